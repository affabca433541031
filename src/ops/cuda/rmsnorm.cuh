#pragma once
// RMSNorm on the GPU (ops.h rmsnorm_forward / rmsnorm_backward), written in the subset of
// CUDA that tests/ops/cuda_emulator.h also runs: one block per row, the row's sums reduced in
// shared memory in a fixed tree order; the gain gradient summed over rows in two passes (each
// part of the rows by its own blocks, then the parts in order), so that the sum over tens of
// thousands of rows is spread over the GPU and still has one order.
#include <cmath>
#include <cstdint>

#include "ops/cuda/portable.cuh"

namespace sps::ops::cuda::rmsnorm {

constexpr int kBlockThreads = 256;
constexpr int kSharedBytes = kBlockThreads * int(sizeof(float));  // the row kernels' sums
constexpr int64_t kGainPartRows = 256;  // rows per part of the gain gradient's first pass

// Grid: one block per row.
template <int kThreads>
__global__ void __launch_bounds__(kThreads)
    forward_kernel(float* out, float* rstd, const float* in, const float* gain, int64_t d,
                   float eps) {
  float* shared = dynamic_shared_floats();
  const float* x = in + blockIdx.x * d;
  float* y = out + blockIdx.x * d;
  float sum_sq = 0;
  for (int64_t c = threadIdx.x; c < d; c += kThreads) sum_sq += x[c] * x[c];
  const float s = 1.0f / sqrtf(block_sum<kThreads>(sum_sq, shared) / float(d) + eps);
  if (threadIdx.x == 0) rstd[blockIdx.x] = s;
  for (int64_t c = threadIdx.x; c < d; c += kThreads) y[c] = x[c] * s * gain[c];
}

// dx += s · (dy ⊙ gain) − x · s³/d · Σ_c dy_c gain_c x_c   (ops/cpu/rmsnorm.cpp). Grid: one
// block per row.
template <int kThreads>
__global__ void __launch_bounds__(kThreads)
    input_gradient_kernel(float* din, const float* dout, const float* in, const float* gain,
                          const float* rstd, int64_t d) {
  float* shared = dynamic_shared_floats();
  const int64_t row = blockIdx.x;
  const float* x = in + row * d;
  const float* dy = dout + row * d;
  float* dx = din + row * d;
  const float s = rstd[row];
  float dot = 0;
  for (int64_t c = threadIdx.x; c < d; c += kThreads) dot += dy[c] * gain[c] * x[c];
  const float k = block_sum<kThreads>(dot, shared) * s * s * s / float(d);
  for (int64_t c = threadIdx.x; c < d; c += kThreads) dx[c] += s * dy[c] * gain[c] - k * x[c];
}

// dgain[c] += Σ_rows dy · x · s, first pass: partial[p, c] = the sum over rows
// [p · part_rows, (p + 1) · part_rows), in row order. Grid: parts × ⌈d / kThreads⌉ blocks,
// one thread per column.
template <int kThreads>
__global__ void __launch_bounds__(kThreads)
    gain_partials_kernel(float* partial, const float* dout, const float* in, const float* rstd,
                         int64_t rows, int64_t d, int64_t part_rows) {
  const int64_t c = blockIdx.y * int64_t(kThreads) + threadIdx.x;
  if (c >= d) return;
  const int64_t first = blockIdx.x * part_rows;
  const int64_t end = first + part_rows < rows ? first + part_rows : rows;
  float sum = 0;
  for (int64_t r = first; r < end; ++r) sum += dout[r * d + c] * in[r * d + c] * rstd[r];
  partial[blockIdx.x * d + c] = sum;
}

// Second pass: dgain[c] += Σ_p partial[p, c], in part order. Grid: ⌈d / kThreads⌉ blocks.
template <int kThreads>
__global__ void __launch_bounds__(kThreads)
    gain_sum_kernel(float* dgain, const float* partial, int64_t parts, int64_t d) {
  const int64_t c = blockIdx.x * int64_t(kThreads) + threadIdx.x;
  if (c >= d) return;
  float sum = 0;
  for (int64_t p = 0; p < parts; ++p) sum += partial[p * d + c];
  dgain[c] += sum;
}

}  // namespace sps::ops::cuda::rmsnorm
