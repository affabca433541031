#include "train/plan.h"

#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>

#include "model/family.h"
#include "model/flops.h"
#include "model/model.h"
#include "ops/backend_registry.h"
#include "train/batch_documents.h"

namespace sps {

namespace {

std::string gib(int64_t bytes) { return fmt::format("{:.2f} GiB", double(bytes) / double(1 << 30)); }

std::string human(double count) {
  const char* units[] = {"", "K", "M", "B", "T"};
  int u = 0;
  while (count >= 1000 && u < 4) count /= 1000, ++u;
  return u == 0 ? fmt::format("{:.0f}", count) : fmt::format("{:.2f}{}", count, units[u]);
}

int64_t file_size(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? int64_t(st.st_size) : -1;
}

}  // namespace

double visible_attention_pairs(const ModelConfig& c, int64_t T) {
  const Family family = family_by_name(c.family);
  const double n = double(T);
  double pairs = 0;
  if (!family.interleaved) {
    pairs = n * (n + 1) / 2;
  } else {
    // Query i of either stream sees i past tokens of the persistent stream and min(i, w) of
    // the windowed one, plus its own pair's slots: the input slot sees its own, the predict
    // slot both (3 own-pair keys over the 4 stream combinations).
    const double w = double(c.window_size);
    const double all_past = n * (n - 1) / 2;                                   // Σ i
    const double windowed_past = n <= w ? all_past : w * (w - 1) / 2 + (n - w) * w;  // Σ min(i, w)
    pairs = 2 * all_past + 2 * windowed_past + 3 * n;
  }
  return pairs * double(c.n_layer) * double(c.n_head);
}

TrainPlan make_train_plan(const TrainConfig& config, int ranks) {
  const ModelConfig& c = config.model;
  TrainPlan p;
  p.ranks = ranks;
  p.accumulation = accumulation_steps(config, ranks);
  p.tokens_per_step = config.tokens_per_step();
  p.steps = config.total_steps();
  p.parameters = c.parameter_count();
  const int64_t B = config.training.micro_batch_size, T = c.block_size;
  const double pairs = visible_attention_pairs(c, T) * double(B);
  p.flops_per_step = training_step_flops(c, B, T, pairs) * double(p.accumulation) *
                     double(ranks);
  p.weight_bytes = p.parameters * int64_t(sizeof(float));
  p.grad_bytes = p.weight_bytes;
  p.optimizer_bytes = 2 * p.parameters * int64_t(sizeof(float));
  const ops::Device device = ops::parse_device(config.system.device, "system.device");
  p.activation_bytes = planned_activation_bytes(c, B, T,
                                                config.system.recompute_activations
                                                    ? ActivationPlanKind::training_recomputed
                                                    : ActivationPlanKind::training,
                                                device);
  if (ops::parse_precision(config.system.precision, "system.precision") == ops::Precision::bf16 &&
      ops::capabilities(device).host_memory) {
    // 4 bytes per weight (fp32 rows rounded to bf16, or oneDNN's two bf16 layouts), and fp32
    // rows for a GEMM's input (at most [rows, F]) and output gradient (at most [rows, 3d or
    // 2F], or an LM-head chunk's [chunk, V]).
    const int64_t rows = B * family_by_name(c.family).streams() * T;
    const int64_t d = c.hidden_size, F = c.intermediate_size;
    const int64_t widest_gradient =
        std::max(rows * std::max(3 * d, 2 * F), lm_head_chunk_rows(device) * c.vocab_size);
    p.bf16_copy_bytes =
        int64_t(sizeof(float)) * (p.parameters + rows * std::max(d, F) + widest_gradient);
  }
  return p;
}

std::string describe_train_plan(const TrainConfig& config, const TrainPlan& p) {
  const ModelConfig& c = config.model;
  const auto& t = config.training;
  std::string s;
  auto line = [&](const std::string& text) { s += text + "\n"; };
  line(fmt::format("recipe        {}", config.source));
  const bool interleaved = family_by_name(c.family).interleaved;
  line(fmt::format("model         {}{}  L={} H={} d={} F={} V={} T={}", c.family,
                   !interleaved ? ""
                   : c.persistent_key_window >= 0
                       ? fmt::format(" (w={}, ω={})", c.window_size, c.persistent_key_window)
                       : fmt::format(" (w={})", c.window_size),
                   c.n_layer, c.n_head, c.hidden_size, c.intermediate_size, c.vocab_size,
                   c.block_size));
  line(fmt::format("parameters    {} ({})", p.parameters, human(double(p.parameters))));
  line(fmt::format("batch         {} sequences per step = {} × {} accumulation × {} process{}",
                   t.global_batch_size, t.micro_batch_size, p.accumulation, p.ranks,
                   p.ranks == 1 ? "" : "es"));
  line(fmt::format("tokens/step   {} ({} sequences × {} tokens; predict slots not counted)",
                   p.tokens_per_step, t.global_batch_size, c.block_size));
  line(fmt::format("steps         {} → {} tokens (max_tokens {})", p.steps,
                   p.steps * p.tokens_per_step, t.max_tokens));
  line(fmt::format("FLOPs/step    {:.4g} (forward + backward; {:.4g} for the run)",
                   p.flops_per_step, p.flops_per_step * double(p.steps)));
  const auto& sc = config.scheduler;
  if (sc.decay_lr)
    line(fmt::format("lr            peak {} after {} warmup tokens, linear to {} over the last "
                     "{} tokens (from {})",
                     config.optimizer.learning_rate, sc.warmup_tokens, sc.min_lr,
                     sc.lr_decay_tokens, t.max_tokens - sc.lr_decay_tokens));
  else
    line(fmt::format("lr            constant {}", config.optimizer.learning_rate));
  line(fmt::format("memory        {} per process: weights {}, grads {}, AdamW {}, activations {} "
                   "(micro-batch {}{}){}",
                   gib(p.memory_bytes()), gib(p.weight_bytes), gib(p.grad_bytes),
                   gib(p.optimizer_bytes), gib(p.activation_bytes), t.micro_batch_size,
                   config.system.recompute_activations ? ", recomputed per block" : "",
                   p.bf16_copy_bytes > 0 ? ", bf16 GEMM copies " + gib(p.bf16_copy_bytes) : ""));
  line(fmt::format("sampler       {} (chunks of {} windows, seed {}, start {})", t.sampler_type,
                   t.chunk_size_units, t.chunk_shuffle_seed, t.sampler_start_offset));
  line(fmt::format("validation    {} tokens at step 0, every {} tokens and at the end",
                   t.eval_total_tokens,
                   t.eval_interval_tokens > 0 ? std::to_string(t.eval_interval_tokens) : "(never)"));
  const int64_t element = config.data.dtype == "uint32" ? 4 : 2;
  for (const auto& [name, path] : {std::pair{"train", config.data.train_bin},
                                   std::pair{"val", config.data.val_bin}}) {
    if (path.empty()) continue;
    const int64_t bytes = file_size(path);
    line(bytes < 0 ? fmt::format("data {:<8} {} (not found)", name, path)
                   : fmt::format("data {:<8} {} ({} tokens)", name, path, human(double(bytes / element))));
  }
  s += planned_documents_per_batch(config, p.ranks);
  line(fmt::format("run folder    {}", config.system.out_dir));
  return s;
}

}  // namespace sps
