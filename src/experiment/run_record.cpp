#include "experiment/run_record.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "model/family.h"
#include "train/train_config.h"
#include "util/error.h"
#include "util/read_file.h"

namespace sps {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::vector<std::string> kStatuses = {"pending",      "training", "decaying", "evaluating",
                                            "benchmarking", "done",     "failed"};

json parse_object(const std::string& text, const std::string& where) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded() || !j.is_object()) fail("{}: not a JSON object", where);
  return j;
}

const json& field(const json& j, const char* key, const std::string& where) {
  if (!j.contains(key)) fail("{}: field \"{}\" is missing", where, key);
  return j.at(key);
}

std::string string_field(const json& j, const char* key, const std::string& where) {
  const json& v = field(j, key, where);
  if (!v.is_string()) fail("{}: field \"{}\" must be a string", where, key);
  return v.get<std::string>();
}

int64_t integer_field(const json& j, const char* key, const std::string& where) {
  const json& v = field(j, key, where);
  if (!v.is_number_integer()) fail("{}: field \"{}\" must be an integer", where, key);
  return v.get<int64_t>();
}

double number_field(const json& j, const char* key, const std::string& where) {
  const json& v = field(j, key, where);
  if (!v.is_number()) fail("{}: field \"{}\" must be a number", where, key);
  return v.get<double>();
}

// A number the file may leave out; NaN when absent.
double optional_number(const json& j, const char* key, const std::string& where) {
  return j.contains(key) ? number_field(j, key, where) : RunResults::kMissing;
}

void check_one_of(const std::string& value, const std::vector<std::string>& allowed,
                  const char* key, const std::string& where) {
  if (std::find(allowed.begin(), allowed.end(), value) != allowed.end()) return;
  std::string list;
  for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
  fail("{}: field \"{}\" is \"{}\"; expected one of {}", where, key, value, list);
}

double median(std::vector<double> values) {
  if (values.empty()) return RunResults::kMissing;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

// The validation records of a metrics file, by tokens (a repeated point keeps the last value).
// With `r`, also the training figures: the median logged throughput, the peak memory and the
// documents per batch. `growing`: the file of a run still going, whose last line may be
// half-written; reading stops at a line that does not parse instead of failing.
std::vector<ValPoint> read_val_curve(const std::string& path, RunResults* r = nullptr,
                                     bool growing = false) {
  std::vector<double> rates;
  std::istringstream lines(read_file(path));
  std::map<int64_t, double> val_by_tokens;
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = fmt::format("{}:{}", path, number);
    if (growing && json::parse(line, nullptr, false).is_discarded()) break;
    const json record = parse_object(line, where);
    if (record.contains("val_nll")) {
      val_by_tokens[integer_field(record, "tokens", where)] =
          number_field(record, "val_nll", where);
    } else if (record.contains("tokens_per_second") && r) {
      rates.push_back(number_field(record, "tokens_per_second", where));
      const double peak = optional_number(record, "peak_rss_bytes", where);
      if (!(peak <= r->peak_rss_bytes)) r->peak_rss_bytes = peak;
    } else if (record.contains("documents_per_batch") && r) {
      r->documents_per_batch = number_field(record, "documents_per_batch", where);
    }
  }
  if (r) r->train_tokens_per_second = median(rates);
  std::vector<ValPoint> curve;
  for (const auto& [tokens, nll] : val_by_tokens) curve.push_back({tokens, nll});
  return curve;
}

void read_metrics(RunResults& r, const std::string& path) {
  if (!fs::exists(path)) fail("{}: missing; a run marked done needs its training metrics", path);
  r.val_curve = read_val_curve(path, &r);
  if (r.val_curve.empty())
    fail("{}: no val_nll record; the report compares validation NLL (set "
         "training.eval_interval_tokens)",
         path);
  r.final_val_nll = r.val_curve.back().val_nll;
}

void read_eval(RunResults& r, const std::string& path) {
  if (!fs::exists(path)) return;
  const json j = parse_object(read_file(path), path);
  if (!j.contains("summary")) return;
  const json& summary = j.at("summary");
  if (!summary.is_object()) fail("{}: field \"summary\" must be an object", path);
  r.corpus_nll = optional_number(summary, "corpus_nll", path + " summary");
  r.task_accuracy = optional_number(summary, "task_accuracy", path + " summary");
}

