#pragma once
// Model configuration: the `model:` section of a YAML config (names as in the paper's
// code), validated. Presets live in configs/models/.
#include <cstdint>
#include <string>
#include <vector>

namespace YAML { class Node; }

namespace sps {

struct ModelConfig {
  std::string family = "standard";   // standard | sps | reverse_sps | delayed_state
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t hidden_size = 0;           // d
  int64_t intermediate_size = 0;     // F
  int64_t vocab_size = 0;            // V (padded, includes PREDICT and PAD)
  int64_t block_size = 0;            // T, context in tokens
  int64_t window_size = 0;           // w (ignored by standard); >= T means 2× memory
  int64_t persistent_key_window = -1;  // ω analysis knob, -1 = off
  int32_t eos_token_id = 50256;
  int32_t predict_token_id = 50257;
  int32_t pad_token_id = 50303;
  double rope_theta = 10000.0;
  double norm_eps = 1e-6;
  double init_std = 0.02;

  int64_t head_dim() const { return hidden_size / n_head; }
  // V·d + L·(4d² + 3dF + 2d) + d
  int64_t parameter_count() const;
  // Throws UserError naming `source` and the field when a value is out of range.
  void validate(const std::string& source) const;
};

// One model field in which two configs differ: its name (`model.n_head`) and both values.
struct ModelFieldDifference {
  std::string field, first, second;
};
// Every field in which `a` and `b` differ, in declaration order (values compared exactly).
std::vector<ModelFieldDifference> model_config_differences(const ModelConfig& a,
                                                           const ModelConfig& b);

// Reads the `model:` mapping of a YAML node (unknown keys are errors).
ModelConfig model_config_from_yaml(const YAML::Node& model, const std::string& source);

// Loads a YAML file (either a bare model mapping or one with a `model:` section), then
// applies `section.key=value` overrides (`model.window_size=16`) and validates.
ModelConfig load_model_config(const std::string& path, const std::vector<std::string>& overrides);

}  // namespace sps
