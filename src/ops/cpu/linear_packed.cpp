// linear over weights packed in column panels, for inference. With the weights stored
// [out_dim, in_dim] every output is a dot product along in_dim, so each weight row re-reads
// all the input rows; past 4–8 rows that traffic, not the weights, bounds a decode step
// (docs/performance.md, "The decode linear kernel alone"). Packed in panels of kPanelWidth
// output columns, [panel][in_dim][kPanelWidth], the weights at one k are two vectors along
// out_dim: a micro-kernel broadcasts one input value per row and multiplies it into both,
// keeping rows × kPanelWidth sums in registers, so the input is read once per panel (not once
// per output) and the weights stream from memory once.
//
// Every output element is the same chain of fused multiply-adds, k = 0 … in_dim − 1, started
// from 0 (or from the old value when accumulating), whatever the number of rows and however
// they are blocked: a row's result does not depend on the rows beside it.
#include <algorithm>
#include <cstring>

#include "ops/cpu/cpu_common.h"
#include "ops/ops.h"
#include "util/error.h"

namespace sps::ops {
namespace {

using cpu::load;
using cpu::store;
using cpu::Vec;

// Output columns per panel: two vectors.
template <typename T>
constexpr int64_t kPanelWidth = 2 * Vec<T>::lanes;

// Steps of in_dim per pass over a panel: one chunk of a panel stays in L1 while every block
// of rows multiplies it (sums are stored and reloaded between chunks, exactly, so the chunk
// size never changes a result). The next chunk is prefetched meanwhile, one cache line per
// step, the blocks' passes taking turns so that the requests spread over the whole chunk's
// work. Measured on the s scale's projections (Zen 3, 2 threads): 4 KB chunks read the
// weights 10-15% faster than 16 KB at 4-8 rows, 16 KB chunks multiply 10-15% faster at 32
// rows and more, where the passes, not memory, take the time.
template <typename T, int64_t kBytes>
constexpr int64_t kChunkSteps = kBytes / (kPanelWidth<T> * int64_t(sizeof(T)));

// out[m, 0 .. NP·kPanelWidth) for m < MR, k in [k0, k1), from NP consecutive full panels at p.
// Sums start from out when `from_out`, else from 0. The block is pass `pass` of `passes` over
// the chunk: it prefetches every passes-th step of the next chunk, starting at its own.
template <typename T, int MR, int NP, int64_t kSteps>
inline void micro_kernel(T* out, int64_t ld_out, const T* in, int64_t K, const T* p,
                         bool from_out, int64_t k0, int64_t k1, int pass, int passes) {
  using V = typename Vec<T>::V;
  constexpr int L = Vec<T>::lanes, P = int(kPanelWidth<T>), NV = 2 * NP;
  V acc[MR][NV];
  for (int m = 0; m < MR; ++m)
    for (int v = 0; v < NV; ++v)
      acc[m][v] = from_out ? load<V>(out + m * ld_out + (v / 2) * P + (v % 2) * L) : V{};
  int64_t prefetch_at = k0 + pass;
  for (int64_t k = k0; k < k1; ++k) {
    V w[NV];
    const bool prefetch = k == prefetch_at;
    if (prefetch) prefetch_at += passes;
    for (int q = 0; q < NP; ++q) {
      const T* row = p + q * K * P + k * P;
      if (prefetch) {  // a step of a panel is one cache line (two with 512-bit vectors)
        __builtin_prefetch(row + kSteps * P);
        if constexpr (P * sizeof(T) > 64) __builtin_prefetch(row + kSteps * P + L);
      }
      w[2 * q] = load<V>(row);
      w[2 * q + 1] = load<V>(row + L);
    }
    for (int m = 0; m < MR; ++m) {
      const V a = in[m * K + k] - V{};  // a broadcast GCC loads straight from memory
      for (int v = 0; v < NV; ++v) acc[m][v] += a * w[v];
    }
  }
  for (int m = 0; m < MR; ++m)
    for (int v = 0; v < NV; ++v) store(out + m * ld_out + (v / 2) * P + (v % 2) * L, acc[m][v]);
}

// All `rows` rows against NP full panels for k in [k0, k1): blocks of 6 rows (12 sums in
// registers with two vectors per panel; 4 for 7 or 8 rows left), each block one pass over the
// chunk. With two panels (few rows) the rows go in one block.
template <typename T, int NP, int64_t kSteps>
void rows_chunk(T* out, int64_t N, const T* in, int64_t rows, int64_t K, const T* p,
                bool from_out, int64_t k0, int64_t k1) {
  SPS_ASSERT(NP == 1 || rows <= 3);
  const auto block_rows = [&](int64_t left) {
    return NP == 2 ? left : left == 7 || left == 8 ? 4 : std::min<int64_t>(left, 6);
  };
  int passes = 0;
  for (int64_t m = 0; m < rows; m += block_rows(rows - m)) ++passes;
  int pass = 0;
  for (int64_t m = 0; m < rows; ++pass) {
    const int64_t block = block_rows(rows - m);
    T* o = out + m * N;
    const T* a = in + m * K;
    switch (block) {
      case 1: micro_kernel<T, 1, NP, kSteps>(o, N, a, K, p, from_out, k0, k1, pass, passes); break;
      case 2: micro_kernel<T, 2, NP, kSteps>(o, N, a, K, p, from_out, k0, k1, pass, passes); break;
      case 3: micro_kernel<T, 3, NP, kSteps>(o, N, a, K, p, from_out, k0, k1, pass, passes); break;
      case 4: micro_kernel<T, 4, 1, kSteps>(o, N, a, K, p, from_out, k0, k1, pass, passes); break;
      case 5: micro_kernel<T, 5, 1, kSteps>(o, N, a, K, p, from_out, k0, k1, pass, passes); break;
      case 6: micro_kernel<T, 6, 1, kSteps>(o, N, a, K, p, from_out, k0, k1, pass, passes); break;
    }
    m += block;
  }
}

template <typename T, int NP, int64_t kSteps>
void chunks(T* out, int64_t N, const T* in, int64_t rows, int64_t K, const T* p, bool accumulate) {
  for (int64_t k0 = 0; k0 < K; k0 += kSteps)
    rows_chunk<T, NP, kSteps>(out, N, in, rows, K, p, accumulate || k0 > 0, k0,
                              std::min(K, k0 + kSteps));
}

template <typename T, int NP>
void panels(T* out, int64_t N, const T* in, int64_t rows, int64_t K, const T* p,
            bool accumulate) {
  if (rows <= 16)
    chunks<T, NP, kChunkSteps<T, 4096>>(out, N, in, rows, K, p, accumulate);
  else
    chunks<T, NP, kChunkSteps<T, 16384>>(out, N, in, rows, K, p, accumulate);
}

}  // namespace

template <typename T>
void pack_linear_weight(T* weight, int64_t in_dim, int64_t out_dim) {
  SPS_ASSERT(in_dim >= 0 && out_dim >= 0);
  constexpr int64_t P = kPanelWidth<T>;
  const int64_t panel_count = (out_dim + P - 1) / P;
  // A panel occupies the elements its weight rows did, so each is transposed on its own
  // through one panel's worth of scratch.
#pragma omp parallel for schedule(static) if (in_dim * out_dim >= cpu::kParallelThreshold)
  for (int64_t j = 0; j < panel_count; ++j) {
    const int64_t n0 = j * P, width = std::min(P, out_dim - n0);
    T* panel = weight + n0 * in_dim;
    T* rows = cpu::thread_buffer<T>(width * in_dim);
    std::memcpy(rows, panel, sizeof(T) * width * in_dim);
    for (int64_t k = 0; k < in_dim; ++k)
      for (int64_t c = 0; c < width; ++c) panel[k * width + c] = rows[c * in_dim + k];
  }
}

template <typename T>
void linear_packed_forward(T* out, const T* in, const T* packed, int64_t rows, int64_t in_dim,
                           int64_t out_dim, bool accumulate) {
  SPS_ASSERT(rows >= 0 && in_dim >= 0 && out_dim >= 0);
  if (rows == 0 || out_dim == 0) return;
  constexpr int64_t P = kPanelWidth<T>;
  const int64_t K = in_dim, N = out_dim, full = N / P;
  const bool parallel = rows * N * K >= 16 * cpu::kParallelThreshold;
  if (rows <= 3) {  // two panels per pass: more independent sums for few rows
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t j = 0; j < full / 2; ++j)
      panels<T, 2>(out + 2 * j * P, N, in, rows, K, packed + 2 * j * P * K, accumulate);
    if (full % 2)
      panels<T, 1>(out + (full - 1) * P, N, in, rows, K, packed + (full - 1) * P * K, accumulate);
  } else {
#pragma omp parallel for schedule(static) if (parallel)
    for (int64_t j = 0; j < full; ++j)
      panels<T, 1>(out + j * P, N, in, rows, K, packed + j * P * K, accumulate);
  }
  // The last, narrower panel ([in_dim][width]): the same chain per element, in scalars.
  const int64_t n0 = full * P, width = N - n0;
  const T* panel = packed + n0 * K;
  for (int64_t m = 0; m < rows; ++m)
    for (int64_t c = 0; c < width; ++c) {
      T& o = out[m * N + n0 + c];
      T sum = accumulate ? o : T(0);
      for (int64_t k = 0; k < K; ++k) sum += in[m * K + k] * panel[k * width + c];
      o = sum;
    }
}

template <typename T>
void embedding_packed_forward(T* out, const int32_t* tokens, const T* packed, int64_t n,
                              int64_t d, int64_t V) {
  constexpr int64_t P = kPanelWidth<T>;
  const int64_t n0 = V / P * P;  // the last, narrower panel starts here
  for (int64_t i = 0; i < n; ++i) {
    const int64_t t = tokens[i], width = t < n0 ? P : V - n0, first = t < n0 ? t / P * P : n0;
    const T* column = packed + first * d + (t - first);
    for (int64_t k = 0; k < d; ++k) out[i * d + k] = column[k * width];
  }
}

template void pack_linear_weight<float>(float*, int64_t, int64_t);
template void pack_linear_weight<double>(double*, int64_t, int64_t);
template void linear_packed_forward<float>(float*, const float*, const float*, int64_t, int64_t,
                                           int64_t, bool);
template void linear_packed_forward<double>(double*, const double*, const double*, int64_t,
                                            int64_t, int64_t, bool);
template void embedding_packed_forward<float>(float*, const int32_t*, const float*, int64_t,
                                              int64_t, int64_t);
template void embedding_packed_forward<double>(double*, const int32_t*, const double*, int64_t,
                                               int64_t, int64_t);

}  // namespace sps::ops
