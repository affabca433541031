// The naive double-precision reference model (naive_model.h) against the golden vectors of
// tests/golden: logits, per-position NLL, keep mask and loss of every case, and the
// docs/model.md §8 rolling log-likelihoods.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "golden_set.h"
#include "naive_model.h"
#include "util/safetensors.h"

namespace sps::testing {
namespace {

double rel_err(double got, double want) {
  return std::abs(got - want) / std::max(std::abs(want), 1e-300);
}

// Largest |got − want| over the vector, relative to max |want|.
double max_rel_err(const std::vector<double>& got, const std::vector<double>& want) {
  double diff = 0.0, scale = 0.0;
  for (size_t k = 0; k < want.size(); ++k) {
    diff = std::max(diff, std::abs(got[k] - want[k]));
    scale = std::max(scale, std::abs(want[k]));
  }
  return diff / std::max(scale, 1e-300);
}

nlohmann::json load_cases() {
  std::ifstream in(kGoldenDir + "/cases.json");
  return nlohmann::json::parse(in);
}

ModelConfig config_for(const nlohmann::json& all, const nlohmann::json& entry) {
  const auto& c = all.at("config");
  ModelConfig cfg;
  cfg.family = entry.at("family").get<std::string>();
  cfg.n_layer = c.at("n_layer").get<int64_t>();
  cfg.n_head = c.at("n_head").get<int64_t>();
  cfg.hidden_size = c.at("hidden_size").get<int64_t>();
  cfg.intermediate_size = c.at("intermediate_size").get<int64_t>();
  cfg.vocab_size = c.at("vocab_size").get<int64_t>();
  cfg.block_size = c.at("block_size").get<int64_t>();
  cfg.eos_token_id = c.at("eos_token_id").get<int32_t>();
  cfg.predict_token_id = c.at("predict_token_id").get<int32_t>();
  cfg.pad_token_id = c.at("pad_token_id").get<int32_t>();
  cfg.window_size = entry.at("window").is_null() ? -1 : entry.at("window").get<int64_t>();
  const auto& omega = entry.at("persistent_key_window");
  cfg.persistent_key_window = omega.is_null() ? -1 : omega.get<int64_t>();
  return cfg;
}

NamedWeights load_weights(const std::string& path) {
  SafetensorsFile f(path);
  NamedWeights w;
  for (const TensorInfo& t : f.header().tensors) w[t.name] = f.read_as_double(t.name);
  return w;
}

std::vector<int32_t> to_tokens(const std::vector<double>& v) {
  std::vector<int32_t> out;
  for (double x : v) out.push_back(static_cast<int32_t>(x));
  return out;
}

class NaiveGolden : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    SPS_REQUIRE_GOLDEN();
    all_ = load_cases();
    bool found = false;
    for (const auto& e : all_.at("cases"))
      if (e.at("case").get<std::string>() == GetParam()) {
        entry_ = e;
        found = true;
      }
    ASSERT_TRUE(found) << GetParam() << " missing from cases.json";
    cfg_ = config_for(all_, entry_);
    weights_ = load_weights(kGoldenDir + "/" + GetParam() + ".weights.safetensors");
  }
  nlohmann::json all_, entry_;
  ModelConfig cfg_;
  NamedWeights weights_;
};

