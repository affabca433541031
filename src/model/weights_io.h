#pragma once
// Model weights as safetensors under the parameter names of docs/model.md §2 (the tied LM
// head is stored once, as transformer.wte.weight). Loading checks every name, shape and
// dtype against the config and throws UserError with one line naming the file and the
// tensor.
#include <memory>
#include <string>

#include "model/model.h"
#include "model/params.h"

namespace sps {

class SafetensorsFile;

// Saves `weights` (flat, in table order) as F32 tensors, atomically. `config_yaml` is kept
// in the file's metadata so a weights file says what model it belongs to.
template <typename T>
void save_weights(const std::string& path, const ParamTable& table, const T* weights,
                  const std::string& config_yaml = "");

// A weights file checked against `table` when opened: missing, extra, misshapen tensors and
// dtypes other than F32, F64 or BF16 are errors. read(offset, count, out) converts the
// weights [offset, offset + count) of the table's flat order (spanning tensors as needed)
// into out; a non-finite value is an error naming the tensor and index.
template <typename T>
class WeightsFileReader {
 public:
  WeightsFileReader(const std::string& path, const ParamTable& table);
  ~WeightsFileReader();
  void read(int64_t offset, int64_t count, T* out) const;

 private:
  std::unique_ptr<SafetensorsFile> file_;
  const ParamTable& table_;
};

// Loads every tensor of the file into `weights` (flat, in table order).
template <typename T>
void load_weights(const std::string& path, const ParamTable& table, T* weights);

// Loads the file into a model made with Model::InitialWeights::unset for inference, its
// projections packed in `type` as they are read (Model::load_for_inference).
template <typename T>
void load_weights_for_inference(const std::string& path, Model<T>& model, ops::WeightType type);

}  // namespace sps
