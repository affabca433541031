// Softmax cross-entropy over rows of V logits (V = 50304 for GPT-2: the hottest
// elementwise loop of a step, so every pass over a row vectorises).
#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/cpu/cpu_common.h"
#include "ops/ops.h"
#include "util/error.h"

namespace sps::ops {
namespace {

// Σ exp(x[i] − shift), summed in blocks so the rounding error grows with the block count
// and the block length rather than with V.
template <typename T>
T sum_exp(const T* __restrict x, int64_t V, T shift) {
  constexpr int64_t kBlock = 512;
  T total = 0;
  for (int64_t begin = 0; begin < V; begin += kBlock) {
    const int64_t end = std::min(V, begin + kBlock);
    T block = 0;
#pragma omp simd simdlen(cpu::kSimdLanes<T>) reduction(+ : block)
    for (int64_t i = begin; i < end; ++i) block += cpu::exp_approx(x[i] - shift);
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
  // Written through one loop that reads logits[i] before writing dlogits[i], so it is
  // correct in place; `omp simd` vouches that iterations are independent (which aliasing
  // at the same index keeps true), so GCC does not fall back to scalar code on overlap.
#pragma omp parallel for schedule(static) if (rows * V >= cpu::kParallelThreshold)
  for (int64_t r = 0; r < rows; ++r) {
    const T* x = logits + r * V;
    T* dx = dlogits + r * V;
    const T row_lse = lse[r], scale = dnll[r];
#pragma omp simd simdlen(cpu::kSimdLanes<T>)
    for (int64_t i = 0; i < V; ++i) dx[i] = cpu::exp_approx(x[i] - row_lse) * scale;
    dx[targets[r]] -= scale;
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
