// Launches the bf16 rounding of elementwise.cuh.
#include "ops/cuda/bf16.h"

#include <cuda_runtime.h>

#include "ops/cuda/check.h"
#include "ops/cuda/elementwise.cuh"
#include "ops/cuda/launch.h"

namespace sps::ops::cuda {

void round_to_bf16(void* out, const float* in, int64_t rows, int64_t cols, int64_t ld) {
  const int64_t n = rows * cols;
  if (n <= 0) return;
  elementwise::round_bf16_kernel<uint16_t><<<grid_stride_blocks(n), kThreads>>>(
      static_cast<uint16_t*>(out), in, n, cols, ld);
  check(cudaGetLastError(), "bf16 rounding launch");
}

}  // namespace sps::ops::cuda
