// The independent golden cases (tests/golden, or SPS_GOLDEN_DIR) on a real GPU: logits,
// per-position NLL, loss and every parameter gradient of each case, within the float
// tolerances of the CPU engine's test (tests/model/test_model_golden.cpp). Skipped where no
// GPU is usable.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cuda/cuda_fixtures.h"
#include "gradcheck.h"
#include "model/golden.h"
#include "model/model.h"
#include "model/weights_io.h"

namespace sps::testing {
namespace {

class CudaGolden : public ::testing::TestWithParam<std::string> {};

TEST_P(CudaGolden, FloatMatches) {
  SPS_REQUIRE_GPU();
  SPS_REQUIRE_GOLDEN();
  const GoldenCase g = load_golden_case(GetParam());
  Model<float> model(g.config, ops::backend_for({"cuda", 0}));
  ops::on_host(model.backend(), model.weights(), size_t(model.params().total()),
               ops::HostAccess::write,
               [&](float* w) { load_weights(g.weights_path, model.params(), w); });
  const int64_t B = g.batch, Tn = g.tokens, V = g.config.vocab_size;
  std::vector<double> logits(B * Tn * V), nll(B * Tn);
  const StepResult r = model.forward(g.x.data(), g.y.data(), B, Tn, {nll.data(), logits.data()});
  const double want_loss = g.expected->read_as_double("loss").at(0);
  EXPECT_LT(max_relative_error(logits, g.expected->read_as_double("logits")), 1e-5);
  EXPECT_LT(max_relative_error(nll, g.expected->read_as_double("nll")), 1e-5);
  EXPECT_NEAR(r.loss, want_loss, 1e-5 * std::abs(want_loss));

  model.zero_grads();
  const StepResult rb = model.forward_backward(g.x.data(), g.y.data(), B, Tn);
  EXPECT_NEAR(rb.loss, want_loss, 1e-5 * std::abs(want_loss));
  std::vector<float> grads(size_t(model.params().total()));
  model.backend().download(grads.data(), model.grads(), grads.size() * sizeof(float));
  for (const auto& e : model.params().entries()) {
    const auto want = g.expected->read_as_double("grad." + e.name);
    ASSERT_EQ(int64_t(want.size()), e.numel) << e.name;
    EXPECT_LT(max_relative_error(grads.data() + e.offset, want.data(), e.numel), 1e-4) << e.name;
  }
}

INSTANTIATE_TEST_SUITE_P(AllCases, CudaGolden, ::testing::ValuesIn(kGoldenCases),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace sps::testing
