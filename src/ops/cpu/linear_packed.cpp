// linear over weights packed in column panels, for inference. With the weights stored
// [out_dim, in_dim] every output is a dot product along in_dim, so each weight row re-reads
// all the input rows; past 4–8 rows that traffic, not the weights, bounds a decode step
// (docs/performance.md, "The decode linear kernel alone"). Packed in panels of kPanelWidth
// output columns, [panel][in_dim][kPanelWidth], the weights at one k are two vectors along
// out_dim: a micro-kernel broadcasts one input value per row and multiplies it into both,
// keeping rows × kPanelWidth sums in registers, so the input is read once per panel (not once
// per output) and the weights stream from memory once.
//
// A panel holds its weights in the model's weight type (ops/weight_type.h): T itself, bf16
// (linear_packed_bf16.h: pairs of steps, bf16 inputs) or int8 (linear_packed_int8.h, integer
// dot products over blocks), so the bytes read per weight, which set a decode step's speed,
// are 4, 2 or ~1.06. A bf16 panel's "step" is a pair of in_dim indices.
//
// Every f32 output element is the same chain of fused multiply-adds, k = 0 … in_dim − 1,
// started from 0 (or from the old value when accumulating), and every bf16 one its chain over
// the pairs, whatever the number of rows and however they are blocked: a row's result does
// not depend on the rows beside it. Nor does it depend on the panel width: this file is
// compiled once for the build's target and, in a portable x86 build, once more per variant
// (SPS_KERNEL_VARIANT, linear_packed.h), and all give the same bits.
#include <algorithm>
#include <cstring>
#include <exception>
#include <type_traits>

#include "ops/cpu/cpu_common.h"
#include "ops/cpu/linear_packed.h"
#include "ops/cpu/linear_packed_bf16.h"
#include "ops/cpu/linear_packed_int8.h"
#include "ops/ops.h"
#include "util/error.h"
#include "util/float_formats.h"

