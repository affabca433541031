#include "experiment/report_trend.h"

#include <fmt/format.h>

#include <cmath>
#include <map>

#include "experiment/report_analysis.h"
#include "model/family.h"

namespace sps::report {

namespace {

using Runs = std::vector<const RunResults*>;

// The runs of one group by seed.
using BySeed = std::map<int64_t, const RunResults*>;

using Pairs = std::vector<std::pair<const RunResults*, const RunResults*>>;

// The gap over the seeds' pairs (group, standard) at one point, each run's NLL there by
// `nll_of`.
template <typename NllOf>
SeedGap gap_of_pairs(const Pairs& pairs, double alpha, SeedGap point, NllOf nll_of) {
  std::vector<double> group, standard;
  for (const auto& [g, s] : pairs) {
    group.push_back(nll_of(g));
    standard.push_back(nll_of(s));
    point.gaps.push_back(group.back() - standard.back());
  }
  point.group_nll = stats::mean(group);
  point.standard_nll = stats::mean(standard);
  point.gap = stats::t_confidence_interval(point.gaps, alpha);
  return point;
}

// The gap at every point all of `pairs`' curves have (per seed: group, standard).
std::vector<SeedGap> shared_gaps(const Pairs& pairs, double alpha) {
  std::map<int64_t, int> count;  // tokens -> curves that have it
  for (const auto& [g, s] : pairs)
    for (const RunResults* r : {g, s})
      for (const ValPoint& p : r->val_curve) ++count[p.tokens];
  std::vector<SeedGap> out;
  for (const auto& [point_tokens, n] : count) {
    if (n != int(2 * pairs.size())) continue;
    const int64_t tokens = point_tokens;  // named: a lambda captures it
    SeedGap point;
    point.tokens = tokens;
    out.push_back(gap_of_pairs(pairs, alpha, point, [&](const RunResults* r) {
      for (const ValPoint& p : r->val_curve)
        if (p.tokens == tokens) return p.val_nll;
      return RunResults::kMissing;
    }));
  }
  return out;
}

// The decayed branches every run of the pairs finished.
std::vector<SeedGap> decayed_gaps(const Pairs& pairs, double alpha) {
  std::map<int64_t, int> count;
  for (const auto& [g, s] : pairs)
    for (const RunResults* r : {g, s})
      for (const DecayedPoint& d : r->decayed) ++count[d.from];
  std::vector<SeedGap> out;
  for (const auto& [branch_from, n] : count) {
    if (n != int(2 * pairs.size())) continue;
    const int64_t from = branch_from;  // named: a lambda captures it
    auto at = [&](const RunResults* r) {
      for (const DecayedPoint& d : r->decayed)
        if (d.from == from) return d;
      return DecayedPoint{};
    };
    SeedGap point;
    point.from = from;
    point.tokens = at(pairs.front().first).tokens;
    out.push_back(
        gap_of_pairs(pairs, alpha, point, [&](const RunResults* r) { return at(r).val_nll; }));
  }
  return out;
}


}  // namespace

GapFit fit_gap(const std::vector<std::pair<int64_t, double>>& pairs, double alpha) {
  GapFit fit;
  fit.pairs = int64_t(pairs.size());
  const double nan = RunResults::kMissing;
  fit.intercept = fit.slope = fit.slope_half_width = fit.residual_sd = fit.zero_tokens = nan;
  if (pairs.empty()) return fit;
  fit.first_tokens = pairs.front().first;
  fit.last_tokens = pairs.front().first;
  for (const auto& [t, gap] : pairs) {
    fit.first_tokens = std::min(fit.first_tokens, t);
    fit.last_tokens = std::max(fit.last_tokens, t);
  }
  if (pairs.size() < 3) return fit;
  const double n = double(pairs.size());
  double mx = 0, my = 0;
  for (const auto& [t, gap] : pairs) mx += double(t) / 1e6, my += gap;
  mx /= n;
  my /= n;
  double sxx = 0, sxy = 0;
  for (const auto& [t, gap] : pairs) {
    const double dx = double(t) / 1e6 - mx;
    sxx += dx * dx;
    sxy += dx * (gap - my);
  }
  if (!(sxx > 0)) return fit;  // every pair at one point: no slope
  fit.slope = sxy / sxx;
  fit.intercept = my - fit.slope * mx;
  double rss = 0;
  for (const auto& [t, gap] : pairs) {
    const double r = gap - (fit.intercept + fit.slope * double(t) / 1e6);
    rss += r * r;
  }
  fit.residual_sd = std::sqrt(rss / (n - 2));
  fit.slope_half_width = stats::t_quantile(1 - alpha / 2, n - 2) * fit.residual_sd / std::sqrt(sxx);
  fit.zero_tokens = fit.slope != 0 ? -fit.intercept / fit.slope * 1e6 : nan;
  return fit;
}

std::vector<GapTrend> analyse_trends(const Runs& runs, double alpha) {
  // (scale, budget) -> group -> seed -> run
  std::map<std::pair<std::string, int64_t>, std::map<std::string, BySeed>> cohorts;
  for (const RunResults* r : runs)
    cohorts[{r->record.scale, r->record.tokens}][r->record.group][r->record.seed] = r;
  std::vector<GapTrend> trends;
  for (const auto& [key, groups] : cohorts) {
    const BySeed* standard = nullptr;
    for (const auto& [name, by_seed] : groups)
      if (by_seed.begin()->second->record.family == "standard") standard = &by_seed;
    if (!standard) continue;
    for (const std::string& family : study_family_names())
      for (const auto& [name, by_seed] : groups) {
        const RunRecord& first = by_seed.begin()->second->record;
        if (&by_seed == standard || first.family != family) continue;
        GapTrend trend;
        trend.scale = key.first;
        trend.budget = key.second;
        trend.group = name;
        trend.family = first.family;
        trend.window = first.window;
        trend.label = study_family(first.family, "family").window == WindowRule::swept
                          ? fmt::format("{} w{}", first.family, first.window)
                          : first.family;
        Pairs pairs;
        for (const auto& [seed, run] : by_seed) {
          const auto other = standard->find(seed);
          if (other == standard->end()) continue;
          trend.seeds.push_back(seed);
          pairs.push_back({run, other->second});
          for (const RunResults* r : {run, other->second})
            if (r->partial) trend.partial_runs.push_back(r->record.name);
        }
        if (pairs.empty()) continue;
        trend.points = shared_gaps(pairs, alpha);
        std::vector<GapPoint> mean_gap;
        for (const SeedGap& p : trend.points) mean_gap.push_back({p.tokens, p.gap.mean});
        trend.crossovers = sign_changes(mean_gap);
        std::vector<std::pair<int64_t, double>> fit_pairs;
        const int64_t fit_from = trend.points.empty() ? 0 : trend.points.back().tokens / 2;
        for (const SeedGap& p : trend.points)
          if (p.tokens >= fit_from && p.tokens > 0)
            for (const double gap : p.gaps) fit_pairs.push_back({p.tokens, gap});
        trend.fit = fit_gap(fit_pairs, alpha);
        trend.decayed = decayed_gaps(pairs, alpha);
        trends.push_back(std::move(trend));
      }
  }
  return trends;
}

}  // namespace sps::report
