#pragma once
// The gap to standard along training, seed by seed (docs/reproducing.md, "Statistics and
// reports"): for every group with the standard group's seeds beside it, the gap at each
// evaluation point all of those runs share (mean over seeds and its t-interval), where the
// mean gap changes sign, a least-squares line through the per-seed gaps of the curve's
// second half, and the gap after each decayed branch. Runs still training count with the
// curve they have so far, and the trend says it is partial: the points past the last shared
// one, which only some seeds have reached, are listed apart (with the seeds they have) and
// left out of the crossing and the fit.
#include <cstdint>
#include <string>
#include <vector>

#include "experiment/run_record.h"
#include "experiment/stats.h"

namespace sps::report {

struct SeedGap {
  int64_t tokens = 0;                      // an evaluation point, or a decayed branch's end
  int64_t from = 0;                        // decayed branches: where they left the constant-LR run
  double group_nll = 0, standard_nll = 0;  // means over the seeds
  std::vector<double> gaps;  // group − standard, one per seed (ascending seed); NaN: not there
  stats::ConfidenceInterval gap;  // mean ± t-interval over the gaps there (half width NaN with one)
};

// gap = intercept + slope · tokens / 10^6 fitted by least squares to (tokens, gap) pairs.
struct GapFit {
  int64_t pairs = 0;  // fewer than 3: no fit (everything NaN)
  int64_t first_tokens = 0, last_tokens = 0;
  double intercept = 0, slope = 0;  // slope per million tokens
  double slope_half_width = 0;      // two-sided (1 − alpha) t-interval, n − 2 d.o.f.
  double residual_sd = 0;
  double zero_tokens = 0;  // where the line is 0; NaN for a flat line
  // A trend's fit only: each seed's slope fitted alone (NaN where a seed has too few points),
  // and their mean ± t-interval over seeds (n − 1 d.o.f.).
  std::vector<double> seed_slopes;
  stats::ConfidenceInterval seed_slope{RunResults::kMissing, RunResults::kMissing};
};

struct GapTrend {
  std::string scale, group, label, family;  // family: the study family (model/family.h)
  int64_t window = 0, budget = 0;
  std::vector<int64_t> seeds;             // those both groups have
  std::vector<std::string> partial_runs;  // runs of the trend that are not done
  std::vector<SeedGap> points;            // the constant-LR curve's shared points
  std::vector<SeedGap> later_points;      // past them, reached by some seeds only
  std::vector<double> crossovers;         // tokens where the mean gap changes sign
  GapFit fit;                             // over the points from half the last shared tokens on
  std::vector<SeedGap> decayed;           // branches every run of the trend has finished
  std::vector<SeedGap> later_decayed;     // branches past them, finished by some seeds only
};

// The trends of every non-standard group with a standard group of the same scale and
// budget and at least one seed in common; `runs` holds finished and partial runs.
std::vector<GapTrend> analyse_trends(const std::vector<const RunResults*>& runs, double alpha);

// The least-squares line through (tokens, gap) pairs (exposed for tests).
GapFit fit_gap(const std::vector<std::pair<int64_t, double>>& pairs, double alpha);

}  // namespace sps::report
