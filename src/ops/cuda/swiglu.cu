// SwiGLU on the GPU: elementwise over [rows, F], gate in columns [0, F) of gate_up and up in
// [F, 2F), as in ops.h.
#include <cuda_runtime.h>

#include "ops/cuda/check.h"
#include "ops/cuda/kernels.h"
#include "ops/cuda/launch.h"

namespace sps::ops::cuda {

namespace {

__device__ float sigmoid(float g) { return 1.0f / (1.0f + expf(-g)); }

__global__ void forward_kernel(float* act, const float* gate_up, int64_t n, int64_t F) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / F, c = i % F;
    const float g = gate_up[r * 2 * F + c], u = gate_up[r * 2 * F + F + c];
    act[i] = g * sigmoid(g) * u;
  }
}

// d/dg silu(g) = σ(g) · (1 + g · (1 − σ(g))); d act/d up = silu(g).
__global__ void backward_kernel(float* dgate_up, const float* dact, const float* gate_up,
                                int64_t n, int64_t F) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / F, c = i % F;
    const float g = gate_up[r * 2 * F + c], u = gate_up[r * 2 * F + F + c];
    const float s = sigmoid(g);
    dgate_up[r * 2 * F + c] = dact[i] * u * s * (1.0f + g * (1.0f - s));
    dgate_up[r * 2 * F + F + c] = dact[i] * g * s;
  }
}

}  // namespace

void swiglu_forward(float* act, const float* gate_up, int64_t rows, int64_t F) {
  const int64_t n = rows * F;
  if (n <= 0) return;
  forward_kernel<<<grid_stride_blocks(n), kThreads>>>(act, gate_up, n, F);
  check(cudaGetLastError(), "swiglu forward launch");
}

void swiglu_backward(float* dgate_up, const float* dact, const float* gate_up, int64_t rows,
                     int64_t F) {
  const int64_t n = rows * F;
  if (n <= 0) return;
  backward_kernel<<<grid_stride_blocks(n), kThreads>>>(dgate_up, dact, gate_up, n, F);
  check(cudaGetLastError(), "swiglu backward launch");
}

}  // namespace sps::ops::cuda
