#pragma once
// The integer step of the int8 linear (ops/weight_type.h): a vector of int32 lanes, one per
// output column, each gaining the sum of four int8 products. Every value is within ±127, so
// a pair's sum fits the int16 that AVX2's and AVX-512BW's multiply-add of bytes produce
// (2 · 127² < 2¹⁵) and the results are exact: every width and instruction set gives the same
// integers. x86 takes the unsigned × signed byte multiply with the activation's sign moved
// onto the weight; other widths (NEON's, or SPS_VECTOR_BYTES's test widths) sum lane by lane.
#include <bit>
#include <cstdint>
#include <cstring>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "ops/cpu/cpu_common.h"

namespace sps::ops::cpu {

using Int32Vec = Vec<int32_t>::V;

// acc[c] + Σ_{j<4} w[4c + j] · a[j] for every lane c: w holds 4 bytes per lane, a 4 bytes.
// (A template, so that only the branch of Vi's width is compiled.)
template <typename Vi = Int32Vec>
inline Vi add_dot4(Vi acc, const int8_t* w, const int8_t* a) {
  int32_t a4;
  std::memcpy(&a4, a, 4);
#if defined(__AVX512BW__)
  if constexpr (sizeof(Vi) == 64) {
    const __m512i weights = _mm512_loadu_si512(w), acts = _mm512_set1_epi32(a4);
    const __m512i signed_weights = _mm512_mask_sub_epi8(
        weights, _mm512_movepi8_mask(acts), _mm512_setzero_si512(), weights);
    const __m512i pairs = _mm512_maddubs_epi16(_mm512_abs_epi8(acts), signed_weights);
    return acc + std::bit_cast<Vi>(_mm512_madd_epi16(pairs, _mm512_set1_epi16(1)));
  }
#endif
#if defined(__AVX2__)
  if constexpr (sizeof(Vi) == 32) {
    const __m256i weights = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w)),
                  acts = _mm256_set1_epi32(a4);
    const __m256i pairs =
        _mm256_maddubs_epi16(_mm256_sign_epi8(acts, acts), _mm256_sign_epi8(weights, acts));
    return acc + std::bit_cast<Vi>(_mm256_madd_epi16(pairs, _mm256_set1_epi16(1)));
  }
#endif
  constexpr int lanes = sizeof(Vi) / 4;
  for (int c = 0; c < lanes; ++c)
    for (int j = 0; j < 4; ++j) acc[c] += int32_t(w[4 * c + j]) * int32_t(a[j]);
  return acc;
}

// AVX512-VNNI (and AVX-VNNI at 32 bytes) multiplies unsigned by signed bytes and sums each
// lane's four products into its int32 in one instruction (vpdpbusd; no saturation, and the
// sums here stay far below 2³¹). Its signed operand may be a broadcast from memory, so the
// activations take that side and the weights the unsigned one: each weight with its sign bit
// flipped (w + 128, 1 … 255; once per vector of weights, for every row), and the kernels
// subtract 128 · Σ a, the row's block sum (computed when the row is quantized). The same exact
// integers as add_dot4, in one instruction per four steps of a row.
template <typename Vi = Int32Vec>
inline constexpr bool kUnsignedDot4 =
#if defined(__AVX512VNNI__)
    sizeof(Vi) == 64 ||
#endif
#if defined(__AVXVNNI__)
    sizeof(Vi) == 32 ||
#endif
    false;

// Four signed weights per lane as unsigned bytes: w + 128.
template <typename Vi = Int32Vec>
inline Vi unsigned_weights(const int8_t* w) {
  return load<Vi>(w) ^ int32_t(0x80808080u);
}

// acc[c] + Σ_{j<4} u[4c + j] · a[j] for every lane c, u from unsigned_weights and a four
// signed bytes (kUnsignedDot4 builds only).
template <typename Vi = Int32Vec>
inline Vi add_unsigned_dot4(Vi acc, Vi u, const int8_t* a) {
  static_assert(kUnsignedDot4<Vi>);
  int32_t a4;
  std::memcpy(&a4, a, 4);
#if defined(__AVX512VNNI__)
  if constexpr (sizeof(Vi) == 64)
    return std::bit_cast<Vi>(_mm512_dpbusd_epi32(std::bit_cast<__m512i>(acc),
                                                 std::bit_cast<__m512i>(u), _mm512_set1_epi32(a4)));
#endif
#if defined(__AVXVNNI__)
  if constexpr (sizeof(Vi) == 32)
    return std::bit_cast<Vi>(_mm256_dpbusd_avx_epi32(
        std::bit_cast<__m256i>(acc), std::bit_cast<__m256i>(u), _mm256_set1_epi32(a4)));
#endif
  return acc;
}

}  // namespace sps::ops::cpu
