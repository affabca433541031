#include "experiment/run_record.h"

#include <algorithm>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "model/family.h"
#include "util/error.h"
#include "util/read_file.h"

namespace sps {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::vector<std::string> kStatuses = {"pending",      "training", "evaluating",
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

void read_metrics(RunResults& r, const std::string& path) {
  if (!fs::exists(path)) fail("{}: missing; a run marked done needs its training metrics", path);
  std::istringstream lines(read_file(path));
  std::map<int64_t, double> val_by_tokens;  // a repeated evaluation point keeps the last value
  std::vector<double> rates;
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = fmt::format("{}:{}", path, number);
    const json record = parse_object(line, where);
    if (record.contains("val_nll")) {
      val_by_tokens[integer_field(record, "tokens", where)] =
          number_field(record, "val_nll", where);
    } else if (record.contains("tokens_per_second")) {
      rates.push_back(number_field(record, "tokens_per_second", where));
      const double peak = optional_number(record, "peak_rss_bytes", where);
      if (!(peak <= r.peak_rss_bytes)) r.peak_rss_bytes = peak;
    }
  }
  if (val_by_tokens.empty())
    fail(
        "{}: no val_nll record; the report compares validation NLL (set "
        "training.eval_interval_tokens)",
        path);
  for (const auto& [tokens, nll] : val_by_tokens) r.val_curve.push_back({tokens, nll});
  r.final_val_nll = r.val_curve.back().val_nll;
  r.train_tokens_per_second = median(rates);
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
    return;
  }
  fail("{}: empty; expected the output of sps bench generate --json", path);
}

}  // namespace

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
  r.window = integer_field(j, "window", path);
  r.seed = integer_field(j, "seed", path);
  r.tokens = integer_field(j, "tokens", path);
  const json& overrides = field(j, "overrides", path);
  if (!overrides.is_array()) fail("{}: field \"overrides\" must be a list of strings", path);
  for (const json& o : overrides) {
    if (!o.is_string()) fail("{}: field \"overrides\" must be a list of strings", path);
    r.overrides.push_back(o.get<std::string>());
  }
  check_one_of(r.family, family_names(), "family", path);
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
  return r;
}

}  // namespace sps
