#pragma once
// What a run will cost, before it starts: steps, tokens, FLOPs and memory (`--dry-run`).
#include <cstdint>
#include <string>

#include "model/config.h"
#include "train/train_config.h"

namespace sps {

// Query-key pairs the docs/model.md §4 mask allows for one sequence of T tokens in one document,
// summed over all layers and heads (what an exact attention computes at least).
double visible_attention_pairs(const ModelConfig& config, int64_t tokens);

struct TrainPlan {
  int ranks = 1;
  int64_t accumulation = 1;        // micro-batches per process per step
  int64_t tokens_per_step = 0;     // global_batch_size · block_size
  int64_t steps = 0;               // ⌈max_tokens / tokens_per_step⌉
  int64_t parameters = 0;
  double flops_per_step = 0;       // forward + backward of every micro-batch, all processes
  int64_t weight_bytes = 0, grad_bytes = 0, optimizer_bytes = 0, activation_bytes = 0;
  // bf16 on the CPU: the weights' GEMM copies and the rows each GEMM rounds its operands into
  // (ops/cpu/linear_bf16.h); 0 in fp32.
  int64_t bf16_copy_bytes = 0;
  int64_t memory_bytes() const {   // per process
    return weight_bytes + grad_bytes + optimizer_bytes + activation_bytes + bf16_copy_bytes;
  }
};

TrainPlan make_train_plan(const TrainConfig& config, int ranks);

// The plan as the lines `sps train --dry-run` prints (data files are reported when present).
std::string describe_train_plan(const TrainConfig& config, const TrainPlan& plan);

}  // namespace sps
