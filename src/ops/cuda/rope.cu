// RoPE on the GPU, adjacent pairs (Llama-1 layout) as in ops/cpu/rope.cpp: one thread per
// (row, head, pair), in place.
#include <cuda_runtime.h>

#include "ops/cuda/check.h"
#include "ops/cuda/kernels.h"
#include "ops/cuda/launch.h"

namespace sps::ops::cuda {

namespace {

// Rotates pair j of every head by +angle (sign = 1) or −angle (sign = −1, the transpose).
__global__ void rotate_kernel(float* x, const int32_t* pos, int64_t n, int64_t heads,
                              int64_t half, int64_t row_stride, const float* cos_table,
                              const float* sin_table, float sign) {
  const int64_t total = n * heads * half;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total;
       i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t j = i % half, h = i / half % heads, r = i / half / heads;
    const float c = cos_table[int64_t(pos[r]) * half + j];
    const float s = sign * sin_table[int64_t(pos[r]) * half + j];
    float* pair = x + r * row_stride + h * 2 * half + 2 * j;
    const float even = pair[0], odd = pair[1];
    pair[0] = even * c - odd * s;
    pair[1] = even * s + odd * c;
  }
}

void rotate(float* x, const int32_t* pos, int64_t n, int64_t heads, int64_t head_dim,
            int64_t row_stride, const float* cos_table, const float* sin_table, float sign) {
  const int64_t total = n * heads * (head_dim / 2);
  if (total <= 0) return;
  rotate_kernel<<<grid_stride_blocks(total), kThreads>>>(x, pos, n, heads, head_dim / 2,
                                                         row_stride, cos_table, sin_table, sign);
  check(cudaGetLastError(), "rope launch");
}

}  // namespace

void rope_forward(float* x, const int32_t* pos, int64_t n, int64_t heads, int64_t head_dim,
                  int64_t row_stride, const float* cos_table, const float* sin_table) {
  rotate(x, pos, n, heads, head_dim, row_stride, cos_table, sin_table, 1.0f);
}

void rope_backward(float* dx, const int32_t* pos, int64_t n, int64_t heads, int64_t head_dim,
                   int64_t row_stride, const float* cos_table, const float* sin_table) {
  rotate(dx, pos, n, heads, head_dim, row_stride, cos_table, sin_table, -1.0f);
}

}  // namespace sps::ops::cuda
