#pragma once
// The int8 kernels of the packed linear (ops/weight_type.h gives the arithmetic), a part of
// linear_packed.cpp compiled with it once per build variant. A panel `width` columns wide
// holds, for each block of kQ8Block steps of in_dim (the last one padded with zero weights),
// the columns' fp16 scales, then the block's weights in groups of four steps: group g, column
// c holds the weights of steps 4g … 4g + 3 of column c, next to each other. One vector of
// them is four steps of a vector's worth of columns, what cpu::add_dot4 multiplies by four
// int8 activations.
//
// Each input row is quantized once per call, block by block, and each output is the chain
// sum = fma(float(I_b), scale_w · scale_a, sum) over the blocks b in order, I_b the block's
// exact integer dot product: the vector kernel and the scalar one compute the same chain, so
// a result depends on neither the rows beside it, nor the blocking, nor the variant.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "ops/cpu/cpu_common.h"
#include "ops/cpu/int8_dot.h"
#include "ops/cpu/linear_packed.h"
#include "ops/cpu/widen.h"
#include "util/float_formats.h"

namespace sps::ops::SPS_KERNEL_VARIANT {
namespace {

inline int64_t q8_blocks(int64_t K) { return (K + kQ8Block - 1) / kQ8Block; }

// Bytes of a panel of `width` columns over in_dim K, and the offsets in it of block b's
// scales and of the weight at step k, column c.
inline int64_t q8_panel_bytes(int64_t K, int64_t width) {
  return q8_blocks(K) * width * (2 + kQ8Block);
}
inline int64_t q8_scales_offset(int64_t b, int64_t width) { return b * width * (2 + kQ8Block); }
inline int64_t q8_weight_offset(int64_t k, int64_t c, int64_t width) {
  const int64_t b = k / kQ8Block, step = k - b * kQ8Block;
  return q8_scales_offset(b, width) + 2 * width + (step / 4) * width * 4 + c * 4 + step % 4;
}

// The weight at step k, column c, and its block's scale.
inline int8_t q8_weight(const uint8_t* panel, int64_t k, int64_t c, int64_t width) {
  return int8_t(panel[q8_weight_offset(k, c, width)]);
}
inline float q8_scale(const uint8_t* panel, int64_t b, int64_t c, int64_t width) {
  uint16_t s;
  std::memcpy(&s, panel + q8_scales_offset(b, width) + 2 * c, 2);
  return f16_to_float(s);
}

// Panel columns from `rows` (row-major [width, K]), each block quantized as GGUF's Q8_0.
template <typename T>
void q8_pack_panel(uint8_t* panel, const T* rows, int64_t K, int64_t width,
                   const std::string& what) {
  int8_t q[kQ8Block];
  float values[kQ8Block];
  for (int64_t c = 0; c < width; ++c)
    for (int64_t b = 0; b < q8_blocks(K); ++b) {
      const int64_t k0 = b * kQ8Block, n = std::min(kQ8Block, K - k0);
      std::copy(rows + c * K + k0, rows + c * K + k0 + n, values);
      const uint16_t scale = quantize_q8_block(values, n, q, what);
      std::memcpy(panel + q8_scales_offset(b, width) + 2 * c, &scale, 2);
      for (int64_t i = 0; i < kQ8Block; ++i)
        panel[q8_weight_offset(k0 + i, c, width)] = i < n ? uint8_t(q[i]) : 0;
    }
}

// Every row of `in` [rows, K] quantized block by block (ops/weight_type.h): q [rows, blocks ·
// kQ8Block], zero-padded, the scales [rows, blocks] and, in cpu::kUnsignedDot4 builds, the
// integers' sums [rows, blocks]; a block holding a NaN or an infinity gets the scale NaN, so that
// its row's outputs are NaN.
template <typename T>
struct QuantizedRows {
  std::vector<int8_t> q;
  std::vector<T> scale;
  std::vector<int32_t> sums;
  int64_t blocks = 0;
  const int8_t* row(int64_t m) const { return q.data() + m * blocks * kQ8Block; }
};

// std::round (half away from zero) without a call into libm: v − trunc(v) is exact, so the
// comparison with one half decides as round does.
template <typename T>
inline T round_half_away(T v) {
  const T t = std::trunc(v);
  return std::fabs(v - t) >= T(0.5) ? t + std::copysign(T(1), v) : t;
}

// One block of n values: its integers into q (left as they are when the block is all zeros
// or not finite) and its scale d, NaN for a block holding a NaN or an infinity.
template <typename T>
T quantize_block(const T* x, int64_t n, int8_t* q) {
  T amax = 0;
  bool finite = true;
  for (int64_t i = 0; i < n; ++i) {
    finite = finite && std::isfinite(x[i]);
    amax = std::max(amax, std::fabs(x[i]));
  }
  const T d = amax / T(127);
  if (finite && d != 0)
    for (int64_t i = 0; i < n; ++i)
      q[i] = int8_t(std::clamp<T>(round_half_away(x[i] / d), -127, 127));
  return finite ? d : std::numeric_limits<T>::quiet_NaN();
}

// A whole block of floats as quantize_block does it, in vector lanes: a decode step quantizes
// its rows on one thread, and a division per value there cost about 5% of the step. The same
// IEEE operations per value (the division, truncation, the comparison with one half), so the
// same integers and scale.
inline float quantize_full_block(const float* x, int8_t* q) {
  using V = cpu::Vec<float>::V;
  using Vi = cpu::Int32Vec;
  constexpr int L = cpu::Vec<float>::lanes, kVectors = int(kQ8Block) / L;
  static_assert(kVectors * L == kQ8Block);
  V v[kVectors], amax{};
  Vi finite = ~Vi{};
  for (int j = 0; j < kVectors; ++j) {
    v[j] = cpu::load<V>(x + j * L);
    const V a = std::bit_cast<V>(std::bit_cast<Vi>(v[j]) & 0x7fffffff);
    finite &= a <= std::numeric_limits<float>::max();  // false for NaN and infinities
    amax = amax < a ? a : amax;
  }
  float m = 0;
  bool all_finite = true;
  for (int i = 0; i < L; ++i) m = std::max(m, amax[i]), all_finite = all_finite && finite[i];
  const float d = m / 127.0f;
  if (!all_finite) return std::numeric_limits<float>::quiet_NaN();
  if (d == 0) return d;
  for (int j = 0; j < kVectors; ++j) {
    const V w = v[j] / d;
    const Vi t = __builtin_convertvector(w, Vi);  // toward zero, as trunc
    const V fraction = w - __builtin_convertvector(t, V);
    const Vi away = (fraction >= 0.5f) | (fraction <= -0.5f);  // lanes of −1 where |·| ≥ ½
    Vi r = t + (away & ((w < 0.0f) | 1));                      // ± 1 by the sign of w
    r = r < -127 ? -127 : r > 127 ? 127 : r;
    typedef int8_t Bytes __attribute__((vector_size(L)));
    cpu::store(q + j * L, __builtin_convertvector(r, Bytes));
  }
  return d;
}

// Rows in parallel where there are many (a prefill's), each into its own part of `out`.
template <typename T>
void quantize_rows(const T* in, int64_t rows, int64_t K, QuantizedRows<T>& out) {
  out.blocks = q8_blocks(K);
  out.q.assign(size_t(rows * out.blocks * kQ8Block), 0);
  out.scale.resize(size_t(rows * out.blocks));
  if constexpr (cpu::kUnsignedDot4<>) out.sums.resize(size_t(rows * out.blocks));
#pragma omp parallel for schedule(static) if (rows * K >= cpu::kParallelThreshold)
  for (int64_t m = 0; m < rows; ++m)
    for (int64_t b = 0; b < out.blocks; ++b) {
      const T* x = in + m * K + b * kQ8Block;
      const int64_t n = std::min(kQ8Block, K - b * kQ8Block);
      int8_t* q = out.q.data() + (m * out.blocks + b) * kQ8Block;
      T& scale = out.scale[m * out.blocks + b];
      scale = [&] {
        if constexpr (std::is_same_v<T, float>)
          if (n == kQ8Block) return quantize_full_block(x, q);
        return quantize_block(x, n, q);
      }();
      if constexpr (cpu::kUnsignedDot4<>) {  // (only VNNI's step takes the sums off)
        int32_t sum = 0;
        for (int64_t i = 0; i < kQ8Block; ++i) sum += q[i];
        out.sums[m * out.blocks + b] = sum;
      }
    }
}

// out[m, c] for the `width` columns of one panel, one output at a time: the chain in scalars
// (a narrow last panel; every panel in double).
template <typename T>
void q8_scalar_panel(T* out, int64_t N, const QuantizedRows<T>& a, int64_t rows,
                     const uint8_t* panel, int64_t width, bool accumulate) {
  for (int64_t m = 0; m < rows; ++m)
    for (int64_t c = 0; c < width; ++c) {
      T sum = accumulate ? out[m * N + c] : T(0);
      for (int64_t b = 0; b < a.blocks; ++b) {
        int32_t dot = 0;
        for (int64_t i = 0; i < kQ8Block; ++i)
          dot += int32_t(a.row(m)[b * kQ8Block + i]) *
                 int32_t(q8_weight(panel, b * kQ8Block + i, c, width));
        const T scale = T(q8_scale(panel, b, c, width)) * a.scale[m * a.blocks + b];
        sum = cpu::fused_multiply_add(T(dot), scale, sum);
      }
      out[m * N + c] = sum;
    }
}

// Blocks of a panel per chunk (about 8 KB), and how far ahead the weights are prefetched.
inline constexpr int64_t kChunkBlocks =
    std::max<int64_t>(1, 8192 / (2 * cpu::Vec<float>::lanes * (2 + kQ8Block)));
inline constexpr int64_t kPrefetchBlocks = kChunkBlocks;

// out[m, 0 .. 2L) for MR rows from a full float panel (two vectors of L columns), blocks
// [b0, b1); sums start from out when `from_out`, else from 0.
template <int MR>
inline void q8_micro_kernel(float* out, int64_t N, const QuantizedRows<float>& a, int64_t m0,
                            const uint8_t* panel, bool from_out, int64_t b0, int64_t b1) {
  using V = cpu::Vec<float>::V;
  using Vi = cpu::Int32Vec;
  constexpr int L = cpu::Vec<float>::lanes;
  constexpr int64_t P = 2 * L;
  V acc[MR][2];
  for (int m = 0; m < MR; ++m)
    for (int v = 0; v < 2; ++v)
      acc[m][v] = from_out ? cpu::load<V>(out + (m0 + m) * N + v * L) : V{};
  for (int64_t b = b0; b < b1; ++b) {
    const uint8_t* block = panel + q8_scales_offset(b, P);
    if (m0 == 0)  // the first rows prefetch the same block of the next chunk
      for (int64_t line = 0; line < P * (2 + kQ8Block); line += 64)
        __builtin_prefetch(block + kPrefetchBlocks * P * (2 + kQ8Block) + line);
    const auto* w = reinterpret_cast<const int8_t*>(block + 2 * P);
    Vi dot[MR][2] = {};
    if constexpr (cpu::kUnsignedDot4<Vi>) {
      // Σ (w + 128) · a for each row, less 128 · Σ a (cpu::kUnsignedDot4).
      for (int g = 0; g < kQ8Block / 4; ++g, w += 4 * P) {
        const Vi u[2] = {cpu::unsigned_weights<Vi>(w), cpu::unsigned_weights<Vi>(w + 4 * L)};
        for (int m = 0; m < MR; ++m)
          for (int v = 0; v < 2; ++v)
            dot[m][v] =
                cpu::add_unsigned_dot4(dot[m][v], u[v], a.row(m0 + m) + b * kQ8Block + 4 * g);
      }
      for (int m = 0; m < MR; ++m)
        for (int v = 0; v < 2; ++v) dot[m][v] -= 128 * a.sums[(m0 + m) * a.blocks + b];
    } else {
      for (int g = 0; g < kQ8Block / 4; ++g, w += 4 * P)
        for (int m = 0; m < MR; ++m) {
          const int8_t* a4 = a.row(m0 + m) + b * kQ8Block + 4 * g;
          dot[m][0] = cpu::add_dot4(dot[m][0], w, a4);
          dot[m][1] = cpu::add_dot4(dot[m][1], w + 4 * L, a4);
        }
    }
    const auto* scales = reinterpret_cast<const uint16_t*>(block);
    const V scale_w[2] = {cpu::widen_f16<V>(scales), cpu::widen_f16<V>(scales + L)};
    for (int m = 0; m < MR; ++m) {
      const float scale_a = a.scale[(m0 + m) * a.blocks + b];
      for (int v = 0; v < 2; ++v) {
        const V scale = scale_w[v] * scale_a;
        acc[m][v] =
            cpu::fused_multiply_add_lanes(__builtin_convertvector(dot[m][v], V), scale, acc[m][v]);
      }
    }
  }
  for (int m = 0; m < MR; ++m)
    for (int v = 0; v < 2; ++v) cpu::store(out + (m0 + m) * N + v * L, acc[m][v]);
}

// Rows per pass of the micro-kernel: two vectors of float sums and two of integer ones per
// row, within the register file (32 vectors with AVX-512, 16 with AVX2).
inline constexpr int kMaxPassRows = cpu::Vec<float>::lanes >= 16 ? 6 : 4;

// All rows against one full float panel: blocks of up to kMaxPassRows rows take turns over
// chunks of about 8 KB of the panel, which stay in L1 between them (sums stored and reloaded
// between chunks, exactly).
inline void q8_panel(float* out, int64_t N, const QuantizedRows<float>& a, int64_t rows,
                     const uint8_t* panel, bool accumulate) {
  for (int64_t b0 = 0; b0 < a.blocks; b0 += kChunkBlocks) {
    const int64_t b1 = std::min(a.blocks, b0 + kChunkBlocks);
    const bool from_out = accumulate || b0 > 0;
    for (int64_t m = 0; m < rows;) {
      const int64_t block = std::min<int64_t>(rows - m, kMaxPassRows);
      switch (block) {
        case 1: q8_micro_kernel<1>(out, N, a, m, panel, from_out, b0, b1); break;
        case 2: q8_micro_kernel<2>(out, N, a, m, panel, from_out, b0, b1); break;
        case 3: q8_micro_kernel<3>(out, N, a, m, panel, from_out, b0, b1); break;
        case 4: q8_micro_kernel<4>(out, N, a, m, panel, from_out, b0, b1); break;
        case 5:
          q8_micro_kernel<std::min(5, kMaxPassRows)>(out, N, a, m, panel, from_out, b0, b1);
          break;
        default: q8_micro_kernel<kMaxPassRows>(out, N, a, m, panel, from_out, b0, b1); break;
      }
      m += block;
    }
  }
}

// The int8 forward: rows quantized once (a buffer per thread, kept), then the panels split
// between the threads.
template <typename T>
void q8_forward(T* out, const T* in, const uint8_t* packed, int64_t rows, int64_t K, int64_t N,
                bool accumulate) {
  constexpr int64_t P = 2 * cpu::Vec<T>::lanes;
  thread_local QuantizedRows<T> buffer;
  quantize_rows(in, rows, K, buffer);
  const QuantizedRows<T>& a = buffer;  // the calling thread's, named so inside the region
  const int64_t full = N / P, stride = q8_panel_bytes(K, P);
  const bool parallel = rows * N * K >= 16 * cpu::kParallelThreshold;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t j = 0; j < full; ++j) {
    if constexpr (std::is_same_v<T, float>)
      q8_panel(out + j * P, N, a, rows, packed + j * stride, accumulate);
    else
      q8_scalar_panel(out + j * P, N, a, rows, packed + j * stride, P, accumulate);
  }
  q8_scalar_panel(out + full * P, N, a, rows, packed + full * stride, N - full * P, accumulate);
}

}  // namespace
}  // namespace sps::ops::SPS_KERNEL_VARIANT
