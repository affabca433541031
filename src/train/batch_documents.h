#pragma once
// How many documents a global batch spans (docs/data.md, "Documents per batch"). At the
// paper's scale a batch of 96 × 4096 tokens drawn from chunks of consecutive windows spans
// hundreds of documents; a small batch read the same way sees one or two, and consecutive
// steps see the same ones, which correlates the steps far more than the batch size says.
// The trainer prints the figure (`--dry-run` and at the start of a run), records it in
// metrics.jsonl and warns when it is below kFewDocumentsPerBatch.
#include <cstdint>
#include <string>

#include "data/token_file.h"
#include "train/train_config.h"

namespace sps {

inline constexpr double kFewDocumentsPerBatch = 8;

// The mean number of distinct documents in the global batch of a step, over up to
// `max_steps` steps spread evenly over the run (every step when the run has fewer), with the
// sampler of `config` on `ranks` processes. A document runs from the token after an EOS (or
// the file's start) to its own EOS; the window at p holds tokens [p, p + T] and spans every
// document that holds one of them.
double mean_documents_per_batch(const TokenFile& file, int64_t eos_token_id,
                                const TrainConfig& config, int ranks, int64_t max_steps = 100);

// The steps mean_documents_per_batch averages over for `config`.
int64_t documents_sampled_steps(const TrainConfig& config, int64_t max_steps = 100);

// "~15.8 per global batch of 16 sequences (mean over 100 steps)".
std::string describe_documents_per_batch(double documents, const TrainConfig& config);

// "" when the figure is at least kFewDocumentsPerBatch, else the warning (one line, no
// newline): "batches span ~1.5 documents; see docs/data.md …".
std::string few_documents_warning(double documents);

// The `--dry-run` lines: the figure for data.train_bin (dtype from the meta.json beside it)
// and its warning; "" when the file does not exist, a "not computed: why" line when it cannot
// be read as the run would read it.
std::string planned_documents_per_batch(const TrainConfig& config, int ranks);

}  // namespace sps
