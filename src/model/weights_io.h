#pragma once
// Model weights as safetensors under the parameter names of docs/model.md §2 (the tied LM
// head is stored once, as transformer.wte.weight). Loading checks every name, shape and
// dtype against the config and throws UserError with one line naming the file and the
// tensor.
#include <string>

#include "model/config.h"
#include "model/params.h"

namespace sps {

// Saves `weights` (flat, in table order) as F32 tensors, atomically. `config_yaml` is kept
// in the file's metadata so a weights file says what model it belongs to.
template <typename T>
void save_weights(const std::string& path, const ParamTable& table, const T* weights,
                  const std::string& config_yaml = "");

// Loads F32, F64 or BF16 tensors into `weights`. Missing, extra, misshapen tensors and
// unsupported dtypes are errors, and so is a tensor that fails its checksum
// (util/safetensors.h). Returns whether the file had checksums to verify (files written
// before sps recorded them have none: the caller notes that, util's unverified_note).
template <typename T>
bool load_weights(const std::string& path, const ParamTable& table, T* weights);

// The model a weights file was saved with decides what it is: `config` (read from
// `config_source`) must equal the model section stored in the file's metadata in every
// field but model.persistent_key_window (an analysis setting applied when the model runs).
// A difference is a UserError naming the field and both values; a file that stores no model
// section (another tool's) passes.
void require_saved_model(const std::string& weights_path, const ModelConfig& config,
                         const std::string& config_source);

}  // namespace sps
