#include "eval/evaluate.h"

#include <fmt/format.h>

#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "data/token_file.h"
#include "eval/corpus.h"
#include "eval/rolling.h"
#include "eval/tasks.h"
#include "train/train_config.h"
#include "train/trainer.h"
#include "util/error.h"
#include "util/sps_home.h"

namespace sps::eval {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// The recipe's data and validation settings when the config is a whole training recipe; a
// bare model config has none, and a recipe with an error is reported, not ignored.
std::unique_ptr<TrainConfig> recipe_of(const EvalModel& m) {
  if (!m.config_doc["training"] && !m.config_doc["data"]) return nullptr;
  return std::make_unique<TrainConfig>(load_train_config(m.config_path, {}));
}

// A task's progress: the caller's callback, or a reporter on stderr (silent when quiet).
class TaskProgress {
 public:
  TaskProgress(const EvalOptions& options, const std::string& label, const std::string& unit) {
    if (options.progress) {
      callback_ = options.progress(label, unit);
    } else {
      reporter_ = std::make_unique<ProgressReporter>(label, progress_in(unit, options.quiet));
      callback_ = reporter_->callback();
    }
  }
  const ProgressCallback& callback() const { return callback_; }

 private:
  std::unique_ptr<ProgressReporter> reporter_;
  ProgressCallback callback_;
};

struct ValResult {
  double nll = 0, seconds = 0, tokens_per_second = 0;
  int64_t windows = 0, tokens = 0;
  std::string path;
};

ValResult run_val(Model<float>& model, const std::string& path, const std::string& dtype_name,
                  int64_t total_tokens, uint64_t seed, int64_t batch, const EvalOptions& options) {
  const int64_t T = model.config().block_size, V = model.config().vocab_size;
  TokenDType dtype = TokenDType::uint16;
  if (!dtype_name.empty()) {
    dtype = token_dtype_from_name(dtype_name, "dtype");
  } else {
    const DatasetMeta meta = read_dataset_meta(fs::path(path).parent_path().string());
    if (!meta.dtype.empty())
      dtype = token_dtype_from_name(meta.dtype, meta.path + ": dtype");
    else if (V > 65536)
      dtype = TokenDType::uint32;
  }
  const TokenFile file(path, dtype);
  if (file.size() < T + 1)
    fail("{}: {} tokens, fewer than one window of block_size + 1 = {}", path, file.size(), T + 1);
  const auto starts = validation_windows(file.size(), T, total_tokens, seed);
  std::vector<int32_t> x(size_t(batch * T)), y(size_t(batch * T)), row(size_t(T + 1));
  const TaskProgress progress(options, "val", "windows");
  const auto t0 = Clock::now();
  model.reserve(batch, T, /*training=*/false);
  const double nll = pooled_nll(model, file, starts, batch, x, y, row, progress.callback());
  ValResult v;
  v.path = path;
  v.seconds = seconds_since(t0);
  v.nll = finite_or_fail(nll, path + ": validation NLL");
  v.windows = int64_t(starts.size());
  v.tokens = v.windows * T;
  v.tokens_per_second = v.seconds > 0 ? double(v.tokens) / v.seconds : 0;
  return v;
}

// --corpus-bytes: the corpus's first documents up to `budget` bytes of text, the last one cut
// at white space (quick runs; the numbers are then those of that prefix).
void cap_corpus_bytes(std::vector<CorpusDocument>& docs, int64_t budget) {
  for (size_t i = 0; i < docs.size(); ++i) {
    std::string& text = docs[i].text;
    if (int64_t(text.size()) < budget) {
      budget -= int64_t(text.size());
      continue;
    }
    size_t cut = text.find_last_of(" \t\n", size_t(budget));
    if (cut == std::string::npos || cut == 0) cut = size_t(budget);
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;  // whole UTF-8
    text.resize(cut);
    docs.resize(text.empty() ? i : i + 1);
    return;
  }
}

std::string suite_dir() { return sps_home() + "/eval-suite"; }

bool is_val_task(const std::string& t) {
  return t == "val" || t == "val?" || t.rfind("val:", 0) == 0;
}

// --suite local: the recipe's val.bin (when there is one), the local corpora that are
// present, the held-out edu documents, cloze and continuation.
void add_local_suite(EvalPlan& plan, bool quiet) {
  const std::string corpora = sps_home() + "/corpora", dir = suite_dir();
  std::error_code ec;
  if (!fs::exists(dir + "/cloze.jsonl", ec))
    fail("{}: the local suite is not built; run scripts/build-eval-suite.sh", dir);
  std::vector<std::string> suite = {"val?"};
  for (const char* name : {"brown", "kjv", "gcide"}) {
    const std::string path = corpora + "/" + name + ".jsonl";
    if (fs::exists(path, ec))
      suite.push_back(fmt::format("corpus:{}={}", name, path));
    else if (!quiet)
      std::fprintf(stderr, "sps eval: %s not found, corpus %s skipped (scripts/get-corpora.sh)\n",
                   path.c_str(), name);
  }
  suite.push_back("corpus:edu_heldout=" + dir + "/edu_heldout.jsonl");
  suite.push_back("cloze");
  suite.push_back("continuation");
  plan.tasks.insert(plan.tasks.begin(), suite.begin(), suite.end());
  plan.files.try_emplace("cloze", dir + "/cloze.jsonl");
  plan.files.try_emplace("continuation", dir + "/continuation.jsonl");
}

// What the tasks found: the results, the printed table's rows, and the numbers the summary
// averages.
struct Report {
  nlohmann::ordered_json results;
  std::vector<std::array<std::string, 4>> table;  // task, metric, value, detail
  double val_nll = NAN;
  std::vector<double> corpus_nll, task_acc;
};

// Everything a task needs besides its own name.
struct Context {
  const EvalModel& model;
  const EvalOptions& options;
  const TrainConfig* recipe;  // null for a bare model config
};

void eval_val(const Context& e, const std::string& t, Report& report) {
  std::string path = t.rfind("val:", 0) == 0 ? t.substr(4) : "";
  if (path.empty() && e.recipe) path = e.recipe->data.val_bin;
  if (path.empty()) {
    if (t == "val?") return;  // the suite without a recipe's val.bin
    fail("task val: {} names no val.bin; use val:PATH", e.model.config_path);
  }
  const EvalOptions& o = e.options;
  const int64_t total = o.val_tokens > 0 ? o.val_tokens
                        : e.recipe       ? e.recipe->training.eval_total_tokens
                                         : 10000000;
  const uint64_t seed = e.recipe ? uint64_t(e.recipe->training.eval_seed) : 42;
  const std::string dtype = e.recipe && t.rfind("val:", 0) != 0 ? e.recipe->data.dtype : "";
  const ValResult v = run_val(e.model.model, path, dtype, total, seed, o.batch, o);
  report.val_nll = v.nll;
  report.results["val"] = {{"path", v.path},       {"nll", v.nll},
                           {"windows", v.windows}, {"tokens", v.tokens},
                           {"seconds", v.seconds}, {"tokens_per_second", v.tokens_per_second}};
  report.table.push_back(
      {"val", "NLL", fmt::format("{:.4f}", v.nll),
       fmt::format("{} windows, {:.0f} tokens/s", v.windows, v.tokens_per_second)});
}

void eval_corpus(const Context& e, const std::string& t, Report& report) {
  const EvalOptions& o = e.options;
  const auto [name, path] = name_path(t.substr(7), "corpus");
  auto docs = read_corpus(path);
  if (o.limit > 0 && int64_t(docs.size()) > o.limit) docs.resize(size_t(o.limit));
  if (o.corpus_bytes > 0) cap_corpus_bytes(docs, o.corpus_bytes);
  const TaskProgress progress(o, "corpus " + name, "windows");
  const auto t0 = Clock::now();
  const CorpusScore s =
      score_corpus(e.model.model, e.model.tokenizer(), docs, o.batch, progress.callback());
  finite_or_fail(s.loglik, path + ": corpus log-likelihood");
  const double secs = seconds_since(t0);
  report.corpus_nll.push_back(s.nats_per_word());
  report.results["corpus"][name] = {{"path", path},
                                    {"nats_per_word", s.nats_per_word()},
                                    {"nll_per_token", s.nll_per_token()},
                                    {"bits_per_byte", s.bits_per_byte()},
                                    {"word_perplexity", std::exp(s.nats_per_word())},
                                    {"documents", s.documents},
                                    {"tokens", s.tokens},
                                    {"words", s.words},
                                    {"bytes", s.bytes},
                                    {"loglik", s.loglik},
                                    {"seconds", secs},
                                    {"tokens_per_second", secs > 0 ? double(s.tokens) / secs : 0}};
  report.table.push_back({"corpus:" + name, "nats/word", fmt::format("{:.4f}", s.nats_per_word()),
                          fmt::format("{:.4f} nats/token, {:.4f} bits/byte, {} docs",
                                      s.nll_per_token(), s.bits_per_byte(), s.documents)});
}

void eval_zero_shot(const Context& e, const std::string& t, const std::string& file,
                    Report& report) {
  const EvalOptions& o = e.options;
  const TaskData data = load_task(t, file, o.limit);
  const TaskProgress progress(o, t, "items");
  const TaskResult r =
      run_task(e.model.model, e.model.tokenizer(), data, o.batch, progress.callback(), o.scoring);
  report.task_acc.push_back(data.lambada ? r.acc : r.acc_norm);
  nlohmann::ordered_json j = {{"path", data.path}, {"items", r.items}};
  if (data.lambada) {
    j["acc"] = r.acc;
    j["perplexity"] = r.perplexity;
  } else {
    j["acc"] = r.acc;
    j["acc_norm"] = r.acc_norm;
  }
  j["scoring"] = scoring_name(o.scoring);
  j["seconds"] = r.seconds;
  j["items_per_second"] = r.items_per_second();
  report.results["tasks"][t] = j;
  if (data.lambada)
    report.table.push_back({t, "exact match", fmt::format("{:.4f}", r.acc),
                            fmt::format("ppl {:.2f}, {} items, {:.1f} items/s", r.perplexity,
                                        r.items, r.items_per_second())});
  else
    report.table.push_back({t, "acc_norm", fmt::format("{:.4f}", r.acc_norm),
                            fmt::format("acc {:.4f}, {} items, {:.1f} items/s", r.acc, r.items,
                                        r.items_per_second())});
}

// Adds the summary (means of what ran) to the results; returns the printed tables.
std::string summarize(Report& report) {
  const auto mean = [](const std::vector<double>& v) {
    double s = 0;
    for (double x : v) s += x;
    return v.empty() ? NAN : s / double(v.size());
  };
  nlohmann::ordered_json summary;
  if (!std::isnan(report.val_nll)) summary["val_nll"] = report.val_nll;
  if (!report.corpus_nll.empty()) summary["corpus_nll"] = mean(report.corpus_nll);
  if (!report.task_acc.empty()) summary["task_accuracy"] = mean(report.task_acc);
  report.results["summary"] = summary;

  std::string md = "| task | metric | value | detail |\n|---|---|---|---|\n";
  for (const auto& r : report.table)
    md += fmt::format("| {} | {} | {} | {} |\n", r[0], r[1], r[2], r[3]);
  md += "\n| val NLL | Corpus NLL | Task Accuracy |\n|---|---|---|\n";
  const auto cell = [&](const char* key) {
    return summary.contains(key) ? fmt::format("{:.4f}", summary[key].get<double>())
                                 : std::string("–");
  };
  md +=
      fmt::format("| {} | {} | {} |\n", cell("val_nll"), cell("corpus_nll"), cell("task_accuracy"));
  return md;
}

}  // namespace

