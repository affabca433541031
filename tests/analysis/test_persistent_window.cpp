// Persistent-window ΔNLL: zero where ω reaches every key (p ≤ ω, and everywhere when ω ≥
// the length), non-zero beyond ω; pooled summaries.
#include <gtest/gtest.h>

#include <cmath>

#include "analysis/persistent_window.h"
#include "model/model_fixtures.h"

namespace sps::testing {
namespace {

using namespace analysis;

struct Pair {
  Model<double> baseline, forced;
  Pair(const ModelConfig& c, int64_t omega)
      : baseline(c), forced([&] {
          ModelConfig f = c;
          f.persistent_key_window = omega;
          return f;
        }()) {
    randomize_weights(baseline, 17);
    std::copy(baseline.weights(), baseline.weights() + baseline.params().total(), forced.weights());
  }
};

Sequences sequences(const ModelConfig& c, int64_t n) {
  Sequences s;
  s.length = c.block_size;
  for (int64_t k = 0; k < n; ++k) s.tokens.push_back(random_tokens(1, c.block_size + 1, c, 70 + k));
  return s;
}

class WindowFamilies : public ::testing::TestWithParam<std::string> {};

TEST_P(WindowFamilies, OmegaReachingEveryKeyChangesNothing) {
  const ModelConfig c = micro_config(GetParam(), 2);
  // p − j ≤ length − 1 for every key, so ω = length − 1 is the smallest ω that is a no-op.
  for (int64_t omega : {c.block_size - 1, c.block_size, 4 * c.block_size}) {
    Pair m(c, omega);
    const auto r = measure_persistent_window(m.baseline, m.forced, sequences(c, 3), 2);
    for (int64_t p = 0; p < r.length; ++p) {
      EXPECT_EQ(r.delta[size_t(p)], 0.0) << "ω=" << omega << " p=" << p;
      EXPECT_EQ(r.count[size_t(p)], 3);
    }
  }
}

TEST_P(WindowFamilies, OnlyPositionsBeyondOmegaMove) {
  const ModelConfig c = micro_config(GetParam(), 2);
  const int64_t omega = 3;
  Pair m(c, omega);
  const auto r = measure_persistent_window(m.baseline, m.forced, sequences(c, 4), 3);
  // A query at p sees persistent keys j ≥ p − ω: for p ≤ ω that is every j ≥ 0, at every layer.
  for (int64_t p = 0; p <= omega; ++p) EXPECT_NEAR(r.delta[size_t(p)], 0.0, 1e-12) << "p=" << p;
  for (int64_t p = omega + 1; p < r.length; ++p)
    EXPECT_GT(std::abs(r.delta[size_t(p)]), 1e-6) << "p=" << p;
  EXPECT_NEAR(r.mean_delta(0, r.length),
              r.mean_delta(omega + 1, r.length) * double(r.length - omega - 1) / double(r.length),
              1e-12);
}

INSTANTIATE_TEST_SUITE_P(Analysis, WindowFamilies, ::testing::ValuesIn(model_families()));

TEST(PersistentWindow, EosTermsAreNotCounted) {
  const ModelConfig c = micro_config("sps", 2);
  Pair m(c, 2);
  Sequences s = sequences(c, 2);
  s.tokens[0][5] = c.eos_token_id;  // x_5 of the first sequence
  const auto r = measure_persistent_window(m.baseline, m.forced, s, 2);
  EXPECT_EQ(r.count[5], 1);
  EXPECT_EQ(r.count[4], 2);
}

}  // namespace
}  // namespace sps::testing
