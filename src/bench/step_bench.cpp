#include <fmt/format.h>
#include <omp.h>

#include <nlohmann/json.hpp>
#include <vector>

#include "bench/bench.h"
#include "model/flops.h"
#include "model/model.h"
#include "ops/backend_registry.h"
#include "util/alloc_counter.h"
#include "util/process_stats.h"
#include "util/rng.h"

namespace sps {

void run_step_bench(const StepBenchOptions& o) {
  const ModelConfig& c = o.config;
  const int64_t B = o.batch, T = o.tokens > 0 ? o.tokens : c.block_size;
  const ops::Backend<float>& backend = ops::backend_for(o.device, o.precision);
  const bool on_cpu = ops::capabilities(o.device).host_memory;
  // The GEMM rate beside it: BLAS sgemm on the CPU; on a GPU the backend's own GEMM (cuBLASLt,
  // on bf16 operands with --precision bf16) at a size that fills it.
  const int64_t gemm_n = on_cpu ? 2048 : 8192;
  const double gemm =
      on_cpu ? measure_sgemm_gflops(gemm_n, 3) : measure_backend_gemm_gflops(backend, gemm_n, 5);
  const std::string gemm_name =
      on_cpu ? fmt::format("sgemm {}³", gemm_n)
             : fmt::format("{} GEMM {}³", o.precision == ops::Precision::bf16 ? "bf16" : "fp32",
                           gemm_n);

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
    float probe = 0;
    backend.download(&probe, model.weights(), sizeof probe);
    return r;
  };
  StepResult result;
  for (int i = 0; i < o.warmup; ++i) result = step_once();
  std::vector<double> seconds;
  seconds.reserve(o.steps);  // so the count below sees only the steps' own allocations
  const int64_t allocations_before = allocation_count();
  for (int i = 0; i < o.steps; ++i) {
    const double t0 = now_seconds();
    result = step_once();
    seconds.push_back(now_seconds() - t0);
  }
  const int64_t step_allocations = (allocation_count() - allocations_before) / std::max(1, o.steps);
  const double step = median(seconds);
  // The backward costs twice the forward (model/flops.h).
  const double flops = training_step_flops(c, B, T, result.attention_pairs) / (o.forward_only ? 3 : 1);
  const double gflops = flops / step / 1e9;
  const double pairs_ratio = double(result.attention_pairs) / dense_causal_pairs(c, B, T);

  if (o.json) {
    nlohmann::json j = {{"family", c.family},
                        {"window", c.window_size},
                        {"batch", B},
                        {"tokens", T},
                        {"device", o.device.name()},
                        {"precision", o.precision == ops::Precision::bf16 ? "bf16" : "fp32"},
                        {"gemm_path", backend.describe_gemms()},
                        {"threads", omp_get_max_threads()},
                        {"step_seconds", step},
                        {"tokens_per_second", double(B * T) / step},
                        {"gflops", gflops},
                        {"gemm", gemm_name},
                        {"gemm_gflops", gemm},
                        {"fraction_of_gemm", gflops / gemm},
                        {"attention_pairs", result.attention_pairs},
                        {"attention_pairs_vs_dense_causal", pairs_ratio},
                        {"parameters", c.parameter_count()},
                        {"activation_bytes", model.activation_bytes()},
                        {"peak_rss_bytes", peak_rss_bytes()},
                        {"allocations_per_step", step_allocations},
                        {"loss", result.loss}};
    fmt::print("{}\n", j.dump());
    return;
  }
  fmt::print("family {} (w={})  L={} d={} H={} F={} V={}  params {:.2f}M\n", c.family,
             c.window_size, c.n_layer, c.hidden_size, c.n_head, c.intermediate_size,
             c.vocab_size, double(c.parameter_count()) / 1e6);
  const char* precision = o.precision == ops::Precision::bf16 ? "bf16" : "fp32";
  fmt::print("micro-batch {} x {} tokens, {}, median of {} {} after {} warm-up\n", B, T,
             on_cpu ? fmt::format("{} threads, {}", omp_get_max_threads(), precision)
                    : fmt::format("{} {}", o.device.name(), precision),
             o.steps, o.forward_only ? "forwards (no backward)" : "steps", o.warmup);
  if (const std::string gemms = backend.describe_gemms(); !gemms.empty())
    fmt::print("  {}\n", gemms);
  fmt::print("  step time            {:.3f} s\n", step);
  fmt::print("  input tokens/s       {:.0f}\n", double(B * T) / step);
  fmt::print("  model GFLOP/s        {:.1f}  ({:.0f}% of {} at {:.1f} GFLOP/s)\n", gflops,
             100 * gflops / gemm, gemm_name, gemm);
  fmt::print("  attention pairs      {} ({:.3f}x dense causal over the same slots)\n",
             result.attention_pairs, pairs_ratio);
  fmt::print("  activations          {:.1f} MiB, peak RSS {:.1f} MiB\n",
             double(model.activation_bytes()) / 1048576.0, double(peak_rss_bytes()) / 1048576.0);
  fmt::print("  allocations per step {}\n", step_allocations);
  fmt::print("  loss                 {:.4f}\n", result.loss);
}

}  // namespace sps
