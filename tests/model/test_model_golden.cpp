// The engine against the independent golden vectors: logits, per-position NLL, loss and
// every parameter gradient, in double (1e-10) and float (1e-5, gradients 1e-4).
#include <gtest/gtest.h>

#include "golden.h"
#include "gradcheck.h"
#include "model/model.h"
#include "model/weights_io.h"

namespace sps::testing {
namespace {

class EngineGolden : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    SPS_REQUIRE_GOLDEN();
  }

  template <typename T>
  void check(double value_tol, double grad_tol) {
    const GoldenCase g = load_golden_case(GetParam());
    Model<T> model(g.config);
    load_weights(g.weights_path, model.params(), model.weights());
    const int64_t B = g.batch, Tn = g.tokens, V = g.config.vocab_size;

    std::vector<double> logits(B * Tn * V), nll(B * Tn);
    const StepResult r = model.forward(g.x.data(), g.y.data(), B, Tn, {nll.data(), logits.data()});
    const auto want_logits = g.expected->read_as_double("logits");
    const auto want_nll = g.expected->read_as_double("nll");
    const double want_loss = g.expected->read_as_double("loss").at(0);
    EXPECT_LT(max_relative_error(logits.data(), want_logits.data(), logits.size()), value_tol);
    EXPECT_LT(max_relative_error(nll.data(), want_nll.data(), nll.size()), value_tol);
    EXPECT_NEAR(r.loss, want_loss, value_tol * std::abs(want_loss));
    const auto keep = g.expected->read_as_double("keep");
    int64_t kept = 0;
    for (double k : keep) kept += int64_t(k);
    EXPECT_EQ(r.kept, kept);

    model.zero_grads();
    const StepResult rb = model.forward_backward(g.x.data(), g.y.data(), B, Tn);
    EXPECT_NEAR(rb.loss, want_loss, value_tol * std::abs(want_loss));
    for (const auto& e : model.params().entries()) {
      const auto want = g.expected->read_as_double("grad." + e.name);
      ASSERT_EQ(int64_t(want.size()), e.numel) << e.name;
      EXPECT_LT(max_relative_error(model.grads() + e.offset, want.data(), e.numel), grad_tol)
          << e.name;
    }
  }
};

TEST_P(EngineGolden, DoubleMatches) { check<double>(1e-10, 1e-9); }
TEST_P(EngineGolden, FloatMatches) { check<float>(1e-5, 1e-4); }

INSTANTIATE_TEST_SUITE_P(AllCases, EngineGolden, ::testing::ValuesIn(kGoldenCases),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace sps::testing
