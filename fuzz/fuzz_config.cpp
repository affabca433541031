// libFuzzer target: the YAML configs sps reads — a model config and a training recipe — on
// arbitrary text. A YAML syntax error (which load_yaml_file turns into one line) or a
// UserError is the expected answer to bad input; any other exception, crash or sanitizer
// report is a bug, and so is a model config that validates with a size the model cannot have.
#include <yaml-cpp/yaml.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "model/config.h"
#include "train/train_config.h"
#include "util/error.h"
#include "util/yaml_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception&) {
    return 0;
  }
  try {
    const sps::ModelConfig c =
        sps::model_config_from_yaml(root.IsMap() && root["model"] ? root["model"] : root, "fuzz");
    c.validate("fuzz");
    if (c.n_layer <= 0 || c.hidden_size % c.n_head != 0 || c.parameter_count() <= 0)
      __builtin_trap();
  } catch (const sps::UserError&) {
  }
  try {
    sps::train_config_from_yaml(root, "fuzz");
  } catch (const sps::UserError&) {
  }
  // The first line as a `section.key=value` override of the document.
  try {
    YAML::Node copy = YAML::Clone(root);
    sps::apply_override(copy, text.substr(0, text.find('\n')), "fuzz");
  } catch (const sps::UserError&) {
  }
  return 0;
}
