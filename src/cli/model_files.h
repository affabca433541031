#pragma once
// Where a model's weights and config come from on the command line: --checkpoint DIR (a
// checkpoint folder, or a run folder whose newest complete checkpoint is taken) or
// --weights FILE with --config FILE. Bad combinations and folders are UserErrors.
#include <string>

namespace sps::cli {

struct ModelFiles {
  std::string weights_path, config_path;
};

ModelFiles resolve_model_files(const std::string& checkpoint, const std::string& weights,
                               const std::string& config);

}  // namespace sps::cli
