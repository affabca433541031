#include "bench/bench.h"
#include "bench/attention_bench.h"
#include "bench/generate_bench.h"
#include "bench/serve_bench.h"
#include "cli/commands.h"
#include "cli/model_files.h"
#include "model/config.h"
#include "model/family.h"
#include "model/weights_io.h"
#include "ops/backend_registry.h"
#include "serve/server.h"
#include "util/error.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <thread>

namespace sps::cli {
namespace {

struct ServeBenchArgs {
  std::string url;
  std::vector<std::string> checkpoints;
  std::string tokenizer;
  int64_t prompt_tokens = 256, parallel = 0;
  std::string token_file, token_dtype;
  uint64_t seed = 1337;
  bool json = false;
  ServeLoadOptions load;
  const DeviceChoice* on = nullptr;  // --device and --weight-type of the servers started here
};

// Prompts of ids the model knows: the checkpoint's config, or GPT-2's ids for a URL.
std::vector<std::vector<int32_t>> serve_bench_prompts(const ServeBenchArgs& a, const ModelConfig& c) {
  const int64_t count = std::min<int64_t>(a.load.requests, 1024), P = a.prompt_tokens;
  const std::vector<int32_t> flat = draw_bench_prompts(a.token_file, a.token_dtype, count, P, c, a.seed);
  std::vector<std::vector<int32_t>> prompts;
  for (int64_t i = 0; i < count; ++i) prompts.emplace_back(flat.begin() + i * P, flat.begin() + (i + 1) * P);
  return prompts;
}

void run_serve_bench(ServeBenchArgs& a) {
  if (a.url.empty() == a.checkpoints.empty()) fail("bench serve: give --url or --checkpoint");
  if (!a.json)
    fmt::print("serve: {} clients, {} streamed completions of P={} prompt tokens ({}) and N={} new "
               "tokens (greedy, EOS ignored)\n{:<22} {:>9} {:>7} {:>10} {:>10} {:>10} {:>10} {:>9} {:>9}\n",
               a.load.clients, a.load.requests, a.prompt_tokens,
               a.token_file.empty() ? "random ids" : "windows of " + a.token_file, a.load.new_tokens,
               "server", "completed", "failed", "req/s", "out tok/s", "TTFT p50", "TTFT p99",
               "ITL p50", "ITL p99");
  if (!a.url.empty()) {
    // host:port, with or without http://
    std::string rest = a.url.rfind("http://", 0) == 0 ? a.url.substr(7) : a.url;
    while (!rest.empty() && rest.back() == '/') rest.pop_back();
    const size_t colon = rest.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == rest.size() ||
        rest.find_first_not_of("0123456789", colon + 1) != std::string::npos)
      fail("--url {}: expected http://HOST:PORT", a.url);
    a.load.host = rest.substr(0, colon);
    a.load.port = std::stoi(rest.substr(colon + 1));
    ModelConfig gpt2;  // the default special ids are GPT-2's; its vocabulary padded to 64
    gpt2.vocab_size = 50304;
    a.load.prompts = serve_bench_prompts(a, gpt2);
    print_serve_load(a.url, a.load, run_serve_load(a.load), a.json);
  }
  for (const std::string& checkpoint : a.checkpoints) {
    const LoadedModel loaded =
        load_model(checkpoint, "", "", *a.on);
    const BpeTokenizer tokenizer = load_tokenizer(a.tokenizer, loaded);
    const ModelConfig& c = loaded.model->config();
    if (a.prompt_tokens + a.load.new_tokens > c.block_size)
      fail("bench serve: --prompt-tokens + --new-tokens {} exceeds {}'s context of {}",
           a.prompt_tokens + a.load.new_tokens, checkpoint, c.block_size);
    serve::ServerOptions server_options;
    server_options.scheduler.rows = a.parallel > 0 ? a.parallel : a.load.clients;
    server_options.scheduler.context = c.block_size;
    server_options.scheduler.queue_limit = a.load.requests;
    // Every client holds one connection from this machine's address.
    server_options.connections.max_connections = a.load.clients + 4;
    server_options.connections.max_per_client = a.load.clients + 4;
    serve::Server server(*loaded.model, tokenizer, server_options);
    a.load.host = "127.0.0.1";
    a.load.port = server.bind();
    std::thread listener([&] { server.listen(); });
    a.load.prompts = serve_bench_prompts(a, c);
    const ServeLoadResult result = run_serve_load(a.load);
    server.shutdown(std::chrono::milliseconds(1000));
    listener.join();
    print_serve_load(fmt::format("{} ({} rows)", c.family, server_options.scheduler.rows), a.load,
                     result, a.json);
  }
}

void register_serve_bench(CLI::App* bench) {
  auto* cmd = bench->add_subcommand(
      "serve", "a bounded load on an OpenAI-style server: sps serve in this process, or any --url");
  static ServeBenchArgs a;
  cmd->add_option("--url", a.url,
                  "a running server, http://HOST:PORT (e.g. llama-server); prompts are GPT-2 ids");
  cmd->add_option("--checkpoint", a.checkpoints,
                  "checkpoint or run folder(s): each is served in this process on a free loopback port");
  cmd->add_option("--tokenizer", a.tokenizer, "for --checkpoint: as for sps serve (default: the one its config names)");
  cmd->add_option("--clients", a.load.clients, "concurrent clients, each with its own connection")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--requests", a.load.requests, "completions in all")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 20));
  cmd->add_option("--prompt-tokens", a.prompt_tokens, "P, prompt tokens per request")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 20));
  cmd->add_option("--new-tokens", a.load.new_tokens, "N, tokens generated per request")
      ->check(CLI::Range(int64_t(1), int64_t(1) << 20));
  cmd->add_option("--parallel", a.parallel, "decode rows of the server started here (default: --clients)")
      ->check(CLI::Range(int64_t(0), int64_t(4096)));
  cmd->add_option("--tokens", a.token_file, "token file to draw prompts from (default: random ids)");
  cmd->add_option("--token-dtype", a.token_dtype, "uint16 | uint32 (default: meta.json's)");
  cmd->add_option("--seed", a.seed, "prompt windows");
  cmd->add_flag("--json", a.json, "one JSON object per server");
  a.on = &add_device_and_weight_type_options(cmd, "sps bench serve");
  cmd->callback([] { run_serve_bench(a); });
}

