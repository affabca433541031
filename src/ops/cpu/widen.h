#pragma once
// Loads of stored weights widened to a vector of T (cpu::Vec): bf16 and fp16 lanes,
// each to the exact float or double it stands for. x86 builds use the widening instructions
// of AVX2 / F16C (and AVX-512 at 512 bits), which GCC's generic vector conversions do not
// reach; every other width (NEON's, or SPS_VECTOR_BYTES's test widths) converts lane by lane.
#include <bit>
#include <cstdint>
#include <cstring>
#include <type_traits>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "util/float_formats.h"

namespace sps::ops::cpu {

template <typename V>
using LaneOf = std::remove_cvref_t<decltype(V{}[0])>;

// V's lanes from the stored values at p converted one by one (the widths without an
// instruction for it).
template <typename V, typename Stored, typename Convert>
inline V widen_each(const Stored* p, Convert to_lane) {
  constexpr int lanes = sizeof(V) / sizeof(LaneOf<V>);
  Stored stored[lanes];
  std::memcpy(stored, p, sizeof stored);
  V v;
  for (int i = 0; i < lanes; ++i) v[i] = LaneOf<V>(to_lane(stored[i]));
  return v;
}

// V's lanes from bf16 values at p (unaligned).
template <typename V>
inline V widen_bf16(const uint16_t* p) {
  using T = LaneOf<V>;
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float> && sizeof(V) == 64) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return std::bit_cast<V>(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
  }
#endif
#if defined(__AVX2__)
  if constexpr (std::is_same_v<T, float> && sizeof(V) == 32) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return std::bit_cast<V>(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
#endif
  return widen_each<V>(p, [](uint16_t h) { return bf16_to_float(h); });
}

// V's lanes from fp16 values at p (unaligned).
template <typename V>
inline V widen_f16(const uint16_t* p) {
  using T = LaneOf<V>;
#if defined(__AVX512F__)
  if constexpr (std::is_same_v<T, float> && sizeof(V) == 64) {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
    return std::bit_cast<V>(_mm512_cvtph_ps(h));
  }
#endif
#if defined(__AVX2__) && defined(__F16C__)
  if constexpr (std::is_same_v<T, float> && sizeof(V) == 32) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return std::bit_cast<V>(_mm256_cvtph_ps(h));
  }
#endif
  return widen_each<V>(p, [](uint16_t h) { return f16_to_float(h); });
}

}  // namespace sps::ops::cpu