TEST_P(NaiveGolden, ForwardMatchesGolden) {
  SafetensorsFile expected(kGoldenDir + "/" + GetParam() + ".expected.safetensors");
  const TensorInfo* xi = expected.find("x");
  ASSERT_NE(xi, nullptr);
  ASSERT_EQ(xi->shape.size(), 2u);
  const int64_t B = xi->shape[0], T = xi->shape[1], V = cfg_.vocab_size;
  const auto x = to_tokens(expected.read_as_double("x"));
  const auto y = to_tokens(expected.read_as_double("y"));
  const auto logits = expected.read_as_double("logits");
  const auto nll = expected.read_as_double("nll");
  const auto keep = expected.read_as_double("keep");
  const double loss = expected.read_as_double("loss").at(0);
  ASSERT_EQ(static_cast<int64_t>(logits.size()), B * T * V);

  NaiveOutput out = naive_forward(cfg_, weights_, x, y, B, T);

  EXPECT_LT(max_rel_err(out.logits, logits), 1e-10);
  for (int64_t k = 0; k < B * T; ++k) {
    EXPECT_EQ(out.keep[k], static_cast<int>(keep[k])) << "position " << k;
    EXPECT_LT(rel_err(out.nll[k], nll[k]), 1e-10) << "position " << k;
  }
  for (int64_t k = 0; k < B * T * V; ++k)
    ASSERT_NEAR(out.logits[k], logits[k], 1e-10 * std::max(1.0, std::abs(logits[k])))
        << "row " << k / (T * V) << " pos " << (k / V) % T << " vocab " << k % V;
  EXPECT_LT(rel_err(out.loss, loss), 1e-10) << out.loss << " vs " << loss;
  EXPECT_LT(rel_err(out.loss, entry_.at("loss").get<double>()), 1e-10);
}

TEST_P(NaiveGolden, RollingLoglikMatchesGolden) {
  if (!entry_.contains("rolling_loglik")) GTEST_SKIP() << "no rolling value for this case";
  const auto doc = entry_.at("rolling_document").get<std::vector<int32_t>>();
  const int64_t context = entry_.at("rolling_context").get<int64_t>();
  const double got = naive_rolling_loglik(cfg_, weights_, doc, context);
  const double want = entry_.at("rolling_loglik").get<double>();
  EXPECT_LT(rel_err(got, want), 1e-9) << got << " vs " << want;
  const double got5 = naive_rolling_loglik(cfg_, weights_, doc, 5);
  const double want5 = entry_.at("rolling_loglik_context5").get<double>();
  EXPECT_LT(rel_err(got5, want5), 1e-9) << got5 << " vs " << want5;
}

INSTANTIATE_TEST_SUITE_P(Naive, NaiveGolden,
                         ::testing::Values("standard_w0", "sps_w0", "sps_w2", "sps_w12",
                                           "reverse_sps_w2", "delayed_state_w2",
                                           "sps_w2_omega3"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

// The rolling windows of docs/model.md §8 for a 30-token document and context 12: [0,12) from
// [EOS] + doc[0,11), [12,24) from doc[11,23), [24,30) from doc[17,29).
TEST(NaiveRolling, WindowsFollowSpec) {
  std::vector<int32_t> doc(30);
  for (int k = 0; k < 30; ++k) doc[k] = k + 100;
  auto wins = naive_rolling_windows(doc, 12, 7);
  ASSERT_EQ(wins.size(), 3u);
  EXPECT_EQ(wins[0].inputs.front(), 7);
  EXPECT_EQ(wins[0].inputs.back(), 110);
  EXPECT_EQ(wins[0].targets.back(), 111);
  EXPECT_EQ(wins[1].start, 12);
  EXPECT_EQ(wins[1].inputs.front(), 111);
  EXPECT_EQ(wins[1].targets.back(), 123);
  EXPECT_EQ(wins[2].start, 24);
  EXPECT_EQ(wins[2].end, 30);
  EXPECT_EQ(wins[2].inputs.size(), 12u);
  EXPECT_EQ(wins[2].inputs.front(), 117);
  EXPECT_EQ(wins[2].inputs.back(), 128);
  EXPECT_EQ(wins[2].targets.back(), 129);
  // A document shorter than the context: one window of its own length.
  auto short_wins = naive_rolling_windows({1, 2, 3}, 12, 7);
  ASSERT_EQ(short_wins.size(), 1u);
  EXPECT_EQ(short_wins[0].inputs, (std::vector<int32_t>{7, 1, 2}));
  EXPECT_EQ(short_wins[0].targets, (std::vector<int32_t>{1, 2, 3}));
}

}  // namespace
}  // namespace sps::testing