void register_gemm_bench(CLI::App* bench) {
  auto* gemm = bench->add_subcommand(
      "gemm",
      "the GEMM rate: BLAS sgemm (or the bf16 GEMMs) with these threads, or a GPU's (--device)");
  static int64_t gemm_n = 2048;
  static int gemm_repeats = 5;
  gemm->add_option("--size", gemm_n,
                   "matrix size n (n×n×n; with bf16 also the rows of the layer shapes)")
      ->check(CLI::Range(64, 16384));
  gemm->add_option("--repeats", gemm_repeats, "timed runs")->check(CLI::Range(1, 1000));
  const DeviceChoice& on = add_device_and_precision_options(
      gemm, "sps bench gemm",
      "fp32, or bf16: on the CPU its bf16 GEMMs beside oneDNN's matmuls and sgemm; on a GPU its "
      "GEMM on bf16 operands (rounded once, untimed)",
      Bf16On::every_device);
  gemm->callback([&on] {
    run_gemm_bench(ops::parse_device(on.device, "--device"),
                   ops::parse_precision(on.precision, "--precision"), gemm_n, gemm_repeats);
  });
}

void register_linear_bench(CLI::App* bench) {
  auto* linear = bench->add_subcommand(
      "linear", "the packed inference linear alone (decode's and prefill's projections, CPU)");
  static std::vector<std::string> types = {"f32", "bf16", "int8"};
  static std::vector<int64_t> rows = {1, 4};
  static int64_t layers = 12;
  static int repeats = 7;
  linear->add_option("--weight-type", types, "f32, bf16 and/or int8, taken in turn")
      ->delimiter(',')
      ->capture_default_str();
  linear->add_option("--rows", rows, "input rows per multiply (a decode step's B)")
      ->delimiter(',')
      ->capture_default_str()
      ->check(CLI::Range(int64_t(1), int64_t(4096)));
  static std::vector<int64_t> shape_dims;
  linear->add_option("--layers", layers,
                     "s-scale blocks (at most 96), or with --shape weights, cycled through")
      ->capture_default_str()
      ->check(CLI::Range(int64_t(1), int64_t(1024)));
  linear->add_option("--shape", shape_dims,
                     "OUTxIN: weights of this one shape instead of an s block's four (a call's "
                     "fixed cost against its bytes)")
      ->delimiter('x')
      ->expected(2)
      ->check(CLI::Range(int64_t(1), int64_t(65536)));
  linear->add_option("--repeats", repeats, "timed rounds")->check(CLI::Range(1, 1000));
  linear->callback([] {
    std::vector<ops::WeightType> parsed;
    for (const std::string& name : types)
      parsed.push_back(ops::parse_weight_type(name, "--weight-type"));
    std::optional<LinearShape> shape;
    if (!shape_dims.empty()) shape = LinearShape{shape_dims[0], shape_dims[1]};
    if (!shape && layers > 96) fail("--layers: at most 96 s-scale blocks (more with --shape)");
    run_linear_bench(parsed, rows, layers, repeats, shape);
  });
}

