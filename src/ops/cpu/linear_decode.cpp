// linear for the few rows of a decode step. A decode step multiplies 1–2 rows per sequence
// by every weight matrix, so it is bound by reading the weights. BLAS sgemm packs the whole
// weight before multiplying, which reads it and writes it again; measured on the s scale's
// matrices with 4 and 8 rows this ran at 1.5–1.9 GB/s against 2.3–3.0 GB/s for streaming
// each weight row once (docs/performance.md, Inference). So up to kMaxStreamRows rows, each
// block of weight rows is loaded once, in vectors along in_dim, and multiplied into every
// input row (kept in L1); past that, BLAS.
#include <algorithm>

#include "ops/cpu/cpu_common.h"
#include "ops/ops.h"
#include "util/error.h"

namespace sps::ops {
namespace {

using cpu::load;
using cpu::Vec;

constexpr int64_t kMaxStreamRows = 16;
// Software prefetch distance along a weight row (the rows are read once, so the hardware
// prefetcher alone left ~20% of the bandwidth unused in measurements).
constexpr int64_t kPrefetchBytes = 4096;

// out[m, n0 .. n0+R) for m < M: R weight rows against M input rows.
template <typename T, int M, int R>
inline void weight_block(T* out, const T* in, const T* weight, int64_t n0, int64_t K, int64_t N,
                         bool accumulate) {
  using V = typename Vec<T>::V;
  constexpr int W = Vec<T>::lanes;
  V acc[R][M];
  for (int r = 0; r < R; ++r)
    for (int m = 0; m < M; ++m) acc[r][m] = V{};
  int64_t k = 0;
  for (; k + W <= K; k += W) {
    V w[R];
    for (int r = 0; r < R; ++r) {
      const T* row = weight + (n0 + r) * K + k;
      w[r] = load<V>(row);
      __builtin_prefetch(row + kPrefetchBytes / sizeof(T));
    }
    for (int m = 0; m < M; ++m) {
      const V a = load<V>(in + m * K + k);
      for (int r = 0; r < R; ++r) acc[r][m] += a * w[r];
    }
  }
  for (int r = 0; r < R; ++r)
    for (int m = 0; m < M; ++m) {
      T sum = 0;
      for (int lane = 0; lane < W; ++lane) sum += acc[r][m][lane];
      for (int64_t kk = k; kk < K; ++kk) sum += in[m * K + kk] * weight[(n0 + r) * K + kk];
      T& o = out[m * N + n0 + r];
      o = accumulate ? o + sum : sum;
    }
}

template <typename T, int M>
void stream_rows(T* out, const T* in, const T* weight, int64_t K, int64_t N, bool accumulate) {
  // Weight rows per block: two streams measured best for 4 and 8 rows (one is slower, four
  // slower still); one past 8 rows keeps the accumulators in registers.
  constexpr int R = M <= 8 ? 2 : 1;
  const int64_t blocks = N / R;
  const bool parallel = N * K >= 16 * cpu::kParallelThreshold;
#pragma omp parallel for schedule(static) if (parallel)
  for (int64_t blk = 0; blk < blocks; ++blk)
    weight_block<T, M, R>(out, in, weight, blk * R, K, N, accumulate);
  for (int64_t n = blocks * R; n < N; ++n) weight_block<T, M, 1>(out, in, weight, n, K, N, accumulate);
}

template <typename T, int M = 1>
void dispatch(int64_t rows, T* out, const T* in, const T* weight, int64_t K, int64_t N,
              bool accumulate) {
  if constexpr (M <= kMaxStreamRows) {
    if (rows == M) return stream_rows<T, M>(out, in, weight, K, N, accumulate);
    return dispatch<T, M + 1>(rows, out, in, weight, K, N, accumulate);
  }
  SPS_ASSERT(false);
}

}  // namespace

template <typename T>
void linear_decode_forward(T* out, const T* in, const T* weight, int64_t rows, int64_t in_dim,
                           int64_t out_dim, bool accumulate) {
  SPS_ASSERT(rows >= 0 && in_dim >= 0 && out_dim >= 0);
  if (rows == 0 || out_dim == 0) return;
  if (rows > kMaxStreamRows || in_dim == 0)
    return linear_forward(out, in, weight, rows, in_dim, out_dim, accumulate);
  dispatch<T>(rows, out, in, weight, in_dim, out_dim, accumulate);
}

template void linear_decode_forward<float>(float*, const float*, const float*, int64_t, int64_t,
                                           int64_t, bool);
template void linear_decode_forward<double>(double*, const double*, const double*, int64_t,
                                            int64_t, int64_t, bool);

}  // namespace sps::ops
