// Whole-model gradients against central finite differences in double precision, for
// every family and window, with EOS inside the sequences.
#include <gtest/gtest.h>

#include "gradcheck.h"
#include "model_fixtures.h"

namespace sps::testing {
namespace {

struct GradCase {
  std::string family;
  int64_t window;
};

class ModelGradient : public ::testing::TestWithParam<GradCase> {};

TEST_P(ModelGradient, MatchesFiniteDifferences) {
  const auto [family, window] = GetParam();
  const ModelConfig c = micro_config(family, window);
  Model<double> model(c);
  randomize_weights(model, 11);
  const int64_t B = 2, T = c.block_size;
  const auto x = random_tokens(B, T, c, 5, {3, 8});
  const auto y = random_tokens(B, T, c, 6, {9});

  model.zero_grads();
  model.forward_backward(x.data(), y.data(), B, T);
  auto loss = [&] { return model.forward(x.data(), y.data(), B, T).loss; };

  // Every parameter tensor; a strided sample of elements keeps the test fast.
  for (const auto& e : model.params().entries()) {
    double worst = 0, scale = 1e-8;
    for (int64_t k = 0; k < e.numel; k += std::max<int64_t>(1, e.numel / 24)) {
      double* w = model.weights() + e.offset + k;
      const double numeric = numeric_gradient(loss, w, 1, 1e-5)[0];
      const double analytic = model.grads()[e.offset + k];
      worst = std::max(worst, std::abs(numeric - analytic));
      scale = std::max(scale, std::abs(numeric));
    }
    EXPECT_LT(worst / scale, 1e-6) << family << " w=" << window << " " << e.name;
  }
}

std::vector<GradCase> grad_cases() {
  std::vector<GradCase> cases{{"standard", 0}};
  for (const std::string& f : model_families())
    if (family_by_name(f).interleaved)
      for (int64_t w : {0, 1, 3, 12}) cases.push_back({f, w});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Families, ModelGradient, ::testing::ValuesIn(grad_cases()),
                         [](const auto& info) {
                           return info.param.family + "_w" + std::to_string(info.param.window);
                         });

}  // namespace
}  // namespace sps::testing
