#pragma once
// `sps experiment run`: every run of a matrix trained, evaluated and optionally benchmarked
// by child processes, in the folder layout the report reads (docs/reproducing.md):
//   <out>/matrix.yaml, <out>/experiment.jsonl, <out>/runs/<name>/{run.json, train/, eval.json,
//   bench.json, train.log, eval.log, bench.log, decay_<N>/, decay_<N>.log}
// Rerunning the same command skips finished runs, resumes interrupted ones from their
// newest checkpoint and retries failed ones.
#include <cstdint>
#include <string>
#include <vector>

#include "experiment/matrix.h"

namespace sps {

struct RunnerOptions {
  std::string out_dir;   // the experiment folder
  std::string binary;    // the sps binary the children run
  int64_t parallel = 0;  // 0: the matrix's
  int64_t cores = 0;     // 0: this machine's; OMP_NUM_THREADS = cores / parallel unless set
};

// The child command lines of one run (what --dry-run prints).
struct RunCommands {
  std::vector<std::string> train, eval, bench;  // bench empty without a bench section
  std::vector<std::vector<std::string>> branches;  // one `sps train` per decayed branch
};
RunCommands run_commands(const ExperimentMatrix& matrix, const PlannedRun& run,
                         const RunnerOptions& options, bool resume);

std::string describe_dry_run(const ExperimentMatrix& matrix, const std::vector<PlannedRun>& runs,
                             const RunnerOptions& options);

struct ExperimentSummary {
  int64_t runs = 0, done = 0, skipped = 0, failed = 0, not_done = 0;
  bool stopped = false;  // SIGINT/SIGTERM: children checkpointed, runs left to resume
};

// Runs the matrix into options.out_dir. A run folder made by a different matrix (other
// recipe or overrides) is a UserError before anything starts.
ExperimentSummary run_experiment(const ExperimentMatrix& matrix, const std::vector<PlannedRun>& runs,
                                 const RunnerOptions& options);

}  // namespace sps
