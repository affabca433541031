// sps analyze persistent-window | gradients --checkpoint DIR [--checkpoint DIR …]
//
// The analyses of docs/model.md §9 on trained checkpoints: persistent-window ΔNLL (the same documents
// with and without the persistent-key window ω) and gradient routing (future-loss gradient
// at each stream's slots). JSON results and a gnuplot figure; see docs/analysis.md.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>

#include "analysis/documents.h"
#include "analysis/gradient_routing.h"
#include "analysis/persistent_window.h"
#include "analysis/plot.h"
#include "analysis/results_json.h"
#include "cli/commands.h"
#include "cli/model_files.h"
#include "data/token_file.h"
#include "model/config.h"
#include "model/model.h"
#include "model/weights_io.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/gnuplot.h"
#include "util/progress.h"
#include "util/safetensors.h"
#include "util/yaml_config.h"

namespace sps::cli {
namespace {

namespace fs = std::filesystem;

// Flags both analyses share.
struct CommonArgs {
  std::vector<std::string> checkpoints, labels;
  std::string data, dtype, out, figure;
  int64_t count = 0, batch = 4;
  uint64_t seed = 1234;
  bool no_figure = false, quiet = false;
};

struct PersistentWindowArgs {
  CommonArgs common;
  int64_t length = 2048, omega = 64, bin_width = 64;
  std::string source = "documents";
};

struct GradientArgs {
  CommonArgs common;
  int64_t window = 1024, target_begin = 64, target_end = 512, max_k = 512;
};

void note(const CommonArgs& a, const std::string& text) {
  if (!a.quiet) std::fprintf(stderr, "sps analyze: %s\n", text.c_str());
}

struct Checkpoint {
  std::string label, weights_path, config_path;
  ModelConfig config;
  std::string val_bin;  // the recipe's data.val_bin, when it names one
};

// The folder name of what was given: a run folder's name, or RUN/checkpoints/NAME's NAME.
std::string default_label(const std::string& arg) {
  fs::path p = fs::path(arg).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  const fs::path parent = p.parent_path();
  if (parent.filename() == "checkpoints") return parent.parent_path().filename().string() + "/" + p.filename().string();
  return p.filename().string();
}

std::vector<Checkpoint> resolve_checkpoints(const CommonArgs& a) {
  if (a.checkpoints.empty()) fail("give at least one --checkpoint DIR");
  if (!a.labels.empty() && a.labels.size() != a.checkpoints.size())
    fail("{} --label for {} --checkpoint; give one per checkpoint or none", a.labels.size(),
         a.checkpoints.size());
  std::vector<Checkpoint> out;
  for (size_t i = 0; i < a.checkpoints.size(); ++i) {
    const ModelFiles files = resolve_model_files(a.checkpoints[i], "", "");
    Checkpoint c;
    c.label = a.labels.empty() ? default_label(a.checkpoints[i]) : a.labels[i];
    c.weights_path = files.weights_path;
    c.config_path = files.config_path;
    c.config = load_model_config(c.config_path, {});
    require_saved_model(c.weights_path, c.config, c.config_path);
    const YAML::Node doc = load_yaml_file(c.config_path);
    if (doc["data"] && doc["data"]["val_bin"] && doc["data"]["val_bin"].IsScalar())
      c.val_bin = doc["data"]["val_bin"].Scalar();
    if (!out.empty() && c.config.eos_token_id != out[0].config.eos_token_id)
      fail("{}: eos_token_id {} differs from {}'s {}; compared models must share a tokenizer",
           c.config_path, c.config.eos_token_id, out[0].config_path, out[0].config.eos_token_id);
    out.push_back(std::move(c));
  }
  return out;
}

std::unique_ptr<TokenFile> open_data(const CommonArgs& a, const Checkpoint& first) {
  const std::string path = !a.data.empty() ? a.data : first.val_bin;
  if (path.empty()) fail("{} names no data.val_bin; give --data PATH (a token file)", first.config_path);
  TokenDType dtype = TokenDType::uint16;
  if (!a.dtype.empty()) {
    dtype = token_dtype_from_name(a.dtype, "--dtype");
  } else {
    const DatasetMeta meta = read_dataset_meta(fs::path(path).parent_path().string());
    if (!meta.dtype.empty()) dtype = token_dtype_from_name(meta.dtype, meta.path + ": dtype");
    else if (first.config.vocab_size > 65536) dtype = TokenDType::uint32;
  }
  return std::make_unique<TokenFile>(path, dtype);
}

// Checks what can be checked before hours of compute: the output folder and gnuplot.
std::string prepare_outputs(const CommonArgs& a) {
  if (a.out.empty()) fail("give --out FILE.json");
  std::error_code ec;
  const fs::path dir = fs::path(a.out).parent_path();
  if (!dir.empty() && !fs::is_directory(dir, ec)) fail("--out {}: no folder {}", a.out, dir.string());
  if (a.no_figure) return "";
  const std::string figure =
      !a.figure.empty() ? a.figure : fs::path(a.out).replace_extension(".png").string();
  if (!gnuplot_available())
    fail("gnuplot is not installed (it draws {}); install gnuplot-nox or pass --no-figure", figure);
  return figure;
}

nlohmann::ordered_json model_json(const Checkpoint& c) {
  return {{"label", c.label},           {"checkpoint", c.weights_path},
          {"config", c.config_path},    {"family", c.config.family},
          {"window_size", c.config.window_size}, {"block_size", c.config.block_size}};
}

void finish(const CommonArgs& a, const nlohmann::ordered_json& results,
            const std::string& figure, const analysis::PlotSpec& plot) {
  write_file_atomically(a.out, results.dump(2) + "\n");
  if (!figure.empty()) analysis::write_plot_png(figure, plot);
  std::printf("results: %s%s%s\n", a.out.c_str(), figure.empty() ? "" : ", figure: ",
              figure.c_str());
}

void run_persistent_window(const PersistentWindowArgs& a) {
  const CommonArgs& c = a.common;
  if (a.omega < 0) fail("--omega must be at least 0, got {}", a.omega);
  if (a.length < 2) fail("--length must be at least 2, got {}", a.length);
  if (a.source != "documents" && a.source != "windows")
    fail("--source {}: expected documents or windows", a.source);
  const std::string figure = prepare_outputs(c);
  const auto checkpoints = resolve_checkpoints(c);
  int64_t length = a.length;
  for (const auto& ck : checkpoints) length = std::min(length, ck.config.block_size);
  const auto data = open_data(c, checkpoints[0]);
  int64_t vocab = INT64_MAX;
  for (const auto& ck : checkpoints) vocab = std::min(vocab, ck.config.vocab_size);
  const analysis::Sequences seqs =
      a.source == "documents"
          ? analysis::sample_documents(*data, length, c.count, c.seed,
                                       checkpoints[0].config.eos_token_id, vocab)
          : analysis::sample_windows(*data, length, c.count, c.seed, vocab);
  if (seqs.tokens.empty() && a.source == "windows")
    fail("{}: {} tokens, fewer than length + 1 = {}", data->path(), data->size(), length + 1);
  if (seqs.tokens.empty())
    fail("{}: no document has {} tokens (length + 1); lower --length or use --source windows",
         data->path(), length + 1);
  // Notes once every input is known to be good, so an error stays one line.
  if (length < a.length)
    note(c, fmt::format("--length {} is more than block_size; using {} tokens", a.length, length));
  if (a.omega + 1 >= length)
    note(c, fmt::format("ω = {} reaches every position of {} tokens: Δℓ is 0 everywhere", a.omega,
                        length));
  if (int64_t(seqs.tokens.size()) < c.count)
    note(c, fmt::format("only {} documents of {} have {} tokens; using them all",
                        seqs.tokens.size(), data->path(), length + 1));

  nlohmann::ordered_json results;
  results["analysis"] = "persistent_window";
  results["data"] = data->path();
  results["source"] = a.source;
  results["seed"] = c.seed;
  results["candidates"] = seqs.candidates;
  analysis::PlotSpec plot{fmt::format("persistent-window ΔNLL, ω = {}, {} sequences of {} tokens",
                                      a.omega, seqs.tokens.size(), length),
                          "position p", "Δℓ(p) = NLL(ω forced) − NLL (nats)", false, 0, {}};
  std::printf("| model | family | ω | sequences | mean Δ (p > ω) | baseline NLL (p > ω) |\n"
              "|---|---|---|---|---|---|\n");
  for (const auto& ck : checkpoints) {
    ModelConfig base_config = ck.config, forced_config = ck.config;
    if (base_config.persistent_key_window >= 0)
      note(c, fmt::format("{} sets ω = {}; the baseline runs without it", ck.config_path,
                          base_config.persistent_key_window));
    base_config.persistent_key_window = -1;
    forced_config.persistent_key_window = a.omega;
    Model<float> baseline(base_config), forced(forced_config);
    if (!load_weights(ck.weights_path, baseline.params(), baseline.weights()))
      note(c, unverified_note(ck.weights_path));
    std::copy(baseline.weights(), baseline.weights() + baseline.params().total(), forced.weights());
    ProgressReporter progress(ck.label, progress_in("sequences", c.quiet));
    const auto r =
        analysis::measure_persistent_window(baseline, forced, seqs, c.batch, progress.callback());
    nlohmann::ordered_json entry = model_json(ck);
    entry.update(analysis::persistent_window_json(r, a.bin_width));
    results["models"].push_back(entry);
    plot.series.push_back(analysis::delta_series(r, ck.label + " (" + ck.config.family + ")",
                                                 int(plot.series.size())));
    std::printf("| %s | %s | %lld | %lld | %.5f | %.4f |\n", ck.label.c_str(),
                ck.config.family.c_str(), (long long)a.omega, (long long)r.sequences,
                r.mean_delta(a.omega + 1, length), r.mean_baseline(a.omega + 1, length));
    std::fflush(stdout);
  }
  finish(c, results, figure, plot);
}

void print_ratio_row(const std::string& label, const std::string& stream,
                     const analysis::RatioCurve& curve) {
  std::string row = "| " + label + " | " + stream + " |";
  for (size_t k : {1, 16, 64, 256, 512})
    row += k <= curve.ratio.size() && curve.count[k - 1] > 0
               ? fmt::format(" {:.3f} |", curve.ratio[k - 1])
               : std::string(" – |");
  std::printf("%s\n", row.c_str());
}

void run_gradients(const GradientArgs& a) {
  const CommonArgs& c = a.common;
  if (a.window < 2) fail("--window must be at least 2, got {}", a.window);
  if (a.target_begin < 0 || a.target_end <= a.target_begin)
    fail("--target-begin {} --target-end {}: need 0 ≤ begin < end", a.target_begin, a.target_end);
  if (a.max_k < 1) fail("--max-k must be at least 1, got {}", a.max_k);
  const std::string figure = prepare_outputs(c);
  const auto checkpoints = resolve_checkpoints(c);
  int64_t window = a.window;
  for (const auto& ck : checkpoints) window = std::min(window, ck.config.block_size);
  if (a.target_begin + 1 >= window)
    fail("--target-begin {} leaves no target with a future loss in a window of {} tokens",
         a.target_begin, window);
  const auto data = open_data(c, checkpoints[0]);
  int64_t vocab = INT64_MAX;
  for (const auto& ck : checkpoints) vocab = std::min(vocab, ck.config.vocab_size);
  const analysis::Sequences seqs = analysis::sample_documents(
      *data, window, c.count, c.seed, checkpoints[0].config.eos_token_id, vocab);
  if (seqs.tokens.empty())
    fail("{}: no document has {} tokens (window + 1); lower --window", data->path(), window + 1);
  // Notes once every input is known to be good, so an error stays one line.
  if (window < a.window)
    note(c, fmt::format("--window {} is more than block_size; using windows of {} tokens", a.window,
                        window));
  if (int64_t(seqs.tokens.size()) < c.count)
    note(c, fmt::format("only {} documents of {} have {} tokens; using them all",
                        seqs.tokens.size(), data->path(), window + 1));
  const analysis::GradientRoutingOptions options{.target_begin = a.target_begin,
                                                 .target_end = a.target_end,
                                                 .max_k = a.max_k,
                                                 .batch = c.batch};
  if (a.target_end > window || a.max_k > window - 1 - a.target_begin)
    note(c, fmt::format("targets cut to [{}, {}) and k to {} by the window of {} tokens",
                        a.target_begin, std::min(a.target_end, window),
                        std::min(a.max_k, window - 1 - a.target_begin), window));

  nlohmann::ordered_json results;
  results["analysis"] = "gradient_routing";
  results["data"] = data->path();
  results["seed"] = c.seed;
  results["candidates"] = seqs.candidates;
  analysis::PlotSpec plot{fmt::format("gradient routing: future / present gradient at p, {} "
                                      "documents, windows of {} tokens",
                                      seqs.tokens.size(), window),
                          "k (loss at p + k)", "mean ‖G_s(L_{p+k})‖ / ‖G_s(L_p)‖", true, 1, {}};
  std::printf("| model | stream | k=1 | k=16 | k=64 | k=256 | k=512 |\n|---|---|---|---|---|---|---|\n");
  for (const auto& ck : checkpoints) {
    Model<float> model(ck.config);
    if (!load_weights(ck.weights_path, model.params(), model.weights()))
      note(c, unverified_note(ck.weights_path));
    ProgressReporter progress(ck.label, progress_in("backwards", c.quiet));
    const auto r = analysis::measure_gradient_routing(model, seqs, options, progress.callback());
    nlohmann::ordered_json entry = model_json(ck);
    entry.update(analysis::gradient_routing_json(r));
    results["models"].push_back(entry);
    for (const auto& s : r.streams) {
      const int color = int(plot.series.size() / 2);
      plot.series.push_back(analysis::ratio_series(s.all, ck.label + " " + s.name, color, false));
      plot.series.push_back(analysis::ratio_series(
          s.without_readout, ck.label + " " + s.name + " (no readout terms)", color, true));
      print_ratio_row(ck.label, s.name, s.all);
      print_ratio_row(ck.label, s.name + " (no readout terms)", s.without_readout);
    }
    std::fflush(stdout);
  }
  finish(c, results, figure, plot);
}

void add_common(CLI::App* cmd, CommonArgs& a, int64_t default_count) {
  a.count = default_count;
  cmd->add_option("--checkpoint", a.checkpoints,
                  "checkpoint folder, or a run folder (newest checkpoint); repeat to compare")
      ->required();
  cmd->add_option("--label", a.labels, "a name per --checkpoint for the table, JSON and figure");
  cmd->add_option("--data", a.data, "token file (default: the first checkpoint's data.val_bin)");
  cmd->add_option("--dtype", a.dtype, "uint16 | uint32 (default: meta.json beside --data)");
  cmd->add_option("--count", a.count, "documents (or windows) to analyse")
      ->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(1) << 40));
  cmd->add_option("--seed", a.seed, "seed of the document choice")->capture_default_str();
  cmd->add_option("--batch", a.batch, "sequences per forward/backward")
      ->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(4096)));
  cmd->add_option("--out", a.out, "results JSON")->required();
  cmd->add_option("--figure", a.figure, "figure PNG (default: --out with .png)");
  cmd->add_flag("--no-figure", a.no_figure, "no figure (gnuplot not needed)");
  cmd->add_flag("--quiet", a.quiet, "no progress line or notes");
  add_device_option(cmd, "sps " + cmd->get_parent()->get_name() + " " + cmd->get_name());
}

}  // namespace

