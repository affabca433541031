#pragma once
// The token files a training run reads, opened and checked before any memory is planned or
// any file of the run folder is written, so that bad data costs nothing: meta.json against
// the config and the model, every id against the tokenizer's range, the validation file's
// length.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/sampler.h"
#include "data/token_file.h"
#include "train/train_config.h"

namespace sps {

// The ids the data may hold: the tokenizer's when meta.json names its size, else the
// model's vocabulary. Ids beyond the tokenizer's (PREDICT and PAD included) must not occur
// in data.
struct IdRange {
  int64_t limit = 0;
  std::string vocabulary;  // names the range in the error about an id beyond it
};

// Rank `rank` of `ranks`'s share of the training windows, in the order training.sampler_type
// gives.
SamplerConfig training_sampler_config(const TrainConfig& config, int rank, int ranks);

// The validation file and its fixed windows (validation_windows in trainer.h).
struct ValidationSet {
  std::unique_ptr<TokenFile> file;
  std::vector<int64_t> windows;
};

// This rank's view of the data. The members are initialised in the order of the checks,
// which decides the error that data with several faults reports.
struct TrainingData {
  // `with_validation`: open the validation file too (rank 0 of a run that evaluates).
  TrainingData(const TrainConfig& config, int rank, int ranks, bool with_validation);

  const DatasetMeta meta;
  const TokenDType dtype;
  const TokenFile train_file;
  const IdRange ids;
  const WindowSampler sampler;  // this rank's windows of train_file, in training order
  const ValidationSet validation;
};

}  // namespace sps
