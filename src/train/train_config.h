#pragma once
// A training run's configuration: the YAML recipe of configs/experiments/ with the paper's
// section and key names (model, training, optimizer, scheduler, data, system), plus
// `section.key=value` overrides. Defaults are the paper's recipe (docs/model.md §6).
//
// Recipes stay short through two indirections, both resolved relative to the file that
// names them:
//   base: FILE.yaml          — another recipe merged underneath (this file's keys win);
//   model: {preset: NAME}    — configs/models/NAME.yaml (or a path) as the model's base.
// Unknown keys anywhere are a UserError naming the file and section.key.
#include <cstdint>
#include <string>
#include <vector>

#include "model/config.h"

namespace YAML { class Node; }

namespace sps {

struct TrainingSettings {
  int64_t micro_batch_size = 6;        // sequences per forward/backward on one process
  int64_t global_batch_size = 96;      // sequences per optimizer step, all processes
  int64_t max_tokens = 0;              // required: the run's length in tokens
  int64_t eval_total_tokens = 10000000;  // validation tokens per evaluation (capped by val.bin)
  int64_t eval_interval_tokens = 0;    // 0: evaluate only at the start and the end
  int64_t log_interval = 1;            // steps between metric lines
  int64_t save_every = 0;              // tokens between named checkpoints; 0 = none
  int64_t rolling_save_every = 0;      // tokens between `latest` checkpoints; 0 = none
  std::string sampler_type = "fixed_random_chunk";  // | sequential
  int64_t chunk_size_units = 262144;   // windows per shuffled chunk
  int64_t chunk_shuffle_seed = 1337;
  int64_t sampler_start_offset = 0;    // s: first window start, in tokens
  int64_t seed = 1337;                 // weight initialisation
  int64_t eval_seed = 42;              // the validation windows
};

struct OptimizerSettings {
  double learning_rate = 6e-4;  // peak
  double weight_decay = 0.1;    // decoupled, on ≥2-D tensors only
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  double grad_clip = 1.0;       // global gradient norm; 0 = no clipping
};

struct SchedulerSettings {
  int64_t warmup_tokens = 0;
  int64_t lr_decay_tokens = 0;  // linear decay over the last lr_decay_tokens
  double min_lr = 6e-5;
  bool decay_lr = true;         // false: learning_rate throughout (no warmup, no decay)
};

struct DataSettings {
  std::string dataset;  // folder with train.bin, val.bin and meta.json
  std::string train_bin, val_bin;  // default: dataset/train.bin, dataset/val.bin
  std::string dtype;    // uint16 | uint32; default: meta.json's, else uint16
};

struct SystemSettings {
  int64_t threads = 0;  // OpenMP threads per process; 0 = OMP_NUM_THREADS or all cores
  bool recompute_activations = false;  // per-block recomputation: less memory, one more forward
  std::string out_dir;  // the run folder; default runs/<recipe file name>
  std::string device = "cpu";  // where the run's ops run: cpu, cuda or cuda:N (--device)
  std::string precision = "fp32";  // GEMM operands: fp32 or bf16 (ops.h Precision)
  // Several processes: gradients are summed in buckets of this size as the backward
  // finishes them (overlapping it on GPUs); PyTorch DDP's bucket_cap_mb and default.
  double all_reduce_bucket_mb = 25;
};

struct TrainConfig {
  std::string source;  // the recipe file, for messages
  ModelConfig model;
  TrainingSettings training;
  OptimizerSettings optimizer;
  SchedulerSettings scheduler;
  DataSettings data;
  SystemSettings system;

  int64_t tokens_per_step() const { return training.global_batch_size * model.block_size; }
  int64_t total_steps() const {  // the run ends at the first step boundary ≥ max_tokens
    return (training.max_tokens + tokens_per_step() - 1) / tokens_per_step();
  }
  // Where the decay phase starts (the pre_decay checkpoint), or -1 without decay.
  int64_t decay_start_tokens() const;
};

// Loads a recipe (resolving base: and model.preset), applies overrides, fills defaults,
// expands ${VAR} and ~ in data paths (SPS_HOME defaults to ~/.cache/sps) and validates.
TrainConfig load_train_config(const std::string& path, const std::vector<std::string>& overrides);

// Parses a resolved config (as written by train_config_yaml) — a checkpoint's config.yaml.
TrainConfig train_config_from_yaml(const YAML::Node& root, const std::string& source);

// The resolved config as YAML: every key explicit, numbers exact (reads back identically).
// Without `with_system` it leaves out the run's own settings (out_dir, threads), as the
// weights file stores it.
std::string train_config_yaml(const TrainConfig& config, bool with_system = true);

// `${NAME}` from the environment (SPS_HOME defaults to ~/.cache/sps), a leading `~/`.
std::string expand_path(const std::string& text, const std::string& field);

// Checks the settings one process can use with `ranks` processes (batch divisibility);
// a UserError naming the field otherwise. Returns the accumulation steps per process.
int64_t accumulation_steps(const TrainConfig& config, int ranks);

}  // namespace sps
