#include <fmt/format.h>
#include <omp.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/bench.h"
#include "model/flops.h"
#include "model/model.h"
#include "ops/backend_registry.h"
#include "util/alloc_counter.h"
#include "util/process_stats.h"
#include "util/rng.h"

namespace sps {

namespace {

// What one `bench step` run of one precision measured.
struct StepMeasurement {
  ops::Precision precision = ops::Precision::fp32;
  int64_t batch = 0, tokens = 0;
  std::string gemm_path;  // the backend's GEMMs, as it describes them
  std::string gemm_name;  // the GEMM rate's yardstick
  double gemm_gflops = 0;
  double step_seconds = 0;  // median (over the rounds: the median of each round's median)
  std::vector<double> round_seconds;  // each round's median
  double flops = 0, gflops = 0;
  double speed_vs_first = 1;  // the first precision's step time over this one's
  StepResult result;       // the last timed step's
  double pairs_ratio = 0;  // attention pairs over dense causal ones
  int64_t activation_bytes = 0, peak_rss_bytes = 0, allocations_per_step = 0,
          library_allocations_per_step = 0;
};

StepMeasurement measure_step(const StepBenchOptions& o, ops::Precision precision) {
  const ModelConfig& c = o.config;
  StepMeasurement m;
  m.precision = precision;
  const int64_t B = m.batch = o.batch, T = m.tokens = o.tokens > 0 ? o.tokens : c.block_size;
  const ops::Backend<float>& backend = ops::backend_for(o.device, precision);
  const bool on_cpu = ops::capabilities(o.device).host_memory;
  // The GEMM rate beside it: BLAS sgemm on the CPU; on a GPU the backend's own GEMM (cuBLASLt,
  // on bf16 operands with --precision bf16) at a size that fills it.
  const int64_t gemm_n = on_cpu ? 2048 : 8192;
  m.gemm_gflops =
      on_cpu ? measure_sgemm_gflops(gemm_n, 3) : measure_backend_gemm_gflops(backend, gemm_n, 5);
  m.gemm_name = on_cpu ? fmt::format("sgemm {}³", gemm_n)
                       : fmt::format("{} GEMM {}³", ops::precision_name(precision), gemm_n);

  Model<float> model(c, backend);
  model.init_weights(o.seed);
  model.reserve(B, T);
  // Random tokens below EOS: every loss term counts, one document per sequence.
  std::vector<int32_t> x(B * T), y(B * T);
  Rng rng(o.seed + 1);
  for (auto& t : x) t = int32_t(rng.below(uint64_t(c.eos_token_id)));
  for (auto& t : y) t = int32_t(rng.below(uint64_t(c.eos_token_id)));

  // --forward-only: the forward alone, as evaluation runs it (the loss is the full step's).
  // A download returns once every earlier op has finished: a step on a GPU is timed whole.
  // The weights are handed out for writing after each step, as the optimizer's update does:
  // with bf16 GEMMs each step converts them anew, as a training step of one micro-batch does.
  const auto step_once = [&] {
    const StepResult r = o.forward_only ? model.forward(x.data(), y.data(), B, T)
                                        : model.forward_backward(x.data(), y.data(), B, T);
    wait_for_backend(backend, model.weights());
    return r;
  };
  for (int i = 0; i < o.warmup; ++i) m.result = step_once();
  std::vector<double> seconds;
  seconds.reserve(o.steps);  // so the count below sees only the steps' own allocations
  const int64_t allocations_before = allocation_count(),
                library_allocations_before = library_allocation_count();
  for (int i = 0; i < o.steps; ++i) {
    const double t0 = now_seconds();
    m.result = step_once();
    seconds.push_back(now_seconds() - t0);
  }
  m.allocations_per_step = (allocation_count() - allocations_before) / std::max(1, o.steps);
  m.library_allocations_per_step =
      (library_allocation_count() - library_allocations_before) / std::max(1, o.steps);
  m.step_seconds = median(seconds);
  m.round_seconds = {m.step_seconds};
  // The backward costs twice the forward (model/flops.h).
  m.flops = training_step_flops(c, B, T, m.result.attention_pairs) / (o.forward_only ? 3 : 1);
  m.gflops = m.flops / m.step_seconds / 1e9;
  m.pairs_ratio = double(m.result.attention_pairs) / dense_causal_pairs(c, B, T);
  m.activation_bytes = model.activation_bytes();
  m.peak_rss_bytes = peak_rss_bytes();
  m.gemm_path = backend.describe_gemms();  // after the steps: some backends choose at the first
  return m;
}

void print_step_json(const StepBenchOptions& o, const StepMeasurement& m) {
  const ModelConfig& c = o.config;
  const nlohmann::json j = {{"family", c.family},
                            {"window", c.window_size},
                            {"batch", m.batch},
                            {"tokens", m.tokens},
                            {"device", o.device.name()},
                            {"precision", ops::precision_name(m.precision)},
                            {"gemm_path", m.gemm_path},
                            {"threads", omp_get_max_threads()},
                            {"step_seconds", m.step_seconds},
                            {"round_step_seconds", m.round_seconds},
                            {"speed_vs_first", m.speed_vs_first},
                            {"tokens_per_second", double(m.batch * m.tokens) / m.step_seconds},
                            {"gflops", m.gflops},
                            {"gemm", m.gemm_name},
                            {"gemm_gflops", m.gemm_gflops},
                            {"fraction_of_gemm", m.gflops / m.gemm_gflops},
                            {"attention_pairs", m.result.attention_pairs},
                            {"attention_pairs_vs_dense_causal", m.pairs_ratio},
                            {"parameters", c.parameter_count()},
                            {"activation_bytes", m.activation_bytes},
                            {"peak_rss_bytes", m.peak_rss_bytes},
                            {"allocations_per_step", m.allocations_per_step},
                            {"library_allocations_per_step", m.library_allocations_per_step},
                            {"loss", m.result.loss}};
  fmt::print("{}\n", j.dump());
}

void print_step_table(const StepBenchOptions& o, const StepMeasurement& m) {
  const ModelConfig& c = o.config;
  fmt::print("family {} (w={})  L={} d={} H={} F={} V={}  params {:.2f}M\n", c.family,
             c.window_size, c.n_layer, c.hidden_size, c.n_head, c.intermediate_size,
             c.vocab_size, double(c.parameter_count()) / 1e6);
  const char* precision = ops::precision_name(m.precision);
  fmt::print("micro-batch {} x {} tokens, {}, median of {} {} after {} warm-up{}\n", m.batch,
             m.tokens,
             ops::capabilities(o.device).host_memory
                 ? fmt::format("{} threads, {}", omp_get_max_threads(), precision)
                 : fmt::format("{} {}", o.device.name(), precision),
             o.steps, o.forward_only ? "forwards (no backward)" : "steps", o.warmup,
             o.rounds > 1 ? fmt::format(", median of {} such rounds", o.rounds) : "");
  if (!m.gemm_path.empty()) fmt::print("  {}\n", m.gemm_path);
  fmt::print("  step time            {:.3f} s\n", m.step_seconds);
  fmt::print("  input tokens/s       {:.0f}\n", double(m.batch * m.tokens) / m.step_seconds);
  fmt::print("  model GFLOP/s        {:.1f}  ({:.0f}% of {} at {:.1f} GFLOP/s)\n", m.gflops,
             100 * m.gflops / m.gemm_gflops, m.gemm_name, m.gemm_gflops);
  fmt::print("  attention pairs      {} ({:.3f}x dense causal over the same slots)\n",
             m.result.attention_pairs, m.pairs_ratio);
  fmt::print("  activations          {:.1f} MiB, peak RSS {:.1f} MiB\n",
             double(m.activation_bytes) / 1048576.0, double(m.peak_rss_bytes) / 1048576.0);
  fmt::print("  allocations per step {}\n", m.allocations_per_step);
  if (m.library_allocations_per_step > 0)  // oneDNN's, per execution (util/alloc_counter.h)
    fmt::print("  inside libraries     {} allocations per step\n", m.library_allocations_per_step);
  fmt::print("  loss                 {:.4f}\n", m.result.loss);
}

}  // namespace

void run_step_bench(const StepBenchOptions& o) {
  // Round by round, each precision in turn; a round's measurement replaces the one before,
  // keeping the medians of all rounds.
  std::vector<StepMeasurement> kept(o.precisions.size());
  for (int round = 0; round < o.rounds; ++round)
    for (size_t i = 0; i < o.precisions.size(); ++i) {
      StepMeasurement m = measure_step(o, o.precisions[i]);
      if (round > 0) m.round_seconds.insert(m.round_seconds.begin(), kept[i].round_seconds.begin(),
                                            kept[i].round_seconds.end());
      m.step_seconds = median(m.round_seconds);
      m.gflops = m.flops / m.step_seconds / 1e9;
      kept[i] = std::move(m);
    }
  for (StepMeasurement& m : kept) m.speed_vs_first = kept.front().step_seconds / m.step_seconds;
  for (const StepMeasurement& m : kept) {
    if (o.json) {
      print_step_json(o, m);
      continue;
    }
    print_step_table(o, m);
    if (kept.size() > 1)
      fmt::print("  {:<21}{:.2f}x (rounds: {:.4f} s)\n",
                 fmt::format("speed vs {}", ops::precision_name(kept.front().precision)),
                 m.speed_vs_first, fmt::join(m.round_seconds, ", "));
  }
}

}  // namespace sps
