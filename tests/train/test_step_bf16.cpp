// Optimizer steps in bf16 precision on the CPU: the weights are converted for the GEMMs once
// per optimizer step, not once per micro-batch, and every step reads the weights the previous
// AdamW update wrote; a few steps follow the fp32 steps within bf16's tolerance.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "model/model.h"
#include "model/model_fixtures.h"
#include "ops/backend.h"
#include "train/collective.h"
#include "train/trainer.h"
#include "util/rng.h"

namespace sps {
namespace {

struct Bf16StepRun {
  Model<float> model;
  AdamW optimizer;
  std::vector<int32_t> x, y;
  Bf16StepRun(const ModelConfig& c, ops::Precision precision, int64_t micro_batch)
      : model(c, ops::cpu_backend(precision)),
        optimizer(model.params(), OptimizerSettings{}, model.backend()),
        x(micro_batch * c.block_size), y(micro_batch * c.block_size) {
    model.init_weights(7);
  }
  StepOutcome step(int64_t first_row, int64_t micro_batch, int64_t accumulation) {
    const int64_t T = model.config().block_size;
    const BatchSource batches = [&](int64_t micro, int32_t* xs, int32_t* ys) {
      for (int64_t b = 0; b < micro_batch; ++b) {
        Rng rng(uint64_t(first_row + micro * micro_batch + b));
        for (int64_t t = 0; t < T; ++t) xs[b * T + t] = int32_t(rng.below(60));
        for (int64_t t = 0; t < T; ++t) ys[b * T + t] = int32_t(rng.below(60));
      }
    };
    auto single = make_single_process_collective();
    return train_step(model, optimizer, *single, micro_batch, accumulation, batches, x, y, 3e-3,
                      1.0);
  }
};

TEST(TrainStepBf16, ConvertsTheWeightsOncePerStepAndFollowsFp32) {
  const ModelConfig c = testing::micro_config("sps", 2);
  // The same four sequences per step as two micro-batches of two and as one of four.
  Bf16StepRun two(c, ops::Precision::bf16, 2), one(c, ops::Precision::bf16, 4),
      fp32(c, ops::Precision::fp32, 2);
  int64_t per_step = 0;
  for (int64_t step = 0; step < 4; ++step) {
    const int64_t before_two = two.model.gemm_weight_conversions(),
                  before_one = one.model.gemm_weight_conversions();
    const StepOutcome a = two.step(4 * step, 2, 2);
    one.step(4 * step, 4, 1);
    const StepOutcome b = fp32.step(4 * step, 2, 2);
    const int64_t converted = two.model.gemm_weight_conversions() - before_two;
    if (step == 0) per_step = converted;
    EXPECT_EQ(converted, per_step) << step;  // every step anew: the update changed them
    EXPECT_EQ(converted, one.model.gemm_weight_conversions() - before_one) << step;
    EXPECT_NEAR(a.loss, b.loss, 1e-2 * b.loss) << step;
    EXPECT_NEAR(a.grad_norm, b.grad_norm, 5e-2 * b.grad_norm) << step;
  }
  // Once per matrix per step (twice on oneDNN: its two layouts), however many micro-batches.
  const int64_t matrices = 4 * c.n_layer + 1;
  EXPECT_GE(per_step, matrices);
  EXPECT_LE(per_step, 2 * matrices);
  EXPECT_EQ(fp32.model.gemm_weight_conversions(), 0);
}

// The step after an update reads the updated weights: the same loss, bit for bit, as a fresh
// bf16 model given the updated weights.
TEST(TrainStepBf16, TheNextStepReadsTheUpdatedWeights) {
  const ModelConfig c = testing::micro_config("standard", 2);
  Bf16StepRun run(c, ops::Precision::bf16, 2);
  run.step(0, 2, 1);
  Model<float> fresh(c, ops::cpu_backend(ops::Precision::bf16));
  std::copy(std::as_const(run.model).weights(),
            std::as_const(run.model).weights() + c.parameter_count(), fresh.weights());
  const int64_t T = c.block_size;
  std::vector<int32_t> x(2 * T), y(2 * T);
  for (int64_t i = 0; i < 2 * T; ++i) x[i] = int32_t(i % 60), y[i] = int32_t((i * 7) % 60);
  EXPECT_EQ(run.model.forward(x.data(), y.data(), 2, T).loss,
            fresh.forward(x.data(), y.data(), 2, T).loss);
}

}  // namespace
}  // namespace sps
