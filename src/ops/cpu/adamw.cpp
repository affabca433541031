// AdamW's fused update and the squared norm used for global gradient clipping.
#include <algorithm>
#include <cmath>

#include "ops/cpu/cpu_common.h"
#include "ops/ops.h"

namespace sps::ops {

namespace {

template <typename T>
void update_range(T* weights, const T* grads, float* m, float* v, int64_t n, const AdamWStep& s,
                  double weight_decay) {
  // The arithmetic runs in T. PyTorch's form:
  // w ← w·(1 − lr·λ); w ← w − (lr / (1 − β1^t)) · m / (√v / √(1 − β2^t) + ε).
  // A struct, not a structured binding: clang cannot capture bindings in OpenMP regions.
  const AdamWFactors<T> f = AdamWFactors<T>::of(s, weight_decay);
#pragma omp parallel for schedule(static) if (n >= cpu::kParallelThreshold)
  for (int64_t begin = 0; begin < n; begin += 4096) {
    const int64_t end = std::min(n, begin + 4096);
#pragma omp simd simdlen(cpu::kSimdLanes<T>)
    for (int64_t i = begin; i < end; ++i) {
      const T g = grads[i] * f.scale;
      const T mi = f.b1 * T(m[i]) + f.one_minus_b1 * g;
      const T vi = f.b2 * T(v[i]) + f.one_minus_b2 * g * g;
      m[i] = float(mi);
      v[i] = float(vi);
      const T denom = std::sqrt(vi) * f.inv_sqrt_bias2 + f.eps;
      weights[i] = weights[i] * f.decay - f.step_size * mi / denom;
    }
  }
}

}  // namespace

template <typename T>
void adamw_update(T* weights, const T* grads, float* m, float* v,
                  const std::vector<AdamWRange>& ranges, const AdamWStep& s) {
  for (const AdamWRange& r : ranges)
    update_range(weights + r.begin, grads + r.begin, m + r.begin, v + r.begin, r.end - r.begin, s,
                 r.decayed ? s.weight_decay : 0.0);
}

template <typename T>
double sum_squares(const T* x, int64_t n) {
  // Blocks of kBlock elements, each summed on one thread; the block sums of a group are
  // added serially in block order. Same result for any thread count.
  constexpr int64_t kBlock = 1 << 14, kGroup = 1024;
  double total = 0;
  for (int64_t group = 0; group < n; group += kBlock * kGroup) {
    const int64_t group_end = std::min(n, group + kBlock * kGroup);
    const int64_t blocks = (group_end - group + kBlock - 1) / kBlock;
    double partial[kGroup];
#pragma omp parallel for schedule(static) if (group_end - group >= cpu::kParallelThreshold)
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t begin = group + b * kBlock, end = std::min(group_end, begin + kBlock);
      double sum = 0;
#pragma omp simd reduction(+ : sum)
      for (int64_t i = begin; i < end; ++i) sum += double(x[i]) * double(x[i]);
      partial[b] = sum;
    }
    for (int64_t b = 0; b < blocks; ++b) total += partial[b];
  }
  return total;
}

template void adamw_update<float>(float*, const float*, float*, float*,
                                  const std::vector<AdamWRange>&, const AdamWStep&);
template void adamw_update<double>(double*, const double*, float*, float*,
                                   const std::vector<AdamWRange>&, const AdamWStep&);
template double sum_squares<float>(const float*, int64_t);
template double sum_squares<double>(const double*, int64_t);

}  // namespace sps::ops
