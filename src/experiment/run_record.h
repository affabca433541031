#pragma once
// One run of an experiment folder as the report sees it: runs/<name>/run.json (written by
// `sps experiment run`) and, for finished runs, what training, evaluation and the decode
// benchmark left beside it. Damaged files are a UserError naming the file.
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace sps {

// The folder of a run's decayed branch from `from` tokens: runs/<name>/decay_<from>/.
std::string decay_folder_name(int64_t from);

struct RunRecord {
  std::string name, group, recipe, family, scale, status, error;  // family: a study family
  std::string cpu;  // where it ran (optional in run.json; "" when absent)
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

// A decayed branch of a run (runs/<name>/decay_<from>/): its last validation.
struct DecayedPoint {
  int64_t from = 0, tokens = 0;  // where it branched, where it ended
  double val_nll = 0;
};

// A decode benchmark is taken as shared with other work when other processes took at least
// this share of the CPUs while it ran (bench.json's other_cpu_share): the runner times it
// again, and the report names it.
constexpr double kSharedBenchmarkShare = 0.10;

// bench.json's other_cpu_share; NaN when the file or the field (older records) is absent.
double benchmark_others_share(const std::string& bench_json);

// A run's numbers; NaN where the file that holds them is absent.
struct RunResults {
  static constexpr double kMissing = std::numeric_limits<double>::quiet_NaN();
  RunRecord record;
  std::vector<ValPoint> val_curve;  // ascending tokens
  double final_val_nll = kMissing;
  double train_tokens_per_second = kMissing;  // median over the logged intervals
  double peak_rss_bytes = kMissing;
  double documents_per_batch = kMissing;  // the trainer's figure (metrics.jsonl)
  double corpus_nll = kMissing, task_accuracy = kMissing;                 // eval.json
  double decode_tokens_per_second = kMissing, kv_cache_bytes = kMissing;  // bench.json
  double bench_others_cpu_share = kMissing;  // other work's share of the CPUs while it ran
  std::vector<DecayedPoint> decayed;  // finished branches, ascending `from`
  bool partial = false;               // the run is not done: its curve so far
};

// Reads <run_dir>/train/metrics.jsonl (required, with at least one val_nll record) and
// <run_dir>/eval.json, <run_dir>/bench.json where present.
// Finished decayed branches are read from decay_<from>/ (metrics.jsonl and config.yaml: a
// branch is finished when it has a validation at its config's last step).
RunResults read_run_results(const RunRecord& record, const std::string& run_dir);

// A run that is not done, as far as it got: its validation curve and finished branches
// (`partial` set); nothing when it has no validation yet.
std::optional<RunResults> read_partial_results(const RunRecord& record, const std::string& run_dir);

}  // namespace sps
