// Launches the choice of the k most likely ids of top_k.cuh.
#include <cuda_runtime.h>

#include "ops/cuda/check.h"
#include "ops/cuda/kernels.h"
#include "ops/cuda/top_k.cuh"

namespace sps::ops::cuda {

void top_k_rows(int32_t* ids, float* values, int32_t* first_nonfinite, const float* x,
                int64_t rows, int64_t n, const uint8_t* banned, int64_t k) {
  if (rows <= 0) return;
  constexpr int kThreads = top_k::kBlockThreads;
  if (k == 1) {
    constexpr int kBytes = top_k::greedy_shared_bytes<kThreads>();
    top_k::greedy_kernel<kThreads>
        <<<unsigned(rows), kThreads, kBytes>>>(ids, values, first_nonfinite, x, n, banned);
  } else {
    constexpr int kMaxK = int(kMaxTopK);
    constexpr int kBytes = top_k::shared_bytes<kThreads, kMaxK>();
    top_k::top_k_kernel<kThreads, kMaxK><<<unsigned(rows), kThreads, kBytes>>>(
        ids, values, first_nonfinite, x, n, banned, int(k));
  }
  check(cudaGetLastError(), "top-k launch");
}

}  // namespace sps::ops::cuda
