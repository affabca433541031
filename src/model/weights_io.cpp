#include "model/weights_io.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
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
WeightsFileReader<T>::WeightsFileReader(const std::string& path, const ParamTable& table)
    : file_(std::make_unique<SafetensorsFile>(path)), table_(table),
      checked_(table.entries().size(), false) {
  std::set<std::string> expected;
  for (const auto& e : table.entries()) expected.insert(e.name);
  for (const auto& info : file_->header().tensors) {
    if (info.name == "lm_head.weight") continue;  // the tied head, if a writer stored it
    if (!expected.count(info.name))
      fail("{}: unexpected tensor '{}' (not a parameter of this model config)", path, info.name);
  }
  for (const auto& e : table.entries()) {
    const TensorInfo* info = file_->find(e.name);
    if (!info) fail("{}: missing tensor '{}'", path, e.name);
    if (info->shape != e.shape)
      fail("{}: tensor '{}' has shape {}, the config expects {}", path, e.name,
           shape_text(info->shape), shape_text(e.shape));
    if (info->dtype != DType::F32 && info->dtype != DType::F64 && info->dtype != DType::BF16)
      fail("{}: tensor '{}' has dtype {}, expected F32, F64 or BF16", path, e.name,
           dtype_name(info->dtype));
  }
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

template <typename T>
WeightsFileReader<T>::~WeightsFileReader() = default;

template <typename T>
bool WeightsFileReader<T>::verified() const {
  return file_->has_checksums();
}

template <typename T>
void WeightsFileReader<T>::read(int64_t offset, int64_t count, T* out) const {
  for (size_t i = 0; i < table_.entries().size(); ++i) {
    const ParamEntry& e = table_.entries()[i];
    const int64_t first = std::max(offset, e.offset),
                  last = std::min(offset + count, e.offset + e.numel);
    if (first >= last) continue;
    T* values = out + (first - offset);
    // A whole tensor is verified as it is read; a part of one, by a pass of its own first.
    const bool whole = last - first == e.numel;
    if (!whole && !checked_[i]) file_->verify(e.name);
    checked_[i] = true;
    file_->read_into(e.name, values, first - e.offset, last - first);
    for (int64_t k = 0; k < last - first; ++k)
      // A NaN or Inf weight would only show as NaN scores or garbage text much later (a
      // finite F64 beyond float's range becomes Inf here too).
      if (!std::isfinite(values[k]))
        fail("{}: tensor '{}' holds a non-finite value ({}) at index {}", file_->path(), e.name,
             values[k], first - e.offset + k);
  }
}

template <typename T>
bool load_weights(const std::string& path, const ParamTable& table, T* weights) {
  const WeightsFileReader<T> file(path, table);
  file.read(0, table.total(), weights);
  return file.verified();
}

template <typename T>
bool load_weights_for_inference(const std::string& path, Model<T>& model, ops::WeightType type) {
  const WeightsFileReader<T> file(path, model.params());
  model.load_for_inference(type, [&](int64_t offset, int64_t count, T* out) {
    file.read(offset, count, out);
  });
  return file.verified();
}

template bool load_weights_for_inference<float>(const std::string&, Model<float>&,
                                                ops::WeightType);
template class WeightsFileReader<float>;
template class WeightsFileReader<double>;
template void save_weights<float>(const std::string&, const ParamTable&, const float*,
                                  const std::string&);
template void save_weights<double>(const std::string&, const ParamTable&, const double*,
                                   const std::string&);
template bool load_weights<float>(const std::string&, const ParamTable&, float*);
template bool load_weights<double>(const std::string&, const ParamTable&, double*);

}  // namespace sps
