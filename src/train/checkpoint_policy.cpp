#include "train/checkpoint_policy.h"

#include <fmt/format.h>

namespace sps {

std::string named_checkpoint(int64_t tokens) { return fmt::format("tokens_{:012}", tokens); }

std::vector<DueCheckpoint> due_checkpoints(const TrainConfig& config, TrainerState& state) {
  const auto& tc = config.training;
  std::vector<DueCheckpoint> due;
  if (state.tokens >= state.next_save_tokens) {
    due.push_back({named_checkpoint(state.tokens), "named"});
    while (state.next_save_tokens <= state.tokens) state.next_save_tokens += tc.save_every;
  }
  const int64_t decay_start = config.decay_start_tokens();
  if (decay_start >= 0 && !state.pre_decay_saved && state.tokens >= decay_start) {
    due.push_back({"pre_decay", "pre_decay"});
    state.pre_decay_saved = true;
  }
  if (state.tokens >= state.next_rolling_tokens) {
    due.push_back({"latest", "latest"});
    while (state.next_rolling_tokens <= state.tokens)
      state.next_rolling_tokens += tc.rolling_save_every;
  }
  return due;
}

}  // namespace sps
