// Recipes: every paper run loads, base/preset resolution, overrides, unknown keys, the
// resolved YAML, the dry-run plan.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>

#include "model/model.h"
#include "train/checkpoint.h"
#include "train/plan.h"
#include "train/train_config.h"
#include "util/error.h"
#include "util/temp_dir.h"
#include "util/user_error.h"

namespace sps {
namespace {

using testing::error_of;

namespace fs = std::filesystem;
const std::string kExperiments = std::string(SPS_SOURCE_DIR) + "/configs/experiments/";

TEST(Recipes, EveryPaperRunIsThere) {
  std::vector<std::string> names;
  for (const char* scale : {"xs", "s", "m", "l", "xl"})
    for (const char* v : {"standard", "sps_w64", "sps_w4096", "delayed_state_w64", "reverse_sps_w64"})
      names.push_back(fmt::format("{}_{}_20b", scale, v));
  for (const char* f : {"sps", "delayed_state", "reverse_sps"})
    for (int w : {0, 16, 64, 256}) names.push_back(fmt::format("s_{}_w{}_20b", f, w));
  for (const char* v : {"standard", "sps_w64", "sps_w4096", "delayed_state_w64"})
    for (int seed : {1, 2, 3}) names.push_back(fmt::format("s_{}_10b_seed{}", v, seed));
  for (const char* v : {"standard", "sps_w64", "sps_w256", "delayed_state_w64", "reverse_sps_w64"})
    names.push_back(fmt::format("tiny_{}", v));
  for (const auto& name : names)
    EXPECT_TRUE(fs::exists(kExperiments + name + ".yaml")) << name;
}

TEST(Recipes, AllLoadWithThePapersNumbers) {
  const std::map<std::string, int64_t> parameters = {
      {"xs", 53027328}, {"s", 130665216}, {"m", 378717184}, {"l", 831253760}, {"xl", 1678081600}};
  int loaded = 0;
  for (const auto& entry : fs::directory_iterator(kExperiments)) {
    if (entry.path().extension() != ".yaml") continue;
    const std::string name = entry.path().stem().string();
    SCOPED_TRACE(name);
    const TrainConfig c = load_train_config(entry.path().string(), {});
    ++loaded;
    EXPECT_EQ(c.system.out_dir, "runs/" + name);
    if (name.starts_with("tiny_")) {
      EXPECT_EQ(c.model.vocab_size, 8256);
      EXPECT_TRUE(c.data.dataset.ends_with("/data/edu-tiny"));
      continue;
    }
    const std::string scale = name.substr(0, name.find('_'));
    EXPECT_EQ(c.model.parameter_count(), parameters.at(scale));
    EXPECT_EQ(c.tokens_per_step(), 96 * 4096);
    EXPECT_EQ(c.model.block_size, 4096);
    EXPECT_DOUBLE_EQ(c.optimizer.learning_rate, 6e-4);
    EXPECT_DOUBLE_EQ(c.scheduler.min_lr, 6e-5);
    EXPECT_DOUBLE_EQ(c.optimizer.beta2, 0.95);
    EXPECT_DOUBLE_EQ(c.optimizer.weight_decay, 0.1);
    EXPECT_DOUBLE_EQ(c.optimizer.grad_clip, 1.0);
    EXPECT_EQ(c.training.chunk_shuffle_seed, 1337);
    EXPECT_EQ(c.training.chunk_size_units, 262144);
    EXPECT_EQ(c.training.sampler_type, "fixed_random_chunk");
    const bool big_warmup = scale == "m" || scale == "l" || scale == "xl";
    EXPECT_EQ(c.scheduler.warmup_tokens, big_warmup ? 100000000 : 50000000);
    const bool interleaved = c.model.family != "standard";
    EXPECT_EQ(c.training.micro_batch_size, scale == "l" && interleaved &&
                                                   c.model.family != "reverse_sps" ? 3 : 6);
    if (name.ends_with("_20b")) {
      EXPECT_EQ(c.training.max_tokens, 20000000000);
      EXPECT_EQ(c.scheduler.lr_decay_tokens, 2000000000);
      EXPECT_EQ(c.decay_start_tokens(), 18000000000);
    } else {
      EXPECT_EQ(c.training.max_tokens, 10000000000);
    }
    if (name.find("_w") != std::string::npos) {
      const std::string w = name.substr(name.find("_w") + 2);
      EXPECT_EQ(c.model.window_size, std::stoll(w.substr(0, w.find('_'))));
    }
  }
  EXPECT_EQ(loaded, 51);
}

TEST(Recipes, SeedRunsDifferOnlyInTheSeed) {
  const TrainConfig a = load_train_config(kExperiments + "s_sps_w64_10b_seed1.yaml", {});
  const TrainConfig b = load_train_config(kExperiments + "s_sps_w64_10b_seed3.yaml", {});
  EXPECT_EQ(a.training.seed, 1);
  EXPECT_EQ(b.training.seed, 3);
  EXPECT_EQ(a.model.family, "sps");
  EXPECT_EQ(a.model.window_size, 64);
}

TEST(TrainConfigTest, OverridesBaseAndPreset) {
  const TrainConfig c = load_train_config(
      kExperiments + "tiny_sps_w64.yaml",
      {"model.window_size=16", "training.max_tokens=8192", "optimizer.learning_rate=1e-3",
       "data.dataset=/data/x", "scheduler.warmup_tokens=0", "scheduler.lr_decay_tokens=4096",
       "system.out_dir=/tmp/run"});
  EXPECT_EQ(c.model.family, "sps");
  EXPECT_EQ(c.model.window_size, 16);
  EXPECT_EQ(c.model.n_layer, 4);  // from the tiny preset
  EXPECT_EQ(c.training.max_tokens, 8192);
  EXPECT_EQ(c.training.micro_batch_size, 8);  // from base/tiny.yaml
  EXPECT_DOUBLE_EQ(c.optimizer.learning_rate, 1e-3);
  EXPECT_EQ(c.data.train_bin, "/data/x/train.bin");
  EXPECT_EQ(c.data.val_bin, "/data/x/val.bin");
  EXPECT_EQ(c.system.out_dir, "/tmp/run");
}

TEST(TrainConfigTest, SpsHomeExpands) {
  testing::TempDir dir;
  ::setenv("SPS_HOME", dir.path().c_str(), 1);
  const TrainConfig c = load_train_config(kExperiments + "tiny_standard.yaml", {});
  ::unsetenv("SPS_HOME");
  EXPECT_EQ(c.data.dataset, dir.path().string() + "/data/edu-tiny");
  EXPECT_NE(error_of([] { expand_path("${SPS_SURELY_UNSET_VARIABLE}/x", "f"); }).find("not set"),
            std::string::npos);
}

TEST(TrainConfigTest, UnknownKeysNameFileAndField) {
  testing::TempDir dir;
  const std::string recipe = dir.file("r.yaml");
  testing::write_whole_file(recipe, "base: " + kExperiments + "base/tiny.yaml\n"
                            "model: {preset: " + std::string(SPS_SOURCE_DIR) +
                            "/configs/models/tiny.yaml}\ntraining: {max_tokenz: 5}\n");
  std::string e = error_of([&] { load_train_config(recipe, {}); });
  EXPECT_NE(e.find(recipe + ": training.max_tokenz: unknown key"), std::string::npos) << e;
  testing::write_whole_file(recipe, "model: {preset: tiny}\nsytem: {threads: 1}\n");
  e = error_of([&] { load_train_config(recipe, {}); });
  EXPECT_NE(e.find("sytem: unknown key"), std::string::npos) << e;
  e = error_of([&] { load_train_config(kExperiments + "tiny_standard.yaml", {"training.foo=1"}); });
  EXPECT_NE(e.find("training.foo: unknown key"), std::string::npos) << e;
  e = error_of([&] { load_train_config(kExperiments + "tiny_standard.yaml", {"model.widht=1"}); });
  EXPECT_NE(e.find("model.widht: unknown key"), std::string::npos) << e;
  e = error_of([&] { load_train_config(kExperiments + "tiny_standard.yaml", {"nosection.x=1"}); });
  EXPECT_NE(e.find("nosection.x=1"), std::string::npos) << e;
  e = error_of([&] { load_train_config(kExperiments + "tiny_standard.yaml", {"model.preset=huge"}); });
  EXPECT_NE(e.find("model.preset: 'huge' not found"), std::string::npos) << e;
  e = error_of([&] {
    load_train_config(kExperiments + "tiny_standard.yaml", {"training.global_batch_size=12"});
  });
  EXPECT_NE(e.find("training.global_batch_size: 12 is not a multiple"), std::string::npos) << e;
  e = error_of([&] { load_train_config(kExperiments + "tiny_standard.yaml", {"training.max_tokens=1000"}); });
  EXPECT_NE(e.find("exceed training.max_tokens"), std::string::npos) << e;
}

TEST(TrainConfigTest, ResolvedYamlReadsBackIdentically) {
  const TrainConfig c = load_train_config(kExperiments + "m_reverse_sps_w64_20b.yaml",
                                          {"optimizer.eps=1.5e-8", "training.seed=9"});
  const std::string text = train_config_yaml(c);
  const TrainConfig back = train_config_from_yaml(YAML::Load(text), "resolved");
  EXPECT_EQ(train_config_yaml(back), text);
  EXPECT_EQ(trajectory_difference(back, c), "");
  EXPECT_DOUBLE_EQ(back.optimizer.eps, 1.5e-8);
  TrainConfig other = c;
  other.model.family = "sps";
  EXPECT_EQ(trajectory_difference(other, c), "model.family is sps there, reverse_sps here");
}

// The dry run's memory line reports the model's own activation plan, recomputation included.
TEST(Plan, ActivationBytesFollowRecompute) {
  TrainConfig c = load_train_config(kExperiments + "s_sps_w64_20b.yaml", {});
  const int64_t stored = make_train_plan(c, 1).activation_bytes;
  c.system.recompute_activations = true;
  const int64_t recomputed = make_train_plan(c, 1).activation_bytes;
  EXPECT_EQ(stored, planned_activation_bytes(c.model, c.training.micro_batch_size,
                                             c.model.block_size, ActivationPlanKind::training));
  EXPECT_LT(recomputed * 3, stored);  // 12 layers: one block's worth instead of twelve
}

TEST(Plan, PaperScaleNumbers) {
  const TrainConfig c = load_train_config(kExperiments + "s_sps_w64_20b.yaml", {});
  const TrainPlan p = make_train_plan(c, 1);
  EXPECT_EQ(p.steps, 50863);  // ⌈20e9 / 393,216⌉
  EXPECT_EQ(p.accumulation, 16);
  EXPECT_EQ(p.parameters, 130665216);
  EXPECT_EQ(p.optimizer_bytes, 2 * 4 * 130665216LL);
  EXPECT_EQ(make_train_plan(c, 4).accumulation, 4);
  EXPECT_THROW(make_train_plan(c, 5), UserError);  // 96 is not a multiple of 6 × 5
  // Visible pairs for sps: per token i, the input query sees i + 1 inputs and min(i, w)
  // predicts, the predict query one more of each kind.
  ModelConfig m = c.model;
  m.n_layer = 1;
  m.n_head = 1;
  m.window_size = 2;
  double expected = 0;
  for (int64_t i = 0; i < 5; ++i) expected += (i + 1) + std::min<int64_t>(i, 2) + (i + 1) + std::min<int64_t>(i, 2) + 1;
  EXPECT_DOUBLE_EQ(visible_attention_pairs(m, 5), expected);
  m.family = "standard";
  EXPECT_DOUBLE_EQ(visible_attention_pairs(m, 5), 15);
  const std::string text = describe_train_plan(c, p);
  EXPECT_NE(text.find("130665216"), std::string::npos);
  EXPECT_NE(text.find("tokens/step   393216"), std::string::npos);
  EXPECT_NE(text.find("steps         50863"), std::string::npos);
}

}  // namespace
}  // namespace sps