void register_attention_bench(CLI::App* bench) {
  auto* attention = bench->add_subcommand("attention", "the family-masked attention alone");
  static int64_t attn_tokens = 4096, attn_window = 64, attn_heads = 8, attn_head_dim = 64;
  static int attn_repeats = 3;
  static bool decode = false;
  static int64_t decode_batch = 1, decode_layers = 12;
  static std::string kv_type = "f32";
  attention->add_flag("--decode", decode,
                      "one decode step's attention over --tokens cached rows per sequence "
                      "(standard: 1 query row, sps: 2 and a full ring of --window rows)");
  attention->add_option("--batch", decode_batch, "--decode: sequences B")
      ->check(CLI::Range(1, 4096));
  attention->add_option("--layers", decode_layers,
                        "--decode: layers, each with its own cache (read from memory, not cache)")
      ->check(CLI::Range(1, 1024));
  attention->add_option("--kv-type", kv_type, "--decode: f32 or bf16 (the CPU's) cache rows");
  attention->add_option("--tokens", attn_tokens,
                        "tokens T (sps has 2T slots); with --decode, cached rows per sequence")
      ->check(CLI::Range(1, 1 << 20));
  attention->add_option("--window", attn_window, "sps window w")->check(CLI::Range(0, 1 << 20));
  attention->add_option("--heads", attn_heads, "heads H")->check(CLI::Range(1, 1024));
  attention->add_option("--head-dim", attn_head_dim, "head size D (even)")->check(CLI::Range(2, 1024));
  attention->add_option("--repeats", attn_repeats, "timed runs")->check(CLI::Range(1, 1000));
  const DeviceChoice& on = add_device_and_precision_options(
      attention, "sps bench attention", "fp32 or bf16: the GPU's tensor-core attention",
      Bf16On::gpu_only);
  attention->callback([&on] {
    if (attn_head_dim % 2) fail("--head-dim must be even, got {}", attn_head_dim);
    if (decode) {
      const ops::Device device = ops::parse_device(on.device, "--device");
      if (ops::parse_precision(on.precision, "--precision") != ops::Precision::fp32)
        fail("--decode times the decode attention, which has no --precision bf16");
      const bool bf16_cache = parse_kv_type(kv_type, "--kv-type") == KvType::bf16;
      if (bf16_cache && !ops::capabilities(device).host_memory)
        fail("--kv-type bf16 runs on the CPU only; use --kv-type f32 with --device {}",
             on.device);
      run_decode_attention_bench(device, decode_batch, attn_tokens, attn_window, attn_heads,
                                 attn_head_dim, bf16_cache, decode_layers, attn_repeats);
      return;
    }
    run_attention_bench(ops::parse_device(on.device, "--device"),
                        ops::parse_precision(on.precision, "--precision"), attn_tokens, attn_window,
                        attn_heads, attn_head_dim, attn_repeats);
  });
}

void register_step_bench(CLI::App* bench) {
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
  step->add_option("--rounds", options.rounds,
                   "rounds, each timing every --precision in turn; medians over the rounds")
      ->check(CLI::Range(1, 100));
  const DeviceChoice& on = add_device_and_precision_options(
      step, "sps bench step",
      "fp32 or bf16: the GEMMs on bf16 operands (on a GPU the attention's products too); a "
      "list (fp32,bf16) times each in turn and gives each one's speed against the first",
      Bf16On::every_device);
  step->callback([&on] {
    options.config = load_model_config(config_path, overrides);
    if (options.tokens > options.config.block_size)
      fail("--tokens {} exceeds model.block_size {}", options.tokens, options.config.block_size);
    options.device = ops::parse_device(on.device, "--device");
    options.precisions = parse_precisions(on.precision);
    run_step_bench(options);
  });
}

// The models of `bench generate`: every family of each --config (random weights; 2x_memory
// gets a window over all `positions`), then each --checkpoint as trained.
std::vector<GenerateBenchModel> generate_bench_models(const std::vector<std::string>& configs,
                                                      const std::vector<std::string>& checkpoints,
                                                      const std::vector<std::string>& overrides,
                                                      const std::vector<std::string>& families,
                                                      int64_t positions) {
  std::vector<GenerateBenchModel> models;
  for (const std::string& path : configs) {
    const ModelConfig base = load_model_config(path, overrides);
    for (const std::string& name : families) {
      const StudyFamily& entry = study_family(name, "--families");
      GenerateBenchModel m;
      m.config = base;
      m.config.family = entry.model_family;
      if (entry.window == WindowRule::every_position)
        m.config.window_size = std::max(base.block_size, positions);
      m.label = entry.window == WindowRule::swept ? fmt::format("{} w={}", name, base.window_size)
                                                  : name;
      if (configs.size() > 1)
        m.label = std::filesystem::path(path).stem().string() + " " + m.label;
      models.push_back(m);
    }
  }
  for (const std::string& dir : checkpoints) {
    const ModelFiles files = resolve_model_files(dir, "", "");
    const std::filesystem::path folder = std::filesystem::path(files.weights_path).parent_path();
    GenerateBenchModel m;
    m.config = load_model_config(files.config_path, {});
    require_saved_model(files.weights_path, m.config, files.config_path);
    m.weights = files.weights_path;
    // A trainer's checkpoints are RUN/checkpoints/NAME: call them RUN/NAME.
    const std::filesystem::path parent = folder.parent_path();
    const bool in_run = parent.filename() == "checkpoints";
    m.label = (in_run ? parent.parent_path().filename().string() + "/" : "") +
              folder.filename().string();
    models.push_back(m);
  }
  return models;
}

