#pragma once
// Writes an imported model as an sps checkpoint folder that `--checkpoint DIR` reads:
//   model.safetensors      weights under the names of docs/model.md §2 (F32), the config in
//                          its metadata
//   config.yaml            the model section
// When the import carried AdamW's state, OUT is instead a run folder whose one checkpoint,
// OUT/checkpoints/imported/, also holds
//   optimizer.safetensors  AdamW's moments and step
//   trainer_state.json     the step and tokens seen (train/checkpoint.h)
// so that `sps train --resume` with system.out_dir=OUT continues the run (`--checkpoint
// OUT` takes a run folder too).
// The folder is written under a temporary name and renamed into place, so a failure
// leaves nothing behind; an existing OUT is refused rather than replaced.
#include <functional>
#include <string>

#include "interop/reference_checkpoint.h"

namespace sps {

// The name of the checkpoint in a run folder written from an import with AdamW's state.
inline constexpr const char* kImportedCheckpointName = "imported";

// The `model:` section of a config file for `config`, with a comment line first.
std::string model_config_yaml(const ModelConfig& config, const std::string& comment);

void write_imported_checkpoint(const std::string& out_dir, const ImportedCheckpoint& checkpoint,
                               const std::string& source);

// Creates OUT.tmp.<pid>, lets `fill` write into it, then renames it to OUT. An existing
// OUT is an error; on any exception the temporary folder is removed.
void write_folder_atomically(const std::string& out_dir,
                             const std::function<void(const std::string&)>& fill);

}  // namespace sps
