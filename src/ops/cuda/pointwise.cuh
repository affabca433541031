#pragma once
// The elementwise kernels of a block on the GPU, written in the subset of CUDA that
// tests/ops/cuda_emulator.h also runs: the embedding (a gather forward; a scatter-add
// backward with one thread per column walking the tokens in order, so repeated tokens add up
// without atomics), RoPE (adjacent pairs, as ops/cpu/rope.cpp) and SwiGLU (gate in columns
// [0, F) of gate_up, up in [F, 2F), as ops.h). Grids: any number of blocks of kThreads
// threads striding over the elements, unless a kernel says otherwise.
#include <cmath>
#include <cstdint>

#include "ops/cuda/portable.cuh"

namespace sps::ops::cuda::pointwise {

constexpr int kBlockThreads = 256;

template <int kThreads>
__global__ void __launch_bounds__(kThreads)
    gather_kernel(float* out, const int32_t* tokens, const float* table, int64_t n, int64_t d) {
  for (int64_t i = blockIdx.x * int64_t(kThreads) + threadIdx.x; i < n * d;
       i += int64_t(gridDim.x) * kThreads)
    out[i] = table[int64_t(tokens[i / d]) * d + i % d];
}

// Grid: ⌈d / kThreads⌉ blocks, one thread per column.
template <int kThreads>
__global__ void __launch_bounds__(kThreads)
    scatter_add_kernel(float* dtable, const float* dout, const int32_t* tokens, int64_t n,
                       int64_t d) {
  const int64_t c = blockIdx.x * int64_t(kThreads) + threadIdx.x;
  if (c >= d) return;
  for (int64_t i = 0; i < n; ++i) dtable[int64_t(tokens[i]) * d + c] += dout[i * d + c];
}

// Rotates pair j of every head of every row by +angle (sign = 1) or −angle (sign = −1, the
// transpose), in place: one thread per (row, head, pair).
template <int kThreads>
__global__ void __launch_bounds__(kThreads)
    rotate_kernel(float* x, const int32_t* pos, int64_t n, int64_t heads, int64_t half,
                  int64_t row_stride, const float* cos_table, const float* sin_table,
                  float sign) {
  const int64_t total = n * heads * half;
  for (int64_t i = blockIdx.x * int64_t(kThreads) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * kThreads) {
    const int64_t j = i % half, h = i / half % heads, r = i / half / heads;
    const float c = cos_table[int64_t(pos[r]) * half + j];
    const float s = sign * sin_table[int64_t(pos[r]) * half + j];
    float* pair = x + r * row_stride + h * 2 * half + 2 * j;
    const float even = pair[0], odd = pair[1];
    pair[0] = even * c - odd * s;
    pair[1] = even * s + odd * c;
  }
}

__device__ inline float sigmoid(float g) { return 1.0f / (1.0f + expf(-g)); }

// act = silu(gate) ⊙ up over n = rows · F elements.
template <int kThreads>
__global__ void __launch_bounds__(kThreads)
    swiglu_forward_kernel(float* act, const float* gate_up, int64_t n, int64_t F) {
  for (int64_t i = blockIdx.x * int64_t(kThreads) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * kThreads) {
    const int64_t r = i / F, c = i % F;
    const float g = gate_up[r * 2 * F + c], u = gate_up[r * 2 * F + F + c];
    act[i] = g * sigmoid(g) * u;
  }
}

// d/dg silu(g) = σ(g) · (1 + g · (1 − σ(g))); d act/d up = silu(g). Written, not accumulated.
template <int kThreads>
__global__ void __launch_bounds__(kThreads)
    swiglu_backward_kernel(float* dgate_up, const float* dact, const float* gate_up, int64_t n,
                           int64_t F) {
  for (int64_t i = blockIdx.x * int64_t(kThreads) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * kThreads) {
    const int64_t r = i / F, c = i % F;
    const float g = gate_up[r * 2 * F + c], u = gate_up[r * 2 * F + F + c];
    const float s = sigmoid(g);
    dgate_up[r * 2 * F + c] = dact[i] * u * s * (1.0f + g * (1.0f - s));
    dgate_up[r * 2 * F + F + c] = dact[i] * g * s;
  }
}

}  // namespace sps::ops::cuda::pointwise