namespace sps::ops::SPS_KERNEL_VARIANT {
namespace {

using cpu::load;
using cpu::store;
using cpu::Vec;

// Output columns per panel: two vectors.
template <typename T>
constexpr int64_t kPanelWidth = 2 * Vec<T>::lanes;

// Where step k (an in_dim index of f32, a pair of them of bf16) of a panel `width` columns
// wide starts, in bytes from the panel's start.
template <typename T, WeightType W>
constexpr int64_t step_offset(int64_t k, int64_t width) {
  static_assert(W != WeightType::int8);
  return W == WeightType::f32 ? k * width * int64_t(sizeof(T)) : bf16_pair_offset(k, width);
}
template <typename T, WeightType W>
constexpr int64_t panel_bytes(int64_t K, int64_t width) {
  if constexpr (W == WeightType::int8)
    return q8_panel_bytes(K, width);
  else if constexpr (W == WeightType::bf16)
    return bf16_panel_bytes(K, width);
  else
    return step_offset<T, W>(K, width);
}

// The weight at step k, column c of a panel `width` wide, widened to T.
template <typename T, WeightType W>
inline T weight_at(const uint8_t* panel, int64_t k, int64_t c, int64_t width) {
  if constexpr (W == WeightType::int8) {
    return T(q8_weight(panel, k, c, width)) * T(q8_scale(panel, k / kQ8Block, c, width));
  } else if constexpr (W == WeightType::bf16) {
    return T(bf16_weight(panel, k, c, width));
  } else {
    T w;
    std::memcpy(&w, panel + step_offset<T, W>(k, width) + c * sizeof(T), sizeof(T));
    return w;
  }
}

// Steps of in_dim per pass over a panel: one chunk of a panel stays in L1 while every block
// of rows multiplies it (sums are stored and reloaded between chunks, exactly, so the chunk
// size never changes a result). The next chunk is prefetched meanwhile, one cache line at a
// time, the blocks' passes taking turns so that the requests spread over the whole chunk's
// work. Measured on the s scale's projections (Zen 3, 2 threads): 4 KB chunks read the
// weights 10-15% faster than 16 KB at 4-8 rows, 16 KB chunks multiply 10-15% faster at 32
// rows and more, where the passes, not memory, take the time.
template <typename T, WeightType W>
constexpr int64_t kStepBytes = step_offset<T, W>(1, kPanelWidth<T>);
template <typename T, WeightType W, int64_t kBytes>
constexpr int64_t kChunkSteps = kBytes / kStepBytes<T, W>;
// Steps between two prefetched cache lines (a step may hold less than one line).
template <typename T, WeightType W>
constexpr int64_t kStepsPerLine = std::max<int64_t>(1, 64 / kStepBytes<T, W>);

// What the micro-kernel reads of each input row per step: T for f32 weights; for bf16 the
// rows rounded (linear_packed_bf16.h), a 32-bit pair per step for vdpbf16ps, else two T.
template <typename T, WeightType W>
using InputOf = std::conditional_t<W == WeightType::bf16 && kBf16PairDot<T>, uint32_t, T>;

// out[m, 0 .. NP·kPanelWidth) for m < MR, steps k in [k0, k1), from NP consecutive full panels
// at p (each `panel_stride` bytes), input row m at in + m · ld_in. Sums start from out when
// `from_out`, else from 0. The block is pass `pass` of `passes` over the chunk: it prefetches
// every passes-th line of the next chunk, starting at its own.
template <typename T, WeightType W, int MR, int NP, int64_t kSteps>
inline void micro_kernel(T* out, int64_t ld_out, const InputOf<T, W>* in, int64_t ld_in,
                         const uint8_t* p, int64_t panel_stride, bool from_out, int64_t k0,
                         int64_t k1, int pass, int passes) {
  using V = typename Vec<T>::V;
  constexpr int L = Vec<T>::lanes, NV = 2 * NP;
  constexpr int64_t P = kPanelWidth<T>;
  V acc[MR][NV];
  for (int m = 0; m < MR; ++m)
    for (int v = 0; v < NV; ++v)
      acc[m][v] = from_out ? load<V>(out + m * ld_out + (v / 2) * P + (v % 2) * L) : V{};
  int64_t prefetch_at = k0 + int64_t(pass) * kStepsPerLine<T, W>;
  for (int64_t k = k0; k < k1; ++k) {
    const bool prefetch = k == prefetch_at;
    if (prefetch) prefetch_at += int64_t(passes) * kStepsPerLine<T, W>;
    V w[NV];  // f32 weights, or bf16 pairs
    for (int q = 0; q < NP; ++q) {
      const uint8_t* step = p + q * panel_stride + step_offset<T, W>(k, P);
      if (prefetch) {  // the same step of the next chunk: one line, two with 512-bit steps
        const uint8_t* ahead = step + kSteps * kStepBytes<T, W>;
        __builtin_prefetch(ahead);
        if constexpr (kStepBytes<T, W> > 64) __builtin_prefetch(ahead + 64);
      }
      w[2 * q] = load<V>(step);
      w[2 * q + 1] = load<V>(step + kStepBytes<T, W> / 2);
    }
    if constexpr (W == WeightType::f32) {
      for (int m = 0; m < MR; ++m) {
        const V a = in[m * ld_in + k] - V{};  // a broadcast GCC loads straight from memory
        for (int v = 0; v < NV; ++v) acc[m][v] += a * w[v];
      }
    } else if constexpr (kBf16PairDot<T>) {
#if defined(__AVX512BF16__)
      for (int m = 0; m < MR; ++m)
        for (int v = 0; v < NV; ++v) acc[m][v] = add_pair_dot(acc[m][v], w[v], in[m * ld_in + k]);
#endif
    } else {
      V odd[NV], even[NV];
      for (int v = 0; v < NV; ++v) split_pairs(w[v], odd[v], even[v]);
      for (int m = 0; m < MR; ++m) {
        const V a_odd = in[m * ld_in + 2 * k] - V{}, a_even = in[m * ld_in + 2 * k + 1] - V{};
        for (int v = 0; v < NV; ++v) {
          acc[m][v] += a_odd * odd[v];
          acc[m][v] += a_even * even[v];
        }
      }
    }
  }
  for (int m = 0; m < MR; ++m)
    for (int v = 0; v < NV; ++v) store(out + m * ld_out + (v / 2) * P + (v % 2) * L, acc[m][v]);
}

// Rows per block of the micro-kernel: two vectors of sums per row in registers, 12 of AVX2's
// 16 vectors, 16 of AVX-512's 32 (a decode step of 4 interleaved sequences has 8 rows).
template <typename T>
constexpr int kMaxBlockRows = Vec<T>::lanes >= 16 ? 8 : 6;

// All `rows` rows against NP full panels for k in [k0, k1): blocks of kMaxBlockRows rows (with
// 6, 4 for 7 or 8 rows left), each block one pass over the chunk. With two panels (few rows)
// the rows go in one block.
template <typename T, WeightType W, int NP, int64_t kSteps>
void rows_chunk(T* out, int64_t N, const InputOf<T, W>* in, int64_t rows, int64_t ld_in,
                const uint8_t* p, int64_t panel_stride, bool from_out, int64_t k0, int64_t k1) {
  SPS_ASSERT(NP == 1 || rows <= 3);
  const auto block_rows = [&](int64_t left) {
    if (NP == 2) return left;
    if (kMaxBlockRows<T> == 6 && (left == 7 || left == 8)) return int64_t(4);
    return std::min<int64_t>(left, kMaxBlockRows<T>);
  };
  int passes = 0;
  for (int64_t m = 0; m < rows; m += block_rows(rows - m)) ++passes;
  int pass = 0;
  for (int64_t m = 0; m < rows; ++pass) {
    const int64_t block = block_rows(rows - m);
    T* o = out + m * N;
    const InputOf<T, W>* a = in + m * ld_in;
#define SPS_MICRO_KERNEL(MR, PANELS)                                                         \
  micro_kernel<T, W, MR, PANELS, kSteps>(o, N, a, ld_in, p, panel_stride, from_out, k0, k1, \
                                         pass, passes)
    switch (block) {
      case 1: SPS_MICRO_KERNEL(1, NP); break;
      case 2: SPS_MICRO_KERNEL(2, NP); break;
      case 3: SPS_MICRO_KERNEL(3, NP); break;
      case 4: SPS_MICRO_KERNEL(4, 1); break;
      case 5: SPS_MICRO_KERNEL(5, 1); break;
      case 6: SPS_MICRO_KERNEL(6, 1); break;
      case 7: SPS_MICRO_KERNEL(std::min(7, kMaxBlockRows<T>), 1); break;
      case 8: SPS_MICRO_KERNEL(kMaxBlockRows<T>, 1); break;
    }
#undef SPS_MICRO_KERNEL
    m += block;
  }
}

// Over all `steps` of the panels.
template <typename T, WeightType W, int NP, int64_t kSteps>
void chunks(T* out, int64_t N, const InputOf<T, W>* in, int64_t rows, int64_t ld_in,
            int64_t steps, const uint8_t* p, int64_t panel_stride, bool accumulate) {
  for (int64_t k0 = 0; k0 < steps; k0 += kSteps)
    rows_chunk<T, W, NP, kSteps>(out, N, in, rows, ld_in, p, panel_stride, accumulate || k0 > 0,
                                 k0, std::min(steps, k0 + kSteps));
}

// Many rows against one bf16 panel where vdpbf16ps is not: each chunk of it is split once into
// an fp32 chunk in L1, its steps in the chain's order (each pair's odd step, then its even
// one, as the rounded inputs lie: Bf16Rows::chain), that every block of rows then multiplies
// as an f32 panel, so the split is paid once per chunk instead of once per block of rows
// (prefill, scoring). The same fused multiply-adds in the same order: the same bits.
template <typename T>
void split_pair_chunks(T* out, int64_t N, const T* chain, int64_t rows, int64_t ld_in,
                       int64_t pairs, const uint8_t* p, bool accumulate) {
  using V = typename Vec<T>::V;
  constexpr int L = Vec<T>::lanes;
  constexpr int64_t P = kPanelWidth<T>, kSteps = kChunkSteps<T, WeightType::f32, 16384>;
  static_assert(kSteps % 2 == 0);  // (whole pairs per chunk)
  alignas(64) T split[kSteps * P];
  for (int64_t k0 = 0; k0 < 2 * pairs; k0 += kSteps) {
    const int64_t k1 = std::min(2 * pairs, k0 + kSteps);
    for (int64_t k = k0; k < k1; k += 2) {
      const uint8_t* step = p + step_offset<T, WeightType::bf16>(k / 2, P);
      T* odd = split + (k - k0) * P;
      for (int v = 0; v < 2; ++v) {
        V w_odd, w_even;
        split_pairs(load<V>(step + v * L * 4), w_odd, w_even);
        store(odd + v * L, w_odd);
        store(odd + P + v * L, w_even);
      }
    }
    rows_chunk<T, WeightType::f32, 1, kSteps>(out, N, chain + k0, rows, ld_in,
                                              reinterpret_cast<const uint8_t*>(split), 0,
                                              accumulate || k0 > 0, 0, k1 - k0);
  }
}

template <typename T, WeightType W, int NP>
void panels(T* out, int64_t N, const InputOf<T, W>* in, int64_t rows, int64_t ld_in,
            int64_t steps, const uint8_t* p, int64_t panel_stride, bool accumulate) {
  if constexpr (W == WeightType::bf16 && !kBf16PairDot<T>)
    if (rows > 16) return split_pair_chunks(out, N, in, rows, ld_in, steps, p, accumulate);
  if (rows <= 16)
    chunks<T, W, NP, kChunkSteps<T, W, 4096>>(out, N, in, rows, ld_in, steps, p, panel_stride,
                                              accumulate);
  else
    chunks<T, W, NP, kChunkSteps<T, W, 16384>>(out, N, in, rows, ld_in, steps, p, panel_stride,
                                               accumulate);
}

// Rows per block of a many-row multiply: every panel passes over one block's inputs before
// the next block starts, so those inputs stay in L2 (about 128 KB of them; a multiple of the
// 6-row micro-kernel). Multiplying all the rows of a forward (thousands) panel by panel
// instead re-read every row's input from L3 or memory for each panel: Model.logits of [8, 256]
// on the tiny model took 1.3 times the CPU of `sps bench step --forward-only`, sgemm on the
// f32 weights (docs/performance.md, "The Python module"). The blocks change no result: each
// output is its own chain.
template <typename A>
int64_t row_block(int64_t ld_in) {
  constexpr int64_t kBlockInputBytes = 128 * 1024;
  return std::max<int64_t>(48,
                           kBlockInputBytes / (std::max<int64_t>(ld_in, 1) * sizeof(A)) / 6 * 6);
}

// out[m, c] for the `width` columns of the panel at `panel`: each output's chain in scalars
// (the last, narrower panel; every bf16 panel in double), from `in`, or for bf16 from its
// rounded rows.
template <typename T, WeightType W>
void scalar_panel(T* out, int64_t N, const T* in, const Bf16Rows<T>* rounded, int64_t rows,
                  int64_t K, const uint8_t* panel, int64_t width, bool accumulate) {
  for (int64_t m = 0; m < rows; ++m)
    for (int64_t c = 0; c < width; ++c) {
      T sum = accumulate ? out[m * N + c] : T(0);
      if constexpr (W == WeightType::bf16) {
        for (int64_t p = 0; p < rounded->count; ++p) {
          // (an odd K's last pair holds zeros for step K)
          const T w_odd = weight_at<T, W>(panel, 2 * p + 1, c, width),
                  w_even = weight_at<T, W>(panel, 2 * p, c, width);
          sum = cpu::fused_multiply_add(rounded->odd(m, p), w_odd, sum);
          sum = cpu::fused_multiply_add(rounded->even(m, p), w_even, sum);
        }
      } else {
        for (int64_t k = 0; k < K; ++k)
          sum = cpu::fused_multiply_add(in[m * K + k], weight_at<T, W>(panel, k, c, width), sum);
      }
      out[m * N + c] = sum;
    }
}

// The full panels' steps: `in` (rows of ld_in) against `full` panels of `stride` bytes.
template <typename T, WeightType W>
void full_panels(T* out, int64_t N, const InputOf<T, W>* in, int64_t rows, int64_t ld_in,
                 int64_t steps, const uint8_t* packed, int64_t full, int64_t stride,
                 bool accumulate, bool parallel) {
  constexpr int64_t P = kPanelWidth<T>;
  if (rows <= 3) {  // two panels per pass: more independent sums for few rows
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t j = 0; j < full / 2; ++j)
      panels<T, W, 2>(out + 2 * j * P, N, in, rows, ld_in, steps, packed + 2 * j * stride, stride,
                      accumulate);
    if (full % 2)
      panels<T, W, 1>(out + (full - 1) * P, N, in, rows, ld_in, steps,
                      packed + (full - 1) * stride, stride, accumulate);
  } else {
    const int64_t block = row_block<InputOf<T, W>>(ld_in);
#pragma omp parallel if (parallel)
    for (int64_t r0 = 0; r0 < rows; r0 += block) {
#pragma omp for schedule(static)
      for (int64_t j = 0; j < full; ++j)
        panels<T, W, 1>(out + r0 * N + j * P, N, in + r0 * ld_in, std::min(block, rows - r0),
                        ld_in, steps, packed + j * stride, stride, accumulate);
    }
  }
}

// f32 and bf16 panels (int8's: q8_forward). A bf16 call rounds its rows first (a buffer per
// thread, kept).
template <typename T, WeightType W>
void packed_forward(T* out, const T* in, const uint8_t* packed, int64_t rows, int64_t K,
                    int64_t N, bool accumulate) {
  constexpr int64_t P = kPanelWidth<T>;
  const int64_t full = N / P, stride = panel_bytes<T, W>(K, P);
  const bool parallel = rows * N * K >= 16 * cpu::kParallelThreshold;
  const Bf16Rows<T>* rounded = nullptr;
  if constexpr (W == WeightType::bf16) {
    thread_local Bf16Rows<T> buffer;
    round_rows_to_pairs(in, rows, K, buffer);
    rounded = &buffer;  // the calling thread's, named so inside the regions
    if constexpr (kBf16PairDot<T>)
      full_panels<T, W>(out, N, buffer.pairs.data(), rows, buffer.stride(), buffer.count, packed,
                        full, stride, accumulate, parallel);
    else if constexpr (std::is_same_v<T, float>)
      full_panels<T, W>(out, N, buffer.chain.data(), rows, buffer.stride(), buffer.count, packed,
                        full, stride, accumulate, parallel);
    else  // (double's lanes do not hold pairs of 32 bits)
#pragma omp parallel for schedule(static) if (parallel)
      for (int64_t j = 0; j < full; ++j)
        scalar_panel<T, W>(out + j * P, N, in, rounded, rows, K, packed + j * stride, P,
                           accumulate);
  } else {
    full_panels<T, W>(out, N, in, rows, K, K, packed, full, stride, accumulate, parallel);
  }
  scalar_panel<T, W>(out + full * P, N, in, rounded, rows, K, packed + full * stride, N - full * P,
                     accumulate);
}

// Panel j's columns from `rows` (row-major [width, K], the panel's weight rows) in type W.
template <typename T, WeightType W>
void pack_panel(uint8_t* panel, const T* rows, int64_t K, int64_t width, const std::string& what) {
  if constexpr (W == WeightType::int8) {
    q8_pack_panel(panel, rows, K, width, what);
  } else if constexpr (W == WeightType::bf16) {
    bf16_pack_panel(panel, rows, K, width);
  } else {
    for (int64_t k = 0; k < K; ++k)
      for (int64_t c = 0; c < width; ++c)
        std::memcpy(panel + step_offset<T, W>(k, width) + c * sizeof(T), &rows[c * K + k],
                    sizeof(T));
  }
}

template <typename T, WeightType W>
void pack_rows(uint8_t* packed, const T* rows, int64_t first_row, int64_t row_count, int64_t K,
               int64_t N, const std::string& what) {
  constexpr int64_t P = kPanelWidth<T>;
  const int64_t stride = panel_bytes<T, W>(K, P), first = first_row / P,
                last = (first_row + row_count + P - 1) / P;
  std::exception_ptr error;  // an int8 block out of range: thrown once the threads are done
#pragma omp parallel for schedule(static) if (row_count * K >= cpu::kParallelThreshold)
  for (int64_t j = first; j < last; ++j) {
    const int64_t width = std::min(P, N - j * P);
    try {
      pack_panel<T, W>(packed + j * stride, rows + (j * P - first_row) * K, K, width, what);
    } catch (...) {
#pragma omp critical(sps_pack_error)
      if (!error) error = std::current_exception();
    }
  }
  if (error) std::rethrow_exception(error);
}

template <typename T, WeightType W>
void embedding_from_panels(T* out, const int32_t* tokens, const uint8_t* packed, int64_t n,
                           int64_t d, int64_t V) {
  constexpr int64_t P = kPanelWidth<T>;
  const int64_t stride = panel_bytes<T, W>(d, P), n0 = V / P * P;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t t = tokens[i], j = t / P, width = t < n0 ? P : V - n0;
    const uint8_t* panel = packed + j * stride;
    for (int64_t k = 0; k < d; ++k) out[i * d + k] = weight_at<T, W>(panel, k, t - j * P, width);
  }
}

