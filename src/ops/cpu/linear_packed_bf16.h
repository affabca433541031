#pragma once
// The bf16 side of the packed linear (ops/weight_type.h gives the arithmetic), a part of
// linear_packed.cpp compiled with it once per build variant. A bf16 panel `width` columns wide
// holds in_dim in pairs of steps: pair p, column c is the 32 bits (w[2p][c], w[2p + 1][c]),
// the even step in the low half (a zero weight after an odd in_dim). One vector of it holds
// both steps of a pair for a vector's worth of fp32 lanes: what AVX512-BF16's vdpbf16ps
// multiplies by a pair of bf16 inputs, and what a mask and a shift make into the two steps'
// fp32 weights elsewhere.
//
// Each input row is rounded to bf16 once per call, and each output is the chain
// sum = fma(x[2p + 1], w[2p + 1], sum); sum = fma(x[2p], w[2p], sum) over the pairs p in
// order: the products of two bf16 values are exact in fp32, so that is vdpbf16ps's arithmetic
// (the odd element first, one rounding per sum), and the other builds compute the same
// chain with fused multiply-adds. A result depends on neither the rows beside it, nor the
// blocking, nor the variant, except where vdpbf16ps flushes a subnormal sum or input to zero.
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#if defined(__AVX512BF16__)
#include <immintrin.h>
#endif

#include "ops/cpu/cpu_common.h"
#include "ops/cpu/linear_packed.h"
#include "util/float_formats.h"

