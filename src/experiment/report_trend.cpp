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

// One run's val NLL by key: an evaluation point's tokens, or where a decayed branch left the
// constant-LR curve.
using Curve = std::map<int64_t, double>;
using CurvePairs = std::vector<std::pair<Curve, Curve>>;  // per seed: group, standard

Curve val_curve(const RunResults* r) {
  Curve c;
  for (const ValPoint& p : r->val_curve) c[p.tokens] = p.val_nll;
  return c;
}

Curve decayed_ends(const RunResults* r) {
  Curve c;
  for (const DecayedPoint& d : r->decayed) c[d.from] = d.val_nll;
  return c;
}

// The gap at `key` over the pairs (one per seed): NaN for a pair without it in both runs,
// which the means and the interval leave out.
SeedGap gap_at(const CurvePairs& pairs, int64_t key, double alpha) {
  SeedGap point;
  point.tokens = key;
  std::vector<double> group, standard, present;
  for (const auto& [g, s] : pairs) {
    const auto in_group = g.find(key), in_standard = s.find(key);
    if (in_group == g.end() || in_standard == s.end()) {
      point.gaps.push_back(RunResults::kMissing);
      continue;
    }
    group.push_back(in_group->second);
    standard.push_back(in_standard->second);
    point.gaps.push_back(group.back() - standard.back());
    present.push_back(point.gaps.back());
  }
  point.group_nll = stats::mean(group);
  point.standard_nll = stats::mean(standard);
  point.gap = stats::t_confidence_interval(present, alpha);
  return point;
}

// The gaps at the keys that both runs of at least one pair have: `shared` where every pair
// has the key, `later` where only some do past the last shared key (runs still going; a hole
// before it is left out).
struct Gaps {
  std::vector<SeedGap> shared, later;
};
Gaps gaps_of(const CurvePairs& pairs, double alpha) {
  std::map<int64_t, int> count;  // key -> pairs that have it in both runs
  for (const auto& [g, s] : pairs)
    for (const auto& [key, nll] : g)
      if (s.contains(key)) ++count[key];
  const int all = int(pairs.size());
  int64_t last_shared = -1;
  for (const auto& [key, n] : count)
    if (n == all) last_shared = key;
  Gaps out;
  for (const auto& [key, n] : count)
    if (n == all || key > last_shared)
      (n == all ? out.shared : out.later).push_back(gap_at(pairs, key, alpha));
  return out;
}

Gaps curve_gaps(const Pairs& pairs, double alpha) {
  CurvePairs curves;
  for (const auto& [g, s] : pairs) curves.push_back({val_curve(g), val_curve(s)});
  return gaps_of(curves, alpha);
}

// The gaps at the ends of the decayed branches: `from` where a branch left the curve,
// `tokens` where it ended (the same in every run that has it).
Gaps decayed_gaps(const Pairs& pairs, double alpha) {
  CurvePairs ends;
  std::map<int64_t, int64_t> end_tokens;
  for (const auto& [g, s] : pairs) {
    ends.push_back({decayed_ends(g), decayed_ends(s)});
    for (const RunResults* r : {g, s})
      for (const DecayedPoint& d : r->decayed) end_tokens.emplace(d.from, d.tokens);
  }
  Gaps out = gaps_of(ends, alpha);
  for (auto* points : {&out.shared, &out.later})
    for (SeedGap& p : *points) {
      p.from = p.tokens;
      p.tokens = end_tokens.at(p.from);
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
        Gaps curve = curve_gaps(pairs, alpha), decayed = decayed_gaps(pairs, alpha);
        trend.points = std::move(curve.shared);
        trend.later_points = std::move(curve.later);
        trend.decayed = std::move(decayed.shared);
        trend.later_decayed = std::move(decayed.later);
        std::vector<GapPoint> mean_gap;
        for (const SeedGap& p : trend.points) mean_gap.push_back({p.tokens, p.gap.mean});
        trend.crossovers = sign_changes(mean_gap);
        std::vector<std::pair<int64_t, double>> fit_pairs;
        std::vector<std::vector<std::pair<int64_t, double>>> seed_pairs(pairs.size());
        const int64_t fit_from = trend.points.empty() ? 0 : trend.points.back().tokens / 2;
        for (const SeedGap& p : trend.points)
          if (p.tokens >= fit_from && p.tokens > 0)
            for (size_t i = 0; i < p.gaps.size(); ++i) {
              fit_pairs.push_back({p.tokens, p.gaps[i]});
              seed_pairs[i].push_back({p.tokens, p.gaps[i]});
            }
        trend.fit = fit_gap(fit_pairs, alpha);
        // Each seed's own line: its slopes' spread over seeds is the uncertainty that counts a
        // seed's curve once, where the pooled interval counts each of its points.
        for (const auto& one_seed : seed_pairs)
          trend.fit.seed_slopes.push_back(fit_gap(one_seed, alpha).slope);
        trend.fit.seed_slope = stats::t_confidence_interval(trend.fit.seed_slopes, alpha);
        trends.push_back(std::move(trend));
      }
  }
  return trends;
}

}  // namespace sps::report
