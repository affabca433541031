#pragma once
// Starting a run in its folder, or continuing it. Rank 0 owns the folder and reads the
// checkpoint; the other ranks take what it read, so that every rank continues from the
// same weights, moments and trainer state.
#include <optional>
#include <string>

#include "model/model.h"
#include "train/checkpoint.h"
#include "train/collective.h"
#include "train/optimizer.h"
#include "train/train_config.h"
#include "util/writer_lock.h"

namespace sps {

// Rank 0 takes the run folder for the whole run (`lock`: one trainer per folder) and tidies
// what an interrupted writer left. Returns the checkpoint to resume from ("" when there is
// none). A folder that already holds a run is refused unless `resume`: nothing is
// overwritten.
std::string claim_run_folder(const std::string& run_dir, bool resume,
                             std::optional<WriterLock>& lock);

// Rank 0 reads `checkpoint` into the model's weights (in the backend's memory), the
// optimizer and the trainer state.
void read_checkpoint_into(const std::string& checkpoint, const TrainConfig& config, int ranks,
                          Model<float>& model, AdamW& optimizer, TrainerState& state);

// Whether rank 0 resumed, on every rank: all must take the same branch.
bool agree_on_resume(Collective& collective, bool leader_resumed);

// Rank 0 alone read the checkpoint: the other ranks take its weights, AdamW moments and
// trainer state. Every rank takes the state as rank 0's JSON says it. Nothing to do with
// one process.
void share_resumed_state(Collective& collective, Model<float>& model, AdamW& optimizer,
                         TrainerState& state);

}  // namespace sps
