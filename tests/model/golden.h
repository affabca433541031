#pragma once
// The independent golden cases of tests/golden (see its README): config, weights,
// inputs and expected values, loaded for the tests.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "golden_set.h"
#include "model/config.h"
#include "util/safetensors.h"

namespace sps::testing {

inline const std::vector<std::string> kGoldenCases = {
    "standard_w0", "sps_w0", "sps_w2", "sps_w12", "reverse_sps_w2", "delayed_state_w2",
    "sps_w2_omega3"};

inline nlohmann::json golden_cases_json() {
  std::ifstream in(kGoldenDir + "/cases.json");
  return nlohmann::json::parse(in);
}

struct GoldenCase {
  std::string name;
  ModelConfig config;
  nlohmann::json entry;  // the case's object in cases.json
  std::string weights_path;
  std::unique_ptr<SafetensorsFile> expected;
  std::vector<int32_t> x, y;  // [3, 12]
  int64_t batch = 0, tokens = 0;
};

inline ModelConfig golden_config(const nlohmann::json& all, const nlohmann::json& entry) {
  const auto& c = all["config"];
  ModelConfig cfg;
  cfg.n_layer = c["n_layer"];
  cfg.n_head = c["n_head"];
  cfg.hidden_size = c["hidden_size"];
  cfg.intermediate_size = c["intermediate_size"];
  cfg.vocab_size = c["vocab_size"];
  cfg.block_size = c["block_size"];
  cfg.eos_token_id = c["eos_token_id"];
  cfg.predict_token_id = c["predict_token_id"];
  cfg.pad_token_id = c["pad_token_id"];
  cfg.family = entry["family"];
  cfg.window_size = entry["window"];
  cfg.persistent_key_window =
      entry["persistent_key_window"].is_null() ? -1 : int64_t(entry["persistent_key_window"]);
  return cfg;
}

inline std::vector<int32_t> to_tokens(const std::vector<double>& v) {
  return std::vector<int32_t>(v.begin(), v.end());
}

inline GoldenCase load_golden_case(const std::string& name) {
  const auto all = golden_cases_json();
  GoldenCase g;
  g.name = name;
  for (const auto& entry : all["cases"])
    if (entry["case"] == name) g.entry = entry;
  g.config = golden_config(all, g.entry);
  g.weights_path = kGoldenDir + "/" + name + ".weights.safetensors";
  g.expected = std::make_unique<SafetensorsFile>(kGoldenDir + "/" + name + ".expected.safetensors");
  g.x = to_tokens(g.expected->read_as_double("x"));
  g.y = to_tokens(g.expected->read_as_double("y"));
  const auto* info = g.expected->find("x");
  g.batch = info->shape[0];
  g.tokens = info->shape[1];
  return g;
}

}  // namespace sps::testing
