// Seed statistics against hand-computed values; the t distribution is checked against a
// closed form (4 d.o.f.) and a numerical integral of the t density, never against Boost.
#include <gtest/gtest.h>

#include <cmath>

#include "experiment/stats.h"

namespace sps::testing {
namespace {

using namespace sps::stats;

const std::vector<double> kLow = {2.80, 2.81, 2.79};
const std::vector<double> kHigh = {2.85, 2.86, 2.84};

// Student t CDF for 4 d.o.f. in closed form: 1/2 + (3/8)·u·(1 − v/12), u = t/√(1+t²/4),
// v = t²/(1+t²/4).
double t_cdf_4(double t) {
  const double q = 1 + t * t / 4;
  return 0.5 + 0.375 * (t / std::sqrt(q)) * (1 - t * t / q / 12);
}

// P(T ≤ t) for t ≤ 0 as 1/2 − ∫_t^0 density, Simpson's rule in long double.
double integrated_t_cdf(double t, double dof) {
  const long double nu = dof;
  const long double log_norm = std::lgamma((nu + 1) / 2) - std::lgamma(nu / 2) -
                               0.5L * std::log(nu * 3.14159265358979323846L);
  auto density = [&](long double x) {
    return std::exp(log_norm - (nu + 1) / 2 * std::log1p(x * x / nu));
  };
  const int n = 20000;  // even
  const long double h = -static_cast<long double>(t) / n;
  long double sum = density(t) + density(0);
  for (int i = 1; i < n; ++i) sum += (i % 2 ? 4 : 2) * density(t + i * h);
  return double(0.5L - sum * h / 3);
}

TEST(Stats, MeanAndSampleSd) {
  EXPECT_DOUBLE_EQ(mean({1, 2, 3, 4}), 2.5);
  // Σ(x − 2.5)² = 5, over n − 1 = 3.
  EXPECT_NEAR(sample_sd({1, 2, 3, 4}), std::sqrt(5.0 / 3.0), 1e-15);
  EXPECT_TRUE(std::isnan(sample_sd({7})));
  EXPECT_TRUE(std::isnan(mean({})));
}

TEST(Stats, ConfidenceIntervalUsesTWithNMinusOneDof) {
  // 2.5 ± t_{0.975,3} · √(5/3) / 2 = 2.5 ± 3.182446305284263 · 0.6454972243679028.
  const ConfidenceInterval ci = t_confidence_interval({1, 2, 3, 4}, 0.05);
  EXPECT_DOUBLE_EQ(ci.mean, 2.5);
  EXPECT_NEAR(ci.half_width, 2.054260256760879, 1e-12);
  EXPECT_NEAR(ci.low(), 0.445739743239121, 1e-12);
  EXPECT_TRUE(std::isnan(t_confidence_interval({3}, 0.05).half_width));
}

TEST(Stats, WelchWithEqualVariancesByHand) {
  // Means 2.80 and 2.85, both variances 1e-4, n = 3: se = √(2e-4/3), t = −0.05/se = −√37.5,
  // d.o.f. = (2e-4/3)² / (2 · (1e-4/3)² / 2) = 4.
  const WelchT w = welch_t(kLow, kHigh);
  EXPECT_NEAR(w.difference, -0.05, 1e-12);
  EXPECT_NEAR(w.t, -std::sqrt(37.5), 1e-9);
  EXPECT_NEAR(w.dof, 4.0, 1e-9);
  // F_4(−6.123724356957945) = 0.0018011163045520417 (closed form above).
  const double p = welch_p_less(kLow, kHigh);
  EXPECT_NEAR(p, 0.0018011163045520417, 1e-12);
  EXPECT_NEAR(p, t_cdf_4(w.t), 1e-12);
  EXPECT_NEAR(p, integrated_t_cdf(w.t, w.dof), 1e-10);
  // The other direction: H1 "kHigh is lower" has p = 1 − p.
  EXPECT_NEAR(welch_p_less(kHigh, kLow), 1 - p, 1e-12);
}

TEST(Stats, WelchWithFractionalDofByHand) {
  // b = {2.84, 2.88, 2.86, 2.90}: mean 2.87, variance 0.002/3. u_a = 1e-4/3, u_b = 1/6000,
  // u_a + u_b = 2e-4: t = −0.07/√2e-4 = −4.949747468305833;
  // d.o.f. = 4e-8 / ((1/30000)²/2 + (1/6000)²/3) = 43.2/10.6 = 4.0754716981132075.
  const std::vector<double> b = {2.84, 2.88, 2.86, 2.90};
  const WelchT w = welch_t(kLow, b);
  EXPECT_NEAR(w.t, -4.949747468305833, 1e-9);
  EXPECT_NEAR(w.dof, 4.0754716981132075, 1e-9);
  const double p = welch_p_less(kLow, b);
  EXPECT_NEAR(p, integrated_t_cdf(w.t, w.dof), 1e-10);
  // Between the 4-d.o.f. value and the normal tail: fractional d.o.f. are really used.
  EXPECT_LT(p, t_cdf_4(w.t));
  EXPECT_GT(p, 0.5 * std::erfc(4.949747468305833 / std::sqrt(2.0)));
}

TEST(Stats, TostOnACraftedPair) {
  // b = kLow + 0.001: difference −0.001, se = √(2e-4/3), 4 d.o.f.
  const std::vector<double> b = {2.801, 2.811, 2.791};
  const double se = std::sqrt(2e-4 / 3);
  // ±0.05: t = 0.049/se and −0.051/se, p = F_4(−0.049/se) = 0.00194, F_4(−0.051/se) = 0.00167.
  const Tost wide = tost(kLow, b, 0.05, 0.05);
  EXPECT_NEAR(wide.p_above_lower, t_cdf_4(-0.049 / se), 1e-9);
  EXPECT_NEAR(wide.p_above_lower, 0.0019397870546389862, 1e-9);
  EXPECT_NEAR(wide.p_below_upper, 0.0016744283968790907, 1e-9);
  EXPECT_TRUE(wide.equivalent);
  // ±0.01: p = 0.1661 and 0.1246, so not equivalent at 0.05 (but at 0.2 it is).
  const Tost narrow = tost(kLow, b, 0.01, 0.05);
  EXPECT_NEAR(narrow.p_above_lower, 0.16610262129985204, 1e-9);
  EXPECT_NEAR(narrow.p_below_upper, 0.1245840477717215, 1e-9);
  EXPECT_FALSE(narrow.equivalent);
  EXPECT_TRUE(tost(kLow, b, 0.01, 0.2).equivalent);
}

TEST(Stats, UndefinedWithoutSpread) {
  const WelchT w = welch_t({1, 1}, {2, 2});
  EXPECT_TRUE(std::isnan(w.t));
  EXPECT_TRUE(std::isnan(welch_p_less({1, 1}, {2, 2})));
  const Tost t = tost({1, 1}, {2, 2}, 0.01, 0.05);
  EXPECT_TRUE(std::isnan(t.p_above_lower));
  EXPECT_FALSE(t.equivalent);
}

}  // namespace
}  // namespace sps::testing
