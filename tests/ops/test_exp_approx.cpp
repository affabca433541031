// The vectorisable float exp behind cross-entropy, SwiGLU and attention: relative error against the
// double exp over its whole range, and the edges (underflow, overflow, NaN).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "ops/cpu/attention_kernels.h"
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

// The attention kernels' vector exp is the same function: the same bits in every lane.
TEST(ExpApprox, TheVectorFormGivesTheScalarBits) {
  using V = tiles::Simd<float>::V;
  constexpr int W = tiles::kLanes<float>;
  const float specials[] = {-std::numeric_limits<float>::infinity(), -1000.0f, -87.34f, -87.3f,
                            -87.0f, 88.0f, 88.5f, 89.0f, std::numeric_limits<float>::quiet_NaN()};
  std::vector<float> xs(std::begin(specials), std::end(specials));
  for (double x = -90.0; x <= 90.0; x += 0.0173) xs.push_back(float(x));
  while (xs.size() % W != 0) xs.push_back(0.0f);
  for (size_t i = 0; i < xs.size(); i += W) {
    const V y = tiles::vexp(tiles::load<V>(&xs[i]));
    for (int lane = 0; lane < W; ++lane) {
      const float expected = exp_approx(xs[i + lane]);
      if (std::isnan(expected)) {
        EXPECT_TRUE(std::isnan(y[lane]));
      } else {
        EXPECT_EQ(y[lane], expected) << "at x = " << xs[i + lane];
      }
    }
  }
}

}  // namespace
}  // namespace sps::ops::cpu
