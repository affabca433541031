#pragma once
// The GEMMs of linear_forward and linear_backward (ops.h) in the terms of a column-major
// BLAS (cuBLAS, cuBLASLt). Read column-major, a row-major matrix X[r, c] with row stride ld
// is Xᵀ with leading dimension ld; so each row-major product C = A·B is computed as
// Cᵀ = Bᵀ·Aᵀ without moving any data:
//   forward          out[rows, out] = in · Wᵀ     →  outᵀ = W · inᵀ        (W: op T)
//   input gradient   din[rows, in]  = dout · W    →  dinᵀ = Wᵀ · doutᵀ
//   weight gradient  dW[out, in]   += doutᵀ · in  →  dWᵀ += inᵀ · dout    (dout: op T)
// W is [out_dim, in_dim] with row stride in_dim (nn.Linear), as in ops.h.
#include <cstdint>

namespace sps::ops {

enum class GemmOperand { input, weight, output, output_gradient, input_gradient, weight_gradient };

// C[m, n] = op(A)[m, k] · op(B)[k, n] + (accumulate ? C : 0), all column-major; A is stored
// k × m when trans_a (else m × k), B is stored n × k when trans_b (else k × n).
struct ColumnMajorGemm {
  GemmOperand a, b, c;
  bool trans_a = false, trans_b = false;
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;
  bool accumulate = false;
};

// A row stride as ops.h gives it: 0 means dense rows of `cols`.
inline int64_t dense_stride(int64_t ld, int64_t cols) { return ld == 0 ? cols : ld; }

// outᵀ[out_dim, rows] = W[out_dim, in_dim] · inᵀ[in_dim, rows]; W read column-major is Wᵀ.
inline ColumnMajorGemm linear_forward_gemm(int64_t rows, int64_t in_dim, int64_t out_dim,
                                           bool accumulate, int64_t ld_in = 0,
                                           int64_t ld_out = 0) {
  return {.a = GemmOperand::weight, .b = GemmOperand::input, .c = GemmOperand::output,
          .trans_a = true, .trans_b = false,
          .m = out_dim, .n = rows, .k = in_dim,
          .lda = in_dim, .ldb = dense_stride(ld_in, in_dim), .ldc = dense_stride(ld_out, out_dim),
          .accumulate = accumulate};
}

// dinᵀ[in_dim, rows] = Wᵀ[in_dim, out_dim] · doutᵀ[out_dim, rows]; din has in's stride.
inline ColumnMajorGemm linear_input_gradient_gemm(int64_t rows, int64_t in_dim, int64_t out_dim,
                                                  bool accumulate, int64_t ld_in = 0,
                                                  int64_t ld_dout = 0) {
  return {.a = GemmOperand::weight, .b = GemmOperand::output_gradient,
          .c = GemmOperand::input_gradient,
          .trans_a = false, .trans_b = false,
          .m = in_dim, .n = rows, .k = out_dim,
          .lda = in_dim, .ldb = dense_stride(ld_dout, out_dim), .ldc = dense_stride(ld_in, in_dim),
          .accumulate = accumulate};
}

// dWᵀ[in_dim, out_dim] += inᵀ[in_dim, rows] · dout[rows, out_dim], dout stored as doutᵀ.
inline ColumnMajorGemm linear_weight_gradient_gemm(int64_t rows, int64_t in_dim, int64_t out_dim,
                                                   int64_t ld_in = 0, int64_t ld_dout = 0) {
  return {.a = GemmOperand::input, .b = GemmOperand::output_gradient,
          .c = GemmOperand::weight_gradient,
          .trans_a = false, .trans_b = true,
          .m = in_dim, .n = out_dim, .k = rows,
          .lda = dense_stride(ld_in, in_dim), .ldb = dense_stride(ld_dout, out_dim), .ldc = in_dim,
          .accumulate = true};
}

}  // namespace sps::ops
