#pragma once
// Small helpers shared by the CPU kernels: a vectorisable exp, and the size under which a
// kernel stays on the calling thread (an OpenMP fork costs a few microseconds, more than
// a decode step's tiny ops).
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace sps::ops::cpu {

// Work (elements touched) below which an op runs serially.
inline constexpr int64_t kParallelThreshold = 1 << 15;

// Lanes of a 512-bit vector. GCC's tuning for AVX-512 CPUs prefers 256-bit vectors; hot
// loops ask for full width with `omp simd simdlen(kSimdLanes<T>)` (the GEMMs run at 512
// bits anyway, so this costs no extra clock drop; on narrower ISAs GCC splits the lanes).
template <typename T>
inline constexpr int kSimdLanes = 64 / sizeof(T);

// Bytes of the widest vector register the build targets, for kernels written with GCC's
// vector extensions.
#if defined(__AVX512F__)
inline constexpr int kVecBytes = 64;
#elif defined(__AVX__)
inline constexpr int kVecBytes = 32;
#else
inline constexpr int kVecBytes = 16;
#endif

// An array of n elements owned by the calling thread, grown on demand and kept, so a planned
// training step allocates nothing after its first iteration. Contents are unspecified on
// return. (The attention kernels' per-thread tiles are tiles::thread_tile_scratch.)
template <typename T>
T* thread_buffer(int64_t n) {
  thread_local std::vector<T> buffer;
  if (int64_t(buffer.size()) < n) buffer.resize(n);
  return buffer.data();
}

// exp(x) for float in a form GCC vectorises (glibc's libmvec is only used under
// -ffast-math). Range reduction x = n·ln2 + r with |r| <= ln2/2 (ln2 split in two so the
// reduction is exact), then a degree-7 Taylor polynomial (truncation < 1e-8 relative) and
// 2^n built in the exponent bits. Relative error ≈ 2e-7 for x in [-87, 88]; returns 0
// below -87.33 (where expf becomes subnormal) and +inf above 88.72; NaN propagates.
// Inputs in (88, 88.72] are clamped to 88 so 2^n stays a normal float (callers only feed
// it x <= 0 or sigmoid's exp(-g), where that tail cannot matter).
inline float exp_approx(float x) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693145751953125f;  // few mantissa bits: n·kLn2Hi is exact
  constexpr float kLn2Lo = 1.42860682030941723212e-6f;
  constexpr float kRoundMagic = 12582912.0f;  // 1.5·2^23: adding it rounds to an integer
  // Comparisons written so a NaN passes through unchanged.
  float clamped = x > 88.0f ? 88.0f : x;
  clamped = clamped < -87.0f ? -87.0f : clamped;
  const float shifted = clamped * kLog2e + kRoundMagic;
  const float n = shifted - kRoundMagic;
  const float r = (clamped - n * kLn2Hi) - n * kLn2Lo;
  float p = 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  // The low mantissa bits of `shifted` hold n (two's complement, |n| <= 127).
  const uint32_t n_bits = std::bit_cast<uint32_t>(shifted) - std::bit_cast<uint32_t>(kRoundMagic);
  const float two_to_n = std::bit_cast<float>((n_bits + 127u) << 23);
  float result = p * two_to_n;
  result = x < -87.3365447f ? 0.0f : result;
  result = x > 88.7228394f ? std::numeric_limits<float>::infinity() : result;
  return result;
}

// Doubles are for tests and reference runs: the library exp is accurate and fast enough.
inline double exp_approx(double x) { return std::exp(x); }

}  // namespace sps::ops::cpu