void register_generate_bench(CLI::App* bench) {
  auto* generate = bench->add_subcommand(
      "generate", "cached generation, the paper's protocol: prefill + decode for each family");
  static std::vector<std::string> gen_configs, gen_checkpoints, gen_overrides;
  static std::vector<std::string> gen_families = study_family_names();
  static GenerateBenchOptions gen;
  static bool gen_paper = false;
  generate->add_option("--config", gen_configs,
                       "model config YAML(s); each runs every --families entry, random weights");
  generate->add_option("--checkpoint", gen_checkpoints,
                       "checkpoint folder(s), or run folder(s) (their newest checkpoint), each as trained");
  generate
      ->add_option("--families", gen_families,
                   fmt::format("for --config: {} (2x_memory: sps with w >= every position)",
                               fmt::join(study_family_names(), ",")))
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
  static std::vector<std::string> gen_weight_types = {"f32"};
  generate
      ->add_option("--weight-type", gen_weight_types,
                   "f32, bf16 and/or int8: how the projections are held (each model runs in "
                   "each type given; not f32 only on the CPU)")
      ->delimiter(',')
      ->capture_default_str();
  static std::vector<std::string> gen_kv_types = {"f32"};
  generate
      ->add_option("--kv-type", gen_kv_types,
                   "f32 and/or bf16: how the KV cache holds keys and values (each model runs "
                   "with each; bf16 on the CPU only)")
      ->delimiter(',')
      ->capture_default_str();
  const std::string& device = add_device_option(generate, "sps bench generate");
  generate->callback([&device] {
    gen.device = ops::parse_device(device, "--device");
    std::vector<ops::WeightType> types;
    for (const std::string& name : gen_weight_types) {
      types.push_back(ops::parse_weight_type(name, "--weight-type"));
      if (types.back() != ops::WeightType::f32 && !ops::capabilities(gen.device).packed_weights)
        fail("--weight-type {}: the CPU backend's packed weights only; {} keeps f32 weights",
             name, device);
    }
    std::vector<KvType> kv_types;
    for (const std::string& name : gen_kv_types) {
      kv_types.push_back(parse_kv_type(name, "--kv-type"));
      require_kv_type(kv_types.back(), gen.device);
    }
    if (gen_paper) {
      gen.prompt_tokens = 1024;
      gen.new_tokens = 3072;
      gen.batch = 16;
    }
    if (gen_configs.empty() && gen_checkpoints.empty())
      fail("bench generate: give --config or --checkpoint");
    if (!gen_overrides.empty() && gen_configs.empty())
      fail("bench generate: overrides go with --config");
    gen.models.clear();
    for (const GenerateBenchModel& model :
         generate_bench_models(gen_configs, gen_checkpoints, gen_overrides, gen_families,
                               gen.prompt_tokens + gen.new_tokens))
      for (const ops::WeightType type : types)
        for (const KvType kv_type : kv_types) {
          gen.models.push_back(model);
          gen.models.back().weight_type = type;
          gen.models.back().kv_type = kv_type;
          if (types.size() > 1 || type != ops::WeightType::f32)
            gen.models.back().label += fmt::format(" {}", ops::weight_type_name(type));
          if (kv_types.size() > 1 || kv_type != KvType::f32)
            gen.models.back().label += fmt::format(" kv-{}", kv_type_name(kv_type));
        }
    run_generate_bench(gen);
  });
}

}  // namespace

void register_bench(CLI::App& app) {
  auto* bench = app.add_subcommand("bench", "measure kernels and training steps");
  bench->require_subcommand(1);
  register_gemm_bench(bench);
  register_linear_bench(bench);
  register_attention_bench(bench);
  register_step_bench(bench);
  register_generate_bench(bench);
  register_serve_bench(bench);
}

}  // namespace sps::cli
