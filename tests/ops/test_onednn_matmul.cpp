// The oneDNN wrapper (ops/cpu/onednn_matmul.h) in f32 against the CPU's sgemm and a double
// reference, for every transpose, padded leading dimensions, accumulation and prepared
// weights, and for the forward, input-gradient and weight-gradient GEMMs of every linear
// layer of the tiny model: this runs on every CPU, so the glue the bf16 path shares is tested
// where bf16 is not native. Then oneDNN's bf16 path against the rounded-sgemm path where the
// CPU has a bf16 matmul (a skip naming the ISA elsewhere).
#include <cblas.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "gemm_bound.h"
#include "ops/cpu/linear_bf16.h"
#include "ops/cpu/onednn_matmul.h"

namespace sps::testing {
namespace {

namespace onednn = ops::cpu::onednn;

std::vector<float> normal_matrix(int64_t n, uint64_t seed) {
  const std::vector<double> d = random_vector(n, seed);
  return std::vector<float>(d.begin(), d.end());
}

// A 64-byte aligned buffer for a prepared B.
std::unique_ptr<void, decltype(&std::free)> aligned_bytes(size_t bytes) {
  return {std::aligned_alloc(64, (bytes + 63) / 64 * 64), &std::free};
}

// Runs g in f32 through the wrapper (B prepared first when g says so), through cblas_sgemm,
// and in double, from the same C; every C entry within the error bound of a sum of K
// products (both sides), and the columns past N untouched.
void expect_f32_gemm_matches(const onednn::Gemm& g, uint64_t seed) {
  SCOPED_TRACE(::testing::Message() << g.M << "x" << g.N << "x" << g.K << " trans " << g.trans_a
                                    << g.trans_b << " ld " << g.lda << "," << g.ldb << "," << g.ldc
                                    << " acc " << g.accumulate << " prepared " << g.prepared_b);
  ASSERT_TRUE(onednn::available(g));
  const StridedGemm s{g.trans_a, g.trans_b, g.M, g.N, g.K, g.lda, g.ldb, g.ldc};
  const std::vector<float> A = normal_matrix(s.a_elements(), seed),
                           B = normal_matrix(s.b_elements(), seed + 1),
                           C0 = normal_matrix(g.M * g.ldc, seed + 2);
  std::vector<float> ours = C0, blas = C0;
  const void* b = B.data();
  auto prepared = aligned_bytes(g.prepared_b ? onednn::prepared_bytes(g.type, g.K, g.N) : 0);
  if (g.prepared_b) {
    onednn::prepare_b(g.type, g.trans_b, g.K, g.N, g.ldb, B.data(), prepared.get());
    b = prepared.get();
  }
  onednn::run(g, A.data(), b, ours.data());
  cblas_sgemm(CblasRowMajor, g.trans_a ? CblasTrans : CblasNoTrans,
              g.trans_b ? CblasTrans : CblasNoTrans, int(g.M), int(g.N), int(g.K), 1.0f, A.data(),
              int(g.lda), B.data(), int(g.ldb), g.accumulate ? 1.0f : 0.0f, blas.data(),
              int(g.ldc));
  const ExactGemm exact = exact_gemm(s, A, B, C0, g.accumulate);
  for (int64_t i = 0; i < g.M; ++i)
    for (int64_t j = 0; j < g.ldc; ++j) {
      const int64_t k = i * g.ldc + j;
      if (j >= g.N) {
        ASSERT_EQ(ours[k], C0[k]) << i << "," << j;
        continue;
      }
      ASSERT_LE(std::abs(ours[k] - exact.c[k]), exact.bound[k]) << i << "," << j;
      ASSERT_LE(std::abs(blas[k] - exact.c[k]), exact.bound[k]) << i << "," << j;
    }
}

onednn::Gemm f32_gemm(bool trans_a, bool trans_b, int64_t M, int64_t N, int64_t K, int64_t pad,
                      bool accumulate, bool prepared) {
  onednn::Gemm g;
  g.trans_a = trans_a, g.trans_b = trans_b;
  g.M = M, g.N = N, g.K = K;
  g.lda = (trans_a ? M : K) + pad;
  g.ldb = (trans_b ? K : N) + pad;
  g.ldc = N + pad;
  g.accumulate = accumulate;
  g.prepared_b = prepared;
  return g;
}

TEST(OnednnMatmul, F32MatchesSgemmForEveryTransposeStrideAndMode) {
  uint64_t seed = 1;
  for (const bool trans_a : {false, true})
    for (const bool trans_b : {false, true})
      for (const int64_t pad : {0, 5})
        for (const bool accumulate : {false, true})
          for (const bool prepared : {false, true})
            expect_f32_gemm_matches(
                f32_gemm(trans_a, trans_b, 37, 29, 41, pad, accumulate, prepared), seed++);
}

// The GEMMs of linear_forward / linear_backward (ops.h) as the bf16 path sets them up, at the
// widths of the tiny model's layers (d = 256, F = 768, V = 8256) on a few rows: forward
// out = in·Wᵀ (W prepared), input gradient din (+)= dout·W (W prepared, din with in's
// stride), weight gradient dW += doutᵀ·in.
TEST(OnednnMatmul, F32MatchesSgemmForEveryLinearLayersGemms) {
  const int64_t d = 256, F = 768, V = 8256;
  const struct {
    int64_t in, out, rows;
  } layers[] = {{d, 3 * d, 16}, {d, d, 16}, {d, 2 * F, 16}, {F, d, 16}, {d, V, 3}};
  uint64_t seed = 100;
  for (const auto& l : layers)
    for (const int64_t pad : {0, 3}) {
      // forward: [rows, in] · ([out, in])ᵀ
      onednn::Gemm forward = f32_gemm(false, true, l.rows, l.out, l.in, 0, pad > 0, true);
      forward.lda = l.in + pad;
      forward.ldc = l.out + pad;
      expect_f32_gemm_matches(forward, seed++);
      // input gradient: [rows, out] · [out, in]
      onednn::Gemm input = f32_gemm(false, false, l.rows, l.in, l.out, 0, pad > 0, true);
      input.lda = l.out + pad;
      input.ldc = l.in + pad;
      expect_f32_gemm_matches(input, seed++);
      // weight gradient: ([rows, out])ᵀ · [rows, in], accumulated
      onednn::Gemm weight = f32_gemm(true, false, l.out, l.in, l.rows, 0, true, false);
      weight.lda = l.out + pad;
      weight.ldb = l.in + pad;
      expect_f32_gemm_matches(weight, seed++);
    }
}

TEST(OnednnMatmul, ReportsItsImplementationAndIsa) {
  const onednn::Gemm g = f32_gemm(false, true, 64, 64, 64, 0, false, true);
  EXPECT_NE(onednn::implementation(g), "none");
  EXPECT_EQ(onednn::version().rfind("oneDNN 2.", 0), 0u) << onednn::version();
  EXPECT_FALSE(onednn::cpu_isa().empty());
}

// oneDNN's bf16 matmul against the rounded-sgemm path: the same rounded operands, so the
// outputs agree to the error of two fp32 sums of K exact products.
TEST(OnednnMatmul, Bf16MatchesTheRoundedSgemmPathWhereTheCpuHasIt) {
  onednn::Gemm probe;
  probe.type = onednn::DataType::bf16;
  probe.M = probe.N = probe.K = probe.lda = probe.ldb = probe.ldc = 64;
  if (!onednn::available(probe))
    GTEST_SKIP() << onednn::version()
                 << " has no bf16 matmul on this CPU (its ISA: " << onednn::cpu_isa()
                 << "); oneDNN 2.6 needs avx512_core_bf16 or avx512_core_amx for one";
  using ops::cpu::Bf16Path;
  const int64_t rows = 45, in_dim = 72, out_dim = 56, ld_in = 75, ld_out = 60;
  const std::vector<float> in = normal_matrix(rows * ld_in, 1),
                           weight = normal_matrix(out_dim * in_dim, 2),
                           dout = normal_matrix(rows * ld_out, 3),
                           start = normal_matrix(rows * ld_in, 4);
  const auto copies = ops::cpu::bf16_weight_copies(weight.data(), out_dim * in_dim);
  std::vector<float> out[2], din[2], dweight[2];
  for (const Bf16Path path : {Bf16Path::onednn, Bf16Path::rounded_sgemm}) {
    const int p = int(path);
    out[p] = normal_matrix(rows * ld_out, 5);
    din[p] = start;
    dweight[p] = normal_matrix(out_dim * in_dim, 6);
    ops::cpu::linear_forward_bf16(path, out[p].data(), in.data(), weight.data(), rows, in_dim,
                                  out_dim, true, ld_in, ld_out);
    ops::cpu::linear_backward_bf16(path, din[p].data(), dweight[p].data(), dout.data(), in.data(),
                                   weight.data(), rows, in_dim, out_dim, true, ld_in, ld_out);
  }
  EXPECT_LT(max_relative_error(out[0], out[1]), 1e-5);
  EXPECT_LT(max_relative_error(din[0], din[1]), 1e-5);
  EXPECT_LT(max_relative_error(dweight[0], dweight[1]), 1e-5);
}

}  // namespace
}  // namespace sps::testing
