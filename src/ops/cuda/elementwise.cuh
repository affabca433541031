#pragma once
// Element-wise kernels of the memory ops and the bf16 operand copies (memory.cu, bf16.cu),
// written in the subset of CUDA that tests/ops/cuda_emulator.h also runs. Grid-stride loops:
// a fixed grid (launch.h grid_stride_blocks) covers any n without overflowing the launch
// limits. Templates, as the kernels of the other headers, so that the GPU build and the
// emulated tests may both define them.
#include <cstdint>

#include "ops/cuda/portable.cuh"

namespace sps::ops::cuda::elementwise {

template <typename T>
__global__ void fill_kernel(T* x, int64_t n, T value) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    x[i] = value;
}

template <typename T>
__global__ void add_kernel(T* y, const T* x, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    y[i] += x[i];
}

// Blocks of a row copy: one row each (then every gridDim-th), capped like a grid-stride
// loop's; a row's elements are split over the block's threads, a warp at least, 256 at most.
constexpr int64_t kMaxRowBlocks = 4096;
inline unsigned row_threads(int64_t width) {
  return unsigned(width >= 256 ? 256 : (width + 31) / 32 * 32);
}

// dst[to[i] + j] = src[from[i] + j] for rows i < n, j < width (ops.h copy_rows).
template <typename T>
__global__ void copy_rows_kernel(T* dst, const T* src, const int64_t* to, const int64_t* from,
                                 int64_t n, int64_t width) {
  for (int64_t i = blockIdx.x; i < n; i += gridDim.x) {
    T* out = dst + to[i];
    const T* in = src + from[i];
    for (int64_t j = threadIdx.x; j < width; j += blockDim.x) out[j] = in[j];
  }
}

// out[r·cols + c] = in[r·ld + c] as bf16 bits (nearest, ties to even; NaN stays a quiet NaN).
template <typename Bits>
__global__ void round_bf16_kernel(Bits* out, const float* in, int64_t n, int64_t cols,
                                  int64_t ld) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const float x = in[(i / cols) * ld + i % cols];
    const uint32_t u = float_bits(x);
    out[i] = Bits((u & 0x7fffffffu) > 0x7f800000u ? (u >> 16) | 0x40u : bf16_bits(x));
  }
}

}  // namespace sps::ops::cuda::elementwise
