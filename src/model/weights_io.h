#pragma once
// Model weights as safetensors under the parameter names of docs/model.md §2 (the tied LM
// head is stored once, as transformer.wte.weight). Loading checks every name, shape and
// dtype against the config and throws UserError with one line naming the file and the
// tensor.
#include <string>

#include "model/params.h"

namespace sps {

// Saves `weights` (flat, in table order) as F32 tensors, atomically. `config_yaml` is kept
// in the file's metadata so a weights file says what model it belongs to.
template <typename T>
void save_weights(const std::string& path, const ParamTable& table, const T* weights,
                  const std::string& config_yaml = "");

// Loads F32, F64 or BF16 tensors into `weights`. Missing, extra, misshapen tensors and
// unsupported dtypes are errors.
template <typename T>
void load_weights(const std::string& path, const ParamTable& table, T* weights);

}  // namespace sps
