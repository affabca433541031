#pragma once
// The numbers of an experiment report: runs grouped by seed, groups gathered into cohorts
// (one scale and token budget, compared with the cohort's standard group), seed statistics,
// data efficiency and the gap to standard along training.
#include <cstdint>
#include <string>
#include <vector>

#include "experiment/run_record.h"
#include "experiment/stats.h"

namespace sps::report {

struct GapPoint {
  int64_t tokens = 0;
  double gap = 0;  // mean val NLL of the group − that of standard at the same tokens
};

// The runs of one group: same recipe and overrides but the seed.
struct GroupSummary {
  std::string name, family, scale;  // family: the study family (model/family.h)
  int64_t window = 0, tokens = 0;
  std::vector<const RunResults*> runs;  // ascending seed
  std::vector<double> final_val_nlls;   // one per run
  stats::ConfidenceInterval val_nll;
  double val_nll_sd = RunResults::kMissing;
  // Means over the runs that have the number (NaN when none has it).
  double corpus_nll = RunResults::kMissing, task_accuracy = RunResults::kMissing,
         train_tokens_per_second = RunResults::kMissing, peak_rss_bytes = RunResults::kMissing,
         decode_tokens_per_second = RunResults::kMissing, kv_cache_bytes = RunResults::kMissing;
  std::vector<ValPoint> mean_curve;  // at the evaluation points all runs share

  // Against the cohort's standard group (NaN, or empty, without one).
  double delta_val_nll = RunResults::kMissing, delta_corpus_nll = RunResults::kMissing,
         delta_task_accuracy = RunResults::kMissing;
  double train_throughput_ratio = RunResults::kMissing, peak_memory_ratio = RunResults::kMissing,
         decode_ratio = RunResults::kMissing, kv_ratio = RunResults::kMissing;
  double tokens_to_reach_standard = RunResults::kMissing;  // NaN: not reached (or no standard)
  std::vector<GapPoint> gap;
  std::vector<double> crossovers;  // tokens where the gap changes sign
};

// sps against one other group (standard, 2x_memory, or another family at the same window):
// one-sided Welch (H1: sps has the lower final val NLL) and TOST.
struct SeedTest {
  std::string sps_group, other_group;
  std::string sps_label, other_label;  // group_label of each
  stats::WelchT welch;
  double p_sps_lower = 0;
  stats::Tost tost;
};

struct Cohort {
  std::string scale;
  int64_t tokens = 0;
  std::vector<GroupSummary> groups;  // family order, then window
  int standard = -1;                 // index of the baseline group, -1 when there is none
  std::vector<SeedTest> tests;
  std::vector<std::string> untested;  // "sps w64 vs standard": pairs lacking 2 seeds
};

// "sps w64", "standard", "2x_memory": how tables and figures name a group.
std::string group_label(const GroupSummary& group);
// "tiny_8388608": scale and token budget, for file names and JSON.
std::string cohort_id(const Cohort& cohort);

// Groups the finished runs into cohorts (known scales small to large) and computes everything.
// The summaries point into `runs`.
std::vector<Cohort> analyse_runs(const std::vector<RunResults>& runs, double alpha, double margin);

// Tokens at which `curve` first reaches `target` (≤), interpolated linearly between the
// evaluation points around it; NaN when it never does.
double tokens_to_reach(const std::vector<ValPoint>& curve, double target);

// Mean over runs at the tokens every curve has.
std::vector<ValPoint> mean_curve(const std::vector<const std::vector<ValPoint>*>& curves);

// `group` − `standard` at the tokens both have.
std::vector<GapPoint> gap_curve(const std::vector<ValPoint>& group,
                                const std::vector<ValPoint>& standard);

// Tokens where the gap changes sign, interpolated linearly between the points around a
// change; a run of exact zeros between opposite signs counts once, at its first point.
std::vector<double> sign_changes(const std::vector<GapPoint>& gap);

}  // namespace sps::report
