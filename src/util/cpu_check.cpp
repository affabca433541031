#include "util/cpu_check.h"

#include <cstdio>
#include <cstring>
#include <unistd.h>

namespace sps {

int missing_cpu_features(const CpuFeature* features, int count, char* out, size_t capacity) {
  int missing = 0;
  if (capacity == 0) return 0;
  out[0] = 0;
  for (int i = 0; i < count; ++i) {
    if (features[i].present) continue;
    if (missing++ > 0) std::strncat(out, ", ", capacity - std::strlen(out) - 1);
    std::strncat(out, features[i].name, capacity - std::strlen(out) - 1);
  }
  return missing;
}

void require_build_cpu_features() {
#if defined(__x86_64__)
  __builtin_cpu_init();  // needed before __builtin_cpu_supports in code that runs before main
  // The instruction sets the compiler may use in this build (its -march), the ones a CPU
  // lacks most often first. The function's own target attribute does not change these macros.
#define SPS_FEATURE(name) CpuFeature{name, bool(__builtin_cpu_supports(name))}
  const CpuFeature compiled_for[] = {
      CpuFeature{"sse2", true},
#ifdef __AVX__
      SPS_FEATURE("avx"),
#endif
#ifdef __AVX2__
      SPS_FEATURE("avx2"),
#endif
#ifdef __FMA__
      SPS_FEATURE("fma"),
#endif
#if defined(__F16C__) && !defined(__clang__)  // clang 14 cannot ask (every AVX2 CPU has it)
      SPS_FEATURE("f16c"),
#endif
#ifdef __BMI2__
      SPS_FEATURE("bmi2"),
#endif
#ifdef __AVX512F__
      SPS_FEATURE("avx512f"),
#endif
#ifdef __AVX512BW__
      SPS_FEATURE("avx512bw"),
#endif
#ifdef __AVX512DQ__
      SPS_FEATURE("avx512dq"),
#endif
#ifdef __AVX512VL__
      SPS_FEATURE("avx512vl"),
#endif
#ifdef __AVX512VNNI__
      SPS_FEATURE("avx512vnni"),
#endif
#ifdef __AVX512BF16__
      SPS_FEATURE("avx512bf16"),
#endif
  };
#undef SPS_FEATURE
  char missing[256];
  if (missing_cpu_features(compiled_for, int(sizeof(compiled_for) / sizeof(compiled_for[0])),
                           missing, sizeof(missing)) == 0)
    return;
  std::fprintf(stderr,
               "sps: this build was compiled for CPUs with %s, which this CPU lacks; rebuild it "
               "here (make build) or configure with -DSPS_CPU=portable\n",
               missing);
  _exit(2);
#endif
}

}  // namespace sps
