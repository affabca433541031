#pragma once
// When the trainer writes which checkpoint (names in checkpoint.h): the schedule of
// training.save_every, the LR decay's start and training.rolling_save_every, kept apart
// from the loop so that the policy reads in one place.
#include <cstdint>
#include <string>
#include <vector>

#include "train/checkpoint.h"
#include "train/train_config.h"

namespace sps {

struct DueCheckpoint {
  std::string name;    // the folder under checkpoints/
  const char* reason;  // TrainerState::reason of what it holds
};

// `tokens_NNNNNNNNNNNN`: the checkpoint written every training.save_every tokens.
std::string named_checkpoint(int64_t tokens);

// The checkpoints due at the step boundary after `state.step` (> 0) steps, in the order
// they are written: named, pre_decay, latest. Advances the state's counters past them, so
// each comes due once, and a resume (which restores the counters) continues the schedule.
std::vector<DueCheckpoint> due_checkpoints(const TrainConfig& config, TrainerState& state);

}  // namespace sps
