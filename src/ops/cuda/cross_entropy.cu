// Launches the cross-entropy kernels of cross_entropy.cuh.
#include <cuda_runtime.h>

#include "ops/cuda/check.h"
#include "ops/cuda/cross_entropy.cuh"
#include "ops/cuda/kernels.h"
#include "ops/cuda/launch.h"

namespace sps::ops::cuda {

void cross_entropy_forward(float* nll, float* lse, const float* logits, const int32_t* targets,
                           int64_t rows, int64_t V) {
  if (rows <= 0) return;
  constexpr int kBlock = cross_entropy::kBlockThreads;
  cross_entropy::forward_kernel<kBlock>
      <<<unsigned(rows), kBlock, cross_entropy::kSharedBytes>>>(nll, lse, logits, targets, V);
  check(cudaGetLastError(), "cross-entropy forward launch");
}

void cross_entropy_backward(float* dlogits, const float* logits, const float* lse,
                            const int32_t* targets, const float* dnll, int64_t rows, int64_t V) {
  if (rows * V <= 0) return;
  constexpr int kBlock = cross_entropy::kBlockThreads;
  static_assert(kBlock == kThreads, "grid_stride_blocks counts blocks of kThreads");
  cross_entropy::backward_kernel<kBlock><<<grid_stride_blocks(rows * V), kBlock>>>(
      dlogits, logits, lse, targets, dnll, rows, V);
  check(cudaGetLastError(), "cross-entropy backward launch");
}

}  // namespace sps::ops::cuda
