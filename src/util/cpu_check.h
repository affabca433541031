#pragma once
// The instruction sets this build was compiled for (CMake's SPS_CPU) against the ones the
// running CPU has. A binary built for a newer CPU than the one it runs on dies of SIGILL in
// its first kernel; checked before main, it says why in one line instead.
#include <cstddef>

// Compiles a function for the oldest CPU of the architecture, whatever the build's target,
// so it can run on a CPU that lacks the build's instruction sets. Such a function may call
// C library functions only: an inline C++ template would be compiled for the build's target.
#if defined(__x86_64__)
#define SPS_BASELINE_CPU __attribute__((target("arch=x86-64")))
#else
#define SPS_BASELINE_CPU
#endif

namespace sps {

struct CpuFeature {
  const char* name;  // as __builtin_cpu_supports spells it
  bool present;      // on the running CPU
};

// Writes the names of the features not present, comma-separated, into out (at most
// capacity bytes with the terminating 0); returns how many there are.
SPS_BASELINE_CPU int missing_cpu_features(const CpuFeature* features, int count, char* out,
                                          size_t capacity);

// Checks the running CPU against the instruction sets this build was compiled for; when one
// is missing, prints one line to stderr and exits with status 2.
SPS_BASELINE_CPU void require_build_cpu_features();

}  // namespace sps
