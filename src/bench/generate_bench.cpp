#include "bench/generate_bench.h"

#include <fmt/format.h>
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/bench.h"
#include "data/token_file.h"
#include "infer/token_sampler.h"
#include "model/decoder.h"
#include "model/flops.h"
#include "model/model.h"
#include "model/weights_io.h"
#include "ops/backend_registry.h"
#include "util/error.h"
#include "util/process_stats.h"
#include "util/rng.h"

namespace sps {

double measure_copy_bandwidth() {
  const size_t bytes = size_t(256) << 20;
  std::vector<char> a(bytes, 1), b(bytes, 2);
  double best = 1e30;
  for (int r = 0; r < 5; ++r) {
    const double t0 = now_seconds();
    const int64_t chunks = 256;
#pragma omp parallel for schedule(static)
    for (int64_t c = 0; c < chunks; ++c)
      std::memcpy(b.data() + c * (bytes / chunks), a.data() + c * (bytes / chunks), bytes / chunks);
    best = std::min(best, now_seconds() - t0);
  }
  return 2.0 * double(bytes) / best;
}

double measure_device_copy_bandwidth(const ops::Backend<float>& backend) {
  const size_t bytes = size_t(1) << 30;
  ops::DeviceBuffer<char> a(backend), b(backend);
  a.reserve(bytes);
  b.reserve(bytes);
  backend.fill(reinterpret_cast<float*>(a.data()), int64_t(bytes / sizeof(float)), 1.0f);
  double best = 1e30;
  for (int r = 0; r < 5; ++r) {
    const double t0 = now_seconds();
    backend.copy(b.data(), a.data(), bytes);
    wait_for_backend(backend, b.data());
    best = std::min(best, now_seconds() - t0);
  }
  return 2.0 * double(bytes) / best;
}

namespace {

// Peak resident memory since the last reset: Linux's VmHWM, which writing 5 to
// /proc/self/clear_refs resets. Where that is not possible, the process-wide peak.
bool reset_peak_rss() {
  std::FILE* f = std::fopen("/proc/self/clear_refs", "w");
  if (!f) return false;
  const bool ok = std::fputs("5", f) >= 0;
  return std::fclose(f) == 0 && ok;
}
int64_t peak_rss_since_reset() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) * 1024;  // kB
  return peak_rss_bytes();
}

// What decode is measured against: the copy bandwidth (bytes/s) and the sgemm rate (FLOP/s)
// of this process's threads, both measured in the run.
struct MachineRates {
  double bandwidth = 0, flops = 0;
};

MachineRates measure_rates(bool on_cpu, const ops::Backend<float>& backend) {
  MachineRates m;
  m.bandwidth = on_cpu ? measure_copy_bandwidth() : measure_device_copy_bandwidth(backend);
  m.flops = 1e9 * (on_cpu ? measure_sgemm_gflops(1024, 5)
                          : measure_backend_gemm_gflops(backend, 4096, 5));
  return m;
}

// What one timed run's decode steps took, read and computed: the projections read the weights,
// the attention the cache rows in use.
struct DecodeTotals {
  double seconds = 0, weight_bytes = 0, cache_bytes = 0, projection_flops = 0, attention_flops = 0;
};

struct BenchResult {
  std::string label, family;
  int64_t window = 0;
  std::vector<double> total, prefill;  // per timed run, every round
  std::vector<DecodeTotals> decode;
  double seconds = 0, prefill_seconds = 0, decode_seconds = 0;
  double total_tokens_per_second = 0, decode_tokens_per_second = 0;
  int64_t kv_allocated = 0, kv_used = 0, peak_rss = 0, rss_end = 0, activation_bytes = 0;
  double bound_fraction = 0;       // decode time at the bandwidth bound / measured decode time
  double flop_bound_fraction = 0;  // decode time at the sgemm rate / measured decode time
  double op_bound_fraction = 0;    // projections and attention each at their own bound, added
  bool peak_is_per_model = true;
};

// One model with its decoder, timed run by run. Each step's greedy choice is made where the
// logits are and ends with the ids on the host, so on a GPU every timed step has finished.
struct Contestant {
  const GenerateBenchModel& spec;
  Model<float> model;
  Decoder<float> decoder;
  TokenSampler greedy;  // never EOS (nor PAD or PREDICT): every row runs N steps
  std::vector<const TokenSampler*> samplers;
  std::vector<Rng> rngs;  // unused by greedy choices; next_tokens takes one per row
  std::vector<Rng*> row_rngs;
  std::vector<int32_t> next;
  double weight_bytes = 0;
  double prefill_seconds = 0;  // the current run
  DecodeTotals decode;
  int64_t activation_bytes = 0;

