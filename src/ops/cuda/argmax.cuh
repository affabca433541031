#pragma once
// Greedy choice per row on the GPU (ops.h argmax_rows), written in the subset of CUDA that
// tests/ops/cuda_emulator.h also runs. One block per row: thread t keeps the best of ids
// t, t + kThreads, … (scanned in id order, so its lowest id wins its ties), then the block
// combines the threads' candidates pairwise in a fixed tree, the lower id winning a tie: the
// CPU's answer, for rows free of NaN.
#include <cstdint>

#include "ops/cuda/portable.cuh"
#include "ops/ops.h"

namespace sps::ops::cuda::argmax {

constexpr int kBlockThreads = 256;
constexpr int kSharedBytes = kBlockThreads * (sizeof(float) + sizeof(int32_t));

// Candidate (value, id) beats (best_value, best_id); id −1 is no candidate.
__device__ inline bool better(float value, int32_t id, float best_value, int32_t best_id) {
  return id >= 0 && (best_id < 0 || value > best_value || (value == best_value && id < best_id));
}

// Grid: one block of kThreads threads per row of x [rows, n]. (A template, as the other
// kernels of these headers, so that the GPU build and the emulated tests may both define it.)
template <int kThreads>
__global__ void __launch_bounds__(kThreads)
    argmax_kernel(int32_t* ids, const float* x, int64_t n, ExcludedIds excluded) {
  float* values = dynamic_shared_floats();
  int32_t* candidates = reinterpret_cast<int32_t*>(values + kThreads);
  const float* row = x + int64_t(blockIdx.x) * n;
  float best_value = 0;
  int32_t best_id = -1;
  for (int64_t i = threadIdx.x; i < n; i += kThreads) {
    const int32_t id = int32_t(i);
    bool skip = false;
    SPS_UNROLL
    for (int e = 0; e < 4; ++e) skip = skip || id == excluded.ids[e];
    if (!skip && (best_id < 0 || row[i] > best_value)) {
      best_value = row[i];
      best_id = id;
    }
  }
  values[threadIdx.x] = best_value;
  candidates[threadIdx.x] = best_id;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (int(threadIdx.x) < stride) {
      const int other = int(threadIdx.x) + stride;
      if (better(values[other], candidates[other], values[threadIdx.x], candidates[threadIdx.x])) {
        values[threadIdx.x] = values[other];
        candidates[threadIdx.x] = candidates[other];
      }
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) ids[blockIdx.x] = candidates[0];
}

}  // namespace sps::ops::cuda::argmax
