#pragma once
// An experiment matrix (docs/reproducing.md): one training recipe crossed with axes —
// scales, token budgets, families, windows, seeds — into runs, each trained with `sps train`,
// evaluated with `sps eval` and optionally benchmarked with `sps bench generate`.
#include <cstdint>
#include <string>
#include <vector>

namespace sps {

// Overrides for the runs of some scales and families only (a list left out matches all).
struct ScopedOverrides {
  std::vector<std::string> scales, families, set;
};

// Decayed branches of every run (docs/reproducing.md): from the run's checkpoint at each of
// `from` tokens, a linear decay of the learning rate to `min_lr` over `fraction` of those
// tokens (rounded up to whole steps), the paper's schedule shape on a constant-LR run.
struct DecayBranches {
  std::vector<int64_t> from;  // empty: no branches
  double fraction = 0.1;
  double min_lr = 0;
};

struct ExperimentMatrix {
  std::string source;  // the matrix file, for messages
  std::string text;    // its content, copied into the experiment folder
  std::string recipe;  // resolved against the matrix's folder; "{scale}" is replaced per scale
  std::vector<std::string> families, scales;
  std::vector<int64_t> windows, seeds, tokens;  // tokens empty: the recipe's max_tokens
  std::vector<std::string> overrides;           // section.key=value for every run
  std::vector<ScopedOverrides> scoped_overrides;  // then these, where they apply
  std::vector<std::string> eval_args;           // passed to `sps eval`
  bool bench = false;                           // a `bench:` section was given
  std::vector<std::string> bench_args;          // passed to `sps bench generate`
  int64_t bench_tries = 1;  // tries of a benchmark that other work shared (run_record.h)
  int64_t parallel = 1;                         // runs side by side
  DecayBranches decay;                          // the `decay:` section
};

// One decayed branch of a run: trained into runs/<name>/decay_<from>/ from the run's
// checkpoint at `from` tokens.
struct PlannedBranch {
  int64_t from = 0, tokens = 0;        // tokens = from + the decay's tokens
  std::vector<std::string> overrides;  // the run's, then the branch's length and schedule
};

// One run of the matrix, as recorded in runs/<name>/run.json.
struct PlannedRun {
  std::string name, group, recipe, family, scale;  // family: the study family (model/family.h)
  int64_t window = 0, seed = 0, tokens = 0;
  std::vector<std::string> overrides;  // what `sps train` gets, before system.out_dir
  std::vector<PlannedBranch> branches;
};

// Reads and checks a matrix file; any problem is a UserError naming the file and the key.
ExperimentMatrix load_matrix(const std::string& path);
ExperimentMatrix parse_matrix(const std::string& text, const std::string& source);

// The runs of a matrix, seeds innermost, each one's training config loaded and validated.
// Standard ignores the window axis; 2x_memory is sps with window_size = block_size.
std::vector<PlannedRun> expand_matrix(const ExperimentMatrix& matrix);

// The runs whose name matches one of the shell patterns (`tiny_sps_*`, `*_seed3`), in matrix
// order; no patterns keeps them all. A pattern that matches no run is a UserError listing
// the names, so a typo never silently runs nothing.
std::vector<PlannedRun> select_runs(const std::vector<PlannedRun>& runs,
                                    const std::vector<std::string>& patterns,
                                    const std::string& source);

}  // namespace sps
