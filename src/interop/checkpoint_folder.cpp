#include "interop/checkpoint_folder.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <functional>

#include "model/params.h"
#include "model/weights_io.h"
#include "train/checkpoint.h"
#include "train/optimizer.h"
#include "util/atomic_file.h"
#include "util/error.h"

namespace sps {

namespace fs = std::filesystem;

std::string model_config_yaml(const ModelConfig& c, const std::string& comment_text) {
  std::string comment = comment_text;  // one line, whatever the file name holds
  for (char& ch : comment)
    if (static_cast<unsigned char>(ch) < 0x20) ch = '?';
  return fmt::format(
      "# {}\n"
      "model:\n"
      "  family: {}\n  n_layer: {}\n  n_head: {}\n  hidden_size: {}\n  intermediate_size: {}\n"
      "  vocab_size: {}\n  block_size: {}\n  window_size: {}\n  eos_token_id: {}\n"
      "  predict_token_id: {}\n  pad_token_id: {}\n  rope_theta: {}\n  norm_eps: {}\n",
      comment, c.family, c.n_layer, c.n_head, c.hidden_size, c.intermediate_size, c.vocab_size,
      c.block_size, c.window_size, c.eos_token_id, c.predict_token_id, c.pad_token_id,
      c.rope_theta, c.norm_eps);
}

void write_folder_atomically(const std::string& out_dir,
                             const std::function<void(const std::string&)>& fill) {
  std::error_code ec;
  if (fs::exists(out_dir, ec)) fail("--out {}: already exists; remove it or choose another name", out_dir);
  const std::string tmp = out_dir + ".tmp." + std::to_string(::getpid());
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp, ec);
  if (ec) fail("--out {}: cannot create {}: {}", out_dir, tmp, ec.message());
  try {
    fill(tmp);
    if (std::rename(tmp.c_str(), out_dir.c_str()) != 0)
      fail("--out {}: cannot rename {} into place", out_dir, tmp);
  } catch (...) {
    fs::remove_all(tmp, ec);
    throw;
  }
}

void write_imported_checkpoint(const std::string& out_dir, const ImportedCheckpoint& ckpt,
                               const std::string& source) {
  const ParamTable table(ckpt.config);
  const std::string yaml = model_config_yaml(
      ckpt.config, fmt::format("imported by sps convert from {} (reference trainer, iter_num {})",
                               fs::path(source).filename().string(), ckpt.iter_num));
  const bool resumable = !ckpt.exp_avg.empty();
  write_folder_atomically(out_dir, [&](const std::string& tmp) {
    const std::string dir =
        resumable ? (fs::path(checkpoints_dir(tmp)) / kImportedCheckpointName).string() : tmp;
    std::error_code ec;
    fs::create_directories(dir, ec);
    if (ec) fail("--out {}: cannot create {}: {}", out_dir, dir, ec.message());
    save_weights(dir + "/model.safetensors", table, ckpt.weights.data(), yaml);
    write_file_atomically(dir + "/config.yaml", yaml);
    if (resumable) {
      AdamW optimizer(table, OptimizerSettings{});
      optimizer.set_moments(ckpt.exp_avg, ckpt.exp_avg_sq);
      optimizer.set_step(ckpt.optimizer_step);
      optimizer.save(dir + "/optimizer.safetensors");
      write_file_atomically(dir + "/trainer_state.json",
                            trainer_state_json(imported_trainer_state(ckpt.optimizer_step,
                                                                      ckpt.tokens_seen)));
    }
  });
}

}  // namespace sps
