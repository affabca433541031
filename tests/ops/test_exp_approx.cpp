// The vectorisable float exp behind cross-entropy and SwiGLU: relative error against the
// double exp over its whole range, and the edges (underflow, overflow, NaN).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ops/cpu/cpu_common.h"

namespace sps::ops::cpu {
namespace {

TEST(ExpApprox, RelativeErrorWithinAFewUlp) {
  double worst = 0;
  double worst_at = 0;
  for (double x = -87.0; x <= 88.0; x += 0.000731) {
    const float xf = float(x);
    const double expected = std::exp(double(xf));
    const double error = std::abs(double(exp_approx(xf)) - expected) / expected;
    if (error > worst) worst = error, worst_at = xf;
  }
  EXPECT_LT(worst, 3e-7) << "at x = " << worst_at;
  EXPECT_EQ(exp_approx(0.0f), 1.0f);
}

TEST(ExpApprox, Edges) {
  EXPECT_EQ(exp_approx(-87.5f), 0.0f);
  EXPECT_EQ(exp_approx(-1000.0f), 0.0f);
  EXPECT_EQ(exp_approx(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_EQ(exp_approx(89.0f), std::numeric_limits<float>::infinity());
  EXPECT_EQ(exp_approx(std::numeric_limits<float>::infinity()),
            std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(exp_approx(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_GT(exp_approx(-87.0f), 0.0f);
  EXPECT_TRUE(std::isfinite(exp_approx(88.0f)));
}

}  // namespace
}  // namespace sps::ops::cpu
