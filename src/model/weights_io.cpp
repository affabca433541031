#include "model/weights_io.h"

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
    : file_(std::make_unique<SafetensorsFile>(path)), table_(table) {
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

template <typename T>
WeightsFileReader<T>::~WeightsFileReader() = default;

template <typename T>
void WeightsFileReader<T>::read(int64_t offset, int64_t count, T* out) const {
  for (const ParamEntry& e : table_.entries()) {
    const int64_t first = std::max(offset, e.offset),
                  last = std::min(offset + count, e.offset + e.numel);
    if (first >= last) continue;
    T* values = out + (first - offset);
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
void load_weights(const std::string& path, const ParamTable& table, T* weights) {
  WeightsFileReader<T>(path, table).read(0, table.total(), weights);
}

template <typename T>
void load_weights_for_inference(const std::string& path, Model<T>& model, ops::WeightType type) {
  const WeightsFileReader<T> file(path, model.params());
  model.load_for_inference(type, [&](int64_t offset, int64_t count, T* out) {
    file.read(offset, count, out);
  });
}

template void load_weights_for_inference<float>(const std::string&, Model<float>&,
                                                ops::WeightType);
template class WeightsFileReader<float>;
template class WeightsFileReader<double>;
template void save_weights<float>(const std::string&, const ParamTable&, const float*,
                                  const std::string&);
template void save_weights<double>(const std::string&, const ParamTable&, const double*,
                                   const std::string&);
template void load_weights<float>(const std::string&, const ParamTable&, float*);
template void load_weights<double>(const std::string&, const ParamTable&, double*);

}  // namespace sps