void register_analyze(CLI::App& app) {
  auto* analyze = app.add_subcommand(
      "analyze",
      "the paper's analyses: gradient routing and persistent-window ΔNLL (docs/model.md §9)");
  analyze->require_subcommand(1);

  auto* pw = analyze->add_subcommand(
      "persistent-window", "ΔNLL per position when persistent keys are cut to the last ω tokens");
  auto p = std::make_shared<PersistentWindowArgs>();
  add_common(pw, p->common, 16);
  pw->add_option("--length", p->length, "tokens per document (cut to block_size)")->capture_default_str();
  pw->add_option("--omega", p->omega, "persistent-key window ω")->capture_default_str();
  pw->add_option("--bin-width", p->bin_width, "positions per summary bin")
      ->capture_default_str()->check(CLI::Range(int64_t(1), int64_t(1) << 30));
  pw->add_option("--source", p->source,
                 "documents (each long enough, from its start) or windows (packed, seeded starts)")
      ->capture_default_str();
  pw->callback([p] { run_persistent_window(*p); });

  auto* gr = analyze->add_subcommand(
      "gradients", "gradient routing: future-loss gradient at each stream's slots");
  auto g = std::make_shared<GradientArgs>();
  add_common(gr, g->common, 4);
  gr->add_option("--window", g->window, "tokens per document window (cut to block_size)")
      ->capture_default_str();
  gr->add_option("--target-begin", g->target_begin, "first target position p")->capture_default_str();
  gr->add_option("--target-end", g->target_end, "end of the target positions (exclusive)")
      ->capture_default_str();
  gr->add_option("--max-k", g->max_k, "largest k of the future loss L_{p+k}")->capture_default_str();
  gr->callback([g] { run_gradients(*g); });
}

}  // namespace sps::cli
