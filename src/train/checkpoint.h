#pragma once
// Training checkpoints. Each is a folder under RUN/checkpoints/:
//   model.safetensors      weights (names of docs/model.md §2, F32), the resolved config in
//                          its metadata
//   optimizer.safetensors  AdamW's exp_avg / exp_avg_sq per parameter, the update count
//   config.yaml            the resolved config of the run
//   trainer_state.json     step, tokens, sampler position, schedule counters, seeds
// Names: `latest` (rolling, and the one SIGINT/SIGTERM write), `tokens_NNNNNNNNNNNN` (every
// training.save_every tokens), `pre_decay` (where the LR decay starts), `final`; and
// `imported`, which `sps convert --with-optimizer` writes from another trainer's checkpoint.
//
// Writing is atomic per folder: everything goes to NAME.tmp/ (each file fsynced, the
// trainer state last), then NAME.tmp/ takes NAME's place in one rename (an exchange where
// the file system supports it), so a crash at any moment leaves the previous NAME intact.
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "model/params.h"
#include "train/optimizer.h"
#include "train/train_config.h"

namespace sps {

// A schedule counter that never comes due.
inline constexpr int64_t kNever = std::numeric_limits<int64_t>::max();

// The `reason` of a checkpoint written by `sps convert --with-optimizer` from another
// trainer's file.
inline constexpr const char* kImportedReason = "imported";

struct TrainerState {
  int64_t step = 0;               // optimizer steps done
  int64_t tokens = 0;             // step · tokens_per_step
  int64_t windows_per_rank = 0;   // sampler position: windows each rank has consumed
  int world_size = 1;             // processes of the run (the data split depends on it)
  int threads = 0;                // OpenMP threads per process (0: not recorded); reduction
                                  // orders, and so the last bits of a step, depend on it
  int64_t next_eval_tokens = 0;   // the schedule's counters, so a resume continues it
  int64_t next_save_tokens = 0;
  int64_t next_rolling_tokens = 0;
  bool pre_decay_saved = false;
  int64_t metrics_bytes = 0;      // metrics.jsonl's length at this point (resume truncates)
  std::string reason;             // latest | named | pre_decay | final | interrupted | imported
  // The seeds of every random stream. Weights are drawn once from `seed`; the sampler's
  // chunk order and the validation windows are recomputed from theirs, so no generator
  // state changes during training.
  int64_t seed = 0, chunk_shuffle_seed = 0, eval_seed = 0;
};

// The state of a run of `config` on `world_size` processes before its first step.
TrainerState initial_trainer_state(const TrainConfig& config, int world_size);

// The state of a checkpoint imported from another trainer: its step and tokens seen, which
// that trainer's file records. Its data order, RNG streams and schedule are not sps's, so
// nothing else is kept: load_checkpoint takes the rest from the resuming run's config.
TrainerState imported_trainer_state(int64_t step, int64_t tokens);

std::string trainer_state_json(const TrainerState& state);
TrainerState trainer_state_from_json(const std::string& text, const std::string& source);

// Where the checkpoints of a run folder live.
std::string checkpoints_dir(const std::string& run_dir);

// Writes one checkpoint folder atomically. `weights` in ParamTable order.
void write_checkpoint(const std::string& run_dir, const std::string& name,
                      const ParamTable& table, const float* weights, const AdamW& optimizer,
                      const TrainConfig& config, const TrainerState& state);

// The checkpoint with the most steps among the complete, readable ones (folders whose
// trainer state parses and whose safetensors files open); empty when there is none. Each
// folder passed over is named in `skipped`, with the reason, when given.
std::string find_newest_checkpoint(const std::string& run_dir,
                                   std::vector<std::string>* skipped = nullptr);

// Removes what an interrupted writer left in a run folder: checkpoint folders still named
// `*.tmp` and temporary files of ended processes. Only for the folder's lock holder.
void remove_unfinished_checkpoints(const std::string& run_dir);

// Reads a checkpoint into `weights` and `optimizer`, after checking that it was written for
// a config compatible with `config` (same model, batch, data order and seed) and with
// `world_size` processes; a mismatch is a UserError naming the checkpoint and the field.
// An imported checkpoint must match the model and the tokens per step; its sampler
// position and schedule are those a run of `config` would have after the same steps.
TrainerState load_checkpoint(const std::string& dir, const TrainConfig& config, int world_size,
                             const ParamTable& table, float* weights, AdamW& optimizer);

// "" when `a` and `b` describe the same training trajectory, else the first difference
// ("model.family is sps there, standard here").
std::string trajectory_difference(const TrainConfig& there, const TrainConfig& here);

}  // namespace sps
