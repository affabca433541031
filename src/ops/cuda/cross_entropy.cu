// Softmax cross-entropy on the GPU, as in ops/cpu/cross_entropy.cpp: one block per row for
// the log-sum-exp (max, then Σ exp in a fixed tree order); the gradient elementwise, in place
// when dlogits aliases logits.
#include <cuda_runtime.h>

#include <cmath>

#include "ops/cuda/check.h"
#include "ops/cuda/kernels.h"
#include "ops/cuda/launch.h"

namespace sps::ops::cuda {

namespace {

__global__ void forward_kernel(float* nll, float* lse, const float* logits,
                               const int32_t* targets, int64_t V) {
  __shared__ float shared[kThreads];
  const float* x = logits + blockIdx.x * V;
  float row_max = -INFINITY;
  for (int64_t i = threadIdx.x; i < V; i += kThreads) row_max = fmaxf(row_max, x[i]);
  row_max = block_max(row_max, shared);
  float sum = 0;
  for (int64_t i = threadIdx.x; i < V; i += kThreads) sum += expf(x[i] - row_max);
  const float row_lse = row_max + logf(block_sum(sum, shared));
  if (threadIdx.x == 0) {
    lse[blockIdx.x] = row_lse;
    nll[blockIdx.x] = row_lse - x[targets[blockIdx.x]];
  }
}

// dlogits = (softmax − onehot(target)) · dnll; each element read, then written, by one thread.
__global__ void backward_kernel(float* dlogits, const float* logits, const float* lse,
                                const int32_t* targets, const float* dnll, int64_t rows,
                                int64_t V) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < rows * V;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / V;
    const float scale = dnll[r];
    const float onehot = i % V == targets[r] ? scale : 0.0f;
    dlogits[i] = expf(logits[i] - lse[r]) * scale - onehot;
  }
}

}  // namespace

void cross_entropy_forward(float* nll, float* lse, const float* logits, const int32_t* targets,
                           int64_t rows, int64_t V) {
  if (rows <= 0) return;
  forward_kernel<<<unsigned(rows), kThreads>>>(nll, lse, logits, targets, V);
  check(cudaGetLastError(), "cross-entropy forward launch");
}

void cross_entropy_backward(float* dlogits, const float* logits, const float* lse,
                            const int32_t* targets, const float* dnll, int64_t rows, int64_t V) {
  if (rows * V <= 0) return;
  backward_kernel<<<grid_stride_blocks(rows * V), kThreads>>>(dlogits, logits, lse, targets,
                                                              dnll, rows, V);
  check(cudaGetLastError(), "cross-entropy backward launch");
}

}  // namespace sps::ops::cuda
