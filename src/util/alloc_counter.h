#pragma once
// Counts calls to the global operator new (every C++ heap allocation of this process), so
// benchmarks and tests can show that a training step allocates nothing once planned.
// Linking this file replaces operator new/delete; they forward to malloc/free.
#include <cstdint>

namespace sps {

// Allocations so far, or -1 where counting is off (AddressSanitizer builds).
int64_t allocation_count();

}  // namespace sps
