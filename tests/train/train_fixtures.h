#pragma once
// Micro training runs for the trainer tests: the golden-shape model (L=2, d=16, V=64, T=12,
// EOS 60), small synthetic token files and a recipe in a temporary folder.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "run_command.h"
#include "train/collective.h"
#include "train/trainer.h"
#include "util/rng.h"
#include "util/temp_dir.h"

namespace sps::testing {

inline const std::string kSps = SPS_BINARY;

inline bool has_command(const std::string& name) {
  return std::system(("command -v " + name + " >/dev/null 2>&1").c_str()) == 0;
}

// uint16 tokens below EOS, with EOS (60) at about one position in 16.
// `bad_every` > 0 puts the id 100 (outside V = 64) at every bad_every-th position.
inline void write_tokens(const std::string& path, int64_t count, uint64_t seed,
                         int64_t bad_every = 0) {
  Rng rng(seed);
  std::vector<uint16_t> tokens(count);
  for (auto& t : tokens) t = rng.below(16) == 0 ? 60 : uint16_t(rng.below(60));
  for (int64_t i = bad_every - 1; bad_every > 0 && i < count; i += bad_every) tokens[i] = 100;
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(tokens.data()), std::streamsize(tokens.size() * 2));
}

// A micro recipe: the golden-shape model, 4 sequences of 12 tokens per step (micro-batch 2 ×
// accumulation 2), `steps` steps, and every kind of checkpoint and evaluation along the way.
inline std::string micro_recipe(const std::string& data_dir, const std::string& family,
                                int64_t steps, const std::string& extra = "") {
  const int64_t tokens_per_step = 4 * 12;
  std::ostringstream s;
  s << "model: {family: " << family
    << ", n_layer: 2, n_head: 2, hidden_size: 16, intermediate_size: 24, vocab_size: 64, "
       "block_size: 12, window_size: 2, eos_token_id: 60, predict_token_id: 61, "
       "pad_token_id: 63, init_std: 0.2}\n"
    << "training: {micro_batch_size: 2, global_batch_size: 4, max_tokens: "
    << steps * tokens_per_step << ", eval_total_tokens: 60, eval_interval_tokens: "
    << 5 * tokens_per_step << ", log_interval: 1, save_every: " << 8 * tokens_per_step
    << ", rolling_save_every: " << 3 * tokens_per_step
    << ", sampler_type: fixed_random_chunk, chunk_size_units: 7}\n"
    << "optimizer: {learning_rate: 0.01}\n"
    << "scheduler: {warmup_tokens: " << 3 * tokens_per_step
    << ", lr_decay_tokens: " << (steps / 3) * tokens_per_step << ", min_lr: 0.001}\n"
    << "data: {dataset: " << data_dir << "}\n"
    << "system: {threads: 1}\n"
    << extra;
  return s.str();
}

// A data folder with train.bin (3000 tokens) and val.bin (400 tokens).
inline void write_micro_data(const std::string& dir) {
  write_tokens(dir + "/train.bin", 3000, 11);
  write_tokens(dir + "/val.bin", 400, 12);
}

inline std::vector<nlohmann::json> read_metrics(const std::string& path) {
  std::vector<nlohmann::json> lines;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

// The metric lines without the fields that measure time or memory.
inline std::vector<nlohmann::json> without_timing(std::vector<nlohmann::json> lines) {
  for (auto& l : lines)
    for (const char* key : {"tokens_per_second", "eval_seconds", "peak_rss_bytes"}) l.erase(key);
  return lines;
}

// Trains `config` in this process without output: from scratch, or resumed from its run
// folder; stop_after > 0 stops after that many steps as SIGTERM would.
inline TrainSummary run_train(const TrainConfig& config, bool resume = false,
                              int64_t stop_after = 0) {
  auto single = make_single_process_collective();
  TrainOptions options;
  options.resume = resume;
  options.stop_after_steps = stop_after;
  options.quiet = true;
  return train(config, *single, options);
}

}  // namespace sps::testing
