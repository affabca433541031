#include "ops/cuda/bf16.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "ops/cuda/check.h"
#include "ops/cuda/launch.h"

namespace sps::ops::cuda {

namespace {

__global__ void round_kernel(__nv_bfloat16* out, const float* in, int64_t n, int64_t cols,
                             int64_t ld) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    out[i] = __float2bfloat16_rn(in[(i / cols) * ld + i % cols]);
}

}  // namespace

void round_to_bf16(void* out, const float* in, int64_t rows, int64_t cols, int64_t ld) {
  const int64_t n = rows * cols;
  if (n <= 0) return;
  round_kernel<<<grid_stride_blocks(n), kThreads>>>(static_cast<__nv_bfloat16*>(out), in, n,
                                                    cols, ld);
  check(cudaGetLastError(), "bf16 rounding launch");
}

}  // namespace sps::ops::cuda
