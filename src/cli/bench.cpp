#include "bench/attention_bench.h"
#include "bench/bench.h"
#include "cli/commands.h"
#include "model/config.h"
#include "util/error.h"

namespace sps::cli {

void register_bench(CLI::App& app) {
  auto* bench = app.add_subcommand("bench", "measure kernels and training steps");
  bench->require_subcommand(1);

  auto* gemm = bench->add_subcommand("gemm", "the sgemm rate BLAS reaches with these threads");
  static int64_t gemm_n = 2048;
  static int gemm_repeats = 5;
  gemm->add_option("--size", gemm_n, "matrix size n (n×n×n)")->check(CLI::Range(64, 16384));
  gemm->add_option("--repeats", gemm_repeats, "timed runs")->check(CLI::Range(1, 1000));
  gemm->callback([] { run_gemm_bench(gemm_n, gemm_repeats); });

  auto* attention = bench->add_subcommand("attention", "the family-masked attention alone");
  static int64_t attn_tokens = 4096, attn_window = 64, attn_heads = 8, attn_head_dim = 64;
  static int attn_repeats = 3;
  attention->add_option("--tokens", attn_tokens, "tokens T (sps has 2T slots)")
      ->check(CLI::Range(1, 1 << 20));
  attention->add_option("--window", attn_window, "sps window w")->check(CLI::Range(0, 1 << 20));
  attention->add_option("--heads", attn_heads, "heads H")->check(CLI::Range(1, 1024));
  attention->add_option("--head-dim", attn_head_dim, "head size D (even)")->check(CLI::Range(2, 1024));
  attention->add_option("--repeats", attn_repeats, "timed runs")->check(CLI::Range(1, 1000));
  attention->callback([] {
    if (attn_head_dim % 2) fail("--head-dim must be even, got {}", attn_head_dim);
    run_attention_bench(attn_tokens, attn_window, attn_heads, attn_head_dim, attn_repeats);
  });

  auto* step = bench->add_subcommand("step", "forward + backward of one micro-batch");
  static std::string config_path;
  static std::vector<std::string> overrides;
  static StepBenchOptions options;
  step->add_option("--config", config_path, "model config YAML")->required();
  step->add_option("overrides", overrides, "key=value overrides, e.g. model.window_size=16");
  step->add_option("--batch", options.batch, "micro-batch sequences")->check(CLI::Range(1, 4096));
  step->add_option("--tokens", options.tokens, "tokens per sequence (default: block_size)")
      ->check(CLI::Range(1, 1 << 20));
  step->add_option("--warmup", options.warmup, "untimed steps")->check(CLI::Range(0, 100));
  step->add_option("--steps", options.steps, "timed steps")->check(CLI::Range(1, 1000));
  step->add_flag("--json", options.json, "print one JSON object");
  step->callback([] {
    options.config = load_model_config(config_path, overrides);
    if (options.tokens > options.config.block_size)
      fail("--tokens {} exceeds model.block_size {}", options.tokens, options.config.block_size);
    run_step_bench(options);
  });
}

}  // namespace sps::cli
