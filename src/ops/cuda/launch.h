#pragma once
// Launch shapes and block reductions shared by the kernels (.cu files only).
#include <cstdint>

namespace sps::ops::cuda {

constexpr int kThreads = 256;  // threads per block

// Blocks for n elements in a grid-stride loop: a fixed cap covers any n without exceeding
// the launch limits.
inline unsigned grid_stride_blocks(int64_t n) {
  const int64_t blocks = (n + kThreads - 1) / kThreads;
  return unsigned(blocks < 4096 ? blocks : 4096);
}

#ifdef __CUDACC__
// The sum (or max) of `value` over a block of kThreads threads, in a fixed tree order: the
// same bits on every run. `shared` holds kThreads values; every thread must call.
template <typename T, typename Combine>
__device__ T block_reduce(T value, T* shared, Combine combine) {
  shared[threadIdx.x] = value;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (threadIdx.x < stride) shared[threadIdx.x] = combine(shared[threadIdx.x], shared[threadIdx.x + stride]);
    __syncthreads();
  }
  const T result = shared[0];
  __syncthreads();  // shared[] is reused by the next call
  return result;
}

template <typename T>
__device__ T block_sum(T value, T* shared) {
  return block_reduce(value, shared, [](T a, T b) { return a + b; });
}

template <typename T>
__device__ T block_max(T value, T* shared) {
  return block_reduce(value, shared, [](T a, T b) { return a > b ? a : b; });
}
#endif

}  // namespace sps::ops::cuda
