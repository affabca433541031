#pragma once
// The training loop (docs/model.md §5–§6): micro-batches with gradient accumulation, data-parallel
// gradient averaging, clipping, AdamW, the token-based LR schedule, validation, metrics,
// checkpoints and exact resumption.
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/model.h"
#include "train/collective.h"
#include "train/optimizer.h"
#include "train/train_config.h"
#include "util/progress.h"

namespace sps {

class TokenFile;

struct TrainOptions {
  bool resume = false;           // continue from the run folder's newest good checkpoint
  int64_t stop_after_steps = 0;  // > 0: after this many steps in this invocation, write
                                 // `latest` and return (as SIGINT/SIGTERM do)
  bool quiet = false;            // no stdout lines (metrics are still written)
  // SIGINT and SIGTERM stop the run at the next step boundary (`latest` is written). False
  // leaves them to the caller (work on a thread that is not the one signals are meant for).
  bool take_signals = true;
  // A checkpoint of another run to start from when the run folder has none of its own (a
  // folder with one continues as with `resume`): its weights, AdamW moments, step and data
  // position, checked against this config as a resume is; the schedule and the length are
  // this config's. How a decayed branch starts from a constant-LR run.
  std::string init_from;
  // Rank 0: each metrics record as it is written to metrics.jsonl. Returning false asks the
  // run to stop at the next step boundary as stop_after_steps does (`latest` is written).
  std::function<bool(const nlohmann::ordered_json& record)> on_metrics;
};

struct TrainSummary {
  int64_t step = 0;           // optimizer steps done when train() returned
  int64_t tokens = 0;
  bool finished = false;      // reached max_tokens (the `final` checkpoint exists)
  bool interrupted = false;   // stopped early by a signal, stop_after_steps or on_metrics
  int signal = 0;             // the signal that stopped it (SIGINT, SIGTERM), 0 if none
  double val_nll = -1;        // the last evaluation's pooled NLL (-1: none)
  double tokens_per_second = 0;  // this invocation, evaluation time excluded
};

// Runs (or resumes) the run described by `config` on this process's share of the data.
// Every rank calls it; only rank 0 evaluates, prints and writes. SIGINT/SIGTERM end the
// current step, write `latest` and return normally. A non-finite loss or gradient is a
// UserError (no checkpoint is written after it).
TrainSummary train(const TrainConfig& config, Collective& collective,
                   const TrainOptions& options);

// ---- pieces of the step, exposed for tests ------------------------------------------

// Fills x and y ([micro_batch, T] each) for micro-batch `micro` of the step.
using BatchSource = std::function<void(int64_t micro, int32_t* x, int32_t* y)>;

struct StepOutcome {
  double loss = 0;       // mean of the micro-batch losses, all ranks
  double nll_sum = 0;    // Σ NLL over kept terms, all ranks
  int64_t kept = 0;
  double grad_norm = 0;  // global norm before clipping
  double clip = 1;       // the factor applied
  double votes = 0;      // Σ over ranks of the `vote` each passed in (stop requests)
  bool finite = true;    // false: loss or gradient not finite; the weights were not updated
};

// One optimizer step: zero the gradients, forward + backward `accumulation` micro-batches
// with grad_scale 1/(accumulation · ranks) (the step gradient is the mean of micro-batch
// gradients), all-reduce, clip, AdamW. `x`, `y` are scratch of micro_batch · T ids.
template <typename T>
StepOutcome train_step(Model<T>& model, AdamW& optimizer, Collective& collective,
                       int64_t micro_batch, int64_t accumulation, const BatchSource& batches,
                       std::vector<int32_t>& x, std::vector<int32_t>& y, double lr,
                       double grad_clip, double vote = 0);

// Validation window starts: ⌈min(eval_total_tokens, N − 1) / T⌉ (at least 1) positions
// drawn uniformly from [0, N − T − 1] by Rng(seed) — unaligned, the same on every call.
std::vector<int64_t> validation_windows(int64_t file_tokens, int64_t block_size,
                                        int64_t eval_total_tokens, uint64_t seed);

// Validation NLL: Σ NLL over kept terms / Σ kept (docs/model.md §5–§6) of the windows of T + 1 tokens
// at `starts`, `micro_batch` per forward. x, y: scratch of micro_batch · T ids; row: T + 1.
// `progress` (optional) gets (windows done, windows total) after every forward.
double pooled_nll(Model<float>& model, const TokenFile& file, const std::vector<int64_t>& starts,
                  int64_t micro_batch, std::vector<int32_t>& x, std::vector<int32_t>& y,
                  std::vector<int32_t>& row, const ProgressCallback& progress = {});

}  // namespace sps
