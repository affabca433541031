// swiglu_forward / swiglu_backward: a plain-loop reference (including saturated gates),
// finite differences in double, overwrite semantics, float against double.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "gradcheck.h"
#include "ops/ops.h"

namespace sps::ops {
namespace {

using testing::cast_vector;
using testing::max_relative_error;
using testing::numeric_gradient;
using testing::random_vector;

double silu(double g) { return g / (1.0 + std::exp(-g)); }

TEST(SwiGLU, ForwardMatchesLoop) {
  const int64_t rows = 3, F = 21;
  auto gate_up = random_vector(rows * 2 * F, 1, 2.0);
  gate_up[0] = 120.0;   // saturated gates: silu → g and → 0 without overflow trouble
  gate_up[1] = -120.0;
  gate_up[2] = -1000.0;
  std::vector<double> act(rows * F);
  swiglu_forward(act.data(), gate_up.data(), rows, F);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < F; ++c) {
      const double g = gate_up[r * 2 * F + c], u = gate_up[r * 2 * F + F + c];
      EXPECT_NEAR(act[r * F + c], silu(g) * u, 1e-13) << r << " " << c;
    }
}

// The float forward runs in vector lanes and a scalar tail; every value is the one the tail
// gives it alone (a call of one value), bit for bit: F = 37 has whole vectors and a tail at
// every width, with saturated and non-finite gates among them. (The reference is the op's
// own tail, not a loop here: GCC fuses exp_approx's multiply-adds differently where it is
// inlined into other code, so a loop in this file can differ in the last bit.)
TEST(SwiGLU, FloatForwardLanesGiveTheScalarBits) {
  const int64_t rows = 3, F = 37;
  std::vector<float> gate_up = cast_vector<float>(random_vector(rows * 2 * F, 4, 4.0));
  const float specials[] = {120.0f, -120.0f, -1000.0f, 88.5f, -87.5f, 0.0f, -0.0f,
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN()};
  for (int i = 0; i < 10; ++i) gate_up[(7 * i) % F + (i % rows) * 2 * F] = specials[i];
  std::vector<float> act(rows * F);
  swiglu_forward(act.data(), gate_up.data(), rows, F);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < F; ++c) {
      const float one[2] = {gate_up[r * 2 * F + c], gate_up[r * 2 * F + F + c]};
      float expected;
      swiglu_forward(&expected, one, 1, 1);
      const float got = act[r * F + c];
      EXPECT_TRUE(std::isnan(expected) ? std::isnan(got) : got == expected)
          << "row " << r << " column " << c << ": gate " << one[0] << ", " << got << " against "
          << expected;
    }
}

// The float backward's vector lanes give its scalar tail's bits (F = 1 runs only the tail),
// with saturated and non-finite gates among the values.
TEST(SwiGLU, FloatBackwardLanesGiveTheScalarBits) {
  const int64_t rows = 3, F = 37;
  std::vector<float> gate_up = cast_vector<float>(random_vector(rows * 2 * F, 5, 4.0));
  const std::vector<float> dact = cast_vector<float>(random_vector(rows * F, 6, 2.0));
  const float specials[] = {120.0f, -120.0f, -1000.0f, 88.5f, -87.5f, 0.0f, -0.0f,
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN()};
  for (int i = 0; i < 10; ++i) gate_up[(7 * i) % F + (i % rows) * 2 * F] = specials[i];
  std::vector<float> dgate_up(rows * 2 * F);
  swiglu_backward(dgate_up.data(), dact.data(), gate_up.data(), rows, F);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < F; ++c) {
      const float one[2] = {gate_up[r * 2 * F + c], gate_up[r * 2 * F + F + c]};
      float expected[2];
      swiglu_backward(expected, &dact[r * F + c], one, 1, 1);
      for (int half = 0; half < 2; ++half) {
        const float got = dgate_up[r * 2 * F + half * F + c];
        EXPECT_TRUE(std::isnan(expected[half]) ? std::isnan(got) : got == expected[half])
            << "row " << r << " column " << c << (half ? " d up" : " d gate") << ": gate "
            << one[0] << ", " << got << " against " << expected[half];
      }
    }
}

TEST(SwiGLU, BackwardMatchesFiniteDifferencesAndOverwrites) {
  const int64_t rows = 4, F = 9;
  auto gate_up = random_vector(rows * 2 * F, 2, 2.0);
  const auto R = random_vector(rows * F, 3);  // loss = Σ act · R
  auto loss = [&] {
    std::vector<double> act(rows * F);
    swiglu_forward(act.data(), gate_up.data(), rows, F);
    double total = 0;
    for (int64_t k = 0; k < rows * F; ++k) total += act[k] * R[k];
    return total;
  };
  const auto numeric = numeric_gradient(loss, gate_up.data(), gate_up.size());
  std::vector<double> dgate_up(gate_up.size(), 1e6);  // garbage that must be overwritten
  swiglu_backward(dgate_up.data(), R.data(), gate_up.data(), rows, F);
  EXPECT_LT(max_relative_error(dgate_up.data(), numeric.data(), numeric.size()), 1e-8);
}

TEST(SwiGLU, SaturatedGatesHaveFiniteGradients) {
  const int64_t F = 4;
  const std::vector<double> gate_up = {-1000, -90, 90, 1000, 1, 2, 3, 4};
  const std::vector<float> gate_up_f(gate_up.begin(), gate_up.end());
  const std::vector<float> dact(F, 1.0f);
  std::vector<float> dgate_up(2 * F);
  swiglu_backward(dgate_up.data(), dact.data(), gate_up_f.data(), 1, F);
  // silu'(g) → 0 for g → −∞ and → 1 for g → +∞; d/dup = silu(g) → 0 or g.
  const std::vector<float> expected = {0, 0, 3, 4, 0, 0, 90, 1000};
  for (int64_t k = 0; k < 2 * F; ++k) EXPECT_NEAR(dgate_up[k], expected[k], 1e-5) << k;
}

TEST(SwiGLU, FloatAgreesWithDouble) {
  const int64_t rows = 40, F = 1536;
  const auto gate_up = random_vector(rows * 2 * F, 4, 3.0);
  const auto dact = random_vector(rows * F, 5);
  std::vector<double> act(rows * F), dgate_up(gate_up.size());
  swiglu_forward(act.data(), gate_up.data(), rows, F);
  swiglu_backward(dgate_up.data(), dact.data(), gate_up.data(), rows, F);
  const auto gate_up_f = cast_vector<float>(gate_up), dact_f = cast_vector<float>(dact);
  std::vector<float> act_f(rows * F), dgate_up_f(gate_up.size());
  swiglu_forward(act_f.data(), gate_up_f.data(), rows, F);
  swiglu_backward(dgate_up_f.data(), dact_f.data(), gate_up_f.data(), rows, F);
  EXPECT_LT(max_relative_error(act_f.data(), act.data(), act.size()), 1e-6);
  EXPECT_LT(max_relative_error(dgate_up_f.data(), dgate_up.data(), dgate_up.size()), 1e-6);
}

}  // namespace
}  // namespace sps::ops