// `sps bench generate --json` prints one object per model; a run benchmarks one model.
void read_bench(RunResults& r, const std::string& path) {
  if (!fs::exists(path)) return;
  std::istringstream lines(read_file(path));
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = fmt::format("{}:{}", path, number);
    const json j = parse_object(line, where);
    r.decode_tokens_per_second = number_field(j, "decode_tokens_per_second", where);
    r.kv_cache_bytes = number_field(j, "kv_cache_allocated_bytes", where);
    r.bench_others_cpu_share = optional_number(j, "other_cpu_share", where);
    return;
  }
  fail("{}: empty; expected the output of sps bench generate --json", path);
}

// The finished branches in decay_<from>/ folders: a branch has finished when its metrics
// hold a validation at the last step of the length its config.yaml gives.
void read_decayed(RunResults& r, const fs::path& dir) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (!entry.is_directory() || !name.starts_with("decay_")) continue;
    const std::string digits = name.substr(6);
    if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    const fs::path metrics = entry.path() / "metrics.jsonl",
                   config_path = entry.path() / "config.yaml";
    if (!fs::exists(metrics) || !fs::exists(config_path)) continue;
    const TrainConfig config = load_train_config(config_path.string(), {});
    const int64_t length = config.total_steps() * config.tokens_per_step();
    const std::vector<ValPoint> curve = read_val_curve(metrics.string(), nullptr, r.partial);
    if (curve.empty() || curve.back().tokens < length) continue;
    r.decayed.push_back({std::stoll(digits), curve.back().tokens, curve.back().val_nll});
  }
  std::sort(r.decayed.begin(), r.decayed.end(),
            [](const DecayedPoint& a, const DecayedPoint& b) { return a.from < b.from; });
}

}  // namespace

double benchmark_others_share(const std::string& bench_json) {
  RunResults r;
  read_bench(r, bench_json);
  return r.bench_others_cpu_share;
}

std::string decay_folder_name(int64_t from) { return fmt::format("decay_{}", from); }

RunRecord read_run_record(const std::string& path) {
  if (!fs::exists(path))
    fail("{}: missing; every run folder needs the run.json that sps experiment run writes", path);
  const json j = parse_object(read_file(path), path);
  RunRecord r;
  r.name = string_field(j, "name", path);
  r.group = string_field(j, "group", path);
  r.recipe = string_field(j, "recipe", path);
  r.family = string_field(j, "family", path);
  r.scale = string_field(j, "scale", path);
  r.status = string_field(j, "status", path);
  r.error = string_field(j, "error", path);
  if (j.contains("cpu")) r.cpu = string_field(j, "cpu", path);
  r.window = integer_field(j, "window", path);
  r.seed = integer_field(j, "seed", path);
  r.tokens = integer_field(j, "tokens", path);
  const json& overrides = field(j, "overrides", path);
  if (!overrides.is_array()) fail("{}: field \"overrides\" must be a list of strings", path);
  for (const json& o : overrides) {
    if (!o.is_string()) fail("{}: field \"overrides\" must be a list of strings", path);
    r.overrides.push_back(o.get<std::string>());
  }
  check_one_of(r.family, study_family_names(), "family", path);
  check_one_of(r.status, kStatuses, "status", path);
  return r;
}

RunResults read_run_results(const RunRecord& record, const std::string& run_dir) {
  RunResults r;
  r.record = record;
  const fs::path dir(run_dir);
  read_metrics(r, (dir / "train" / "metrics.jsonl").string());
  read_eval(r, (dir / "eval.json").string());
  read_bench(r, (dir / "bench.json").string());
  read_decayed(r, dir);
  return r;
}

std::optional<RunResults> read_partial_results(const RunRecord& record,
                                               const std::string& run_dir) {
  const fs::path dir(run_dir), metrics = dir / "train" / "metrics.jsonl";
  if (!fs::exists(metrics)) return std::nullopt;
  RunResults r;
  r.record = record;
  r.partial = true;
  r.val_curve = read_val_curve(metrics.string(), &r, true);
  if (r.val_curve.empty()) return std::nullopt;
  r.final_val_nll = r.val_curve.back().val_nll;
  read_decayed(r, dir);
  return r;
}

}  // namespace sps
