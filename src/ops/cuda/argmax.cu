// Launches the greedy choice of argmax.cuh.
#include <cuda_runtime.h>

#include "ops/cuda/argmax.cuh"
#include "ops/cuda/check.h"
#include "ops/cuda/kernels.h"

namespace sps::ops::cuda {

void argmax_rows(int32_t* ids, const float* x, int64_t rows, int64_t n,
                 const ExcludedIds& excluded) {
  if (rows <= 0) return;
  argmax::argmax_kernel<argmax::kBlockThreads>
      <<<unsigned(rows), argmax::kBlockThreads, argmax::kSharedBytes>>>(ids, x, n, excluded);
  check(cudaGetLastError(), "argmax launch");
}

}  // namespace sps::ops::cuda