// f(std::integral_constant<WeightType, type>{}): each weight type's kernels are their own
// instantiation.
template <typename F>
auto with_weight_type(WeightType type, F&& f) {
  switch (type) {
    case WeightType::f32: return f(std::integral_constant<WeightType, WeightType::f32>{});
    case WeightType::bf16: return f(std::integral_constant<WeightType, WeightType::bf16>{});
    case WeightType::int8: break;
  }
  return f(std::integral_constant<WeightType, WeightType::int8>{});
}

template <typename T>
int64_t weight_bytes(WeightType type, int64_t in_dim, int64_t out_dim) {
  constexpr int64_t P = kPanelWidth<T>;
  const int64_t full = out_dim / P, rest = out_dim - full * P;
  return with_weight_type(type, [&](auto W) {
    return full * panel_bytes<T, W.value>(in_dim, P) + panel_bytes<T, W.value>(in_dim, rest);
  });
}

template <typename T>
int64_t panel_rows() {
  return kPanelWidth<T>;
}

template <typename T>
void pack_weight(WeightType type, void* packed, const T* rows, int64_t first_row,
                      int64_t row_count, int64_t in_dim, int64_t out_dim,
                      const std::string& what) {
  constexpr int64_t P = kPanelWidth<T>;
  SPS_ASSERT(in_dim >= 0 && first_row >= 0 && row_count >= 0 && first_row % P == 0 &&
             first_row + row_count <= out_dim &&
             (row_count % P == 0 || first_row + row_count == out_dim));
  auto* p = static_cast<uint8_t*>(packed);
  with_weight_type(type, [&](auto W) {
    pack_rows<T, W.value>(p, rows, first_row, row_count, in_dim, out_dim, what);
  });
}

