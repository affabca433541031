#include "model/config.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <functional>

#include "model_fixtures.h"
#include "util/error.h"
#include "util/temp_dir.h"

namespace sps {
namespace {

using sps::testing::model_families;
using sps::testing::TempDir;
using sps::testing::write_whole_file;

const std::string kModels = SPS_SOURCE_DIR "/configs/models/";

std::string config_error(const std::function<void()>& action) {
  try {
    action();
  } catch (const UserError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no UserError";
  return "";
}

#define EXPECT_CONFIG_ERROR(action, fragment)                             \
  do {                                                                    \
    std::string message = config_error([&] { action; });                  \
    EXPECT_NE(message.find(fragment), std::string::npos) << message;      \
    EXPECT_EQ(message.find('\n'), std::string::npos) << message;          \
  } while (0)

ModelConfig micro() { return load_model_config(kModels + "micro.yaml", {}); }

TEST(ModelConfig, PaperPresetParameterCounts) {
  const std::pair<const char*, int64_t> expected[] = {{"xs", 53'027'328},
                                                      {"s", 130'665'216},
                                                      {"m", 378'717'184},
                                                      {"l", 831'253'760},
                                                      {"xl", 1'678'081'600}};
  for (const auto& [name, count] : expected) {
    ModelConfig c = load_model_config(kModels + name + ".yaml", {});
    EXPECT_EQ(c.parameter_count(), count) << name;
    EXPECT_EQ(c.head_dim(), 64) << name;
    EXPECT_EQ(c.intermediate_size, 3 * c.hidden_size) << name;
    EXPECT_EQ(c.block_size, 4096) << name;
    EXPECT_EQ(c.vocab_size, 50304) << name;
    EXPECT_EQ(c.eos_token_id, 50256) << name;
    EXPECT_EQ(c.predict_token_id, 50257) << name;
    EXPECT_EQ(c.pad_token_id, 50303) << name;
    EXPECT_EQ(c.family, "standard") << name;
  }
}

TEST(ModelConfig, SmallPresets) {
  ModelConfig tiny = load_model_config(kModels + "tiny.yaml", {});
  EXPECT_EQ(tiny.n_layer, 4);
  EXPECT_EQ(tiny.hidden_size, 256);
  EXPECT_EQ(tiny.vocab_size, 8256);
  EXPECT_EQ(tiny.vocab_size % 64, 0);
  EXPECT_EQ(tiny.eos_token_id, 8191);
  EXPECT_EQ(tiny.predict_token_id, 8192);
  EXPECT_EQ(tiny.pad_token_id, tiny.vocab_size - 1);

  ModelConfig m = micro();
  EXPECT_EQ(m.n_layer, 2);
  EXPECT_EQ(m.n_head, 2);
  EXPECT_EQ(m.hidden_size, 16);
  EXPECT_EQ(m.intermediate_size, 24);
  EXPECT_EQ(m.vocab_size, 64);
  EXPECT_EQ(m.block_size, 12);
  EXPECT_EQ(m.eos_token_id, 60);
  EXPECT_EQ(m.predict_token_id, 61);
  EXPECT_EQ(m.pad_token_id, 63);
  EXPECT_EQ(m.persistent_key_window, -1);
  EXPECT_DOUBLE_EQ(m.rope_theta, 10000.0);
  EXPECT_DOUBLE_EQ(m.norm_eps, 1e-6);
  EXPECT_DOUBLE_EQ(m.init_std, 0.02);
  // V·d + L·(4d² + 3dF + 2d) + d
  EXPECT_EQ(m.parameter_count(), 64 * 16 + 2 * (4 * 256 + 3 * 16 * 24 + 32) + 16);
}

TEST(ModelConfig, Overrides) {
  ModelConfig c = load_model_config(
      kModels + "micro.yaml",
      {"model.family=sps", "model.window_size=16", "model.persistent_key_window=3",
       "model.rope_theta=500000", "model.n_layer=3"});
  EXPECT_EQ(c.family, "sps");
  EXPECT_EQ(c.window_size, 16);
  EXPECT_EQ(c.persistent_key_window, 3);
  EXPECT_DOUBLE_EQ(c.rope_theta, 500000.0);
  EXPECT_EQ(c.n_layer, 3);
  EXPECT_EQ(load_model_config(kModels + "micro.yaml", {"model.persistent_key_window=null"})
                .persistent_key_window,
            -1);
}

TEST(ModelConfig, OverridesAreTypeChecked) {
  const std::string path = kModels + "micro.yaml";
  EXPECT_CONFIG_ERROR(load_model_config(path, {"model.n_layer=abc"}),
                      path + ": model.n_layer: expected an integer, got 'abc'");
  EXPECT_CONFIG_ERROR(load_model_config(path, {"model.window_size=1.5"}),
                      "model.window_size: expected an integer, got '1.5'");
  EXPECT_CONFIG_ERROR(load_model_config(path, {"model.norm_eps=small"}),
                      "model.norm_eps: expected a finite number");
  EXPECT_CONFIG_ERROR(load_model_config(path, {"model.family=[sps]"}),
                      "model.family: expected a string");
  EXPECT_CONFIG_ERROR(load_model_config(path, {"model.family=bogus"}),
                      "model.family: unknown family 'bogus'");
  EXPECT_CONFIG_ERROR(load_model_config(path, {"model.foo=1"}), "model.foo: unknown key");
  EXPECT_CONFIG_ERROR(load_model_config(path, {"train.lr=1"}), "only model.* overrides");
  EXPECT_CONFIG_ERROR(load_model_config(path, {"model.n_layer"}), "expected section.key=value");
}

TEST(ModelConfig, BareMappingAndSectionedFiles) {
  TempDir dir;
  const std::string bare = dir.file("bare.yaml");
  write_whole_file(bare, "n_layer: 1\nn_head: 1\nhidden_size: 4\nintermediate_size: 8\n"
                         "vocab_size: 16\nblock_size: 8\neos_token_id: 13\npredict_token_id: 14\n"
                         "pad_token_id: 15\n");
  ModelConfig c = load_model_config(bare, {"model.family=delayed_state"});
  EXPECT_EQ(c.family, "delayed_state");
  EXPECT_EQ(c.parameter_count(), 16 * 4 + (4 * 16 + 3 * 4 * 8 + 8) + 4);
  EXPECT_EQ(c.window_size, 0);  // defaults for keys left out

  // Other sections of a run config belong to other readers.
  const std::string run = dir.file("run.yaml");
  write_whole_file(run, "train:\n  lr: 1\nmodel:\n  n_layer: 1\n  n_head: 1\n  hidden_size: 4\n"
                        "  intermediate_size: 8\n  vocab_size: 16\n  block_size: 8\n"
                        "  eos_token_id: 13\n  predict_token_id: 14\n  pad_token_id: 15\n");
  EXPECT_EQ(load_model_config(run, {}).hidden_size, 4);
}

TEST(ModelConfig, FileErrors) {
  TempDir dir;
  const std::string path = dir.file("m.yaml");
  EXPECT_CONFIG_ERROR(load_model_config(path, {}), path);  // missing
  write_whole_file(path, "");
  EXPECT_CONFIG_ERROR(load_model_config(path, {}), path + ": expected a mapping");
  write_whole_file(path, "model: 3\n");
  EXPECT_CONFIG_ERROR(load_model_config(path, {}), path + ": model: expected a mapping");
  write_whole_file(path, "model:\n  n_layer: 2\n  n_layer: 3\n");
  EXPECT_CONFIG_ERROR(load_model_config(path, {}), "model.n_layer: key appears twice");
  write_whole_file(path, "model:\n  n_layer: 2\n");
  EXPECT_CONFIG_ERROR(load_model_config(path, {}), "model.n_head: missing");
  write_whole_file(path, "model:\n  n_layer: [2\n");
  EXPECT_CONFIG_ERROR(load_model_config(path, {}), path + ":");
}

TEST(ModelConfig, UnknownKeyListsTheKnownOnes) {
  YAML::Node node = YAML::Load("{n_layer: 2, foo: 1}");
  EXPECT_CONFIG_ERROR(model_config_from_yaml(node, "F.yaml"),
                      "F.yaml: model.foo: unknown key (expected one of family, n_layer, n_head, "
                      "hidden_size, intermediate_size, vocab_size, block_size, window_size, "
                      "persistent_key_window, eos_token_id, predict_token_id, pad_token_id, "
                      "rope_theta, norm_eps, init_std)");
}

TEST(ModelConfig, ValidationErrorsNameTheField) {
  const ModelConfig good = micro();
  EXPECT_NO_THROW(good.validate("F"));
  struct Case {
    std::function<void(ModelConfig&)> change;
    std::string fragment;
  };
  const Case cases[] = {
      {[](ModelConfig& c) { c.n_layer = 0; }, "F: model.n_layer: must be > 0, got 0"},
      {[](ModelConfig& c) { c.n_head = -2; }, "model.n_head: must be > 0"},
      {[](ModelConfig& c) { c.hidden_size = 0; }, "model.hidden_size: must be > 0"},
      {[](ModelConfig& c) { c.intermediate_size = 0; }, "model.intermediate_size: must be > 0"},
      {[](ModelConfig& c) { c.vocab_size = 0; }, "model.vocab_size: must be > 0"},
      {[](ModelConfig& c) { c.block_size = 0; }, "model.block_size: must be > 0"},
      {[](ModelConfig& c) { c.n_head = 3; }, "model.hidden_size: 16 is not divisible by model.n_head"},
      {[](ModelConfig& c) { c.hidden_size = 6; c.n_head = 2; }, "must be even"},
      {[](ModelConfig& c) { c.window_size = -1; }, "model.window_size: must be >= 0"},
      {[](ModelConfig& c) { c.persistent_key_window = -2; }, "model.persistent_key_window"},
      {[](ModelConfig& c) { c.eos_token_id = 64; }, "model.eos_token_id: 64 is outside the vocabulary"},
      {[](ModelConfig& c) { c.predict_token_id = -1; }, "model.predict_token_id: -1 is outside"},
      {[](ModelConfig& c) { c.pad_token_id = 100; }, "model.pad_token_id"},
      {[](ModelConfig& c) { c.predict_token_id = 60; }, "model.predict_token_id: 60 is also model.eos_token_id"},
      {[](ModelConfig& c) { c.pad_token_id = 61; }, "model.pad_token_id: 61 is also model.predict_token_id"},
      {[](ModelConfig& c) { c.family = "2x"; }, "F: model.family: unknown family '2x'"},
      {[](ModelConfig& c) { c.rope_theta = 0; }, "model.rope_theta"},
      {[](ModelConfig& c) { c.norm_eps = -1; }, "model.norm_eps"},
      {[](ModelConfig& c) { c.init_std = -0.1; }, "model.init_std"},
      {[](ModelConfig& c) { c.hidden_size = int64_t{1} << 40; c.n_head = 1; c.vocab_size = 1 << 30; },
       "too large for any machine"},
      // 16 bytes per parameter (weights, gradients, two moments) must fit 64 bits.
      {[](ModelConfig& c) { c.hidden_size = int64_t{1} << 29; c.n_head = 1; c.vocab_size = 1 << 30; },
       "too large for any machine"},
  };
  for (const Case& k : cases) {
    ModelConfig c = good;
    k.change(c);
    EXPECT_CONFIG_ERROR(c.validate("F"), k.fragment);
  }
  // Every family name is accepted; a window at or beyond T (2× memory) and ω = 0 are fine.
  for (const std::string& family : model_families()) {
    ModelConfig c = good;
    c.family = family;
    c.window_size = 1000;
    c.persistent_key_window = 0;
    EXPECT_NO_THROW(c.validate("F")) << family;
  }
}

TEST(ModelConfig, ValidationRunsOnLoad) {
  EXPECT_CONFIG_ERROR(load_model_config(kModels + "micro.yaml", {"model.n_head=3"}),
                      "micro.yaml: model.hidden_size: 16 is not divisible");
  EXPECT_CONFIG_ERROR(load_model_config(kModels + "micro.yaml", {"model.eos_token_id=99999999999"}),
                      "model.eos_token_id");
}

}  // namespace
}  // namespace sps
