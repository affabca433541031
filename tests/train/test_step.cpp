// One optimizer step: gradient accumulation (in double), clipping feeding AdamW.
#include <gtest/gtest.h>

#include <cmath>

#include "model/model.h"
#include "model/model_fixtures.h"
#include "train/collective.h"
#include "train/trainer.h"
#include "util/rng.h"

namespace sps {
namespace {

// Rows of T + 1 tokens below EOS; `eos` puts EOS at the given positions of row 0 only,
// which gives that micro-batch fewer kept loss terms.
std::vector<int32_t> rows(int64_t count, int64_t T, uint64_t seed, std::vector<int> eos = {}) {
  Rng rng(seed);
  std::vector<int32_t> r(count * (T + 1));
  for (auto& t : r) t = int32_t(rng.below(60));
  for (int i : eos) r[i] = 60;
  return r;
}

BatchSource source(const std::vector<int32_t>& data, int64_t micro_batch, int64_t T) {
  return [&data, micro_batch, T](int64_t micro, int32_t* x, int32_t* y) {
    for (int64_t b = 0; b < micro_batch; ++b) {
      const int32_t* row = data.data() + (micro * micro_batch + b) * (T + 1);
      std::copy(row, row + T, x + b * T);
      std::copy(row + 1, row + T + 1, y + b * T);
    }
  };
}

struct StepRun {
  Model<double> model;
  AdamW optimizer;
  std::vector<int32_t> x, y;
  StepOutcome out;
  StepRun(const ModelConfig& c, int64_t micro_batch, const OptimizerSettings& settings = {})
      : model(c), optimizer(model.params(), settings), x(micro_batch * c.block_size),
        y(micro_batch * c.block_size) {
    model.init_weights(7);
  }
  void step(const std::vector<int32_t>& data, int64_t micro_batch, int64_t accumulation,
            double lr, double clip) {
    auto single = make_single_process_collective();
    out = train_step(model, optimizer, *single, micro_batch, accumulation,
                     source(data, micro_batch, model.config().block_size), x, y, lr, clip);
  }
};

double max_relative_difference(const double* a, const double* b, int64_t n) {
  double worst = 0, scale = 0;
  for (int64_t i = 0; i < n; ++i) scale = std::max(scale, std::abs(b[i]));
  for (int64_t i = 0; i < n; ++i) worst = std::max(worst, std::abs(a[i] - b[i]) / scale);
  return worst;
}

TEST(TrainStep, TwoByTwoAccumulationEqualsFourByOne) {
  const ModelConfig c = testing::micro_config("sps", 2);
  const std::vector<int32_t> data = rows(4, c.block_size, 3);  // no EOS: equal counts
  StepRun accumulated(c, 2), whole(c, 4);
  accumulated.step(data, 2, 2, 1e-3, 1.0);
  whole.step(data, 4, 1, 1e-3, 1.0);
  const int64_t P = whole.model.params().total();
  EXPECT_LT(max_relative_difference(accumulated.model.grads(), whole.model.grads(), P), 1e-13);
  EXPECT_NEAR(accumulated.out.loss, whole.out.loss, 1e-14);
  EXPECT_EQ(accumulated.out.kept, whole.out.kept);
  EXPECT_NEAR(accumulated.out.grad_norm, whole.out.grad_norm, 1e-13 * whole.out.grad_norm);
  // The updates agree too (AdamW's fp32 moments round alike).
  for (int64_t i = 0; i < P; ++i)
    ASSERT_NEAR(accumulated.model.weights()[i], whole.model.weights()[i], 1e-9) << i;
}

TEST(TrainStep, StepGradientIsTheMeanOfMicroBatchGradients) {
  // With unequal kept counts the mean of micro-batch means (docs/model.md §5) differs from the
  // pooled mean over all four sequences: the two settings must then disagree, and the
  // accumulated one must equal the average of the two micro-batch gradients.
  const ModelConfig c = testing::micro_config("sps", 2);
  const std::vector<int32_t> data = rows(4, c.block_size, 3, {2, 5, 8});
  StepRun accumulated(c, 2), whole(c, 4), first(c, 2), second(c, 2);
  accumulated.step(data, 2, 2, 0.0, 0.0);
  whole.step(data, 4, 1, 0.0, 0.0);
  const std::vector<int32_t> first_rows(data.begin(), data.begin() + 2 * 13);
  const std::vector<int32_t> second_rows(data.begin() + 2 * 13, data.end());
  first.step(first_rows, 2, 1, 0.0, 0.0);
  second.step(second_rows, 2, 1, 0.0, 0.0);
  const int64_t P = whole.model.params().total();
  EXPECT_GT(max_relative_difference(accumulated.model.grads(), whole.model.grads(), P), 1e-4);
  std::vector<double> mean(P);
  for (int64_t i = 0; i < P; ++i)
    mean[i] = 0.5 * (first.model.grads()[i] + second.model.grads()[i]);
  EXPECT_LT(max_relative_difference(accumulated.model.grads(), mean.data(), P), 1e-13);
  EXPECT_NEAR(accumulated.out.loss, 0.5 * (first.out.loss + second.out.loss), 1e-14);
}

TEST(TrainStep, ClipFactorReachesAdamW) {
  // ε = 1 makes AdamW's first step depend on the gradient's scale:
  // w1 = w0·(1 − lr·λ) − lr·(c·g)/(|c·g| + 1) with c the clip factor.
  const ModelConfig c = testing::micro_config("sps", 2);
  const std::vector<int32_t> data = rows(2, c.block_size, 5);
  OptimizerSettings settings;
  settings.eps = 1.0;
  settings.weight_decay = 0.0;
  StepRun run(c, 2, settings);
  const int64_t P = run.model.params().total();
  const std::vector<double> w0(run.model.weights(), run.model.weights() + P);
  const double lr = 0.5, max_norm = 0.01;
  run.step(data, 2, 1, lr, max_norm);
  double sum = 0;
  for (int64_t i = 0; i < P; ++i) sum += run.model.grads()[i] * run.model.grads()[i];
  EXPECT_NEAR(run.out.grad_norm, std::sqrt(sum), 1e-12 * std::sqrt(sum));
  ASSERT_GT(run.out.grad_norm, max_norm);
  EXPECT_DOUBLE_EQ(run.out.clip, max_norm / (run.out.grad_norm + 1e-6));
  for (int64_t i = 0; i < P; i += 97) {
    const double g = run.model.grads()[i] * run.out.clip;
    ASSERT_NEAR(run.model.weights()[i], w0[i] - lr * g / (std::abs(g) + 1.0), 1e-9) << i;
  }
}

}  // namespace
}  // namespace sps
