#include "cli/model_files.h"

#include <cstdio>
#include <filesystem>

#include "train/checkpoint.h"
#include "util/error.h"

namespace sps::cli {

namespace {

namespace fs = std::filesystem;

std::string checkpoint_folder(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) fail("--checkpoint {}: no such folder", dir);
  if (fs::exists(fs::path(dir) / "model.safetensors", ec)) return dir;
  if (fs::is_directory(fs::path(dir) / "checkpoints", ec)) {
    std::vector<std::string> skipped;
    const std::string newest = find_newest_checkpoint(dir, &skipped);
    for (const std::string& note : skipped) std::fprintf(stderr, "sps: %s\n", note.c_str());
    if (newest.empty()) fail("--checkpoint {}: no complete checkpoint under its checkpoints/", dir);
    return newest;
  }
  fail("--checkpoint {}: neither a checkpoint folder (model.safetensors) nor a run folder "
       "(checkpoints/)",
       dir);
}

}  // namespace

ModelFiles resolve_model_files(const std::string& checkpoint, const std::string& weights,
                               const std::string& config) {
  ModelFiles m;
  if (!checkpoint.empty()) {
    if (!weights.empty() || !config.empty())
      fail("give either --checkpoint or --weights with --config, not both");
    const std::string dir = checkpoint_folder(checkpoint);
    m.weights_path = (fs::path(dir) / "model.safetensors").string();
    m.config_path = (fs::path(dir) / "config.yaml").string();
    std::error_code ec;
    if (!fs::exists(m.config_path, ec)) fail("--checkpoint {}: config.yaml is missing", dir);
  } else {
    if (weights.empty() || config.empty())
      fail("give --checkpoint DIR, or --weights FILE with --config FILE");
    m.weights_path = weights;
    m.config_path = config;
  }
  return m;
}

}  // namespace sps::cli
