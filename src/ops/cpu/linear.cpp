// linear via CBLAS GEMM. Weights are row-major [out_dim, in_dim] (nn.Linear), so the
// forward multiplies by the transposed weight. OpenBLAS threads the GEMM itself.
#include <cblas.h>

#include <algorithm>

#include "ops/ops.h"
#include "util/error.h"

namespace sps::ops {
namespace {

// C[M, N] = alpha · op(A) · op(B) + beta · C, row-major, for float or double.
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, float alpha,
          const float* A, int64_t lda, const float* B, int64_t ldb, float beta, float* C,
          int64_t ldc) {
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}
void gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, double alpha,
          const double* A, int64_t lda, const double* B, int64_t ldb, double beta, double* C,
          int64_t ldc) {
  cblas_dgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
              trans_b ? CblasTrans : CblasNoTrans, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

// An empty inner dimension makes the product zero; BLAS may then return without touching
// C, so an overwrite has to clear it here.
template <typename T>
void zero_rows(T* C, int64_t rows, int64_t cols, int64_t ld) {
  for (int64_t r = 0; r < rows; ++r) std::fill(C + r * ld, C + r * ld + cols, T(0));
}

}  // namespace

template <typename T>
void linear_forward(T* out, const T* in, const T* weight, int64_t rows, int64_t in_dim,
                    int64_t out_dim, bool accumulate, int64_t ld_in, int64_t ld_out) {
  if (ld_in == 0) ld_in = in_dim;
  if (ld_out == 0) ld_out = out_dim;
  SPS_ASSERT(rows >= 0 && in_dim >= 0 && out_dim >= 0 && ld_in >= in_dim && ld_out >= out_dim);
  if (rows == 0 || out_dim == 0) return;
  if (in_dim == 0) {
    if (!accumulate) zero_rows(out, rows, out_dim, ld_out);
    return;
  }
  // out[rows, out_dim] = in[rows, in_dim] · weightᵀ
  gemm(false, true, rows, out_dim, in_dim, T(1), in, ld_in, weight, in_dim,
       accumulate ? T(1) : T(0), out, ld_out);
}

template <typename T>
void linear_backward(T* din, T* dweight, const T* dout, const T* in, const T* weight,
                     int64_t rows, int64_t in_dim, int64_t out_dim, bool accumulate_din,
                     int64_t ld_in, int64_t ld_dout) {
  if (ld_in == 0) ld_in = in_dim;
  if (ld_dout == 0) ld_dout = out_dim;
  SPS_ASSERT(rows >= 0 && in_dim >= 0 && out_dim >= 0 && ld_in >= in_dim &&
             ld_dout >= out_dim);
  if (in_dim == 0) return;
  if (din != nullptr && rows > 0) {
    // din[rows, in_dim] (+)= dout[rows, out_dim] · weight[out_dim, in_dim]; din shares
    // in's row stride (it is the gradient of a view with the same layout).
    if (out_dim == 0) {
      if (!accumulate_din) zero_rows(din, rows, in_dim, ld_in);
    } else {
      gemm(false, false, rows, in_dim, out_dim, T(1), dout, ld_dout, weight, in_dim,
           accumulate_din ? T(1) : T(0), din, ld_in);
    }
  }
  if (dweight != nullptr && rows > 0 && out_dim > 0) {
    // dweight[out_dim, in_dim] += doutᵀ · in
    gemm(true, false, out_dim, in_dim, rows, T(1), dout, ld_dout, in, ld_in, T(1), dweight,
         in_dim);
  }
}

template void linear_forward<float>(float*, const float*, const float*, int64_t, int64_t,
                                    int64_t, bool, int64_t, int64_t);
template void linear_forward<double>(double*, const double*, const double*, int64_t, int64_t,
                                     int64_t, bool, int64_t, int64_t);
template void linear_backward<float>(float*, float*, const float*, const float*, const float*,
                                     int64_t, int64_t, int64_t, bool, int64_t, int64_t);
template void linear_backward<double>(double*, double*, const double*, const double*,
                                      const double*, int64_t, int64_t, int64_t, bool, int64_t,
                                      int64_t);

}  // namespace sps::ops
