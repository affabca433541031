#pragma once
// The elementwise kernels of a block on the GPU, written in the subset of CUDA that
// tests/ops/cuda_emulator.h also runs: the embedding (a gather forward; a backward that adds
// each token's rows in two passes over the rows grouped by token, ops.h TokenRows, so
// repeated tokens add up in one order, without atomics, and the work spreads over the
// tokens and the runs of the long ones), RoPE (adjacent pairs, as ops/cpu/rope.cpp) and SwiGLU
// (gate in columns [0, F) of gate_up, up in [F, 2F), as ops.h). Grids: any number of blocks of
// kThreads threads striding over the elements, unless a kernel says otherwise.
#include <cmath>
#include <cstdint>

#include "ops/cuda/portable.cuh"
#include "ops/ops.h"

namespace sps::ops::cuda::pointwise {

constexpr int kBlockThreads = 256;

template <int kThreads>
__global__ void __launch_bounds__(kThreads)
    gather_kernel(float* out, const int32_t* tokens, const float* table, int64_t n, int64_t d) {
  for (int64_t i = blockIdx.x * int64_t(kThreads) + threadIdx.x; i < n * d;
       i += int64_t(gridDim.x) * kThreads)
    out[i] = table[int64_t(tokens[i / d]) * d + i % d];
}

// The backward's first pass: partial[r, c] = the sum of dout's rows of run r, in row order.
// Grid: runs × ⌈d / kThreads⌉ blocks, one thread per column.
template <int kThreads>
__global__ void __launch_bounds__(kThreads)
    run_sums_kernel(float* partial, const float* dout, TokenRows rows, int64_t d) {
  const int64_t c = blockIdx.y * int64_t(kThreads) + threadIdx.x;
  if (c >= d) return;
  const int64_t r = blockIdx.x;
  float sum = 0;
  for (int32_t i = rows.run_starts[r]; i < rows.run_starts[r + 1]; ++i)
    sum += dout[int64_t(rows.order[i]) * d + c];
  partial[r * d + c] = sum;
}

// Second pass: dtable[token, c] += the token's runs' partials in run order (a long token) or
// its rows in row order (any other). Each token's row of the table is one block's. Grid:
// tokens × ⌈d / kThreads⌉ blocks.
template <int kThreads>
__global__ void __launch_bounds__(kThreads)
    token_sums_kernel(float* dtable, const float* partial, const float* dout, const int32_t* tokens,
                      TokenRows rows, int64_t d) {
  const int64_t c = blockIdx.y * int64_t(kThreads) + threadIdx.x;
  if (c >= d) return;
  const int64_t g = blockIdx.x;
  float sum = 0;
  if (g < rows.long_tokens) {
    for (int32_t r = rows.token_runs[g]; r < rows.token_runs[g + 1]; ++r)
      sum += partial[int64_t(r) * d + c];
  } else {
    for (int32_t i = rows.token_starts[g]; i < rows.token_starts[g + 1]; ++i)
      sum += dout[int64_t(rows.order[i]) * d + c];
  }
  dtable[int64_t(tokens[rows.order[rows.token_starts[g]]]) * d + c] += sum;
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
