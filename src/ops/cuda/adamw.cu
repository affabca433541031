// AdamW and the squared norm for clipping on the GPU, as in ops/cpu/adamw.cpp: constants
// formed in double on the host, the update elementwise in fp32; the norm in double with
// per-block sums in a fixed order, added on the host in block order.
#include <cuda_runtime.h>

#include <cmath>
#include <vector>

#include "ops/cuda/check.h"
#include "ops/cuda/kernels.h"
#include "ops/cuda/launch.h"
#include "ops/cuda/memory.h"

namespace sps::ops::cuda {

namespace {

struct Constants {
  float decay, step_size, inv_sqrt_bias2, b1, b2, one_minus_b1, one_minus_b2, eps, scale;
};

__global__ void update_kernel(float* weights, const float* grads, float* m, float* v, int64_t n,
                              Constants k) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const float g = grads[i] * k.scale;
    const float mi = k.b1 * m[i] + k.one_minus_b1 * g;
    const float vi = k.b2 * v[i] + k.one_minus_b2 * g * g;
    m[i] = mi;
    v[i] = vi;
    const float denom = sqrtf(vi) * k.inv_sqrt_bias2 + k.eps;
    weights[i] = weights[i] * k.decay - k.step_size * mi / denom;
  }
}

constexpr int64_t kBlockElements = int64_t(1) << 16;  // elements summed by one block

__global__ void block_squares_kernel(double* partial, const float* x, int64_t n) {
  __shared__ double shared[kThreads];
  const int64_t begin = blockIdx.x * kBlockElements;
  const int64_t end = begin + kBlockElements < n ? begin + kBlockElements : n;
  double sum = 0;
  for (int64_t i = begin + threadIdx.x; i < end; i += kThreads) sum += double(x[i]) * double(x[i]);
  sum = block_sum(sum, shared);
  if (threadIdx.x == 0) partial[blockIdx.x] = sum;
}

}  // namespace

void adamw_update(float* weights, const float* grads, float* m, float* v, int64_t n,
                  const AdamWStep& s) {
  if (n <= 0) return;
  const double bias1 = 1.0 - std::pow(s.beta1, double(s.step));
  const double bias2 = 1.0 - std::pow(s.beta2, double(s.step));
  const Constants k{float(1.0 - s.lr * s.weight_decay), float(s.lr / bias1),
                    float(1.0 / std::sqrt(bias2)),      float(s.beta1),
                    float(s.beta2),                     float(1.0 - s.beta1),
                    float(1.0 - s.beta2),               float(s.eps),
                    float(s.grad_scale)};
  update_kernel<<<grid_stride_blocks(n), kThreads>>>(weights, grads, m, v, n, k);
  check(cudaGetLastError(), "AdamW launch");
}

double sum_squares(const float* x, int64_t n) {
  if (n <= 0) return 0;
  const int64_t blocks = (n + kBlockElements - 1) / kBlockElements;
  // Kept and grown, not allocated per call: freeing device memory waits for the whole GPU.
  static double* partial = nullptr;
  static int64_t capacity = 0;
  if (blocks > capacity) {
    device_free(partial);
    partial = static_cast<double*>(device_allocate(size_t(blocks) * sizeof(double)));
    capacity = blocks;
  }
  block_squares_kernel<<<unsigned(blocks), kThreads>>>(partial, x, n);
  check(cudaGetLastError(), "sum of squares launch");
  std::vector<double> host(blocks);
  copy_to_host(host.data(), partial, host.size() * sizeof(double));
  double total = 0;
  for (double b : host) total += b;
  return total;
}

}  // namespace sps::ops::cuda
