#include "model/weights_io.h"

#include <yaml-cpp/yaml.h>

#include <cmath>
#include <set>
#include <vector>

#include "util/error.h"
#include "util/safetensors.h"

namespace sps {

namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

}  // namespace

template <typename T>
void save_weights(const std::string& path, const ParamTable& table, const T* weights,
                  const std::string& config_yaml) {
  std::vector<float> staged;  // F32 on disk whatever T is
  const float* source = nullptr;
  if constexpr (std::is_same_v<T, float>) {
    source = weights;
  } else {
    staged.assign(weights, weights + table.total());
    source = staged.data();
  }
  std::vector<TensorToWrite> tensors;
  for (const auto& e : table.entries())
    tensors.push_back({e.name, DType::F32, e.shape, source + e.offset});
  std::map<std::string, std::string> metadata{{"format", "sps"}};
  if (!config_yaml.empty()) metadata["config"] = config_yaml;
  write_safetensors(path, tensors, metadata);
}

template <typename T>
bool load_weights(const std::string& path, const ParamTable& table, T* weights) {
  SafetensorsFile file(path);
  std::set<std::string> expected;
  for (const auto& e : table.entries()) expected.insert(e.name);
  for (const auto& info : file.header().tensors) {
    if (info.name == "lm_head.weight") continue;  // the tied head, if a writer stored it
    if (!expected.count(info.name))
      fail("{}: unexpected tensor '{}' (not a parameter of this model config)", path, info.name);
  }
  for (const auto& e : table.entries()) {
    const TensorInfo* info = file.find(e.name);
    if (!info) fail("{}: missing tensor '{}'", path, e.name);
    if (info->shape != e.shape)
      fail("{}: tensor '{}' has shape {}, the config expects {}", path, e.name,
           shape_text(info->shape), shape_text(e.shape));
    if (info->dtype != DType::F32 && info->dtype != DType::F64 && info->dtype != DType::BF16)
      fail("{}: tensor '{}' has dtype {}, expected F32, F64 or BF16", path, e.name,
           dtype_name(info->dtype));
    T* values = weights + e.offset;
    file.read_into(e.name, values);
    for (int64_t k = 0; k < e.numel; ++k)
      // A NaN or Inf weight would only show as NaN scores or garbage text much later (a
      // finite F64 beyond float's range becomes Inf here too).
      if (!std::isfinite(values[k]))
        fail("{}: tensor '{}' holds a non-finite value ({}) at index {}", path, e.name,
             values[k], k);
  }
  return file.has_checksums();
}

void require_saved_model(const std::string& weights_path, const ModelConfig& config,
                         const std::string& config_source) {
  const SafetensorsFile file(weights_path);
  const auto it = file.header().metadata.find("config");
  if (it == file.header().metadata.end()) return;
  YAML::Node saved;
  try {
    saved = YAML::Load(it->second);
  } catch (const YAML::Exception&) {
    fail("{}: the config in its metadata is not YAML", weights_path);
  }
  if (saved.IsMap() && saved["model"]) saved = saved["model"];  // a whole recipe, or its model
  const ModelConfig stored = model_config_from_yaml(saved, weights_path + " (metadata)");
  for (const ModelFieldDifference& d : model_config_differences(stored, config)) {
    if (d.field == "model.persistent_key_window") continue;
    fail("{} was saved with {} = {}, but {} says {}; the model stored with the weights decides "
         "(restore the config's value)",
         weights_path, d.field, d.first, config_source, d.second);
  }
}

template void save_weights<float>(const std::string&, const ParamTable&, const float*,
                                  const std::string&);
template void save_weights<double>(const std::string&, const ParamTable&, const double*,
                                   const std::string&);
template bool load_weights<float>(const std::string&, const ParamTable&, float*);
template bool load_weights<double>(const std::string&, const ParamTable&, double*);

}  // namespace sps