template <typename T>
void forward(T* out, const T* in, const void* packed, WeightType type, int64_t rows,
                           int64_t in_dim, int64_t out_dim, bool accumulate) {
  SPS_ASSERT(rows >= 0 && in_dim >= 0 && out_dim >= 0);
  if (rows == 0 || out_dim == 0) return;
  const auto* p = static_cast<const uint8_t*>(packed);
  with_weight_type(type, [&](auto W) {
    if constexpr (W.value == WeightType::int8)
      q8_forward(out, in, p, rows, in_dim, out_dim, accumulate);
    else
      packed_forward<T, W.value>(out, in, p, rows, in_dim, out_dim, accumulate);
  });
}

template <typename T>
void embedding(T* out, const int32_t* tokens, const void* packed, WeightType type,
                              int64_t n, int64_t d, int64_t V) {
  const auto* p = static_cast<const uint8_t*>(packed);
  with_weight_type(type,
                   [&](auto W) { embedding_from_panels<T, W.value>(out, tokens, p, n, d, V); });
}


}  // namespace

template <typename T>
const PackedLinearKernels<T>& packed_linear_kernels() {
  static const PackedLinearKernels<T> kernels{SPS_STRINGIFY(SPS_KERNEL_VARIANT), cpu::kVecBytes,
                                              panel_rows<T>, weight_bytes<T>, pack_weight<T>,
                                              forward<T>, embedding<T>};
  return kernels;
}
template const PackedLinearKernels<float>& packed_linear_kernels<float>();
template const PackedLinearKernels<double>& packed_linear_kernels<double>();

}  // namespace sps::ops::SPS_KERNEL_VARIANT
