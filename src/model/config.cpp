#include "model/config.h"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <limits>

#include "model/family.h"
#include "util/error.h"
#include "util/yaml_config.h"

namespace sps {

namespace {

const std::vector<std::string> kModelKeys = {
    "family",        "n_layer",          "n_head",       "hidden_size",
    "intermediate_size", "vocab_size",   "block_size",   "window_size",
    "persistent_key_window", "eos_token_id", "predict_token_id", "pad_token_id",
    "rope_theta",    "norm_eps",         "init_std"};

// Shapes without which no model exists; the rest have defaults.
const std::vector<std::string> kRequiredKeys = {"n_layer",           "n_head",     "hidden_size",
                                                "intermediate_size", "vocab_size", "block_size"};

__int128 parameter_count_wide(const ModelConfig& c) {
  const __int128 d = c.hidden_size, L = c.n_layer, F = c.intermediate_size, V = c.vocab_size;
  return V * d + L * (4 * d * d + 3 * d * F + 2 * d) + d;
}

}  // namespace

int64_t ModelConfig::parameter_count() const {
  __int128 count = parameter_count_wide(*this);
  SPS_ASSERT(count >= 0 && count <= std::numeric_limits<int64_t>::max());
  return static_cast<int64_t>(count);
}

void ModelConfig::validate(const std::string& source) const {
  try {
    family_by_name(family);
  } catch (const UserError& e) {
    fail("{}: {}", source, e.what());
  }
  const std::pair<const char*, int64_t> positive[] = {
      {"n_layer", n_layer},       {"n_head", n_head},         {"hidden_size", hidden_size},
      {"intermediate_size", intermediate_size}, {"vocab_size", vocab_size},
      {"block_size", block_size}};
  for (const auto& [name, value] : positive)
    if (value <= 0) fail("{}: model.{}: must be > 0, got {}", source, name, value);
  if (hidden_size % n_head != 0)
    fail("{}: model.hidden_size: {} is not divisible by model.n_head = {}", source, hidden_size,
         n_head);
  if (head_dim() % 2 != 0)
    fail("{}: model.hidden_size: the head size hidden_size / n_head = {} must be even (RoPE "
         "rotates pairs)",
         source, head_dim());
  if (vocab_size > std::numeric_limits<int32_t>::max())
    fail("{}: model.vocab_size: {} is over the limit of {}", source, vocab_size,
         std::numeric_limits<int32_t>::max());
  if (window_size < 0) fail("{}: model.window_size: must be >= 0, got {}", source, window_size);
  if (persistent_key_window < -1)
    fail("{}: model.persistent_key_window: must be >= 0, or -1 for off, got {}", source,
         persistent_key_window);

  const std::pair<const char*, int32_t> ids[] = {
      {"eos_token_id", eos_token_id},
      {"predict_token_id", predict_token_id},
      {"pad_token_id", pad_token_id}};
  for (size_t i = 0; i < 3; ++i) {
    if (ids[i].second < 0 || ids[i].second >= vocab_size)
      fail("{}: model.{}: {} is outside the vocabulary [0, {})", source, ids[i].first,
           ids[i].second, vocab_size);
    for (size_t j = 0; j < i; ++j)
      if (ids[i].second == ids[j].second)
        fail("{}: model.{}: {} is also model.{}; the special ids must differ", source,
             ids[i].first, ids[i].second, ids[j].first);
  }

  if (!(rope_theta > 0) || !std::isfinite(rope_theta))
    fail("{}: model.rope_theta: must be > 0, got {}", source, rope_theta);
  if (!(norm_eps > 0) || !std::isfinite(norm_eps))
    fail("{}: model.norm_eps: must be > 0, got {}", source, norm_eps);
  if (!(init_std >= 0) || !std::isfinite(init_std))
    fail("{}: model.init_std: must be >= 0, got {}", source, init_std);
  // Training holds 16 bytes per parameter (weights, gradients, two AdamW moments).
  if (parameter_count_wide(*this) > std::numeric_limits<int64_t>::max() / 16)
    fail("{}: model: {} parameters; these shapes are too large for any machine", source,
         static_cast<double>(parameter_count_wide(*this)));
}

std::vector<ModelFieldDifference> model_config_differences(const ModelConfig& a,
                                                           const ModelConfig& b) {
  std::vector<ModelFieldDifference> out;
  auto check = [&](const char* field, const auto& x, const auto& y) {
    if (!(x == y)) out.push_back({field, fmt::format("{}", x), fmt::format("{}", y)});
  };
  check("model.family", a.family, b.family);
  check("model.n_layer", a.n_layer, b.n_layer);
  check("model.n_head", a.n_head, b.n_head);
  check("model.hidden_size", a.hidden_size, b.hidden_size);
  check("model.intermediate_size", a.intermediate_size, b.intermediate_size);
  check("model.vocab_size", a.vocab_size, b.vocab_size);
  check("model.block_size", a.block_size, b.block_size);
  check("model.window_size", a.window_size, b.window_size);
  check("model.persistent_key_window", a.persistent_key_window, b.persistent_key_window);
  check("model.eos_token_id", a.eos_token_id, b.eos_token_id);
  check("model.predict_token_id", a.predict_token_id, b.predict_token_id);
  check("model.pad_token_id", a.pad_token_id, b.pad_token_id);
  check("model.rope_theta", a.rope_theta, b.rope_theta);
  check("model.norm_eps", a.norm_eps, b.norm_eps);
  check("model.init_std", a.init_std, b.init_std);
  return out;
}

ModelConfig model_config_from_yaml(const YAML::Node& model, const std::string& source) {
  if (!model.IsMap()) {
    std::string got = !model.IsDefined() || model.IsNull() ? "nothing"
                      : model.IsSequence()                 ? "a sequence"
                                                           : "'" + model.Scalar() + "'";
    fail("{}: model: expected a mapping of model settings, got {}", source, got);
  }
  check_yaml_keys(model, kModelKeys, source, "model");
  for (const std::string& key : kRequiredKeys)
    if (!model[key]) fail("{}: model.{}: missing (required)", source, key);

  ModelConfig c;
  auto field = [](const std::string& key) { return "model." + key; };
  auto read_int = [&](const char* key, int64_t* out) {
    if (const YAML::Node node = model[key]) *out = yaml_int(node, source, field(key));
  };
  auto read_id = [&](const char* key, int32_t* out) {
    if (const YAML::Node node = model[key]) {
      int64_t value = yaml_int(node, source, field(key));
      if (value < std::numeric_limits<int32_t>::min() || value > std::numeric_limits<int32_t>::max())
        fail("{}: model.{}: {} is out of range", source, key, value);
      *out = static_cast<int32_t>(value);
    }
  };
  auto read_double = [&](const char* key, double* out) {
    if (const YAML::Node node = model[key]) *out = yaml_double(node, source, field(key));
  };

  if (const YAML::Node node = model["family"]) c.family = yaml_string(node, source, "model.family");
  read_int("n_layer", &c.n_layer);
  read_int("n_head", &c.n_head);
  read_int("hidden_size", &c.hidden_size);
  read_int("intermediate_size", &c.intermediate_size);
  read_int("vocab_size", &c.vocab_size);
  read_int("block_size", &c.block_size);
  read_int("window_size", &c.window_size);
  if (const YAML::Node node = model["persistent_key_window"]) {
    // null (as in the golden cases) means off, like -1.
    c.persistent_key_window =
        node.IsNull() ? -1 : yaml_int(node, source, "model.persistent_key_window");
  }
  read_id("eos_token_id", &c.eos_token_id);
  read_id("predict_token_id", &c.predict_token_id);
  read_id("pad_token_id", &c.pad_token_id);
  read_double("rope_theta", &c.rope_theta);
  read_double("norm_eps", &c.norm_eps);
  read_double("init_std", &c.init_std);
  return c;
}

ModelConfig load_model_config(const std::string& path, const std::vector<std::string>& overrides) {
  const YAML::Node root = load_yaml_file(path);
  if (!root.IsMap()) {
    fail("{}: expected a mapping of model settings (or a model: section), got {}", path,
         !root.IsDefined() || root.IsNull() ? std::string("an empty file")
                                            : std::string("something else"));
  }
  // Work on a document of the form {model: {...}} so overrides address `model.*` either way.
  YAML::Node doc;
  if (root["model"]) {
    doc["model"] = YAML::Clone(root["model"]);
  } else {
    doc["model"] = YAML::Clone(root);
  }
  for (const std::string& o : overrides) {
    if (o.rfind("model.", 0) != 0)
      fail("override '{}': a model config takes only model.* overrides (e.g. "
           "model.window_size=16)",
           o);
    apply_override(doc, o);
  }
  ModelConfig config = model_config_from_yaml(doc["model"], path);
  config.validate(path);
  return config;
}

}  // namespace sps
