#include "experiment/report_figures.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "model/family.h"

namespace sps::report {

namespace {

constexpr double kMillion = 1e6;

Figure titled_figure(std::string file, std::string title, std::string xlabel, std::string ylabel) {
  Figure f;
  f.file = std::move(file);
  f.title = std::move(title);
  f.xlabel = std::move(xlabel);
  f.ylabel = std::move(ylabel);
  return f;
}

FigureSeries series_for(const GroupSummary& g, const std::vector<int64_t>& windows) {
  FigureSeries s;
  s.title = group_label(g);
  s.color = study_family(g.family, "family").color;
  const auto found = std::find(windows.begin(), windows.end(), g.window);
  const int at = found == windows.end() ? 0 : int(found - windows.begin());
  const int point_types[] = {7, 5, 9, 11, 13, 15};
  s.point_type = point_types[at % 6];
  s.dash_type = 1 + at % 5;
  return s;
}

// The windows of the interleaved families in `cohorts`, ascending.
std::vector<int64_t> interleaved_windows(const std::vector<const Cohort*>& cohorts) {
  std::set<int64_t> windows;
  for (const Cohort* c : cohorts)
    for (const GroupSummary& g : c->groups)
      if (window_is_swept(g.family)) windows.insert(g.window);
  return {windows.begin(), windows.end()};
}

std::string cohort_title(const Cohort& c) {
  return fmt::format("scale {}, {:.4g}M tokens", c.scale, double(c.tokens) / kMillion);
}

Figure val_nll_figure(const Cohort& c) {
  Figure f = titled_figure("val_nll_" + cohort_id(c) + ".png",
                           "validation NLL, mean over seeds (" + cohort_title(c) + ")",
                           "tokens (millions)", "val NLL (nats/token)");
  const std::vector<int64_t> windows = interleaved_windows({&c});
  for (const GroupSummary& g : c.groups) {
    FigureSeries s = series_for(g, windows);
    for (const ValPoint& p : g.mean_curve)
      s.points.push_back({double(p.tokens) / kMillion, p.val_nll});
    f.series.push_back(std::move(s));
  }
  return f;
}

std::optional<Figure> window_figure(const Cohort& c) {
  std::map<std::string, std::set<int64_t>> windows_of_family;
  for (const GroupSummary& g : c.groups)
    if (window_is_swept(g.family)) windows_of_family[g.family].insert(g.window);
  std::set<int64_t> windows;
  std::vector<std::string> families;
  for (const auto& [family, family_windows] : windows_of_family) {
    if (family_windows.size() < 2) continue;
    families.push_back(family);
    windows.insert(family_windows.begin(), family_windows.end());
  }
  if (families.empty()) return std::nullopt;
  Figure f = titled_figure("window_ablation_" + cohort_id(c) + ".png",
                           "final val NLL against window (" + cohort_title(c) + ")", "window w",
                           "final val NLL, mean over seeds");
  const std::vector<int64_t> order(windows.begin(), windows.end());
  for (int64_t w : order) f.categories.push_back(std::to_string(w));
  for (const std::string& family : families) {
    FigureSeries s;
    s.title = family;
    s.color = study_family(family, "family").color;
    for (const GroupSummary& g : c.groups)
      if (g.family == family) {
        const auto at = std::find(order.begin(), order.end(), g.window) - order.begin();
        s.points.push_back({double(at), g.val_nll.mean});
      }
    f.series.push_back(std::move(s));
  }
  if (c.standard >= 0) {
    f.reference_y = c.groups[c.standard].val_nll.mean;
    f.reference_title = "standard";
  }
  return f;
}

std::optional<Figure> gap_figure(const Cohort& c) {
  if (c.standard < 0) return std::nullopt;
  Figure f = titled_figure("gap_" + cohort_id(c) + ".png",
                           "val NLL minus standard's (" + cohort_title(c) + ")",
                           "tokens (millions)", "val NLL gap to standard (below 0: better)");
  const std::vector<int64_t> windows = interleaved_windows({&c});
  for (const GroupSummary& g : c.groups) {
    if (g.family == "standard" || g.gap.empty()) continue;
    FigureSeries s = series_for(g, windows);
    for (const GapPoint& p : g.gap) s.points.push_back({double(p.tokens) / kMillion, p.gap});
    f.series.push_back(std::move(s));
  }
  if (f.series.empty()) return std::nullopt;
  f.reference_y = 0;
  f.reference_title = "standard";
  return f;
}

// The gap of each seed (past the shared points as far as the seed has come), their mean with
// its interval at the shared points, and the mean gap at the ends of the decayed branches.
Figure gap_by_seed_figure(const GapTrend& t, double alpha) {
  Figure f = titled_figure(fmt::format("gap_by_seed_{}_{}_{}.png", t.scale, t.budget, t.group),
                           fmt::format("{} minus standard by seed (scale {}, {:.4g}M tokens)",
                                       t.label, t.scale, double(t.budget) / kMillion),
                           "tokens (millions)", "val NLL gap to standard (below 0: better)");
  const std::string color = study_family(t.family, "family").color;
  const bool interval = t.seeds.size() >= 2;
  const std::string ci = fmt::format("{}%", std::lround(100 * (1 - alpha)));
  for (size_t i = 0; i < t.seeds.size(); ++i) {
    FigureSeries s;
    s.title = fmt::format("seed {}", t.seeds[i]);
    s.color = color;
    s.point_type = 1 + int(i) % 6;
    s.dash_type = 2 + int(i) % 4;
    for (const auto* points : {&t.points, &t.later_points})
      for (const SeedGap& p : *points)
        if (std::isfinite(p.gaps[i])) s.points.push_back({double(p.tokens) / kMillion, p.gaps[i]});
    f.series.push_back(std::move(s));
  }
  if (interval) {
    FigureSeries s;
    s.title = "mean ± " + ci + " over seeds";
    s.color = color;
    for (const SeedGap& p : t.points) {
      s.points.push_back({double(p.tokens) / kMillion, p.gap.mean});
      s.y_errors.push_back(p.gap.half_width);
    }
    f.series.push_back(std::move(s));
  }
  if (!t.decayed.empty()) {
    FigureSeries s;
    s.title = interval ? "after decay, mean ± " + ci : "after decay";
    s.color = "#d62728";
    s.point_type = 9;
    s.lines = false;
    for (const SeedGap& p : t.decayed) {
      s.points.push_back({double(p.tokens) / kMillion, p.gap.mean});
      if (interval) s.y_errors.push_back(p.gap.half_width);
    }
    f.series.push_back(std::move(s));
  }
  f.reference_y = 0;
  f.reference_title = "standard";
  // The axis fits the gaps, not the intervals: with two seeds an interval is 12.7 times their
  // spread, and early ones would flatten the curve. Bars longer than that run off the frame.
  double low = 0, high = 0;
  for (const FigureSeries& s : f.series)
    for (const auto& [x, y] : s.points) low = std::min(low, y), high = std::max(high, y);
  const double margin = 0.1 * (high - low) + 1e-3;
  f.y_range = {low - margin, high + margin};
  return f;
}

std::optional<Figure> accuracy_figure(const std::vector<Cohort>& cohorts) {
  Figure f = titled_figure("accuracy_gain.png", "Task Accuracy gain over standard by scale",
                           "scale (token budget)", "Task Accuracy − standard's (points)");
  std::vector<const Cohort*> all;
  for (const Cohort& c : cohorts) all.push_back(&c);
  const std::vector<int64_t> windows = interleaved_windows(all);
  for (const Cohort& c : cohorts) {
    bool used = false;
    for (const GroupSummary& g : c.groups) {
      if (g.family == "standard" || std::isnan(g.delta_task_accuracy)) continue;
      const std::string title = group_label(g);
      auto s = std::find_if(f.series.begin(), f.series.end(),
                            [&](const FigureSeries& x) { return x.title == title; });
      if (s == f.series.end()) s = f.series.insert(f.series.end(), series_for(g, windows));
      s->points.push_back({double(f.categories.size()), 100 * g.delta_task_accuracy});
      used = true;
    }
    if (used)
      f.categories.push_back(fmt::format("{} ({:.4g}M)", c.scale, double(c.tokens) / kMillion));
  }
  if (f.series.empty()) return std::nullopt;
  f.reference_y = 0;
  f.reference_title = "standard";
  return f;
}

}  // namespace

std::vector<Figure> plan_figures(const std::vector<Cohort>& cohorts,
                                 const std::vector<GapTrend>& trends, double alpha,
                                 std::vector<std::string>& skipped) {
  std::vector<Figure> figures;
  for (const Cohort& c : cohorts) {
    figures.push_back(val_nll_figure(c));
    if (auto f = window_figure(c))
      figures.push_back(std::move(*f));
    else
      skipped.push_back(fmt::format("window ablation ({}): no interleaved family has runs at two "
                                    "or more windows",
                                    cohort_title(c)));
    if (auto f = gap_figure(c))
      figures.push_back(std::move(*f));
    else
      skipped.push_back(fmt::format("gap to standard ({}): no standard group, or no evaluation "
                                    "points shared with it",
                                    cohort_title(c)));
  }
  for (const GapTrend& t : trends) figures.push_back(gap_by_seed_figure(t, alpha));
  if (auto f = accuracy_figure(cohorts))
    figures.push_back(std::move(*f));
  else
    skipped.push_back("accuracy gain by scale: no Task Accuracy (eval.json summary) next to a "
                      "standard group");
  return figures;
}

}  // namespace sps::report
