#pragma once
// Counts calls to the global operator new (every C++ heap allocation of this process), so
// benchmarks and tests can show that a training step allocates nothing once planned.
// Linking this file replaces operator new/delete; they forward to malloc/free.
#include <cstdint>

namespace sps {

// Allocations so far, or -1 where counting is off (AddressSanitizer builds): ours, not those
// made inside a LibraryAllocations scope.
int64_t allocation_count();
// Allocations made while a LibraryAllocations scope was open, or -1.
int64_t library_allocation_count();

// While alive, the process's allocations count as a library's, not ours: for calls into a
// library that allocates what we cannot hand it (oneDNN 2.6 builds a map of a primitive's
// arguments at every execution, and its threads' work lists), so that the count of our own
// stays a test of our code. Any thread's allocations in that time count so (the library's own
// threads allocate for it): the counts are for tests and benchmarks that do one thing at a time.
class LibraryAllocations {
 public:
  LibraryAllocations();
  ~LibraryAllocations();
  LibraryAllocations(const LibraryAllocations&) = delete;
  LibraryAllocations& operator=(const LibraryAllocations&) = delete;
};

}  // namespace sps
