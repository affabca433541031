// SwiGLU: act = silu(gate) ⊙ up, silu(g) = g · sigmoid(g).
#include "ops/cpu/cpu_common.h"
#include "ops/ops.h"

namespace sps::ops {

template <typename T>
void swiglu_forward(T* act, const T* gate_up, int64_t rows, int64_t F) {
  // gate_up [rows, 2F] = gate | up; act [rows, F]
#pragma omp parallel for schedule(static) if (rows * F >= cpu::kParallelThreshold)
  for (int64_t r = 0; r < rows; ++r) {
    const T* __restrict gate = gate_up + r * 2 * F;
    const T* __restrict up = gate + F;
    T* __restrict a = act + r * F;
#pragma omp simd simdlen(cpu::kSimdLanes<T>)
    for (int64_t c = 0; c < F; ++c) {
      const T sigmoid = T(1) / (T(1) + cpu::exp_approx(-gate[c]));
      a[c] = gate[c] * sigmoid * up[c];
    }
  }
}

template <typename T>
void swiglu_backward(T* dgate_up, const T* dact, const T* gate_up, int64_t rows, int64_t F) {
  // d/dg silu(g) = σ(g) · (1 + g · (1 − σ(g))); d act/d up = silu(g).
#pragma omp parallel for schedule(static) if (rows * F >= cpu::kParallelThreshold)
  for (int64_t r = 0; r < rows; ++r) {
    const T* __restrict gate = gate_up + r * 2 * F;
    const T* __restrict up = gate + F;
    const T* __restrict da = dact + r * F;
    T* __restrict dgate = dgate_up + r * 2 * F;
    T* __restrict dup = dgate + F;
#pragma omp simd simdlen(cpu::kSimdLanes<T>)
    for (int64_t c = 0; c < F; ++c) {
      const T g = gate[c];
      const T sigmoid = T(1) / (T(1) + cpu::exp_approx(-g));
      dgate[c] = da[c] * up[c] * sigmoid * (T(1) + g * (T(1) - sigmoid));
      dup[c] = da[c] * g * sigmoid;
    }
  }
}

template void swiglu_forward<float>(float*, const float*, int64_t, int64_t);
template void swiglu_forward<double>(double*, const double*, int64_t, int64_t);
template void swiglu_backward<float>(float*, const float*, const float*, int64_t, int64_t);
template void swiglu_backward<double>(double*, const double*, const double*, int64_t, int64_t);

}  // namespace sps::ops
