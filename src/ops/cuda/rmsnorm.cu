// Launches the RMSNorm kernels of rmsnorm.cuh.
#include <cuda_runtime.h>

#include "ops/cuda/check.h"
#include "ops/cuda/kernels.h"
#include "ops/cuda/memory.h"
#include "ops/cuda/rmsnorm.cuh"

namespace sps::ops::cuda {

void rmsnorm_forward(float* out, float* rstd, const float* in, const float* gain, int64_t rows,
                     int64_t d, double eps) {
  if (rows <= 0) return;
  rmsnorm::forward_kernel<rmsnorm::kBlockThreads>
      <<<unsigned(rows), rmsnorm::kBlockThreads, rmsnorm::kSharedBytes>>>(out, rstd, in, gain, d,
                                                                         float(eps));
  check(cudaGetLastError(), "rmsnorm forward launch");
}

void rmsnorm_backward(float* din, float* dgain, const float* dout, const float* in,
                      const float* gain, const float* rstd, int64_t rows, int64_t d) {
  if (rows <= 0) return;
  constexpr int kThreads = rmsnorm::kBlockThreads;
  rmsnorm::input_gradient_kernel<kThreads>
      <<<unsigned(rows), kThreads, rmsnorm::kSharedBytes>>>(din, dout, in, gain, rstd, d);
  check(cudaGetLastError(), "rmsnorm backward launch");
  const int64_t parts = (rows + rmsnorm::kGainPartRows - 1) / rmsnorm::kGainPartRows;
  const unsigned columns = unsigned((d + kThreads - 1) / kThreads);
  auto* partial = static_cast<float*>(scratch(sizeof(float) * size_t(parts * d)));
  rmsnorm::gain_partials_kernel<kThreads><<<dim3(unsigned(parts), columns), kThreads>>>(
      partial, dout, in, rstd, rows, d, rmsnorm::kGainPartRows);
  check(cudaGetLastError(), "rmsnorm gain gradient launch");
  rmsnorm::gain_sum_kernel<kThreads><<<columns, kThreads>>>(dgain, partial, parts, d);
  check(cudaGetLastError(), "rmsnorm gain gradient sum launch");
}

}  // namespace sps::ops::cuda