  static DecoderShape shape(const GenerateBenchOptions& o) {
    DecoderShape s;
    s.batch = o.batch;
    s.max_prompt_tokens = o.prompt_tokens;
    s.max_new_tokens = std::max<int64_t>(0, o.new_tokens - 1);
    s.prefill_rows = o.prefill_rows;
    return s;
  }
  static Model<float>& with_weights(Model<float>& model, const GenerateBenchModel& m, uint64_t seed) {
    if (m.weights.empty()) {
      model.init_weights(seed);
      model.pack_for_inference(m.weight_type);
    } else {
      load_weights_for_inference(m.weights, model, m.weight_type);
    }
    model.set_kv_type(m.kv_type);
    return model;
  }
  Contestant(const GenerateBenchModel& m, const GenerateBenchOptions& o,
             const ops::Backend<float>& backend)
      : spec(m),
        model(m.config, backend,
              m.weights.empty() ? Model<float>::InitialWeights::zero
                                : Model<float>::InitialWeights::unset),
        decoder(with_weights(model, m, o.seed), shape(o)),
        greedy(never_eos(m.config), m.config), samplers(o.batch, &greedy), rngs(o.batch),
        next(o.batch), weight_bytes(double(model.weight_bytes())) {
    for (Rng& rng : rngs) row_rngs.push_back(&rng);
  }
  static SamplingOptions never_eos(const ModelConfig& c) {
    SamplingOptions s;
    s.forbidden = {int32_t(c.eos_token_id)};
    return s;
  }

  void prefill(const std::vector<int32_t>& prompts, int64_t P) {
    const double t0 = now_seconds();
    decoder.prefill(prompts.data(), P);
    activation_bytes = model.activation_bytes();
    model.release_activations();  // decode holds only weights and the cache
    prefill_seconds = now_seconds() - t0;
    decode = DecodeTotals{};
  }
  // One new token per row: greedy choice over ids other than EOS, PAD and PREDICT, then the
  // decode step that consumes it.
  void step() {
    const ModelConfig& c = spec.config;
    const double t0 = now_seconds();
    TokenSampler::next_tokens(decoder, int64_t(next.size()), samplers.data(), row_rngs.data(),
                              next.data());
    decode.weight_bytes += weight_bytes;
    decode.cache_bytes += double(decoder.cache().used_bytes());
    decoder.step(next.data());
    decode.seconds += now_seconds() - t0;
    decode.projection_flops += decode_projection_flops(c, int64_t(next.size()));
    decode.attention_flops +=
        decode_attention_flops(c, double(decoder.last_step_attention_pairs()));
  }
  void record(BenchResult& r) const {
    r.total.push_back(prefill_seconds + decode.seconds);
    r.prefill.push_back(prefill_seconds);
    r.decode.push_back(decode);
  }
  void summarise(BenchResult& r, const GenerateBenchOptions& o) const {
    const int64_t B = o.batch, P = o.prompt_tokens, N = o.new_tokens;
    r.label = spec.label;
    r.family = spec.config.family;
    r.window = spec.config.window_size;
    r.seconds = median(r.total);
    r.prefill_seconds = median(r.prefill);
    std::vector<double> decode_seconds;
    for (const DecodeTotals& d : r.decode) decode_seconds.push_back(d.seconds);
    r.decode_seconds = median(decode_seconds);
    r.total_tokens_per_second = double(B * (P + N)) / r.seconds;
    r.decode_tokens_per_second = r.decode_seconds > 0 ? double(B * (N - 1)) / r.decode_seconds : 0;
    r.kv_allocated = decoder.cache().allocated_bytes();
    r.kv_used = decoder.cache().used_bytes();
    r.activation_bytes = activation_bytes;
  }
};

// The decode time each bound allows, as a fraction of the measured decode time: median over
// the timed runs.
void set_bound_fractions(BenchResult& r, const MachineRates& machine) {
  std::vector<double> bound, flop_bound, op_bound;
  const double bw = machine.bandwidth, rate = machine.flops;
  for (const DecodeTotals& d : r.decode) {
    const auto fraction = [&](double seconds) { return d.seconds > 0 ? seconds / d.seconds : 0.0; };
    bound.push_back(fraction((d.weight_bytes + d.cache_bytes) / bw));
    flop_bound.push_back(fraction((d.projection_flops + d.attention_flops) / rate));
    // Each part at the roofline of its own kind: the bound of a step whose parts run one after
    // the other (per step the larger side of each part is the same, so sums can stand in).
    op_bound.push_back(fraction(std::max(d.weight_bytes / bw, d.projection_flops / rate) +
                                std::max(d.cache_bytes / bw, d.attention_flops / rate)));
  }
  r.bound_fraction = median(bound);
  r.flop_bound_fraction = median(flop_bound);
  r.op_bound_fraction = median(op_bound);
}

