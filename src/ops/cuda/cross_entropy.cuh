#pragma once
// Softmax cross-entropy on the GPU (ops.h cross_entropy_forward / _backward), written in the
// subset of CUDA that tests/ops/cuda_emulator.h also runs: one block per row for the
// log-sum-exp (max, then Σ exp in a fixed tree order); the gradient elementwise, in place
// when dlogits aliases logits.
#include <cmath>
#include <cstdint>

#include "ops/cuda/portable.cuh"

namespace sps::ops::cuda::cross_entropy {

constexpr int kBlockThreads = 256;
constexpr int kSharedBytes = kBlockThreads * int(sizeof(float));

// Grid: one block per row.
template <int kThreads>
__global__ void __launch_bounds__(kThreads)
    forward_kernel(float* nll, float* lse, const float* logits, const int32_t* targets,
                   int64_t V) {
  float* shared = dynamic_shared_floats();
  const float* x = logits + blockIdx.x * V;
  float row_max = -INFINITY;
  for (int64_t i = threadIdx.x; i < V; i += kThreads) row_max = fmaxf(row_max, x[i]);
  row_max = block_max<kThreads>(row_max, shared);
  float sum = 0;
  for (int64_t i = threadIdx.x; i < V; i += kThreads) sum += expf(x[i] - row_max);
  const float row_lse = row_max + logf(block_sum<kThreads>(sum, shared));
  if (threadIdx.x == 0) {
    lse[blockIdx.x] = row_lse;
    nll[blockIdx.x] = row_lse - x[targets[blockIdx.x]];
  }
}

// dlogits = (softmax − onehot(target)) · dnll; each element read, then written, by one thread.
// Grid: any number of blocks striding over rows · V.
template <int kThreads>
__global__ void __launch_bounds__(kThreads)
    backward_kernel(float* dlogits, const float* logits, const float* lse, const int32_t* targets,
                    const float* dnll, int64_t rows, int64_t V) {
  for (int64_t i = blockIdx.x * int64_t(kThreads) + threadIdx.x; i < rows * V;
       i += int64_t(gridDim.x) * kThreads) {
    const int64_t r = i / V;
    const float scale = dnll[r];
    const float onehot = i % V == targets[r] ? scale : 0.0f;
    dlogits[i] = expf(logits[i] - lse[r]) * scale - onehot;
  }
}

}  // namespace sps::ops::cuda::cross_entropy