namespace sps::ops::SPS_KERNEL_VARIANT {
namespace {

// Whether this build multiplies bf16 pairs with vdpbf16ps (fp32 lanes of 64 bytes).
template <typename T>
inline constexpr bool kBf16PairDot =
#if defined(__AVX512BF16__)
    std::is_same_v<T, float> && cpu::kVecBytes == 64;
#else
    false;
#endif

constexpr int64_t bf16_pairs(int64_t K) { return (K + 1) / 2; }

// Bytes of a bf16 panel of `width` columns over in_dim K, and the offset of pair p in it.
constexpr int64_t bf16_pair_offset(int64_t p, int64_t width) { return p * width * 4; }
constexpr int64_t bf16_panel_bytes(int64_t K, int64_t width) {
  return bf16_pair_offset(bf16_pairs(K), width);
}

// The weight at step k, column c, widened to the fp32 it stands for.
inline float bf16_weight(const uint8_t* panel, int64_t k, int64_t c, int64_t width) {
  uint16_t h;
  std::memcpy(&h, panel + bf16_pair_offset(k / 2, width) + c * 4 + (k % 2) * 2, 2);
  return bf16_to_float(h);
}

// Panel columns from `rows` (row-major [width, K]), each weight rounded to bf16.
template <typename T>
void bf16_pack_panel(uint8_t* panel, const T* rows, int64_t K, int64_t width) {
  for (int64_t p = 0; p < bf16_pairs(K); ++p)
    for (int64_t c = 0; c < width; ++c) {
      const T* row = rows + c * K;
      const uint16_t pair[2] = {float_to_bf16(float(row[2 * p])),
                                uint16_t(2 * p + 1 < K ? float_to_bf16(float(row[2 * p + 1])) : 0)};
      std::memcpy(panel + bf16_pair_offset(p, width) + c * 4, pair, 4);
    }
}

// Every row of `in` [rows, K] rounded to bf16, in the layout the micro-kernel reads: with
// kBf16PairDot the 32-bit pairs as the weights hold them ([rows, pairs]), else the values in
// the chain's order, x[2p + 1] then x[2p] ([rows, 2 · pairs]); zero after an odd K.
template <typename T>
struct Bf16Rows {
  std::vector<uint32_t> pairs;
  std::vector<T> chain;
  int64_t count = 0;  // pairs per row
  // The row stride of what the micro-kernel reads, in its elements.
  int64_t stride() const { return kBf16PairDot<T> ? count : 2 * count; }
  // Input m, in_dim index 2p + 1 and 2p, as T.
  T odd(int64_t m, int64_t p) const {
    if constexpr (kBf16PairDot<T>) return T(bf16_to_float(uint16_t(pairs[m * count + p] >> 16)));
    else return chain[(m * count + p) * 2];
  }
  T even(int64_t m, int64_t p) const {
    if constexpr (kBf16PairDot<T>) return T(bf16_to_float(uint16_t(pairs[m * count + p])));
    else return chain[(m * count + p) * 2 + 1];
  }
};

// One input row's values [2p, 2p + 2) for p in [p0, p1) rounded into `out` (the pairs or
// the chain, at row m), one at a time.
template <typename T>
void round_pairs(const T* x, int64_t K, Bf16Rows<T>& out, int64_t m, int64_t p0, int64_t p1) {
  for (int64_t p = p0; p < p1; ++p) {
    const uint16_t even = float_to_bf16(float(x[2 * p])),
                   odd = 2 * p + 1 < K ? float_to_bf16(float(x[2 * p + 1])) : 0;
    if constexpr (kBf16PairDot<T>) {
      out.pairs[m * out.count + p] = uint32_t(even) | uint32_t(odd) << 16;
    } else {
      out.chain[(m * out.count + p) * 2] = T(bf16_to_float(odd));
      out.chain[(m * out.count + p) * 2 + 1] = T(bf16_to_float(even));
    }
  }
}

// The same for a vector's worth of floats at x (L / 2 pairs from p), float_to_bf16 lane by lane
// (a decode step rounds its rows on one thread, before the threads share the panels).
inline void round_pairs_lanes(const float* x, Bf16Rows<float>& out, int64_t m, int64_t p) {
  using Vu = cpu::Vec<uint32_t>::V;
  using Vq = cpu::Vec<uint64_t>::V;
  constexpr int L = cpu::Vec<float>::lanes;
  const Vu bits = std::bit_cast<Vu>(cpu::load<cpu::Vec<float>::V>(x));
  const auto nan = (bits & 0x7fffffffu) > 0x7f800000u;
  const Vu rounded = (nan ? bits | 0x400000u : bits + 0x7fffu + ((bits >> 16) & 1u)) & 0xffff0000u;
  const Vq lane_pairs = std::bit_cast<Vq>(rounded);  // x[2j] in the low half of lane j
  if constexpr (kBf16PairDot<float>) {
    typedef uint32_t Half __attribute__((vector_size(L * 2)));
    const Vq pairs = ((lane_pairs >> 16) & 0xffffu) | ((lane_pairs >> 32) & 0xffff0000u);
    cpu::store(out.pairs.data() + m * out.count + p, __builtin_convertvector(pairs, Half));
  } else {  // the chain's order: each lane's two floats swapped
    cpu::store(out.chain.data() + (m * out.count + p) * 2,
               std::bit_cast<cpu::Vec<float>::V>(lane_pairs >> 32 | lane_pairs << 32));
  }
}

template <typename T>
void round_rows_to_pairs(const T* in, int64_t rows, int64_t K, Bf16Rows<T>& out) {
  out.count = bf16_pairs(K);
  if constexpr (kBf16PairDot<T>)
    out.pairs.resize(size_t(rows * out.count));
  else
    out.chain.resize(size_t(rows * out.count * 2));
  constexpr int64_t L = cpu::Vec<T>::lanes;
#pragma omp parallel for schedule(static) if (rows * K >= cpu::kParallelThreshold)
  for (int64_t m = 0; m < rows; ++m) {
    int64_t p = 0;
    if constexpr (std::is_same_v<T, float>)
      for (; 2 * p + L <= K; p += L / 2) round_pairs_lanes(in + m * K + 2 * p, out, m, p);
    round_pairs(in + m * K, K, out, m, p, out.count);
  }
}

// The two fp32 weight vectors of a vector of pairs: the odd steps (the high halves, in place)
// and the even ones (the low halves, shifted up).
template <typename V>
inline void split_pairs(V pairs, V& odd, V& even) {
  using Vi = typename cpu::Vec<int32_t>::V;
  static_assert(sizeof(Vi) == sizeof(V));
  const Vi bits = std::bit_cast<Vi>(pairs);
  odd = std::bit_cast<V>(bits & int32_t(0xffff0000u));
  even = std::bit_cast<V>(bits << 16);
}

// acc + the pair (x[2p + 1] · w[2p + 1], then x[2p] · w[2p]) in each lane: vdpbf16ps.
#if defined(__AVX512BF16__)
template <typename V>
inline V add_pair_dot(V acc, V weight_pairs, uint32_t input_pair) {
  const __m512i inputs = _mm512_set1_epi32(int32_t(input_pair));
  return std::bit_cast<V>(_mm512_dpbf16_ps(std::bit_cast<__m512>(acc),
                                           std::bit_cast<__m512bh>(weight_pairs),
                                           std::bit_cast<__m512bh>(inputs)));
}
#endif

}  // namespace
}  // namespace sps::ops::SPS_KERNEL_VARIANT
