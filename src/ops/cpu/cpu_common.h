#pragma once
// Small helpers shared by the CPU kernels: a vectorisable exp, and the size under which a
// kernel stays on the calling thread (an OpenMP fork costs a few microseconds, more than
// a decode step's tiny ops).
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#if defined(__FMA__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace sps::ops::cpu {

// Work (elements touched) below which an op runs serially.
inline constexpr int64_t kParallelThreshold = 1 << 15;

// Lanes of a 512-bit vector. GCC's tuning for AVX-512 CPUs prefers 256-bit vectors; hot
// loops ask for full width with `omp simd simdlen(kSimdLanes<T>)` (the GEMMs run at 512
// bits anyway, so this costs no extra clock drop; on narrower ISAs GCC splits the lanes).
template <typename T>
inline constexpr int kSimdLanes = 64 / sizeof(T);

// Bytes of the widest vector register the build targets.
#if defined(__AVX512F__)
inline constexpr int kRegisterBytes = 64;
#elif defined(__AVX__)
inline constexpr int kRegisterBytes = 32;
#else
inline constexpr int kRegisterBytes = 16;
#endif

// Bytes of the vectors of the kernels written with GCC's vector extensions: the widest
// register, or SPS_VECTOR_BYTES, which tests a wider build's kernels on a narrower machine.
#if defined(SPS_VECTOR_BYTES)
inline constexpr int kVecBytes = SPS_VECTOR_BYTES;
#else
inline constexpr int kVecBytes = kRegisterBytes;
#endif

// The vector of T as wide as kVecBytes (GCC's vector extensions), and unaligned loads and
// stores of any such vector.
template <typename T>
struct Vec {
  typedef T V __attribute__((vector_size(kVecBytes)));
  static constexpr int lanes = kVecBytes / int(sizeof(T));
};
template <typename V>
inline V load(const void* p) {
  V v;
  std::memcpy(&v, p, sizeof(V));
  return v;
}
template <typename V>
inline void store(void* p, const V& v) {
  std::memcpy(p, &v, sizeof(V));
}

// a·b + c, rounded once where the build has fused multiply-adds (x86-64-v3 and later,
// AArch64), as GCC contracts the vector kernels' `acc += a * w`: a scalar tail so computes
// the chain the vector lanes do, whatever the compiler makes of the expression around it.
template <typename T>
inline T fused_multiply_add(T a, T b, T c) {
#if defined(__FMA__) || defined(__aarch64__)
  return std::fma(a, b, c);
#else
  return a * b + c;
#endif
}

// a·b rounded, then + c: never fused, whatever the compiler would contract (the empty asm
// hands the product over as a value the addition cannot look through: in a register, or in
// memory for a vector wider than the registers).
template <typename T>
inline T multiply_then_add(T a, T b, T c) {
  T product = a * b;
  if constexpr (sizeof(T) > kRegisterBytes)
    asm("" : "+m"(product));
#if defined(__x86_64__)
  else
    asm("" : "+x"(product));
#elif defined(__aarch64__)
  else
    asm("" : "+w"(product));
#else
  else
    asm("" : "+m"(product));
#endif
  return product + c;
}

// The same, lane by lane, for a GCC vector of floats: always fused (GCC contracts `a * b + c`
// only when it optimises at -O2 and above), so a vector kernel and a scalar one that both
// call these give the same bits in every build.
template <typename V>
inline V fused_multiply_add_lanes(V a, V b, V c) {
#if defined(__AVX512F__)
  if constexpr (sizeof(V) == 64 && std::is_same_v<std::remove_cvref_t<decltype(a[0])>, float>)
    return std::bit_cast<V>(_mm512_fmadd_ps(std::bit_cast<__m512>(a), std::bit_cast<__m512>(b),
                                            std::bit_cast<__m512>(c)));
#endif
#if defined(__FMA__)
  if constexpr (sizeof(V) == 32 && std::is_same_v<std::remove_cvref_t<decltype(a[0])>, float>)
    return std::bit_cast<V>(_mm256_fmadd_ps(std::bit_cast<__m256>(a), std::bit_cast<__m256>(b),
                                            std::bit_cast<__m256>(c)));
#endif
  V out = c;
  for (size_t i = 0; i < sizeof(V) / sizeof(a[0]); ++i) out[i] = fused_multiply_add(a[i], b[i], c[i]);
  return out;
}

// An array of n elements owned by the calling thread, grown on demand and kept, so a planned
// training step allocates nothing after its first iteration. Contents are unspecified on
// return. (The attention kernels' per-thread tiles are tiles::thread_tile_scratch.)
template <typename T>
T* thread_buffer(int64_t n) {
  thread_local std::vector<T> buffer;
  if (int64_t(buffer.size()) < n) buffer.resize(n);
  return buffer.data();
}

// exp(x) for float lanes: V is float, or a GCC vector of floats (the attention kernels' vexp)
// with U its unsigned integer vector; one function, so every op computes the same bits.
// Written so GCC vectorises the scalar form too (glibc's libmvec is only used under
// -ffast-math). Range reduction x = n·ln2 + r with |r| <= ln2/2 (ln2 split in two so the
// reduction is exact), then a degree-7 Taylor polynomial (truncation < 1e-8 relative) and
// 2^n built in the exponent bits. Relative error ≈ 2e-7 for x in [-87, 88]; returns 0
// below -87.33 (where expf becomes subnormal) and +inf above 88.72; NaN propagates.
// Inputs in (88, 88.72] are clamped to 88 so 2^n stays a normal float (callers only feed
// it x <= 0 or sigmoid's exp(-g), where that tail cannot matter).
template <typename V, typename U>
inline V exp_lanes(V x) {
  const V zero{};  // V{} + c is c in every lane, for a float and a vector alike
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693145751953125f;  // few mantissa bits: n·kLn2Hi is exact
  constexpr float kLn2Lo = 1.42860682030941723212e-6f;
  const V round_magic = zero + 12582912.0f;  // 1.5·2^23: adding it rounds to an integer
  // Comparisons written so a NaN passes through unchanged.
  V clamped = x > zero + 88.0f ? zero + 88.0f : x;
  clamped = clamped < zero - 87.0f ? zero - 87.0f : clamped;
  const V shifted = clamped * kLog2e + round_magic;
  const V n = shifted - round_magic;
  const V r = (clamped - n * kLn2Hi) - n * kLn2Lo;
  V p = zero + 1.0f / 5040.0f;
  p = p * r + 1.0f / 720.0f;
  p = p * r + 1.0f / 120.0f;
  p = p * r + 1.0f / 24.0f;
  p = p * r + 1.0f / 6.0f;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  // The low mantissa bits of `shifted` hold n (two's complement, |n| <= 127).
  const U n_bits = std::bit_cast<U>(shifted) - std::bit_cast<U>(round_magic);
  const V two_to_n = std::bit_cast<V>((n_bits + 127u) << 23);
  V result = p * two_to_n;
  result = x < zero - 87.3365447f ? zero : result;
  result = x > zero + 88.7228394f ? zero + std::numeric_limits<float>::infinity() : result;
  return result;
}

inline float exp_approx(float x) { return exp_lanes<float, uint32_t>(x); }

// exp_lanes on a GCC vector of floats, its integer vector deduced.
template <typename V>
inline V exp_vector(V x) {
  typedef uint32_t U __attribute__((vector_size(sizeof(V))));
  return exp_lanes<V, U>(x);
}

// Doubles are for tests and reference runs: the library exp is accurate and fast enough.
inline double exp_approx(double x) { return std::exp(x); }

}  // namespace sps::ops::cpu
