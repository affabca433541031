// Per-slot gradient norms: the bookkeeping on hand-computed rows, and the engine's observer
// hook against the engine's own gradients (per-slot contributions summed over slots equal
// every parameter tensor's gradient; a one-hot loss weight backpropagates one position).
#include <gtest/gtest.h>

#include <cmath>

#include "analysis/slot_gradient_norms.h"
#include "gradcheck.h"
#include "model/model_fixtures.h"

namespace sps::testing {
namespace {

using analysis::SlotGradientNorms;

TEST(SlotGradientNorms, HandComputedRows) {
  const ModelConfig c = micro_config("sps", 2);  // two streams, read at the predict stream
  Model<double> model(c);
  const int64_t T = 3;  // slots: input 0..2, predict 3..5
  SlotGradientNorms<double> norms(model, 1, T);
  // Linear: ‖in‖ = 5, ‖dout‖ = 3 at slot 1; ‖in‖ = 1, ‖dout‖ = 2 at slot 2.
  const double in[] = {3, 4, 1, 0};
  const double dout[] = {1, 2, 2, 0, 0, 2};
  norms.linear(0, in, dout, 1, 2, 2, 3, false);
  EXPECT_DOUBLE_EQ(norms.slot_norm(1), 15.0);
  EXPECT_DOUBLE_EQ(norms.slot_norm(2), 2.0);
  EXPECT_DOUBLE_EQ(norms.slot_norm(0), 0.0);
  // Readout row t = 1 is the predict slot of token 1: slot 3 + 1.
  norms.linear(0, in, dout, 1, 1, 2, 3, true);
  EXPECT_DOUBLE_EQ(norms.slot_norm(4), 15.0);
  EXPECT_DOUBLE_EQ(norms.slot_norm_without_readout(4), 0.0);
  EXPECT_DOUBLE_EQ(norms.slot_norm_without_readout(1), 15.0);
  // Norm gain: dout ⊙ x·rstd = (1, 2) ⊙ (1, 0.5) → ‖(1, 1)‖² = 2, added to slot 1's 225.
  const double x[] = {2, 1}, rstd[] = {0.5}, dnorm[] = {1, 2};
  norms.norm(0, x, rstd, dnorm, 1, 1, 2, false);
  EXPECT_DOUBLE_EQ(norms.squared(1), 227.0);
  // Embedding: ‖dout‖² per slot, every slot from 0.
  const int32_t tokens[] = {5, 6};
  const double demb[] = {0, 3, 4, 0};
  norms.embedding(0, tokens, demb, 2, 2);
  EXPECT_DOUBLE_EQ(norms.squared(0), 9.0);
  EXPECT_DOUBLE_EQ(norms.squared(1), 243.0);
  EXPECT_EQ(norms.slot(0, 1, 2), 5);
  norms.clear();
  EXPECT_EQ(norms.squared(1), 0.0);
}

// Materialises every per-slot contribution: sums them into a full gradient, and keeps each
// slot's Σ over terms of the contribution's squared Frobenius norm, element by element.
struct MaterialisingObserver : GradientObserver<double> {
  MaterialisingObserver(const Model<double>& m, int64_t B, int64_t T)
      : grads(size_t(m.params().total()), 0.0),
        squared(size_t(B * m.family().streams() * T), 0.0), T_(T),
        S_(m.family().streams() * T),
        readout_(m.family().interleaved ? int64_t(m.family().readout_slot) : 0) {}
  int64_t slot(int64_t row, bool readout) const {
    return readout ? row / T_ * S_ + readout_ * T_ + row % T_ : row;
  }
  void linear(int64_t param, const double* in, const double* dout, int64_t first_row,
              int64_t rows, int64_t in_dim, int64_t out_dim, bool readout) override {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t o = 0; o < out_dim; ++o)
        for (int64_t i = 0; i < in_dim; ++i) {
          const double g = dout[r * out_dim + o] * in[r * in_dim + i];
          grads[size_t(param + o * in_dim + i)] += g;
          squared[size_t(slot(first_row + r, readout))] += g * g;
        }
  }
  void norm(int64_t param, const double* x, const double* rstd, const double* dout,
            int64_t first_row, int64_t rows, int64_t dim, bool readout) override {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < dim; ++j) {
        const double g = dout[r * dim + j] * x[r * dim + j] * rstd[r];
        grads[size_t(param + j)] += g;
        squared[size_t(slot(first_row + r, readout))] += g * g;
      }
  }
  void embedding(int64_t param, const int32_t* tokens, const double* dout, int64_t rows,
                 int64_t dim) override {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < dim; ++j) {
        grads[size_t(param + tokens[r] * dim + j)] += dout[r * dim + j];
        squared[size_t(r)] += dout[r * dim + j] * dout[r * dim + j];
      }
  }
  std::vector<double> grads, squared;
  int64_t T_, S_, readout_;
};

