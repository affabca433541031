#pragma once
// `sps bench` workflows: they print measured numbers and assert nothing about time.
#include <cstdint>
#include <string>

#include "model/config.h"

namespace sps {

// Median sgemm rate (GFLOP/s) of C[n,n] = A·Bᵀ over `repeats` runs, after one warm-up.
double measure_sgemm_gflops(int64_t n, int repeats);

void run_gemm_bench(int64_t n, int repeats);

struct StepBenchOptions {
  ModelConfig config;
  int64_t batch = 1;   // micro-batch sequences
  int64_t tokens = 0;  // 0 = config.block_size
  int warmup = 1;
  int steps = 3;
  uint64_t seed = 1337;
  bool json = false;   // one JSON object instead of the table
  bool forward_only = false;  // time the forward alone (no backward), e.g. against `sps eval`
};

void run_step_bench(const StepBenchOptions& options);

}  // namespace sps
