// Softmax cross-entropy over rows of V logits (V = 50304 for GPT-2: the hottest
// elementwise loop of a step, so every pass over a row vectorises).
#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>

#include "ops/cpu/cpu_common.h"
#include "ops/ops.h"
#include "util/error.h"

namespace sps::ops {
namespace {

// out[i] = exp(x[i] − shift) · scale for i < n; float in vector lanes through cpu::exp_lanes
// (a loop of exp_approx calls under `omp simd` compiled to scalar code with branches), with
// the same operations per value as the scalar tail, so the same bits.
template <typename T>
void scaled_exp(T* out, const T* x, int64_t n, T shift, T scale) {
  int64_t i = 0;
  if constexpr (std::is_same_v<T, float>) {
    using V = cpu::Vec<float>::V;
    for (; i + cpu::Vec<float>::lanes <= n; i += cpu::Vec<float>::lanes)
      cpu::store(out + i, cpu::exp_vector(cpu::load<V>(x + i) - shift) * scale);
  }
  for (; i < n; ++i) out[i] = cpu::exp_approx(x[i] - shift) * scale;
}

// Σ exp(x[i] − shift), summed in blocks so the rounding error grows with the block count
// and the block length rather than with V; each block's exps in lanes, its sum in index
// order (a sum in lanes would round in another order: other losses, other training bits).
template <typename T>
T sum_exp(const T* x, int64_t V, T shift) {
  constexpr int64_t kBlock = 512;
  alignas(64) T e[kBlock];
  T total = 0;
  for (int64_t begin = 0; begin < V; begin += kBlock) {
    const int64_t n = std::min(kBlock, V - begin);
    scaled_exp(e, x + begin, n, shift, T(1));
    T block = 0;
    for (int64_t i = 0; i < n; ++i) block += e[i];
    total += block;
  }
  return total;
}

}  // namespace

template <typename T>
void cross_entropy_forward(T* nll, T* lse, const T* logits, const int32_t* targets,
                           int64_t rows, int64_t V) {
  SPS_ASSERT(V > 0);
#pragma omp parallel for schedule(static) if (rows * V >= cpu::kParallelThreshold)
  for (int64_t r = 0; r < rows; ++r) {
    const T* __restrict x = logits + r * V;
    T row_max = -std::numeric_limits<T>::infinity();
    // Written as a comparison (not std::max) so GCC turns it into vector max instructions.
#pragma omp simd simdlen(cpu::kSimdLanes<T>) reduction(max : row_max)
    for (int64_t i = 0; i < V; ++i) row_max = x[i] > row_max ? x[i] : row_max;
    const T row_lse = row_max + std::log(sum_exp(x, V, row_max));
    lse[r] = row_lse;
    nll[r] = row_lse - x[targets[r]];
  }
}

template <typename T>
void cross_entropy_backward(T* dlogits, const T* logits, const T* lse, const int32_t* targets,
                            const T* dnll, int64_t rows, int64_t V) {
  // Each vector of logits is read before its gradients are written, so it is correct in place.
#pragma omp parallel for schedule(static) if (rows * V >= cpu::kParallelThreshold)
  for (int64_t r = 0; r < rows; ++r) {
    scaled_exp(dlogits + r * V, logits + r * V, V, lse[r], dnll[r]);
    dlogits[r * V + targets[r]] -= dnll[r];
  }
}

template void cross_entropy_forward<float>(float*, float*, const float*, const int32_t*,
                                           int64_t, int64_t);
template void cross_entropy_forward<double>(double*, double*, const double*, const int32_t*,
                                            int64_t, int64_t);
template void cross_entropy_backward<float>(float*, const float*, const float*, const int32_t*,
                                            const float*, int64_t, int64_t);
template void cross_entropy_backward<double>(double*, const double*, const double*,
                                             const int32_t*, const double*, int64_t, int64_t);

}  // namespace sps::ops
