// The column-major GEMMs a GPU BLAS runs for linear (ops/linear_gemms.h), executed here by a
// plain column-major GEMM and compared with the CPU backend's linear_forward/backward, with
// strided rows and accumulation on and off: a wrong transpose, dimension or leading
// dimension gives a wrong product.
#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "gradcheck.h"
#include "ops/linear_gemms.h"
#include "ops/ops.h"

namespace sps {
namespace {

using ops::ColumnMajorGemm;
using ops::GemmOperand;
using testing::max_relative_error;
using testing::random_vector;

// C = op(A) · op(B) (+ C), column-major, as BLAS defines it; element (i, j) of a
// column-major X with leading dimension ld is X[i + j·ld].
void column_major_gemm(const ColumnMajorGemm& g, std::map<GemmOperand, std::vector<double>*> x) {
  const std::vector<double>& A = *x.at(g.a);
  const std::vector<double>& B = *x.at(g.b);
  std::vector<double>& C = *x.at(g.c);
  for (int64_t j = 0; j < g.n; ++j)
    for (int64_t i = 0; i < g.m; ++i) {
      double sum = 0;
      for (int64_t p = 0; p < g.k; ++p) {
        const double a = g.trans_a ? A.at(p + i * g.lda) : A.at(i + p * g.lda);
        const double b = g.trans_b ? B.at(j + p * g.ldb) : B.at(p + j * g.ldb);
        sum += a * b;
      }
      double& c = C.at(i + j * g.ldc);
      c = g.accumulate ? c + sum : sum;
    }
}

struct Shape {
  int64_t rows, in_dim, out_dim, ld_in, ld_out;
};

class LinearGemms : public ::testing::TestWithParam<Shape> {};

TEST_P(LinearGemms, MatchTheCpuBackend) {
  const Shape s = GetParam();
  for (bool accumulate : {false, true}) {
    std::vector<double> in = random_vector(s.rows * s.ld_in, 1);
    std::vector<double> weight = random_vector(s.out_dim * s.in_dim, 2);
    std::vector<double> dout = random_vector(s.rows * s.ld_out, 3);
    const std::vector<double> start_out = random_vector(s.rows * s.ld_out, 4);
    const std::vector<double> start_din = random_vector(s.rows * s.ld_in, 5);
    const std::vector<double> start_dweight = random_vector(s.out_dim * s.in_dim, 6);

    std::vector<double> out = start_out, din = start_din, dweight = start_dweight;
    ops::linear_forward(out.data(), in.data(), weight.data(), s.rows, s.in_dim, s.out_dim,
                        accumulate, s.ld_in, s.ld_out);
    ops::linear_backward(din.data(), dweight.data(), dout.data(), in.data(), weight.data(),
                         s.rows, s.in_dim, s.out_dim, accumulate, s.ld_in, s.ld_out);

    std::vector<double> gemm_out = start_out, gemm_din = start_din, gemm_dweight = start_dweight;
    const std::map<GemmOperand, std::vector<double>*> operands = {
        {GemmOperand::input, &in},           {GemmOperand::weight, &weight},
        {GemmOperand::output, &gemm_out},    {GemmOperand::output_gradient, &dout},
        {GemmOperand::input_gradient, &gemm_din}, {GemmOperand::weight_gradient, &gemm_dweight}};
    column_major_gemm(ops::linear_forward_gemm(s.rows, s.in_dim, s.out_dim, accumulate,
                                               s.ld_in, s.ld_out), operands);
    column_major_gemm(ops::linear_input_gradient_gemm(s.rows, s.in_dim, s.out_dim, accumulate,
                                                      s.ld_in, s.ld_out), operands);
    column_major_gemm(ops::linear_weight_gradient_gemm(s.rows, s.in_dim, s.out_dim, s.ld_in,
                                                       s.ld_out), operands);
    // Same products, another summation order; padding columns untouched on both sides.
    EXPECT_LT(max_relative_error(gemm_out, out), 1e-12) << accumulate;
    EXPECT_LT(max_relative_error(gemm_din, din), 1e-12) << accumulate;
    EXPECT_LT(max_relative_error(gemm_dweight, dweight), 1e-12) << accumulate;
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, LinearGemms,
                         ::testing::Values(Shape{5, 3, 4, 3, 4}, Shape{7, 6, 2, 9, 5},
                                           Shape{1, 8, 8, 8, 11}, Shape{16, 5, 9, 12, 9},
                                           Shape{3, 1, 7, 4, 7}));

// A dense call means leading dimensions equal to the row lengths.
TEST(LinearGemms, DenseLeadingDimensions) {
  const ColumnMajorGemm f = ops::linear_forward_gemm(10, 6, 4, false);
  EXPECT_EQ(f.lda, 6);
  EXPECT_EQ(f.ldb, 6);
  EXPECT_EQ(f.ldc, 4);
  const ColumnMajorGemm w = ops::linear_weight_gradient_gemm(10, 6, 4);
  EXPECT_EQ(w.lda, 6);
  EXPECT_EQ(w.ldb, 4);
  EXPECT_EQ(w.ldc, 6);
  EXPECT_TRUE(w.accumulate);  // parameter gradients always add up (ops.h)
}

}  // namespace
}  // namespace sps