// One round of a model alone: its warm-up and timed runs, added to r.
void bench_model(BenchResult& r, const GenerateBenchModel& m, const GenerateBenchOptions& o,
                 const std::vector<int32_t>& prompts, const ops::Backend<float>& backend) {
  r.peak_is_per_model = reset_peak_rss();
  Contestant c(m, o, backend);
  for (int run = 0; run < o.warmup + o.runs; ++run) {
    c.prefill(prompts, o.prompt_tokens);
    for (int64_t k = 0; k + 1 < o.new_tokens; ++k) c.step();
    if (run >= o.warmup) c.record(r);
  }
  c.summarise(r, o);
  r.rss_end = std::max(r.rss_end, current_rss_bytes());
  r.peak_rss = std::max(r.peak_rss, peak_rss_since_reset());
}

// All models at once, taking turns step by step, so every model sees the same machine.
void bench_interleaved(std::vector<BenchResult>& results, const GenerateBenchOptions& o,
                       const std::vector<int32_t>& prompts, const ops::Backend<float>& backend) {
  std::vector<std::unique_ptr<Contestant>> all;
  for (const auto& m : o.models) all.push_back(std::make_unique<Contestant>(m, o, backend));
  for (int run = 0; run < o.warmup + o.runs; ++run) {
    for (auto& c : all) c->prefill(prompts, o.prompt_tokens);
    for (int64_t k = 0; k + 1 < o.new_tokens; ++k)
      for (auto& c : all) c->step();
    if (run >= o.warmup)
      for (size_t i = 0; i < all.size(); ++i) all[i]->record(results[i]);
  }
  for (size_t i = 0; i < all.size(); ++i) {
    all[i]->summarise(results[i], o);
    results[i].peak_is_per_model = false;
    results[i].peak_rss = peak_rss_bytes();
    results[i].rss_end = current_rss_bytes();
  }
}

double ratio(double a, double b) { return b > 0 ? a / b : 0.0; }

// The roofline that limits decode: the one that would take longer at the measured rates.
const char* bound_name(const BenchResult& r) {
  return r.flop_bound_fraction > r.bound_fraction ? "compute" : "bandwidth";
}

}  // namespace

std::vector<int32_t> draw_bench_prompts(const std::string& token_file, const std::string& token_dtype,
                                        int64_t count, int64_t P, const ModelConfig& c, uint64_t seed) {
  std::vector<int32_t> prompts(count * P);
  Rng rng(seed);
  if (token_file.empty()) {
    for (auto& t : prompts) t = int32_t(rng.below(uint64_t(c.eos_token_id)));
    return prompts;
  }
  std::string dtype = token_dtype;
  if (dtype.empty()) {
    const DatasetMeta meta = read_dataset_meta(std::filesystem::path(token_file).parent_path().string());
    dtype = meta.dtype.empty() ? "uint16" : meta.dtype;
  }
  const TokenFile file(token_file, token_dtype_from_name(dtype, "--token-dtype"));
  if (file.size() < P) fail("{}: {} tokens, fewer than --prompt-tokens {}", token_file, file.size(), P);
  for (int64_t b = 0; b < count; ++b) {
    const int64_t start = int64_t(rng.below(uint64_t(file.size() - P + 1)));
    file.read(start, P, prompts.data() + b * P, c.vocab_size);
    for (int64_t i = 0; i < P; ++i) {
      int32_t& t = prompts[b * P + i];
      if (t == c.pad_token_id || t == c.predict_token_id)
        fail("{}: id {} at {} is PAD or PREDICT of the model", token_file, t, start + i);
    }
  }
  return prompts;
}