// Calls two observers, so one backward feeds both.
struct TeeObserver : GradientObserver<double> {
  TeeObserver(GradientObserver<double>& a, GradientObserver<double>& b) : a(a), b(b) {}
  void linear(int64_t p, const double* in, const double* d, int64_t f, int64_t r, int64_t i,
              int64_t o, bool ro) override {
    a.linear(p, in, d, f, r, i, o, ro);
    b.linear(p, in, d, f, r, i, o, ro);
  }
  void norm(int64_t p, const double* x, const double* s, const double* d, int64_t f, int64_t r,
            int64_t n, bool ro) override {
    a.norm(p, x, s, d, f, r, n, ro);
    b.norm(p, x, s, d, f, r, n, ro);
  }
  void embedding(int64_t p, const int32_t* t, const double* d, int64_t r, int64_t n) override {
    a.embedding(p, t, d, r, n);
    b.embedding(p, t, d, r, n);
  }
  GradientObserver<double>&a, &b;
};

double relative_difference(const double* a, const double* b, int64_t n) {
  double diff = 0, scale = 0;
  for (int64_t k = 0; k < n; ++k) {
    diff += (a[k] - b[k]) * (a[k] - b[k]);
    scale += b[k] * b[k];
  }
  return std::sqrt(diff / std::max(scale, 1e-300));
}

class ObserverFamilies : public ::testing::TestWithParam<std::string> {};

TEST_P(ObserverFamilies, ContributionsSumToEveryParameterGradient) {
  const ModelConfig c = micro_config(GetParam(), 3);
  Model<double> model(c);
  randomize_weights(model, 21);
  const int64_t B = 2, T = c.block_size;
  const auto x = random_tokens(B, T, c, 7, {4});
  const auto y = random_tokens(B, T, c, 8, {10});
  MaterialisingObserver full(model, B, T);
  SlotGradientNorms<double> norms(model, B, T);
  TeeObserver both(full, norms);
  model.zero_grads();
  model.forward_backward(x.data(), y.data(), B, T, 1.0, BackwardOptions<double>{.observer = &both});
  for (const auto& e : model.params().entries()) {
    double norm = 0;
    for (int64_t k = 0; k < e.numel; ++k) norm += std::abs(model.grads()[e.offset + k]);
    ASSERT_GT(norm, 0) << e.name;
    EXPECT_LT(relative_difference(full.grads.data() + e.offset, model.grads() + e.offset, e.numel),
              1e-12)
        << GetParam() << " " << e.name;
  }
  // The norm bookkeeping equals the squared norms of the materialised contributions.
  for (size_t s = 0; s < full.squared.size(); ++s)
    EXPECT_NEAR(norms.squared(int64_t(s)), full.squared[s], 1e-12 * std::max(1.0, full.squared[s]))
        << GetParam() << " slot " << s;
}

INSTANTIATE_TEST_SUITE_P(Analysis, ObserverFamilies, ::testing::ValuesIn(model_families()));

// The gradient of one position's NLL: linear in the weights (Σ_q keep_q / kept · g_q is the
// full loss's gradient) and equal to finite differences of nll[q].
TEST(OneHotLossWeight, BackpropagatesOnePositionsNll) {
  const ModelConfig c = micro_config("sps", 2);
  Model<double> model(c);
  randomize_weights(model, 31);
  const int64_t T = c.block_size, n = model.params().total();
  const auto x = random_tokens(1, T, c, 9, {5});
  const auto y = random_tokens(1, T, c, 10);
  model.zero_grads();
  const StepResult full = model.forward_backward(x.data(), y.data(), 1, T);
  const std::vector<double> full_grads(model.grads(), model.grads() + n);

  std::vector<double> combined(size_t(n), 0.0), weight(size_t(T), 0.0);
  std::vector<double> single_q;
  const int64_t q = 7;
  for (int64_t p = 0; p < T; ++p) {
    if (x[size_t(p)] == c.eos_token_id) continue;  // not kept
    std::fill(weight.begin(), weight.end(), 0.0);
    weight[size_t(p)] = 1.0;
    model.zero_grads();
    model.forward_backward(x.data(), y.data(), 1, T, 1.0,
                           BackwardOptions<double>{.loss_weight = weight.data()});
    for (int64_t k = 0; k < n; ++k) combined[size_t(k)] += model.grads()[k] / double(full.kept);
    if (p == q) single_q.assign(model.grads(), model.grads() + n);
  }
  EXPECT_LT(relative_difference(combined.data(), full_grads.data(), n), 1e-12);

  std::vector<double> nll(static_cast<size_t>(T), 0.0);
  auto nll_q = [&] {
    model.forward(x.data(), y.data(), 1, T, ForwardOptions{.nll = nll.data()});
    return nll[size_t(q)];
  };
  for (const auto& e : model.params().entries())
    for (int64_t k = 0; k < e.numel; k += std::max<int64_t>(1, e.numel / 5)) {
      const double numeric = numeric_gradient(nll_q, model.weights() + e.offset + k, 1, 1e-5)[0];
      EXPECT_NEAR(single_q[size_t(e.offset + k)], numeric, 1e-6 * std::max(1.0, std::abs(numeric)))
          << e.name << "[" << k << "]";
    }
}

}  // namespace
}  // namespace sps::testing
