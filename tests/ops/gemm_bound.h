#pragma once
// A strided row-major GEMM C[M, N] (+)= op(A)·op(B) computed exactly enough in double, with
// the bound on the error of any fp32 computation of it: each entry is a sum of K products
// (and C's old value) rounded in some order, |error| <= γ_{K+2}·(Σ|a·b| + |c|), γ_n ≈ n·2⁻²⁴,
// whatever the order and blocking of the sums. For the GEMM tests of the CPU's f32 and bf16
// paths (on bf16 operands a product is exact in fp32, so the same bound holds on them).
#include <cmath>
#include <cstdint>
#include <vector>

#include "gradcheck.h"

namespace sps::testing {

// A stored [M, K] with row stride lda, or [K, M] when trans_a; B [K, N] with ldb, or [N, K]
// when trans_b; C [M, N] with ldc.
struct StridedGemm {
  bool trans_a = false, trans_b = false;
  int64_t M = 0, N = 0, K = 0, lda = 0, ldb = 0, ldc = 0;
  int64_t a_elements() const { return (trans_a ? K : M) * lda; }
  int64_t b_elements() const { return (trans_b ? N : K) * ldb; }
  template <typename E>
  double a(const std::vector<E>& A, int64_t i, int64_t k) const {
    return double(trans_a ? A[k * lda + i] : A[i * lda + k]);
  }
  template <typename E>
  double b(const std::vector<E>& B, int64_t k, int64_t j) const {
    return double(trans_b ? B[j * ldb + k] : B[k * ldb + j]);
  }
};

struct ExactGemm {
  std::vector<double> c, bound;  // [M · ldc], entries past N zero
};

template <typename E>
ExactGemm exact_gemm(const StridedGemm& g, const std::vector<E>& A, const std::vector<E>& B,
                     const std::vector<float>& C, bool accumulate) {
  ExactGemm out{std::vector<double>(g.M * g.ldc, 0.0), std::vector<double>(g.M * g.ldc, 0.0)};
  const double gamma = double(g.K + 2) * std::ldexp(1.0, -24) * 1.01;
  for (int64_t i = 0; i < g.M; ++i)
    for (int64_t j = 0; j < g.N; ++j) {
      double sum = accumulate ? double(C[i * g.ldc + j]) : 0.0;
      double magnitude = std::abs(sum);
      for (int64_t k = 0; k < g.K; ++k) {
        const double p = g.a(A, i, k) * g.b(B, k, j);
        sum += p;
        magnitude += std::abs(p);
      }
      out.c[i * g.ldc + j] = sum;
      out.bound[i * g.ldc + j] = gamma * magnitude + 1e-30;
    }
  return out;
}

}  // namespace sps::testing
