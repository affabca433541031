#include "bench/attention_bench.h"
#include "bench/bench.h"
#include "bench/generate_bench.h"
#include "cli/commands.h"
#include "cli/model_files.h"
#include "model/config.h"
#include "model/family.h"
#include "util/error.h"

#include <algorithm>
#include <filesystem>

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
  add_device_option(attention, "sps bench attention");
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
  step->add_flag("--forward-only", options.forward_only,
                 "time the forward alone (no backward; FLOPs count the forward only)");
  add_device_option(step, "sps bench step");
  step->callback([] {
    options.config = load_model_config(config_path, overrides);
    if (options.tokens > options.config.block_size)
      fail("--tokens {} exceeds model.block_size {}", options.tokens, options.config.block_size);
    run_step_bench(options);
  });

  auto* generate = bench->add_subcommand(
      "generate", "cached generation, the paper's protocol: prefill + decode for each family");
  static std::vector<std::string> gen_configs, gen_checkpoints, gen_overrides;
  static std::vector<std::string> gen_families = family_names();
  static GenerateBenchOptions gen;
  static bool gen_paper = false;
  generate->add_option("--config", gen_configs,
                       "model config YAML(s); each runs every --families entry, random weights");
  generate->add_option("--checkpoint", gen_checkpoints,
                       "checkpoint folder(s), or run folder(s) (their newest checkpoint), each as trained");
  generate->add_option("--families", gen_families,
                       fmt::format("for --config: {} (2x_memory: sps with w >= every position)",
                                   fmt::join(family_names(), ",")))
      ->delimiter(',');
  generate->add_option("overrides", gen_overrides, "model.key=value overrides for --config");
  generate->add_option("--prompt-tokens", gen.prompt_tokens, "P, prompt tokens per row")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 20));
  generate->add_option("--new-tokens", gen.new_tokens, "N, new tokens per row")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 20));
  generate->add_option("--batch", gen.batch, "B, rows generated together")
      ->check(CLI::Range(int64_t(1), int64_t(4096)));
  generate->add_flag("--paper", gen_paper, "the paper's sizes: P=1024, N=3072, B=16");
  generate->add_option("--warmup", gen.warmup, "untimed runs")->check(CLI::Range(0, 100));
  generate->add_option("--runs", gen.runs, "timed runs")->check(CLI::Range(1, 100));
  generate->add_option("--rounds", gen.rounds,
                       "sweeps over all models (medians pool them; evens out machine drift)")
      ->check(CLI::Range(1, 100));
  generate->add_option("--tokens", gen.token_file,
                       "token file to draw prompts from (default: random ids)");
  generate->add_option("--token-dtype", gen.token_dtype, "uint16 | uint32 (default: meta.json's)");
  generate->add_option("--seed", gen.seed, "prompt windows and random weights");
  generate->add_option("--prefill-rows", gen.prefill_rows,
                       "rows per prefill forward (0 = all B; 1 keeps activation memory small)")
      ->check(CLI::Range(int64_t(0), int64_t(4096)));
  generate->add_flag("--interleave", gen.interleave,
                     "hold all models at once and alternate them step by step (fair ratios on "
                     "a busy machine; peak memory is then the process's)");
  generate->add_flag("--json", gen.json, "one JSON object per model");
  add_device_option(generate, "sps bench generate");
  generate->callback([] {
    if (gen_paper) {
      gen.prompt_tokens = 1024;
      gen.new_tokens = 3072;
      gen.batch = 16;
    }
    if (gen_configs.empty() && gen_checkpoints.empty()) fail("bench generate: give --config or --checkpoint");
    if (!gen_overrides.empty() && gen_configs.empty()) fail("bench generate: overrides go with --config");
    gen.models.clear();
    for (const std::string& path : gen_configs) {
      const ModelConfig base = load_model_config(path, gen_overrides);
      for (const std::string& name : gen_families) {
        const FamilyEntry& entry = family_entry(name, "--families");
        GenerateBenchModel m;
        m.config = base;
        m.config.family = entry.model_family;
        if (entry.window == WindowRule::every_position)
          m.config.window_size = std::max(base.block_size, gen.prompt_tokens + gen.new_tokens);
        m.label = entry.window == WindowRule::swept ? fmt::format("{} w={}", name, base.window_size)
                                                    : name;
        if (gen_configs.size() > 1)
          m.label = std::filesystem::path(path).stem().string() + " " + m.label;
        gen.models.push_back(m);
      }
    }
    for (const std::string& dir : gen_checkpoints) {
      const ModelFiles files = resolve_model_files(dir, "", "");
      const std::filesystem::path folder = std::filesystem::path(files.weights_path).parent_path();
      GenerateBenchModel m;
      m.config = load_model_config(files.config_path, {});
      m.weights = files.weights_path;
      // A trainer's checkpoints are RUN/checkpoints/NAME: call them RUN/NAME.
      const std::filesystem::path parent = folder.parent_path();
      m.label = (parent.filename() == "checkpoints" ? parent.parent_path().filename().string() + "/" : "") +
                folder.filename().string();
      gen.models.push_back(m);
    }
    run_generate_bench(gen);
  });
}

}  // namespace sps::cli
