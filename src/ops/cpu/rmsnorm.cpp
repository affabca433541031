// RMSNorm: y = x · rsqrt(mean(x²) + eps) · gain, statistics in T (fp32 in training).
#include <omp.h>

#include <algorithm>
#include <cmath>

#include "ops/cpu/cpu_common.h"
#include "ops/ops.h"

namespace sps::ops {

template <typename T>
void rmsnorm_forward(T* out, T* rstd, const T* in, const T* gain, int64_t rows, int64_t d,
                     double eps) {
#pragma omp parallel for schedule(static) if (rows * d >= cpu::kParallelThreshold)
  for (int64_t r = 0; r < rows; ++r) {
    const T* __restrict x = in + r * d;
    T* __restrict y = out + r * d;
    T sum_sq = 0;
#pragma omp simd simdlen(cpu::kSimdLanes<T>) reduction(+ : sum_sq)
    for (int64_t c = 0; c < d; ++c) sum_sq += x[c] * x[c];
    const T s = T(1) / std::sqrt(sum_sq / T(d) + T(eps));
    rstd[r] = s;
#pragma omp simd simdlen(cpu::kSimdLanes<T>)
    for (int64_t c = 0; c < d; ++c) y[c] = x[c] * s * gain[c];
  }
}

template <typename T>
void rmsnorm_backward(T* din, T* dgain, const T* dout, const T* in, const T* gain,
                      const T* rstd, int64_t rows, int64_t d) {
  // With s = rstd and x̂ = x·s:  dgain += Σ_rows dy ⊙ x̂,
  // dx = s · (dy ⊙ gain) − x · s³/d · Σ_c dy_c gain_c x_c.
  // dgain is summed per thread into its own row of `partial` and reduced in thread order,
  // so the result is deterministic for a given thread count.
  const bool parallel = rows * d >= cpu::kParallelThreshold;
  const int max_threads = parallel ? omp_get_max_threads() : 1;
  T* partial = cpu::thread_buffer<T>(int64_t(max_threads) * d);  // [threads, d]
  int used_threads = 1;
#pragma omp parallel if (parallel)
  {
    const int thread = omp_get_thread_num();
#pragma omp single
    used_threads = omp_get_num_threads();
    T* __restrict my_dgain = partial + int64_t(thread) * d;
    std::fill(my_dgain, my_dgain + d, T(0));
#pragma omp for schedule(static)
    for (int64_t r = 0; r < rows; ++r) {
      const T* __restrict x = in + r * d;
      const T* __restrict dy = dout + r * d;
      T* __restrict dx = din + r * d;
      const T s = rstd[r];
      T dot = 0;
#pragma omp simd simdlen(cpu::kSimdLanes<T>) reduction(+ : dot)
      for (int64_t c = 0; c < d; ++c) {
        dot += dy[c] * gain[c] * x[c];
        my_dgain[c] += dy[c] * x[c] * s;
      }
      const T k = dot * s * s * s / T(d);
#pragma omp simd simdlen(cpu::kSimdLanes<T>)
      for (int64_t c = 0; c < d; ++c) dx[c] += s * dy[c] * gain[c] - k * x[c];
    }
#pragma omp for schedule(static)
    for (int64_t c = 0; c < d; ++c) {
      T sum = 0;
      for (int t = 0; t < used_threads; ++t) sum += partial[int64_t(t) * d + c];
      dgain[c] += sum;
    }
  }
}

template void rmsnorm_forward<float>(float*, float*, const float*, const float*, int64_t,
                                     int64_t, double);
template void rmsnorm_forward<double>(double*, double*, const double*, const double*, int64_t,
                                      int64_t, double);
template void rmsnorm_backward<float>(float*, float*, const float*, const float*, const float*,
                                      const float*, int64_t, int64_t);
template void rmsnorm_backward<double>(double*, double*, const double*, const double*,
                                       const double*, const double*, int64_t, int64_t);

}  // namespace sps::ops
