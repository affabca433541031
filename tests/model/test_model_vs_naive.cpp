// The engine's forward equals the naive dense-mask reference on random weights, for every
// family, window and ω, with documents and left padding in the batch.
#include <gtest/gtest.h>

#include "gradcheck.h"
#include "model_fixtures.h"
#include "naive_model.h"

namespace sps::testing {
namespace {

struct NaiveCase {
  std::string family;
  int64_t window;
  int64_t omega;
};

class ModelVsNaive : public ::testing::TestWithParam<NaiveCase> {};

TEST_P(ModelVsNaive, LogitsAndLossMatch) {
  const auto [family, window, omega] = GetParam();
  const ModelConfig c = micro_config(family, window, omega);
  Model<double> model(c);
  randomize_weights(model, 17);
  NamedWeights named;
  for (const auto& e : model.params().entries())
    named[e.name].assign(model.weights() + e.offset, model.weights() + e.offset + e.numel);

  const int64_t B = 3, T = c.block_size, V = c.vocab_size;
  auto x = random_tokens(B, T, c, 31);
  const auto y = random_tokens(B, T, c, 32, {2});
  x[0 * T + 4] = x[0 * T + 5] = c.eos_token_id;  // an empty document inside row 0
  x[1 * T + 9] = c.eos_token_id;
  for (int64_t i = 0; i < 5; ++i) x[2 * T + i] = c.pad_token_id;  // row 2 left-padded
  x[2 * T + 7] = c.eos_token_id;

  std::vector<double> logits(B * T * V), nll(B * T);
  const StepResult r = model.forward(x.data(), y.data(), B, T, {nll.data(), logits.data()});
  const NaiveOutput want = naive_forward(c, named, x, y, B, T);
  EXPECT_LT(max_relative_error(logits.data(), want.logits.data(), logits.size()), 1e-11);
  EXPECT_LT(max_relative_error(nll.data(), want.nll.data(), nll.size()), 1e-11);
  EXPECT_NEAR(r.loss, want.loss, 1e-11 * want.loss);
}

std::vector<NaiveCase> naive_cases() {
  std::vector<NaiveCase> cases{{"standard", 0, -1}, {"standard", 0, 3}};
  for (const std::string& f : model_families())
    if (family_by_name(f).interleaved)
      for (int64_t w : {0, 1, 3, 12}) cases.push_back({f, w, -1});
  cases.push_back({"sps", 2, 0});
  cases.push_back({"sps", 4, 5});
  cases.push_back({"delayed_state", 3, 2});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Families, ModelVsNaive, ::testing::ValuesIn(naive_cases()),
                         [](const auto& info) {
                           const auto& p = info.param;
                           return p.family + "_w" + std::to_string(p.window) +
                                  (p.omega >= 0 ? "_omega" + std::to_string(p.omega) : "");
                         });

}  // namespace
}  // namespace sps::testing
