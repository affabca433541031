// SwiGLU: act = silu(gate) ⊙ up, silu(g) = g · sigmoid(g).
//
// The forward of float runs in explicit vector lanes through cpu::exp_lanes, the exp_approx of
// every lane: a loop of exp_approx calls under `omp simd` stayed scalar (GCC compiled exp's
// range checks as branches), a division and a serial exp per value, 4% of an sps decode step
// at B = 4. Every value gets the same operations in the lanes as in the scalar tail (products
// and a quotient, nothing to fuse), so the same bits as before.
#include <type_traits>

#include "ops/cpu/cpu_common.h"
#include "ops/ops.h"

namespace sps::ops {
namespace {

// sigmoid(g) = 1 / (1 + exp(−g)), for T or a vector of floats.
template <typename V>
inline V sigmoid(V g) {
  if constexpr (std::is_arithmetic_v<V>) {
    return V(1) / (V(1) + cpu::exp_approx(-g));
  } else {
    return 1.0f / (1.0f + cpu::exp_vector(-g));
  }
}

}  // namespace

template <typename T>
void swiglu_forward(T* act, const T* gate_up, int64_t rows, int64_t F) {
  // gate_up [rows, 2F] = gate | up; act [rows, F]
#pragma omp parallel for schedule(static) if (rows * F >= cpu::kParallelThreshold)
  for (int64_t r = 0; r < rows; ++r) {
    const T* gate = gate_up + r * 2 * F;
    const T* up = gate + F;
    T* a = act + r * F;
    int64_t c = 0;
    if constexpr (std::is_same_v<T, float>) {
      using V = cpu::Vec<float>::V;
      for (; c + cpu::Vec<float>::lanes <= F; c += cpu::Vec<float>::lanes) {
        const V g = cpu::load<V>(gate + c);
        cpu::store(a + c, g * sigmoid(g) * cpu::load<V>(up + c));
      }
    }
    for (; c < F; ++c) a[c] = gate[c] * sigmoid(gate[c]) * up[c];
  }
}

// The backward of float in vector lanes too, with each value's operations those of the
// scalar tail as GCC compiles it: 1 + g·(1 − σ) with the product rounded before the sum
// (cpu::multiply_then_add; free lanes would fuse it), then products only; so training's bits
// stay what the scalar loop gave (SwiGLU.FloatBackwardLanesGiveTheScalarBits).
template <typename T>
void swiglu_backward(T* dgate_up, const T* dact, const T* gate_up, int64_t rows, int64_t F) {
  // d/dg silu(g) = σ(g) · (1 + g · (1 − σ(g))); d act/d up = silu(g).
#pragma omp parallel for schedule(static) if (rows * F >= cpu::kParallelThreshold)
  for (int64_t r = 0; r < rows; ++r) {
    const T* gate = gate_up + r * 2 * F;
    const T* up = gate + F;
    const T* da = dact + r * F;
    T* dgate = dgate_up + r * 2 * F;
    T* dup = dgate + F;
    int64_t c = 0;
    if constexpr (std::is_same_v<T, float>) {
      using V = cpu::Vec<float>::V;
      const V one = V{} + 1.0f;
      for (; c + cpu::Vec<float>::lanes <= F; c += cpu::Vec<float>::lanes) {
        const V g = cpu::load<V>(gate + c), s = sigmoid(g), d = cpu::load<V>(da + c);
        const V slope = cpu::multiply_then_add(one - s, g, one);
        cpu::store(dgate + c, d * cpu::load<V>(up + c) * s * slope);
        cpu::store(dup + c, d * g * s);
      }
    }
    for (; c < F; ++c) {
      const T g = gate[c], s = sigmoid(g);
      dgate[c] = da[c] * up[c] * s * cpu::multiply_then_add(T(1) - s, g, T(1));
      dup[c] = da[c] * g * s;
    }
  }
}

template void swiglu_forward<float>(float*, const float*, int64_t, int64_t);
template void swiglu_forward<double>(double*, const double*, int64_t, int64_t);
template void swiglu_backward<float>(float*, const float*, const float*, int64_t, int64_t);
template void swiglu_backward<double>(double*, const double*, const double*, int64_t, int64_t);

}  // namespace sps::ops
