#include "train/checkpoint.h"

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "model/config.h"
#include "model/weights_io.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/read_file.h"
#include "util/safetensors.h"
#include "util/yaml_config.h"

namespace sps {

namespace fs = std::filesystem;

namespace {

void fsync_path(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) fail("{}: cannot open the folder: {}", path, std::strerror(errno));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) fail("{}: fsync failed: {}", path, std::strerror(err));
}

// Puts `from` in `to`'s place in one step. With an existing `to`, an exchange (the old
// folder then sits at `from` and is removed); where the file system has no exchange,
// `to` moves aside first, and a crash in between leaves it complete as `to.old`.
void replace_folder(const std::string& from, const std::string& to) {
  std::error_code ec;
  if (!fs::exists(to, ec)) {
    if (::rename(from.c_str(), to.c_str()) != 0)
      fail("{}: cannot rename to {}: {}", from, to, std::strerror(errno));
    return;
  }
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_EXCHANGE) == 0) {
    fs::remove_all(from, ec);
    return;
  }
  const std::string old = to + ".old";
  fs::remove_all(old, ec);
  if (::rename(to.c_str(), old.c_str()) != 0)
    fail("{}: cannot move aside: {}", to, std::strerror(errno));
  if (::rename(from.c_str(), to.c_str()) != 0)
    fail("{}: cannot rename to {}: {}", from, to, std::strerror(errno));
  fs::remove_all(old, ec);
}

template <typename T>
bool same(const T& a, const T& b) { return a == b; }

}  // namespace

TrainerState initial_trainer_state(const TrainConfig& config, int world_size) {
  const TrainingSettings& tc = config.training;
  TrainerState s;
  s.world_size = world_size;
  s.next_eval_tokens = tc.eval_total_tokens > 0 ? 0 : kNever;
  s.next_save_tokens = tc.save_every > 0 ? tc.save_every : kNever;
  s.next_rolling_tokens = tc.rolling_save_every > 0 ? tc.rolling_save_every : kNever;
  s.seed = tc.seed;
  s.chunk_shuffle_seed = tc.chunk_shuffle_seed;
  s.eval_seed = tc.eval_seed;
  return s;
}

TrainerState imported_trainer_state(int64_t step, int64_t tokens) {
  TrainerState s;
  s.step = step;
  s.tokens = tokens;
  s.reason = kImportedReason;
  return s;
}

std::string trainer_state_json(const TrainerState& s) {
  nlohmann::ordered_json j;
  j["step"] = s.step;
  j["tokens"] = s.tokens;
  j["sampler"] = {{"windows_per_rank", s.windows_per_rank}, {"world_size", s.world_size}};
  j["threads"] = s.threads;
  j["schedule"] = {{"next_eval_tokens", s.next_eval_tokens},
                   {"next_save_tokens", s.next_save_tokens},
                   {"next_rolling_tokens", s.next_rolling_tokens},
                   {"pre_decay_saved", s.pre_decay_saved}};
  j["metrics_bytes"] = s.metrics_bytes;
  j["reason"] = s.reason;
  if (s.reason == kImportedReason)
    j["note"] = "only step and tokens come from the other trainer; a resume takes the "
                "sampler position, schedule and seeds from its own config";
  j["rng"] = {{"seed", s.seed}, {"chunk_shuffle_seed", s.chunk_shuffle_seed},
              {"eval_seed", s.eval_seed},
              {"note", "no generator advances during training: weights are drawn once from "
                       "seed; chunk order and validation windows are recomputed from theirs"}};
  return j.dump(2) + "\n";
}

TrainerState trainer_state_from_json(const std::string& text, const std::string& source) {
  TrainerState s;
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    s.step = j.at("step").get<int64_t>();
    s.tokens = j.at("tokens").get<int64_t>();
    s.windows_per_rank = j.at("sampler").at("windows_per_rank").get<int64_t>();
    s.world_size = j.at("sampler").at("world_size").get<int>();
    const auto& schedule = j.at("schedule");
    s.next_eval_tokens = schedule.at("next_eval_tokens").get<int64_t>();
    s.next_save_tokens = schedule.at("next_save_tokens").get<int64_t>();
    s.next_rolling_tokens = schedule.at("next_rolling_tokens").get<int64_t>();
    s.pre_decay_saved = schedule.at("pre_decay_saved").get<bool>();
    s.metrics_bytes = j.at("metrics_bytes").get<int64_t>();
    s.threads = j.value("threads", 0);  // absent in states written before it was recorded
    s.reason = j.at("reason").get<std::string>();
    s.seed = j.at("rng").at("seed").get<int64_t>();
    s.chunk_shuffle_seed = j.at("rng").at("chunk_shuffle_seed").get<int64_t>();
    s.eval_seed = j.at("rng").at("eval_seed").get<int64_t>();
  } catch (const nlohmann::json::exception& e) {
    fail("{}: not a trainer state: {}", source, e.what());
  }
  if (s.step < 0 || s.tokens < 0 || s.windows_per_rank < 0 || s.world_size < 1)
    fail("{}: not a trainer state: negative counters", source);
  return s;
}

