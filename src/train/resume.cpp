#include "train/resume.h"

#include <cstdio>
#include <filesystem>
#include <system_error>
#include <vector>

#include "ops/backend.h"
#include "util/error.h"

namespace sps {

namespace fs = std::filesystem;

std::string claim_run_folder(const std::string& run_dir, bool resume,
                             std::optional<WriterLock>& lock) {
  std::error_code ec;
  fs::create_directories(run_dir, ec);
  if (ec) fail("{}: cannot create the run folder: {}", run_dir, ec.message());
  lock.emplace(folder_lock_path(run_dir), run_dir);
  remove_unfinished_checkpoints(run_dir);
  std::vector<std::string> skipped;
  const std::string newest = find_newest_checkpoint(run_dir, &skipped);
  if (resume)
    for (const std::string& note : skipped) std::fprintf(stderr, "sps: %s\n", note.c_str());
  const std::string metrics_path = (fs::path(run_dir) / "metrics.jsonl").string();
  if (!resume &&
      (!newest.empty() || (fs::exists(metrics_path, ec) && fs::file_size(metrics_path, ec) > 0)))
    fail("{}: already holds a run{}; pass --resume to continue it, or choose another "
         "system.out_dir",
         run_dir, newest.empty() ? "" : " (" + fs::path(newest).filename().string() + ")");
  return resume ? newest : "";
}

void read_checkpoint_into(const std::string& checkpoint, const TrainConfig& config, int ranks,
                          Model<float>& model, AdamW& optimizer, TrainerState& state) {
  const ParamTable& table = model.params();
  ops::on_host(model.backend(), model.weights(), size_t(table.total()), ops::HostAccess::write,
               [&](float* weights) {
                 state = load_checkpoint(checkpoint, config, ranks, table, weights, optimizer);
               });
}

bool agree_on_resume(Collective& collective, bool leader_resumed) {
  int64_t resumed = leader_resumed ? 1 : 0;
  if (collective.size() > 1) {
    double flag = double(resumed);
    collective.broadcast(&flag, sizeof flag, 0);
    resumed = int64_t(flag);
  }
  return resumed != 0;
}

void share_resumed_state(Collective& collective, Model<float>& model, AdamW& optimizer,
                         TrainerState& state) {
  if (collective.size() == 1) return;
  // Through host copies where the tensors live on a GPU.
  const int64_t P = model.params().total();
  for (float* tensor : {model.weights(), optimizer.exp_avg(), optimizer.exp_avg_sq()})
    ops::on_host(model.backend(), tensor, size_t(P), ops::HostAccess::read_write,
                 [&](float* host) { collective.broadcast(host, P * int64_t(sizeof(float)), 0); });
  std::string text = trainer_state_json(state);
  int64_t length = int64_t(text.size());
  collective.broadcast(&length, sizeof length, 0);
  text.resize(size_t(length));
  collective.broadcast(text.data(), length, 0);
  state = trainer_state_from_json(text, "trainer state from rank 0");
  optimizer.set_step(state.step);
}

}  // namespace sps