std::vector<std::string> split_task_list(const std::string& s) {
  std::vector<std::string> out;
  size_t b = 0;
  while (b <= s.size()) {
    size_t e = s.find(',', b);
    if (e == std::string::npos) e = s.size();
    std::string item = s.substr(b, e - b);
    while (!item.empty() && item.front() == ' ') item.erase(item.begin());
    while (!item.empty() && item.back() == ' ') item.pop_back();
    if (!item.empty()) out.push_back(item);
    b = e + 1;
  }
  return out;
}

std::pair<std::string, std::string> name_path(const std::string& spec, const std::string& what) {
  const size_t eq = spec.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
    fail("{} \"{}\": expected NAME=PATH", what, spec);
  return {spec.substr(0, eq), spec.substr(eq + 1)};
}

EvalPlan plan_evaluation(const EvalOptions& o) {
  if (o.batch < 1) fail("--batch must be at least 1");
  EvalPlan plan;
  plan.tasks = o.tasks;
  for (const auto& [name, path] : o.task_files) {
    if (!is_task_name(name))
      fail("--task-file {}={}: unknown task \"{}\" (known: arc_easy, hellaswag, piqa, sciq, "
           "lambada_openai, cloze, continuation)",
           name, path, name);
    plan.files[name] = path;
  }
  if (!o.suite.empty()) {
    if (o.suite != "local") fail("--suite {}: the only suite is \"local\"", o.suite);
    add_local_suite(plan, o.quiet);
  }
  if (plan.tasks.empty()) fail("give --tasks LIST or --suite local");
  for (const auto& t : plan.tasks) {
    if (is_val_task(t)) continue;
    if (t.rfind("corpus:", 0) == 0) {
      name_path(t.substr(7), "corpus");
      continue;
    }
    if (!is_task_name(t))
      fail("unknown task \"{}\" (val, val:PATH, corpus:NAME=PATH, arc_easy, hellaswag, piqa, sciq, "
           "lambada_openai, cloze, continuation)",
           t);
    if (!plan.files.count(t)) fail("task {} needs its file: --task-file {}=PATH", t, t);
  }
  return plan;
}

EvalResults evaluate(const EvalModel& model, const EvalPlan& plan, const EvalOptions& options) {
  const auto recipe = recipe_of(model);
  const Context context{model, options, recipe.get()};
  Report report;
  report.results["checkpoint"] = model.weights_path;
  report.results["config"] = model.config_path;
  report.results["family"] = model.model.config().family;
  report.results["block_size"] = model.model.config().block_size;
  for (const auto& t : plan.tasks) {
    if (is_val_task(t))
      eval_val(context, t, report);
    else if (t.rfind("corpus:", 0) == 0)
      eval_corpus(context, t, report);
    else
      eval_zero_shot(context, t, plan.files.at(t), report);
  }
  EvalResults out;
  out.tables = summarize(report);
  out.results = std::move(report.results);
  return out;
}

}  // namespace sps::eval
