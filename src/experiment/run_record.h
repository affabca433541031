#pragma once
// One run of an experiment folder as the report sees it: runs/<name>/run.json (written by
// `sps experiment run`) and, for finished runs, what training, evaluation and the decode
// benchmark left beside it. Damaged files are a UserError naming the file.
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace sps {

struct RunRecord {
  std::string name, group, recipe, family, scale, status, error;
  int64_t window = 0, seed = 0, tokens = 0;
  std::vector<std::string> overrides;
  bool done() const { return status == "done"; }
};

// Reads and checks run.json (every field present, with its type; a known family and status).
RunRecord read_run_record(const std::string& path);

struct ValPoint {
  int64_t tokens = 0;
  double val_nll = 0;
};

// A finished run's numbers; NaN where the file that holds them is absent.
struct RunResults {
  static constexpr double kMissing = std::numeric_limits<double>::quiet_NaN();
  RunRecord record;
  std::vector<ValPoint> val_curve;  // ascending tokens
  double final_val_nll = kMissing;
  double train_tokens_per_second = kMissing;  // median over the logged intervals
  double peak_rss_bytes = kMissing;
  double corpus_nll = kMissing, task_accuracy = kMissing;                 // eval.json
  double decode_tokens_per_second = kMissing, kv_cache_bytes = kMissing;  // bench.json
};

// Reads <run_dir>/train/metrics.jsonl (required, with at least one val_nll record) and
// <run_dir>/eval.json, <run_dir>/bench.json where present.
RunResults read_run_results(const RunRecord& record, const std::string& run_dir);

}  // namespace sps