std::string checkpoints_dir(const std::string& run_dir) {
  return (fs::path(run_dir) / "checkpoints").string();
}

void write_checkpoint(const std::string& run_dir, const std::string& name,
                      const ParamTable& table, const float* weights, const AdamW& optimizer,
                      const TrainConfig& config, const TrainerState& state) {
  const std::string config_yaml = train_config_yaml(config);
  const std::string parent = checkpoints_dir(run_dir);
  const std::string final_dir = (fs::path(parent) / name).string();
  const std::string tmp = final_dir + ".tmp";
  std::error_code ec;
  fs::create_directories(parent, ec);
  if (ec) fail("{}: cannot create: {}", parent, ec.message());
  fs::remove_all(tmp, ec);
  fs::create_directory(tmp, ec);
  if (ec) fail("{}: cannot create: {}", tmp, ec.message());
  try {
    // The weights carry the model's recipe without the run's own settings (out_dir,
    // threads), so the same model trained in two folders is the same file.
    save_weights(tmp + "/model.safetensors", table, weights, train_config_yaml(config, false));
    optimizer.save(tmp + "/optimizer.safetensors");
    write_file_atomically(tmp + "/config.yaml", config_yaml);
    write_file_atomically(tmp + "/trainer_state.json", trainer_state_json(state));
    fsync_path(tmp);
    replace_folder(tmp, final_dir);
  } catch (...) {
    fs::remove_all(tmp, ec);  // a full disk must not leave a partial checkpoint behind
    throw;
  }
  fsync_path(parent);
}

std::string find_newest_checkpoint(const std::string& run_dir, std::vector<std::string>* skipped) {
  const std::string parent = checkpoints_dir(run_dir);
  std::error_code ec;
  if (!fs::is_directory(parent, ec)) return "";
  std::string best;
  int64_t best_step = -1;
  std::vector<fs::path> folders;
  for (const auto& entry : fs::directory_iterator(parent, ec))
    if (entry.is_directory() && entry.path().extension() != ".tmp") folders.push_back(entry.path());
  std::sort(folders.begin(), folders.end());  // ties go to the first name, deterministically
  for (const auto& folder : folders) {
    try {
      const std::string state_path = (folder / "trainer_state.json").string();
      if (!fs::exists(state_path)) fail("{}: missing", state_path);
      const TrainerState state = trainer_state_from_json(read_file(state_path), state_path);
      SafetensorsFile model((folder / "model.safetensors").string());
      SafetensorsFile optimizer((folder / "optimizer.safetensors").string());
      if (!fs::exists(folder / "config.yaml")) fail("{}: missing", (folder / "config.yaml").string());
      if (state.step > best_step) {
        best_step = state.step;
        best = folder.string();
      }
    } catch (const UserError& e) {
      // Incomplete or damaged: not a candidate, and the user hears why.
      if (skipped) skipped->push_back(fmt::format("skipped {}: {}", folder.string(), e.what()));
    }
  }
  return best;
}

void remove_unfinished_checkpoints(const std::string& run_dir) {
  const std::string parent = checkpoints_dir(run_dir);
  std::error_code ec;
  std::vector<fs::path> unfinished;
  for (const auto& entry : fs::directory_iterator(parent, ec))
    if (entry.path().extension() == ".tmp") unfinished.push_back(entry.path());
  for (const fs::path& path : unfinished) fs::remove_all(path, ec);
  remove_stale_temporaries(run_dir);
}

