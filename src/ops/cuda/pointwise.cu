// Launches the embedding, RoPE and SwiGLU kernels of pointwise.cuh.
#include <cuda_runtime.h>

#include "ops/cuda/check.h"
#include "ops/cuda/kernels.h"
#include "ops/cuda/launch.h"
#include "ops/cuda/memory.h"
#include "ops/cuda/pointwise.cuh"

namespace sps::ops::cuda {

namespace {

constexpr int kBlock = pointwise::kBlockThreads;
static_assert(kBlock == kThreads, "grid_stride_blocks counts blocks of kThreads");

void rotate(float* x, const int32_t* pos, int64_t n, int64_t heads, int64_t head_dim,
            int64_t row_stride, const float* cos_table, const float* sin_table, float sign) {
  const int64_t total = n * heads * (head_dim / 2);
  if (total <= 0) return;
  pointwise::rotate_kernel<kBlock><<<grid_stride_blocks(total), kBlock>>>(
      x, pos, n, heads, head_dim / 2, row_stride, cos_table, sin_table, sign);
  check(cudaGetLastError(), "rope launch");
}

}  // namespace

void embedding_forward(float* out, const int32_t* tokens, const float* table, int64_t n,
                       int64_t d) {
  if (n * d <= 0) return;
  pointwise::gather_kernel<kBlock><<<grid_stride_blocks(n * d), kBlock>>>(out, tokens, table, n, d);
  check(cudaGetLastError(), "embedding forward launch");
}

void embedding_backward(float* dtable, const float* dout, const int32_t* tokens, int64_t n,
                        int64_t d, const TokenRows& rows) {
  if (n * d <= 0) return;
  const unsigned columns = unsigned((d + kBlock - 1) / kBlock);
  float* partial = nullptr;
  if (rows.runs > 0) {
    partial = static_cast<float*>(scratch(sizeof(float) * size_t(rows.runs * d)));
    pointwise::run_sums_kernel<kBlock>
        <<<dim3(unsigned(rows.runs), columns), kBlock>>>(partial, dout, rows, d);
    check(cudaGetLastError(), "embedding backward launch");
  }
  pointwise::token_sums_kernel<kBlock>
      <<<dim3(unsigned(rows.tokens), columns), kBlock>>>(dtable, partial, dout, tokens, rows, d);
  check(cudaGetLastError(), "embedding backward sum launch");
}

void rope_forward(float* x, const int32_t* pos, int64_t n, int64_t heads, int64_t head_dim,
                  int64_t row_stride, const float* cos_table, const float* sin_table) {
  rotate(x, pos, n, heads, head_dim, row_stride, cos_table, sin_table, 1.0f);
}

void rope_backward(float* dx, const int32_t* pos, int64_t n, int64_t heads, int64_t head_dim,
                   int64_t row_stride, const float* cos_table, const float* sin_table) {
  rotate(dx, pos, n, heads, head_dim, row_stride, cos_table, sin_table, -1.0f);
}

void swiglu_forward(float* act, const float* gate_up, int64_t rows, int64_t F) {
  const int64_t n = rows * F;
  if (n <= 0) return;
  pointwise::swiglu_forward_kernel<kBlock><<<grid_stride_blocks(n), kBlock>>>(act, gate_up, n, F);
  check(cudaGetLastError(), "swiglu forward launch");
}

void swiglu_backward(float* dgate_up, const float* dact, const float* gate_up, int64_t rows,
                     int64_t F) {
  const int64_t n = rows * F;
  if (n <= 0) return;
  pointwise::swiglu_backward_kernel<kBlock>
      <<<grid_stride_blocks(n), kBlock>>>(dgate_up, dact, gate_up, n, F);
  check(cudaGetLastError(), "swiglu backward launch");
}

}  // namespace sps::ops::cuda