namespace {

void check_generate_bench_options(const GenerateBenchOptions& o) {
  if (o.models.empty()) fail("bench generate: no model to run");
  if (o.prompt_tokens < 1 || o.new_tokens < 1 || o.batch < 1)
    fail("bench generate: --prompt-tokens, --new-tokens and --batch must be >= 1");
  for (const auto& m : o.models)
    if (o.prompt_tokens > m.config.block_size)
      fail("{}: --prompt-tokens {} exceeds model.block_size {}", m.label, o.prompt_tokens,
           m.config.block_size);
}

// Every model's rounds (or one interleaved pass), then each result's bound fractions at the
// machine's rates: the larger of each rate measured before and after the runs, since the
// rates move while a long run goes on (another tenant, the clock); the stricter bound.
std::vector<BenchResult> time_models(const GenerateBenchOptions& o,
                                     const std::vector<int32_t>& prompts,
                                     const ops::Backend<float>& backend, bool on_cpu,
                                     const MachineRates& before, MachineRates& after) {
  std::vector<BenchResult> results(o.models.size());
  if (o.interleave) bench_interleaved(results, o, prompts, backend);
  for (int round = 0; round < (o.interleave ? 0 : o.rounds); ++round)
    for (size_t i = 0; i < o.models.size(); ++i) {
      bench_model(results[i], o.models[i], o, prompts, backend);
      if (o.rounds > 1 && !o.json)
        std::fprintf(stderr, "round %d/%d %s: decode %.1f tokens/s\n", round + 1, o.rounds,
                     results[i].label.c_str(), results[i].decode_tokens_per_second);
    }
  after = measure_rates(on_cpu, backend);
  const MachineRates machine{std::max(before.bandwidth, after.bandwidth),
                             std::max(before.flops, after.flops)};
  for (BenchResult& r : results) set_bound_fractions(r, machine);
  return results;
}

void print_table_head(const GenerateBenchOptions& o, const MachineRates& before, bool on_cpu) {
  fmt::print("generate: B={} prompts of P={} tokens, N={} new tokens ({}), {} warm-up + {} "
             "timed run(s) in {} round(s), medians; {}; before the runs: copy bandwidth "
             "{:.1f} GB/s, {} {:.1f} GFLOP/s\n",
             o.batch, o.prompt_tokens, o.new_tokens,
             o.token_file.empty() ? "random prompt ids" : "prompts from " + o.token_file, o.warmup,
             o.runs, o.rounds,
             on_cpu ? fmt::format("{} threads", omp_get_max_threads()) : o.device.name(),
             before.bandwidth / 1e9, on_cpu ? "sgemm" : "GEMM", before.flops / 1e9);
  fmt::print("{:<22} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>8} {:>10} {:>8} | {:>7} {:>7} "
             "{:>7} {:>7}\n",
             "model", "prefill ms", "decode t/s", "total t/s", "KV MiB", "KV used", "peak MiB",
             "BW bound", "FLOP bound", "op bound", "decode", "total", "KV", "peak");
  std::fflush(stdout);
}

void print_table_row(const BenchResult& r, const BenchResult& ref) {
  fmt::print("{:<22} {:>10.1f} {:>10.1f} {:>10.1f} {:>10.2f} {:>10.2f} {:>10.1f} {:>7.0f}% "
             "{:>9.0f}% {:>7.0f}% | "
             "{:>6.3f}x {:>6.3f}x {:>6.3f}x {:>6.3f}x\n",
             r.label, 1e3 * r.prefill_seconds, r.decode_tokens_per_second,
             r.total_tokens_per_second, double(r.kv_allocated) / 1048576.0,
             double(r.kv_used) / 1048576.0, double(r.peak_rss) / 1048576.0, 100 * r.bound_fraction,
             100 * r.flop_bound_fraction, 100 * r.op_bound_fraction,
             ratio(r.decode_tokens_per_second, ref.decode_tokens_per_second),
             ratio(r.total_tokens_per_second, ref.total_tokens_per_second),
             ratio(double(r.kv_allocated), double(ref.kv_allocated)),
             ratio(double(r.peak_rss), double(ref.peak_rss)));
}

// What other work took of the machine while the models ran: a number to trust the rates by.
std::string others_text(double others) {
  return others < 0 ? "unknown (no /proc)" : fmt::format("{:.0f}%", 100 * others);
}

void print_table_notes(const GenerateBenchOptions& o, const std::vector<BenchResult>& results,
                       const BenchResult& ref, const MachineRates& before,
                       const MachineRates& after, double others) {
  fmt::print("ratios are to {}; KV = allocated cache (capacity P+N per row, plus the ring); "
             "BW bound = (weights + cache rows in use, read once per step) / copy bandwidth, "
             "FLOP bound = decode FLOPs (every slot's projections, the LM head, the attention "
             "pairs) / GEMM rate (BLAS sgemm on the CPU, cuBLASLt on a GPU), op bound = the "
             "projections and the attention each at the longer of their own memory and FLOP "
             "times, added (the bound when they run one after the other), each as a fraction "
             "of the measured decode time; the larger of BW and FLOP is the bound that "
             "applies; rates before and after the runs: copy {:.1f} and {:.1f} GB/s, {:.1f} and "
             "{:.1f} GFLOP/s (the bounds take the larger of each)\n",
             ref.label, before.bandwidth / 1e9, after.bandwidth / 1e9, before.flops / 1e9,
             after.flops / 1e9);
  fmt::print("other processes took {} of the CPUs' time while the models ran (a VM's steal "
             "time included)\n",
             others_text(others));
  if (o.interleave)
    fmt::print("interleaved: all models held at once, taking turns step by step; peak memory "
               "is the whole process's\n");
  else if (!results.front().peak_is_per_model)
    fmt::print("peak memory is the process's high-water mark (could not reset it per model)\n");
}

void print_json(const GenerateBenchOptions& o, const BenchResult& r, const BenchResult& ref,
                const MachineRates& before, const MachineRates& after, double others) {
  const double bandwidth = std::max(before.bandwidth, after.bandwidth);
  const double flops = std::max(before.flops, after.flops);
  const nlohmann::json j = {
      {"model", r.label},
      {"family", r.family},
      {"window", r.window},
      {"batch", o.batch},
      {"prompt_tokens", o.prompt_tokens},
      {"new_tokens", o.new_tokens},
      {"threads", omp_get_max_threads()},
      {"device", o.device.name()},
      {"seconds", r.seconds},
      {"prefill_seconds", r.prefill_seconds},
      {"decode_seconds", r.decode_seconds},
      {"total_tokens_per_second", r.total_tokens_per_second},
      {"decode_tokens_per_second", r.decode_tokens_per_second},
      {"kv_cache_allocated_bytes", r.kv_allocated},
      {"kv_cache_used_bytes", r.kv_used},
      {"peak_rss_bytes", r.peak_rss},
      {"peak_rss_per_model", r.peak_is_per_model},
      {"rss_end_of_decode_bytes", r.rss_end},
      {"prefill_activation_bytes", r.activation_bytes},
      {"copy_bandwidth_bytes_per_second", bandwidth},
      {"copy_bandwidth_before_after", {before.bandwidth, after.bandwidth}},
      {"decode_fraction_of_bandwidth_bound", r.bound_fraction},
      {"gemm_flops_per_second", flops},
      {"gemm_flops_before_after", {before.flops, after.flops}},
      {"decode_fraction_of_flop_bound", r.flop_bound_fraction},
      {"decode_fraction_of_op_bound", r.op_bound_fraction},
      {"decode_bound", bound_name(r)},
      {"other_cpu_share", others},
      {"reference", ref.label},
      {"decode_ratio", ratio(r.decode_tokens_per_second, ref.decode_tokens_per_second)},
      {"total_ratio", ratio(r.total_tokens_per_second, ref.total_tokens_per_second)},
      {"kv_ratio", ratio(double(r.kv_allocated), double(ref.kv_allocated))},
      {"kv_used_ratio", ratio(double(r.kv_used), double(ref.kv_used))},
      {"peak_ratio", ratio(double(r.peak_rss), double(ref.peak_rss))}};
  fmt::print("{}\n", j.dump());
}

}  // namespace