std::string trajectory_difference(const TrainConfig& there, const TrainConfig& here) {
  std::string diff;
  auto check = [&](const char* field, const auto& a, const auto& b) {
    if (diff.empty() && !same(a, b)) diff = fmt::format("{} is {} there, {} here", field, a, b);
  };
  const auto model = model_config_differences(there.model, here.model);
  if (!model.empty())
    return fmt::format("{} is {} there, {} here", model[0].field, model[0].first, model[0].second);
  const TrainingSettings &t1 = there.training, &t2 = here.training;
  check("training.global_batch_size", t1.global_batch_size, t2.global_batch_size);
  check("training.sampler_type", t1.sampler_type, t2.sampler_type);
  check("training.chunk_size_units", t1.chunk_size_units, t2.chunk_size_units);
  check("training.chunk_shuffle_seed", t1.chunk_shuffle_seed, t2.chunk_shuffle_seed);
  check("training.sampler_start_offset", t1.sampler_start_offset, t2.sampler_start_offset);
  check("training.seed", t1.seed, t2.seed);
  return diff;
}

namespace {

// The first multiple of `every` past `tokens`, or kNever when `every` is 0 (off).
int64_t next_after(int64_t tokens, int64_t every) {
  return every > 0 ? (tokens / every + 1) * every : kNever;
}

// Where a run of `config` stands after an imported checkpoint's steps: the sampler past
// the windows such a run would have read (in sps's order; the other trainer's order is not
// known here), an evaluation at once, and no checkpoint due for the tokens already behind.
TrainerState continue_imported(const TrainerState& imported, const TrainConfig& config,
                               int world_size) {
  const TrainingSettings& tc = config.training;
  TrainerState s = initial_trainer_state(config, world_size);
  s.step = imported.step;
  s.tokens = imported.tokens;
  s.reason = imported.reason;
  s.windows_per_rank = s.step * tc.global_batch_size / world_size;
  s.next_save_tokens = next_after(s.tokens, tc.save_every);
  s.next_rolling_tokens = next_after(s.tokens, tc.rolling_save_every);
  const int64_t decay_start = config.decay_start_tokens();
  s.pre_decay_saved = decay_start >= 0 && s.tokens > decay_start;
  return s;
}

}  // namespace

TrainerState load_checkpoint(const std::string& dir, const TrainConfig& config, int world_size,
                             const ParamTable& table, float* weights, AdamW& optimizer) {
  const std::string state_path = dir + "/trainer_state.json";
  TrainerState state = trainer_state_from_json(read_file(state_path), state_path);
  const bool imported = state.reason == kImportedReason;
  const std::string config_path = dir + "/config.yaml";
  TrainConfig there;
  if (imported) {
    // Another trainer's checkpoint records its model; the sampler and seeds are this run's.
    there = config;
    there.model = load_model_config(config_path, {});
    there.model.init_std = config.model.init_std;  // the weights are imported, not drawn
  } else {
    there = train_config_from_yaml(load_yaml_file(config_path), config_path);
  }
  const std::string diff = trajectory_difference(there, config);
  if (!diff.empty())
    fail("{}: the checkpoint belongs to another config: {} ({})", dir, diff,
         imported ? "the recipe must describe the imported model"
                  : "choose another system.out_dir for a new run");
  if (!imported && state.world_size != world_size)
    fail("{}: written by a run of {} processes, resumed with {}; the data split depends on it "
         "(resume with mpirun -np {})",
         dir, state.world_size, world_size, state.world_size);
  if (state.tokens != state.step * config.tokens_per_step())
    fail("{}: {} tokens after {} steps, but training.global_batch_size × model.block_size = "
         "{} × {} tokens per step make {}",
         state_path, state.tokens, state.step, config.training.global_batch_size,
         config.model.block_size, state.step * config.tokens_per_step());
  // The checkpoint's config agrees with its weights (and, above, with this run).
  const std::string weights_path = dir + "/model.safetensors";
  require_saved_model(weights_path, load_model_config(config_path, {}), config_path);
  const bool verified_weights = load_weights(weights_path, table, weights);
  const bool verified_moments = optimizer.load(dir + "/optimizer.safetensors");
  if (!verified_weights || !verified_moments)
    std::fprintf(stderr, "sps: %s\n", unverified_note(dir).c_str());
  if (optimizer.step() != state.step)
    fail("{}: the optimizer made {} updates, the trainer state says {} steps", dir,
         optimizer.step(), state.step);
  return imported ? continue_imported(state, config, world_size) : state;
}

}  // namespace sps
