#pragma once
// `sps bench` workflows: they print measured numbers and assert nothing about time.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/config.h"
#include "ops/backend.h"
#include "ops/device.h"
#include "ops/weight_type.h"

namespace sps {

// Returns once every op issued on `backend` before it has finished: a download of one element
// of `buffer` (device memory of that backend) waits for them, so a clock read after it has
// timed the ops, on a GPU too.
template <typename T>
void wait_for_backend(const ops::Backend<float>& backend, const T* buffer) {
  T probe{};
  backend.download(&probe, buffer, sizeof probe);
}

// Median sgemm rate (GFLOP/s) of C[n,n] = A·Bᵀ over `repeats` runs, after one warm-up.
double measure_sgemm_gflops(int64_t n, int repeats);

// The same product on `backend` (Backend::time_gemm: on a GPU cuBLASLt, with the backend's
// operand precision, bf16 operands rounded before the timed products), median of `repeats`
// after one warm-up.
double measure_backend_gemm_gflops(const ops::Backend<float>& backend, int64_t n, int repeats);

// `sps bench gemm`. On the CPU, fp32: sgemm at n³; bf16: the bf16 GEMM path this process
// takes, at n³ and at the shapes of an s-scale block's projections on n rows, beside oneDNN's
// own bf16 and f32 matmuls and sgemm. On a GPU: its backend's GEMM at n³ on `precision`
// operands (measure_backend_gemm_gflops).
void run_gemm_bench(const ops::Device& device, ops::Precision precision, int64_t n, int repeats);

// A weight's [out, in] dimensions.
struct LinearShape {
  int64_t out_dim = 0, in_dim = 0;
};
// `sps bench linear`: the packed inference linear alone (ops.h linear_packed_forward, the
// kernels of decode and prefill) on `rows` input rows through the projections of `layers`
// s-scale blocks in each weight type, the types taken in turn each round: milliseconds per
// pass, weight bytes read per second, that against the copy bandwidth, and each type's speed
// against the first's. With `shape`, through `layers` weights of that one shape instead (a
// call's fixed cost shows against its bytes).
void run_linear_bench(const std::vector<ops::WeightType>& types, const std::vector<int64_t>& rows,
                      int64_t layers, int repeats, const std::optional<LinearShape>& shape);

struct StepBenchOptions {
  ModelConfig config;
  int64_t batch = 1;   // micro-batch sequences
  int64_t tokens = 0;  // 0 = config.block_size
  int warmup = 1;
  int steps = 3;
  uint64_t seed = 1337;
  bool json = false;   // one JSON object instead of the table
  bool forward_only = false;  // time the forward alone (no backward), e.g. against `sps eval`
  ops::Device device;         // the CPU unless --device says otherwise
  // Several precisions are timed in turn, `rounds` times over, each reported with the median
  // of its rounds and its speed against the first: a fair ratio on a machine whose speed drifts.
  std::vector<ops::Precision> precisions = {ops::Precision::fp32};
  int rounds = 1;
};

void run_step_bench(const StepBenchOptions& options);

}  // namespace sps
