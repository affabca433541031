// Embedding on the GPU: a gather forward; a scatter-add backward with one thread per column
// walking the tokens in order, so repeated tokens add up without atomics, the same bits on
// every run.
#include <cuda_runtime.h>

#include "ops/cuda/check.h"
#include "ops/cuda/kernels.h"
#include "ops/cuda/launch.h"

namespace sps::ops::cuda {

namespace {

__global__ void gather_kernel(float* out, const int32_t* tokens, const float* table, int64_t n,
                              int64_t d) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n * d;
       i += int64_t(gridDim.x) * blockDim.x)
    out[i] = table[int64_t(tokens[i / d]) * d + i % d];
}

__global__ void scatter_add_kernel(float* dtable, const float* dout, const int32_t* tokens,
                                   int64_t n, int64_t d) {
  const int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (c >= d) return;
  for (int64_t i = 0; i < n; ++i) dtable[int64_t(tokens[i]) * d + c] += dout[i * d + c];
}

}  // namespace

void embedding_forward(float* out, const int32_t* tokens, const float* table, int64_t n,
                       int64_t d) {
  if (n * d <= 0) return;
  gather_kernel<<<grid_stride_blocks(n * d), kThreads>>>(out, tokens, table, n, d);
  check(cudaGetLastError(), "embedding forward launch");
}

void embedding_backward(float* dtable, const float* dout, const int32_t* tokens, int64_t n,
                        int64_t d) {
  if (n * d <= 0) return;
  scatter_add_kernel<<<unsigned((d + kThreads - 1) / kThreads), kThreads>>>(dtable, dout, tokens,
                                                                            n, d);
  check(cudaGetLastError(), "embedding backward launch");
}

}  // namespace sps::ops::cuda
