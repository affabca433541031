#include "experiment/report_analysis.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "model/family.h"

namespace sps::report {

namespace {

constexpr double kNaN = RunResults::kMissing;

int rank_in(const std::vector<std::string>& order, const std::string& name) {
  const auto it = std::find(order.begin(), order.end(), name);
  return int(it - order.begin());  // unknown names after the known ones
}

// Paper scales small to large, the project's CPU presets before them.
int scale_rank(const std::string& scale) {
  return rank_in({"micro", "tiny", "xs", "s", "m", "l", "xl"}, scale);
}

int family_rank(const std::string& family) { return rank_in(study_family_names(), family); }

// Mean of the runs' values that are present.
template <typename Field>
double mean_present(const std::vector<const RunResults*>& runs, Field field) {
  std::vector<double> values;
  for (const RunResults* r : runs)
    if (!std::isnan(r->*field)) values.push_back(r->*field);
  return stats::mean(values);
}

GroupSummary summarise_group(std::vector<const RunResults*> runs, double alpha) {
  std::sort(runs.begin(), runs.end(), [](const RunResults* a, const RunResults* b) {
    return a->record.seed < b->record.seed;
  });
  const RunRecord& first = runs.front()->record;
  GroupSummary g;
  g.name = first.group;
  g.family = first.family;
  g.scale = first.scale;
  g.window = first.window;
  g.tokens = first.tokens;
  g.runs = runs;
  std::vector<const std::vector<ValPoint>*> curves;
  for (const RunResults* r : runs) {
    g.final_val_nlls.push_back(r->final_val_nll);
    curves.push_back(&r->val_curve);
  }
  g.val_nll = stats::t_confidence_interval(g.final_val_nlls, alpha);
  g.val_nll_sd = stats::sample_sd(g.final_val_nlls);
  g.corpus_nll = mean_present(runs, &RunResults::corpus_nll);
  g.task_accuracy = mean_present(runs, &RunResults::task_accuracy);
  g.train_tokens_per_second = mean_present(runs, &RunResults::train_tokens_per_second);
  g.peak_rss_bytes = mean_present(runs, &RunResults::peak_rss_bytes);
  g.decode_tokens_per_second = mean_present(runs, &RunResults::decode_tokens_per_second);
  g.kv_cache_bytes = mean_present(runs, &RunResults::kv_cache_bytes);
  g.mean_curve = mean_curve(curves);
  return g;
}

void compare_with_standard(GroupSummary& g, const GroupSummary& standard) {
  g.delta_val_nll = g.val_nll.mean - standard.val_nll.mean;
  g.delta_corpus_nll = g.corpus_nll - standard.corpus_nll;
  g.delta_task_accuracy = g.task_accuracy - standard.task_accuracy;
  g.train_throughput_ratio = g.train_tokens_per_second / standard.train_tokens_per_second;
  g.peak_memory_ratio = g.peak_rss_bytes / standard.peak_rss_bytes;
  g.decode_ratio = g.decode_tokens_per_second / standard.decode_tokens_per_second;
  g.kv_ratio = g.kv_cache_bytes / standard.kv_cache_bytes;
  g.tokens_to_reach_standard = tokens_to_reach(g.mean_curve, standard.val_nll.mean);
  g.gap = gap_curve(g.mean_curve, standard.mean_curve);
  g.crossovers = sign_changes(g.gap);
}

void run_seed_tests(Cohort& c, double alpha, double margin) {
  for (const GroupSummary& s : c.groups) {
    if (s.family != "sps") continue;
    for (const GroupSummary& other : c.groups) {
      // Families with a window are compared at sps's window: across windows is the ablation.
      if (other.family == "sps" || (window_is_swept(other.family) && other.window != s.window)) continue;
      if (s.runs.size() < 2 || other.runs.size() < 2) {
        c.untested.push_back(group_label(s) + " vs " + group_label(other));
        continue;
      }
      SeedTest t;
      t.sps_group = s.name;
      t.other_group = other.name;
      t.sps_label = group_label(s);
      t.other_label = group_label(other);
      t.welch = stats::welch_t(s.final_val_nlls, other.final_val_nlls);
      t.p_sps_lower = stats::welch_p_less(s.final_val_nlls, other.final_val_nlls);
      t.tost = stats::tost(s.final_val_nlls, other.final_val_nlls, margin, alpha);
      c.tests.push_back(t);
    }
  }
}

}  // namespace

std::string group_label(const GroupSummary& group) {
  if (!window_is_swept(group.family)) return group.family;
  return group.family + " w" + std::to_string(group.window);
}

std::string cohort_id(const Cohort& cohort) {
  return cohort.scale + "_" + std::to_string(cohort.tokens);
}

double tokens_to_reach(const std::vector<ValPoint>& curve, double target) {
  for (size_t i = 0; i < curve.size(); ++i) {
    if (!(curve[i].val_nll <= target)) continue;
    if (i == 0) return double(curve[0].tokens);
    const ValPoint& a = curve[i - 1];
    const ValPoint& b = curve[i];
    const double fraction = (a.val_nll - target) / (a.val_nll - b.val_nll);
    return double(a.tokens) + fraction * double(b.tokens - a.tokens);
  }
  return kNaN;
}

std::vector<ValPoint> mean_curve(const std::vector<const std::vector<ValPoint>*>& curves) {
  std::map<int64_t, std::vector<double>> by_tokens;
  for (const auto* curve : curves)
    for (const ValPoint& p : *curve) by_tokens[p.tokens].push_back(p.val_nll);
  std::vector<ValPoint> mean;
  for (const auto& [tokens, values] : by_tokens)
    if (values.size() == curves.size()) mean.push_back({tokens, stats::mean(values)});
  return mean;
}

std::vector<GapPoint> gap_curve(const std::vector<ValPoint>& group,
                                const std::vector<ValPoint>& standard) {
  std::map<int64_t, double> standard_at;
  for (const ValPoint& p : standard) standard_at[p.tokens] = p.val_nll;
  std::vector<GapPoint> gap;
  for (const ValPoint& p : group) {
    const auto it = standard_at.find(p.tokens);
    if (it != standard_at.end()) gap.push_back({p.tokens, p.val_nll - it->second});
  }
  return gap;
}

std::vector<double> sign_changes(const std::vector<GapPoint>& gap) {
  std::vector<double> changes;
  int last_signed = -1;  // index of the last point with a nonzero gap
  for (int i = 0; i < int(gap.size()); ++i) {
    if (gap[i].gap == 0) continue;
    if (last_signed >= 0 && (gap[i].gap > 0) != (gap[last_signed].gap > 0)) {
      const GapPoint& a = gap[last_signed];
      const GapPoint& b = gap[i];
      if (i == last_signed + 1)
        changes.push_back(double(a.tokens) + a.gap / (a.gap - b.gap) * double(b.tokens - a.tokens));
      else
        changes.push_back(double(gap[last_signed + 1].tokens));
    }
    last_signed = i;
  }
  return changes;
}

std::vector<Cohort> analyse_runs(const std::vector<RunResults>& runs, double alpha, double margin) {
  std::map<std::string, std::vector<const RunResults*>> by_group;
  for (const RunResults& r : runs) by_group[r.record.group].push_back(&r);

  std::vector<Cohort> cohorts;
  for (auto& [name, members] : by_group) {
    GroupSummary g = summarise_group(members, alpha);
    auto it = std::find_if(cohorts.begin(), cohorts.end(), [&](const Cohort& c) {
      return c.scale == g.scale && c.tokens == g.tokens;
    });
    if (it == cohorts.end()) {
      cohorts.push_back({g.scale, g.tokens, {}, -1, {}, {}});
      it = cohorts.end() - 1;
    }
    it->groups.push_back(std::move(g));
  }
  std::sort(cohorts.begin(), cohorts.end(), [](const Cohort& a, const Cohort& b) {
    const int ra = scale_rank(a.scale), rb = scale_rank(b.scale);
    if (ra != rb) return ra < rb;
    return a.scale != b.scale ? a.scale < b.scale : a.tokens < b.tokens;
  });
  for (Cohort& c : cohorts) {
    std::sort(c.groups.begin(), c.groups.end(), [](const GroupSummary& a, const GroupSummary& b) {
      const int fa = family_rank(a.family), fb = family_rank(b.family);
      if (fa != fb) return fa < fb;
      return a.window != b.window ? a.window < b.window : a.name < b.name;
    });
    for (int i = 0; i < int(c.groups.size()) && c.standard < 0; ++i)
      if (c.groups[i].family == "standard") c.standard = i;
    if (c.standard >= 0) {
      const GroupSummary standard = c.groups[c.standard];
      for (GroupSummary& g : c.groups) compare_with_standard(g, standard);
    }
    run_seed_tests(c, alpha, margin);
  }
  return cohorts;
}

}  // namespace sps::report
