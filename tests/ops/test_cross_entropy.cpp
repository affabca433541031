// cross_entropy_forward / cross_entropy_backward: nll against log-sum-exp in double, large
// and shifted logits, finite differences, in-place gradients, float against double at the
// GPT-2 vocabulary size.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "gradcheck.h"
#include "ops/ops.h"

namespace sps::ops {
namespace {

using testing::cast_vector;
using testing::max_relative_error;
using testing::numeric_gradient;
using testing::random_vector;

// log Σ exp(x) in long double, without shifting: only for modest logits.
long double reference_lse(const double* x, int64_t V) {
  long double sum = 0;
  for (int64_t i = 0; i < V; ++i) sum += std::exp(static_cast<long double>(x[i]));
  return std::log(sum);
}

TEST(CrossEntropy, ForwardMatchesLogSumExp) {
  const int64_t rows = 3, V = 1000;
  const auto logits = random_vector(rows * V, 1, 4.0);
  const std::vector<int32_t> targets = {0, 999, 417};
  std::vector<double> nll(rows), lse(rows);
  cross_entropy_forward(nll.data(), lse.data(), logits.data(), targets.data(), rows, V);
  for (int64_t r = 0; r < rows; ++r) {
    const double expected_lse = double(reference_lse(logits.data() + r * V, V));
    EXPECT_NEAR(lse[r], expected_lse, 1e-12 * std::abs(expected_lse));
    EXPECT_NEAR(nll[r], expected_lse - logits[r * V + targets[r]], 1e-12);
  }
}

TEST(CrossEntropy, LargeLogitsStayFinite) {
  // exp(1000) overflows; the result must not. A shift of all logits leaves the nll alone.
  const int64_t V = 5;
  const std::vector<double> base = {1, 2, 3, 4, 5};
  std::vector<float> shifted(V);
  for (int64_t i = 0; i < V; ++i) shifted[i] = float(base[i] + 1000.0);
  const int32_t target = 1;
  double nll, lse;
  cross_entropy_forward(&nll, &lse, base.data(), &target, 1, V);
  float nll_f, lse_f;
  cross_entropy_forward(&nll_f, &lse_f, shifted.data(), &target, 1, V);
  // Float spacing near 1000 is 6e-5: nll = lse − logit cannot be closer than that.
  EXPECT_NEAR(nll_f, nll, 2e-4);
  EXPECT_NEAR(lse_f, lse + 1000.0, 2e-4);
  // A target far below the rest: a large but exact nll, and a finite gradient.
  const std::vector<float> extreme = {0.0f, -200.0f, 0.0f};
  cross_entropy_forward(&nll_f, &lse_f, extreme.data(), &target, 1, 3);
  EXPECT_NEAR(nll_f, 200.0f + std::log(2.0f), 1e-4);
  std::vector<float> dlogits(3);
  const float dnll = 1.0f;
  cross_entropy_backward(dlogits.data(), extreme.data(), &lse_f, &target, &dnll, 1, 3);
  EXPECT_NEAR(dlogits[0], 0.5f, 1e-6);
  EXPECT_NEAR(dlogits[1], -1.0f, 1e-6);
  EXPECT_NEAR(dlogits[2], 0.5f, 1e-6);
}

TEST(CrossEntropy, BackwardMatchesFiniteDifferences) {
  const int64_t rows = 4, V = 13;
  auto logits = random_vector(rows * V, 2, 2.0);
  const std::vector<int32_t> targets = {3, 0, 12, 3};
  const auto dnll = random_vector(rows, 3);  // loss = Σ nll · dnll
  auto loss = [&] {
    std::vector<double> nll(rows), lse(rows);
    cross_entropy_forward(nll.data(), lse.data(), logits.data(), targets.data(), rows, V);
    double total = 0;
    for (int64_t r = 0; r < rows; ++r) total += nll[r] * dnll[r];
    return total;
  };
  const auto numeric = numeric_gradient(loss, logits.data(), logits.size());
  std::vector<double> nll(rows), lse(rows), dlogits(logits.size(), 1e6);
  cross_entropy_forward(nll.data(), lse.data(), logits.data(), targets.data(), rows, V);
  cross_entropy_backward(dlogits.data(), logits.data(), lse.data(), targets.data(), dnll.data(),
                         rows, V);
  EXPECT_LT(max_relative_error(dlogits.data(), numeric.data(), numeric.size()), 1e-8);
  for (int64_t r = 0; r < rows; ++r) {  // each row of the gradient sums to zero
    double sum = 0;
    for (int64_t i = 0; i < V; ++i) sum += dlogits[r * V + i];
    EXPECT_NEAR(sum, 0.0, 1e-12);
  }
}

TEST(CrossEntropy, BackwardInPlaceMatchesSeparateBuffers) {
  const int64_t rows = 6, V = 3001;
  const auto logits_d = random_vector(rows * V, 4, 3.0);
  const auto logits = cast_vector<float>(logits_d);
  const std::vector<int32_t> targets = {5, 3000, 0, 17, 17, 2999};
  const std::vector<float> dnll = {1.0f, 0.5f, -2.0f, 0.0f, 1.0f, 3.0f};
  std::vector<float> nll(rows), lse(rows);
  cross_entropy_forward(nll.data(), lse.data(), logits.data(), targets.data(), rows, V);
  std::vector<float> separate(logits.size());
  cross_entropy_backward(separate.data(), logits.data(), lse.data(), targets.data(),
                         dnll.data(), rows, V);
  auto in_place = logits;
  cross_entropy_backward(in_place.data(), in_place.data(), lse.data(), targets.data(),
                         dnll.data(), rows, V);
  EXPECT_EQ(in_place, separate);
  EXPECT_LT(separate[1 * V + 3000], -0.4f);  // the target's entry carries −dnll
}

// The float exps in vector lanes give the scalar tail's bits: each gradient against the op on
// two logits (fewer than a vector: the tail alone), the loss against those exps summed in
// index order, as the op sums them. Logits far below and above the row's log-sum-exp too.
TEST(CrossEntropy, FloatLanesGiveTheScalarBits) {
  const int64_t rows = 3, V = 37;
  std::vector<float> logits = cast_vector<float>(random_vector(rows * V, 7, 6.0));
  logits[3] = -200.0f, logits[5] = 80.0f, logits[V + 8] = -95.0f, logits[V + 30] = 40.0f;
  // The last row's maximum is 0 and its other exps small: its log-sum-exp is the log of a sum
  // just above 1, whose every last bit shows, so a sum in another order fails.
  for (int64_t i = 0; i < V; ++i) logits[2 * V + i] = logits[2 * V + i] / 6.0f - 4.0f;
  logits[2 * V + 10] = 0.0f;
  const std::vector<int32_t> targets = {4, 36, 0};
  const std::vector<float> dnll = {0.75f, -1.5f, 1.0f};
  std::vector<float> nll(rows), lse(rows), dlogits(rows * V);
  cross_entropy_forward(nll.data(), lse.data(), logits.data(), targets.data(), rows, V);
  cross_entropy_backward(dlogits.data(), logits.data(), lse.data(), targets.data(), dnll.data(),
                         rows, V);
  // exp(x − shift) · scale from the op's scalar tail: x beside a second logit, the target.
  const auto tail_exp = [](float x, float shift, float scale) {
    const float two[2] = {x, 0.0f}, shift1[1] = {shift}, scale1[1] = {scale};
    const int32_t target[1] = {1};
    float out[2];
    cross_entropy_backward(out, two, shift1, target, scale1, 1, 2);
    return out[0];
  };
  for (int64_t r = 0; r < rows; ++r) {
    const float* x = logits.data() + r * V;
    float row_max = x[0], block = 0;
    for (int64_t i = 1; i < V; ++i) row_max = std::max(row_max, x[i]);
    for (int64_t i = 0; i < V; ++i) block += tail_exp(x[i], row_max, 1.0f);
    EXPECT_EQ(lse[r], row_max + std::log(0.0f + block)) << "row " << r;
    for (int64_t i = 0; i < V; ++i) {
      if (i == targets[r]) continue;
      EXPECT_EQ(dlogits[r * V + i], tail_exp(x[i], lse[r], dnll[r])) << r << ", " << i;
    }
  }
}

// At V = 50304 (GPT-2) the float path's sums and exp must stay close to double.
TEST(CrossEntropy, FloatAgreesWithDoubleAtGpt2Vocabulary) {
  const int64_t rows = 3, V = 50304;
  auto logits = random_vector(rows * V, 5, 3.0);
  logits[1 * V + 123] = 25.0;  // one confident row
  const std::vector<int32_t> targets = {50256, 123, 0};
  const auto dnll = random_vector(rows, 6);
  std::vector<double> nll(rows), lse(rows), dlogits(logits.size());
  cross_entropy_forward(nll.data(), lse.data(), logits.data(), targets.data(), rows, V);
  cross_entropy_backward(dlogits.data(), logits.data(), lse.data(), targets.data(), dnll.data(),
                         rows, V);
  auto logits_f = cast_vector<float>(logits);
  const auto dnll_f = cast_vector<float>(dnll);
  std::vector<float> nll_f(rows), lse_f(rows);
  cross_entropy_forward(nll_f.data(), lse_f.data(), logits_f.data(), targets.data(), rows, V);
  cross_entropy_backward(logits_f.data(), logits_f.data(), lse_f.data(), targets.data(),
                         dnll_f.data(), rows, V);
  EXPECT_LT(max_relative_error(lse_f.data(), lse.data(), rows), 1e-6);
  for (int64_t r = 0; r < rows; ++r)  // nll of the confident row is tiny: compare absolutely
    EXPECT_NEAR(nll_f[r], nll[r], 1e-6 * std::max(1.0, std::abs(lse[r]))) << r;
  EXPECT_LT(max_relative_error(logits_f.data(), dlogits.data(), dlogits.size()), 1e-5);
}

}  // namespace
}  // namespace sps::ops
