// Continuing a reference trainer's run in sps: `sps convert --with-optimizer` writes a run
// folder that the trainer resumes at the imported step, with the imported AdamW moments.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "data/sampler.h"
#include "interop/checkpoint_folder.h"
#include "interop/reference_checkpoint.h"
#include "interop_fixtures.h"
#include "model/model.h"
#include "model/weights_io.h"
#include "train/checkpoint.h"
#include "train/trainer.h"
#include "util/temp_dir.h"

namespace sps {
namespace {

namespace fs = std::filesystem;
using testing::interop_fixture;

ImportedCheckpoint import_with_optimizer(const std::string& file) {
  ImportOptions options;
  options.with_optimizer = true;
  return import_reference_checkpoint(interop_fixture(file), options);
}

// The first step after the import, recomputed here: the gradient of the windows an sps run
// reads at step 2, then AdamW from the imported moments with bias correction for step 3 at
// the warm-up's learning rate for step 2.
TEST(ImportResume, FirstStepContinuesTheImportedAdamW) {
  testing::TempDir dir;
  testing::write_micro_data(dir.path().string());
  const std::string recipe = dir.file("recipe.yaml");
  testing::write_whole_file(recipe, testing::fixture_sps_recipe(dir.path().string(), 6));
  const ImportedCheckpoint ckpt = import_with_optimizer("sps_fp32_compiled.pt");
  const std::string run = dir.file("run");
  write_imported_checkpoint(run, ckpt, "sps_fp32_compiled.pt");
  const TrainConfig config = load_train_config(recipe, {"system.out_dir=" + run});

  const TrainSummary first = testing::run_train(config, true, 1);
  EXPECT_EQ(first.step, 3);
  EXPECT_EQ(first.tokens, 3 * 32);

  // The gradient at the imported weights: windows 8 … 11 of sps's order (2 steps × 4
  // windows read), two micro-batches of 2, each weighted 1/2.
  Model<float> model(config.model);
  const ParamTable& table = model.params();
  std::copy(ckpt.weights.begin(), ckpt.weights.end(), model.weights());
  const std::string bytes = testing::read_whole_file(dir.file("train.bin"));
  std::vector<uint16_t> data(bytes.size() / 2);
  std::memcpy(data.data(), bytes.data(), bytes.size());
  const int64_t T = 8;
  SamplerConfig sampling;
  sampling.block_size = T;
  sampling.chunk_size_units = 7;
  const WindowSampler sampler(int64_t(data.size()), sampling, "train.bin");
  model.zero_grads();
  for (int64_t micro = 0; micro < 2; ++micro) {
    std::vector<int32_t> x, y;
    for (int64_t b = 0; b < 2; ++b) {
      const int64_t p = sampler.position(8 + micro * 2 + b);
      for (int64_t t = 0; t < T; ++t) x.push_back(data[p + t]), y.push_back(data[p + t + 1]);
    }
    model.forward_backward(x.data(), y.data(), 2, T, 0.5);
  }

  const double lr = 0.01 * (64.0 / 128), beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  const double bias1 = 1 - std::pow(beta1, 3), bias2 = 1 - std::pow(beta2, 3);
  Model<float> resumed(config.model);
  const std::string latest = run + "/checkpoints/latest";
  load_weights(latest + "/model.safetensors", table, resumed.weights());
  AdamW optimizer(table, config.optimizer);
  optimizer.load(latest + "/optimizer.safetensors");
  EXPECT_EQ(optimizer.step(), 3);
  for (const auto& e : table.entries()) {
    for (int64_t k = 0; k < e.numel; ++k) {
      const int64_t i = e.offset + k;
      const double g = model.grads()[i];
      const double m = beta1 * ckpt.exp_avg[i] + (1 - beta1) * g;
      const double v = beta2 * ckpt.exp_avg_sq[i] + (1 - beta2) * g * g;
      const double w = ckpt.weights[i] * (1 - lr * (e.decayed ? 0.1 : 0.0)) -
                       lr * (m / bias1) / (std::sqrt(v / bias2) + eps);
      // Float rounding, relative to the terms (which may cancel in m).
      const double m_scale = beta1 * std::abs(ckpt.exp_avg[i]) + (1 - beta1) * std::abs(g);
      ASSERT_NEAR(optimizer.exp_avg()[i], m, 1e-6 * m_scale) << e.name << "[" << k << "]";
      ASSERT_NEAR(optimizer.exp_avg_sq()[i], v, 1e-6 * v) << e.name << "[" << k << "]";
      ASSERT_NEAR(resumed.weights()[i], w, 1e-6) << e.name << "[" << k << "]";
    }
  }

  // The metrics start with an evaluation at the imported step; the step line carries the
  // warm-up's rate for step 2. The run then goes on to its end.
  const auto lines = testing::read_metrics(run + "/metrics.jsonl");
  ASSERT_GE(lines.size(), 2u);
  EXPECT_EQ(lines[0]["step"], 2);
  EXPECT_TRUE(lines[0].contains("val_nll"));
  EXPECT_EQ(lines[1]["step"], 3);
  EXPECT_DOUBLE_EQ(lines[1]["lr"].get<double>(), lr);
  const TrainSummary rest = testing::run_train(config, true);
  EXPECT_TRUE(rest.finished);
  EXPECT_EQ(rest.step, 6);
  EXPECT_TRUE(fs::exists(run + "/checkpoints/final/model.safetensors"));
}

}  // namespace
}  // namespace sps
