#pragma once
// Checkpoints of the paper's reference trainer (`ckpt.pt`, `ckpt_tokens_N.pt`,
// `..._final.pt`): a torch.save dict with `model` (state dict; keys may carry
// torch.compile's `_orig_mod.` prefix; the tied embedding appears as both
// transformer.wte.weight and lm_head.weight), `model_args` (the model config dataclass),
// `optimizer` (torch.optim.AdamW's state dict), `iter_num` (optimizer steps done),
// `last_save_tokens` (the tokens seen: iter_num × global_batch_size × block_size),
// `config` (the run's whole configuration; config.model._target_ names the model class,
// hence the family) and sampler/RNG state, which is not needed here.
#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"

namespace sps {

struct ImportOptions {
  std::string family;    // --family: used when the checkpoint does not say; must agree if it does
  int64_t window = -1;   // --window: likewise
  bool with_optimizer = false;
};

struct ImportedCheckpoint {
  ModelConfig config;
  std::vector<float> weights;  // ParamTable order
  std::string family_from;     // where the family came from, for the summary line
  int64_t iter_num = 0;
  // With ImportOptions::with_optimizer: AdamW's moments in ParamTable order, its step (the
  // same as iter_num) and the tokens seen, for `sps train --resume`.
  std::vector<float> exp_avg, exp_avg_sq;
  int64_t optimizer_step = 0;
  int64_t tokens_seen = 0;
};

// Reads and checks everything; nothing is written. UserError names the file and the field.
ImportedCheckpoint import_reference_checkpoint(const std::string& path, const ImportOptions& options);

}  // namespace sps
