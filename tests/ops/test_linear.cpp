// linear_forward / linear_backward: a plain-loop reference, finite differences in double
// (dense and strided, accumulate on and off), and float against double.
#include <gtest/gtest.h>

#include <vector>

#include "gradcheck.h"
#include "ops/ops.h"

namespace sps::ops {
namespace {

using testing::cast_vector;
using testing::max_relative_error;
using testing::numeric_gradient;
using testing::random_vector;

struct Shape {
  int64_t rows, in_dim, out_dim, ld_in, ld_out;  // ld_* are the strides actually used
};

// out[r, o] = Σ_i in[r, i] · weight[o, i], written into a strided buffer.
std::vector<double> reference_forward(const Shape& s, const std::vector<double>& in,
                                      const std::vector<double>& weight) {
  std::vector<double> out(s.rows * s.ld_out, 0.0);
  for (int64_t r = 0; r < s.rows; ++r)
    for (int64_t o = 0; o < s.out_dim; ++o)
      for (int64_t i = 0; i < s.in_dim; ++i)
        out[r * s.ld_out + o] += in[r * s.ld_in + i] * weight[o * s.in_dim + i];
  return out;
}

class LinearTest : public ::testing::TestWithParam<Shape> {};

TEST_P(LinearTest, ForwardMatchesLoopAndKeepsPadding) {
  const Shape s = GetParam();
  const auto in = random_vector(s.rows * s.ld_in, 1);
  const auto weight = random_vector(s.out_dim * s.in_dim, 2);
  const auto expected = reference_forward(s, in, weight);
  const auto initial = random_vector(s.rows * s.ld_out, 3);
  const int64_t ld_in = s.ld_in == s.in_dim ? 0 : s.ld_in;  // exercise the dense default
  const int64_t ld_out = s.ld_out == s.out_dim ? 0 : s.ld_out;

  auto out = initial;
  linear_forward(out.data(), in.data(), weight.data(), s.rows, s.in_dim, s.out_dim, false,
                 ld_in, ld_out);
  auto acc = initial;
  linear_forward(acc.data(), in.data(), weight.data(), s.rows, s.in_dim, s.out_dim, true,
                 ld_in, ld_out);
  for (int64_t r = 0; r < s.rows; ++r) {
    for (int64_t o = 0; o < s.ld_out; ++o) {
      const int64_t k = r * s.ld_out + o;
      if (o < s.out_dim) {
        EXPECT_NEAR(out[k], expected[k], 1e-12);
        EXPECT_NEAR(acc[k], initial[k] + expected[k], 1e-12);
      } else {  // columns past out_dim belong to someone else
        EXPECT_EQ(out[k], initial[k]);
        EXPECT_EQ(acc[k], initial[k]);
      }
    }
  }
}

TEST_P(LinearTest, BackwardMatchesFiniteDifferences) {
  const Shape s = GetParam();
  // dout lives in its own strided buffer: give it a stride unlike in's and out's.
  const int64_t ld_dout = s.out_dim + 3;
  auto in = random_vector(s.rows * s.ld_in, 4);
  auto weight = random_vector(s.out_dim * s.in_dim, 5);
  const auto R = random_vector(s.rows * ld_dout, 6);  // loss = Σ out · R
  auto loss = [&] {
    const auto out = reference_forward(s, in, weight);
    double total = 0;
    for (int64_t r = 0; r < s.rows; ++r)
      for (int64_t o = 0; o < s.out_dim; ++o) total += out[r * s.ld_out + o] * R[r * ld_dout + o];
    return total;
  };
  const auto numeric_din = numeric_gradient(loss, in.data(), in.size());
  const auto numeric_dweight = numeric_gradient(loss, weight.data(), weight.size());

  for (bool accumulate : {false, true}) {
    const auto din_initial = random_vector(s.rows * s.ld_in, 7);
    const auto dweight_initial = random_vector(weight.size(), 8);
    auto din = din_initial;
    auto dweight = dweight_initial;
    linear_backward(din.data(), dweight.data(), R.data(), in.data(), weight.data(), s.rows,
                    s.in_dim, s.out_dim, accumulate, s.ld_in, ld_dout);
    std::vector<double> din_expected(din.size()), dweight_expected(dweight.size());
    for (size_t k = 0; k < din.size(); ++k) {
      const bool used = int64_t(k) % s.ld_in < s.in_dim;
      din_expected[k] = used ? numeric_din[k] + (accumulate ? din_initial[k] : 0.0)
                             : din_initial[k];  // padding untouched
    }
    for (size_t k = 0; k < dweight.size(); ++k)
      dweight_expected[k] = numeric_dweight[k] + dweight_initial[k];  // always accumulates
    EXPECT_LT(max_relative_error(din.data(), din_expected.data(), din.size()), 1e-7)
        << "accumulate=" << accumulate;
    EXPECT_LT(max_relative_error(dweight.data(), dweight_expected.data(), dweight.size()), 1e-7);
  }

  // Null outputs are skipped.
  auto din = random_vector(s.rows * s.ld_in, 9);
  const auto din_before = din;
  linear_backward(din.data(), static_cast<double*>(nullptr), R.data(), in.data(), weight.data(),
                  s.rows, s.in_dim, s.out_dim, true, s.ld_in, ld_dout);
  for (size_t k = 0; k < din.size(); ++k) {
    if (int64_t(k) % s.ld_in < s.in_dim) {
      EXPECT_NEAR(din[k], din_before[k] + numeric_din[k], 1e-6);
    }
  }
  auto dweight = random_vector(weight.size(), 10);
  const auto dweight_before = dweight;
  linear_backward(static_cast<double*>(nullptr), dweight.data(), R.data(), in.data(),
                  weight.data(), s.rows, s.in_dim, s.out_dim, false, s.ld_in, ld_dout);
  for (size_t k = 0; k < dweight.size(); ++k)
    EXPECT_NEAR(dweight[k], dweight_before[k] + numeric_dweight[k], 1e-6);
}

TEST_P(LinearTest, FloatAgreesWithDouble) {
  const Shape s = GetParam();
  const int64_t ld_dout = s.out_dim;
  const auto in = random_vector(s.rows * s.ld_in, 11);
  const auto weight = random_vector(s.out_dim * s.in_dim, 12);
  const auto dout = random_vector(s.rows * ld_dout, 13);
  std::vector<double> out(s.rows * s.ld_out), din(in.size()), dweight(weight.size());
  linear_forward(out.data(), in.data(), weight.data(), s.rows, s.in_dim, s.out_dim, false,
                 s.ld_in, s.ld_out);
  linear_backward(din.data(), dweight.data(), dout.data(), in.data(), weight.data(), s.rows,
                  s.in_dim, s.out_dim, false, s.ld_in, ld_dout);
  const auto in_f = cast_vector<float>(in), weight_f = cast_vector<float>(weight),
             dout_f = cast_vector<float>(dout);
  std::vector<float> out_f(out.size()), din_f(din.size()), dweight_f(dweight.size());
  linear_forward(out_f.data(), in_f.data(), weight_f.data(), s.rows, s.in_dim, s.out_dim, false,
                 s.ld_in, s.ld_out);
  linear_backward(din_f.data(), dweight_f.data(), dout_f.data(), in_f.data(), weight_f.data(),
                  s.rows, s.in_dim, s.out_dim, false, s.ld_in, ld_dout);
  EXPECT_LT(max_relative_error(out_f.data(), out.data(), out.size()), 1e-5);
  EXPECT_LT(max_relative_error(din_f.data(), din.data(), din.size()), 1e-5);
  EXPECT_LT(max_relative_error(dweight_f.data(), dweight.data(), dweight.size()), 1e-5);
}

INSTANTIATE_TEST_SUITE_P(Shapes, LinearTest,
                         ::testing::Values(Shape{5, 7, 6, 7, 6},      // dense
                                           Shape{4, 6, 5, 10, 9},     // strided in and out
                                           Shape{1, 3, 8, 3, 8},      // one row
                                           Shape{33, 17, 12, 20, 12}  // more rows than lanes
                                           ));

TEST(Linear, EmptyInnerDimensionClearsOrKeeps) {
  std::vector<double> out = {1, 2, 3, 4, 5, 6};
  linear_forward(out.data(), static_cast<const double*>(nullptr),
                 static_cast<const double*>(nullptr), 2, 0, 3, true);
  EXPECT_EQ(out, (std::vector<double>{1, 2, 3, 4, 5, 6}));
  linear_forward(out.data(), static_cast<const double*>(nullptr),
                 static_cast<const double*>(nullptr), 2, 0, 3, false);
  EXPECT_EQ(out, (std::vector<double>(6, 0.0)));
}

}  // namespace
}  // namespace sps::ops