void run_generate_bench(const GenerateBenchOptions& o) {
  check_generate_bench_options(o);
  const ops::Backend<float>& backend = ops::backend_for(o.device, ops::Precision::fp32);
  const bool on_cpu = ops::capabilities(o.device).host_memory;
  const MachineRates before = measure_rates(on_cpu, backend);
  if (!o.json) print_table_head(o, before, on_cpu);
  const std::vector<int32_t> prompts = draw_bench_prompts(
      o.token_file, o.token_dtype, o.batch, o.prompt_tokens, o.models.front().config, o.seed);
  MachineRates after;
  const CpuTimes cpu_before = cpu_times_now();
  const std::vector<BenchResult> results = time_models(o, prompts, backend, on_cpu, before, after);
  const double others = others_cpu_share(cpu_before, cpu_times_now());
  // Ratios are to the first standard model, else each model's own.
  const BenchResult* reference = nullptr;
  for (const BenchResult& r : results)
    if (!reference && r.family == "standard") reference = &r;
  for (const BenchResult& r : results) {
    const BenchResult& ref = reference ? *reference : r;
    if (o.json)
      print_json(o, r, ref, before, after, others);
    else
      print_table_row(r, ref);
    std::fflush(stdout);
  }
  if (!o.json)
    print_table_notes(o, results, reference ? *reference : results.front(), before, after, others);
}

}  // namespace sps
