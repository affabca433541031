#include "train/training_data.h"

#include <filesystem>

#include "train/trainer.h"
#include "util/error.h"

namespace sps {

namespace fs = std::filesystem;

namespace {

// data.dataset, else the folder of data.train_bin: where meta.json is looked for.
std::string dataset_folder(const TrainConfig& config) {
  const std::string dataset_dir = config.data.dataset.empty()
                                      ? fs::path(config.data.train_bin).parent_path().string()
                                      : config.data.dataset;
  return dataset_dir.empty() ? "." : dataset_dir;
}

// meta.json against the config and the model, before the token files are opened: data
// from another tokenizer fails here, in one line, instead of training on wrong ids.
// Returns the width of the ids in the files.
TokenDType checked_token_dtype(const TrainConfig& config, const DatasetMeta& meta) {
  const ModelConfig& mc = config.model;
  std::string dtype_name = config.data.dtype;
  if (!meta.dtype.empty()) {
    if (!dtype_name.empty() && dtype_name != meta.dtype)
      fail("{}: data.dtype is {}, but {} says {}", config.source, dtype_name, meta.path,
           meta.dtype);
    dtype_name = meta.dtype;
  }
  const TokenDType dtype =
      token_dtype_from_name(dtype_name.empty() ? "uint16" : dtype_name,
                            meta.path.empty() ? "data.dtype" : meta.path + ": dtype");
  if (meta.eos_token_id >= 0 && meta.eos_token_id != mc.eos_token_id)
    fail("{}: eos_token_id {} differs from model.eos_token_id {} of {} (data from another "
         "tokenizer?)",
         meta.path, meta.eos_token_id, mc.eos_token_id, config.source);
  if (meta.vocab_size > mc.vocab_size)
    fail("{}: vocab_size {} exceeds model.vocab_size {} of {}", meta.path, meta.vocab_size,
         mc.vocab_size, config.source);
  return dtype;
}

// The id range of the data, checked on the training file.
IdRange checked_id_range(const TrainConfig& config, const DatasetMeta& meta,
                         const TokenFile& file) {
  IdRange ids;
  ids.limit = meta.vocab_size > 0 ? meta.vocab_size : config.model.vocab_size;
  ids.vocabulary =
      meta.vocab_size > 0 ? "the tokenizer's ids (" + meta.path + ")" : "the model's vocabulary";
  file.check_ids(ids.limit, ids.vocabulary, meta.known_max_id(file));
  return ids;
}

// The validation file, its ids and its length checked, and its windows.
ValidationSet open_validation_set(const TrainConfig& config, TokenDType dtype,
                                  const DatasetMeta& meta, const IdRange& ids) {
  const int64_t T = config.model.block_size;
  ValidationSet val;
  val.file = std::make_unique<TokenFile>(config.data.val_bin, dtype);
  val.file->check_ids(ids.limit, ids.vocabulary, meta.known_max_id(*val.file));
  if (val.file->size() < T + 1)
    fail("{}: {} tokens, fewer than one window of block_size + 1 = {}", config.data.val_bin,
         val.file->size(), T + 1);
  val.windows = validation_windows(val.file->size(), T, config.training.eval_total_tokens,
                                   uint64_t(config.training.eval_seed));
  return val;
}

}  // namespace

SamplerConfig training_sampler_config(const TrainConfig& config, int rank, int ranks) {
  const auto& tc = config.training;
  SamplerConfig sampler_config;
  sampler_config.type =
      sampler_type_from_name(tc.sampler_type, config.source + ": training.sampler_type");
  sampler_config.block_size = config.model.block_size;
  sampler_config.chunk_size_units = tc.chunk_size_units;
  sampler_config.shuffle_seed = uint64_t(tc.chunk_shuffle_seed);
  sampler_config.start_offset = tc.sampler_start_offset;
  sampler_config.rank = rank;
  sampler_config.ranks = ranks;
  return sampler_config;
}

TrainingData::TrainingData(const TrainConfig& config, int rank, int ranks, bool with_validation)
    : meta(read_dataset_meta(dataset_folder(config))), dtype(checked_token_dtype(config, meta)),
      train_file(config.data.train_bin, dtype), ids(checked_id_range(config, meta, train_file)),
      sampler(train_file.size(), training_sampler_config(config, rank, ranks),
              config.data.train_bin),
      validation(with_validation ? open_validation_set(config, dtype, meta, ids)
                                 : ValidationSet{}) {}

}  // namespace sps
