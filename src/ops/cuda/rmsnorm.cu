// RMSNorm on the GPU: one block per row, the row's sums reduced in shared memory in a fixed
// tree order; the gain gradient summed over rows by one thread per column, in row order.
#include <cuda_runtime.h>

#include "ops/cuda/check.h"
#include "ops/cuda/kernels.h"
#include "ops/cuda/launch.h"

namespace sps::ops::cuda {

namespace {

__global__ void forward_kernel(float* out, float* rstd, const float* in, const float* gain,
                               int64_t d, float eps) {
  __shared__ float shared[kThreads];
  const float* x = in + blockIdx.x * d;
  float* y = out + blockIdx.x * d;
  float sum_sq = 0;
  for (int64_t c = threadIdx.x; c < d; c += kThreads) sum_sq += x[c] * x[c];
  const float s = rsqrtf(block_sum(sum_sq, shared) / float(d) + eps);
  if (threadIdx.x == 0) rstd[blockIdx.x] = s;
  for (int64_t c = threadIdx.x; c < d; c += kThreads) y[c] = x[c] * s * gain[c];
}

// dx += s · (dy ⊙ gain) − x · s³/d · Σ_c dy_c gain_c x_c   (ops/cpu/rmsnorm.cpp)
__global__ void input_gradient_kernel(float* din, const float* dout, const float* in,
                                      const float* gain, const float* rstd, int64_t d) {
  __shared__ float shared[kThreads];
  const int64_t row = blockIdx.x;
  const float* x = in + row * d;
  const float* dy = dout + row * d;
  float* dx = din + row * d;
  const float s = rstd[row];
  float dot = 0;
  for (int64_t c = threadIdx.x; c < d; c += kThreads) dot += dy[c] * gain[c] * x[c];
  const float k = block_sum(dot, shared) * s * s * s / float(d);
  for (int64_t c = threadIdx.x; c < d; c += kThreads) dx[c] += s * dy[c] * gain[c] - k * x[c];
}

// dgain[c] += Σ_rows dy · x · s, one thread per column, rows in order.
__global__ void gain_gradient_kernel(float* dgain, const float* dout, const float* in,
                                     const float* rstd, int64_t rows, int64_t d) {
  const int64_t c = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (c >= d) return;
  float sum = 0;
  for (int64_t r = 0; r < rows; ++r) sum += dout[r * d + c] * in[r * d + c] * rstd[r];
  dgain[c] += sum;
}

}  // namespace

void rmsnorm_forward(float* out, float* rstd, const float* in, const float* gain, int64_t rows,
                     int64_t d, double eps) {
  if (rows <= 0) return;
  forward_kernel<<<unsigned(rows), kThreads>>>(out, rstd, in, gain, d, float(eps));
  check(cudaGetLastError(), "rmsnorm forward launch");
}

void rmsnorm_backward(float* din, float* dgain, const float* dout, const float* in,
                      const float* gain, const float* rstd, int64_t rows, int64_t d) {
  if (rows <= 0) return;
  input_gradient_kernel<<<unsigned(rows), kThreads>>>(din, dout, in, gain, rstd, d);
  check(cudaGetLastError(), "rmsnorm backward launch");
  gain_gradient_kernel<<<unsigned((d + kThreads - 1) / kThreads), kThreads>>>(dgain, dout, in,
                                                                             rstd, rows, d);
  check(cudaGetLastError(), "rmsnorm gain gradient launch");
}

}  // namespace sps::ops::cuda
