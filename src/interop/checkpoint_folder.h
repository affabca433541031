#pragma once
// Writes an imported model as an sps checkpoint folder that `--checkpoint DIR` reads:
//   model.safetensors      weights under the names of docs/model.md §2 (F32), the config in
//                          its metadata
//   config.yaml            the model section
//   optimizer.safetensors  AdamW's moments and step, when the import carried them
// The folder is written under a temporary name and renamed into place, so a failure
// leaves nothing behind; an existing OUT is refused rather than replaced.
#include <functional>
#include <string>

#include "interop/reference_checkpoint.h"

namespace sps {

// The `model:` section of a config file for `config`, with a comment line first.
std::string model_config_yaml(const ModelConfig& config, const std::string& comment);

void write_imported_checkpoint(const std::string& out_dir, const ImportedCheckpoint& checkpoint,
                               const std::string& source);

// Creates OUT.tmp.<pid>, lets `fill` write into it, then renames it to OUT. An existing
// OUT is an error; on any exception the temporary folder is removed.
void write_folder_atomically(const std::string& out_dir,
                             const std::function<void(const std::string&)>& fill);

}  // namespace sps
