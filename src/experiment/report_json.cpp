// results.json: the report's numbers, machine-readable; null where a number is missing.
#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "experiment/report_content.h"

namespace sps::report {

namespace {

using nlohmann::ordered_json;

ordered_json number(double value) {
  return std::isfinite(value) ? ordered_json(value) : ordered_json();
}

// A run against the mean of its cohort's standard group (null without one).
ordered_json run_json(const RunResults& r, const GroupSummary* standard) {
  const GroupSummary none;
  const GroupSummary& s = standard ? *standard : none;
  auto against = [&](double value, double reference, bool ratio) {
    if (!standard) return ordered_json();
    return number(ratio ? value / reference : value - reference);
  };
  return {{"name", r.record.name},
          {"seed", r.record.seed},
          {"recipe", r.record.recipe},
          {"overrides", r.record.overrides},
          {"cpu", r.record.cpu},
          {"final_val_nll", number(r.final_val_nll)},
          {"corpus_nll", number(r.corpus_nll)},
          {"task_accuracy", number(r.task_accuracy)},
          {"train_tokens_per_second_median", number(r.train_tokens_per_second)},
          {"peak_rss_bytes", number(r.peak_rss_bytes)},
          {"documents_per_batch", number(r.documents_per_batch)},
          {"decode_tokens_per_second", number(r.decode_tokens_per_second)},
          {"kv_cache_bytes", number(r.kv_cache_bytes)},
          {"vs_standard",
           {{"delta_val_nll", against(r.final_val_nll, s.val_nll.mean, false)},
            {"delta_corpus_nll", against(r.corpus_nll, s.corpus_nll, false)},
            {"delta_task_accuracy", against(r.task_accuracy, s.task_accuracy, false)},
            {"train_throughput_ratio",
             against(r.train_tokens_per_second, s.train_tokens_per_second, true)},
            {"peak_memory_ratio", against(r.peak_rss_bytes, s.peak_rss_bytes, true)},
            {"decode_ratio", against(r.decode_tokens_per_second, s.decode_tokens_per_second, true)},
            {"kv_ratio", against(r.kv_cache_bytes, s.kv_cache_bytes, true)}}}};
}

ordered_json group_json(const GroupSummary& g, const GroupSummary* standard) {
  ordered_json runs = ordered_json::array();
  for (const RunResults* r : g.runs) runs.push_back(run_json(*r, standard));
  ordered_json gap = ordered_json::array();
  for (const GapPoint& p : g.gap) gap.push_back({{"tokens", p.tokens}, {"gap", p.gap}});
  ordered_json curve = ordered_json::array();
  for (const ValPoint& p : g.mean_curve)
    curve.push_back({{"tokens", p.tokens}, {"val_nll", p.val_nll}});
  return {{"group", g.name},
          {"label", group_label(g)},
          {"family", g.family},
          {"window", g.window},
          {"seeds", g.runs.size()},
          {"final_val_nll",
           {{"values", g.final_val_nlls},
            {"mean", number(g.val_nll.mean)},
            {"sd", number(g.val_nll_sd)},
            {"ci_half_width", number(g.val_nll.half_width)},
            {"ci_low", number(g.val_nll.low())},
            {"ci_high", number(g.val_nll.high())}}},
          {"delta_val_nll", number(g.delta_val_nll)},
          {"corpus_nll", number(g.corpus_nll)},
          {"delta_corpus_nll", number(g.delta_corpus_nll)},
          {"task_accuracy", number(g.task_accuracy)},
          {"delta_task_accuracy", number(g.delta_task_accuracy)},
          {"train_tokens_per_second", number(g.train_tokens_per_second)},
          {"train_throughput_ratio", number(g.train_throughput_ratio)},
          {"peak_rss_bytes", number(g.peak_rss_bytes)},
          {"peak_memory_ratio", number(g.peak_memory_ratio)},
          {"decode_tokens_per_second", number(g.decode_tokens_per_second)},
          {"decode_ratio", number(g.decode_ratio)},
          {"kv_cache_bytes", number(g.kv_cache_bytes)},
          {"kv_ratio", number(g.kv_ratio)},
          {"tokens_to_reach_standard", number(g.tokens_to_reach_standard)},
          {"crossovers", g.crossovers},
          {"val_nll_curve", curve},
          {"gap_to_standard", gap},
          {"runs", runs}};
}

ordered_json test_json(const SeedTest& t, double margin) {
  return {{"sps", t.sps_group},
          {"other", t.other_group},
          {"difference", number(t.welch.difference)},
          {"welch_t", number(t.welch.t)},
          {"dof", number(t.welch.dof)},
          {"p_sps_lower", number(t.p_sps_lower)},
          {"tost",
           {{"margin", margin},
            {"p_above_lower", number(t.tost.p_above_lower)},
            {"p_below_upper", number(t.tost.p_below_upper)},
            {"equivalent", t.tost.equivalent}}}};
}

ordered_json seed_gap_json(const SeedGap& p, bool decayed) {
  ordered_json j = {{"tokens", p.tokens}};
  if (decayed) j["from"] = p.from;
  j["standard_val_nll"] = number(p.standard_nll);
  j["group_val_nll"] = number(p.group_nll);
  j["gap"] = number(p.gap.mean);
  j["gap_half_width"] = number(p.gap.half_width);
  j["gaps_per_seed"] = p.gaps;
  j["seeds_present"] =
      std::count_if(p.gaps.begin(), p.gaps.end(), [](double gap) { return !std::isnan(gap); });
  return j;
}

ordered_json trend_json(const GapTrend& t) {
  const auto gaps_json = [](const std::vector<SeedGap>& points, bool decayed) {
    ordered_json out = ordered_json::array();
    for (const SeedGap& p : points) out.push_back(seed_gap_json(p, decayed));
    return out;
  };
  const GapFit& f = t.fit;
  return {{"scale", t.scale},
          {"tokens", t.budget},
          {"group", t.group},
          {"label", t.label},
          {"seeds", t.seeds},
          {"partial_runs", t.partial_runs},
          {"points", gaps_json(t.points, false)},
          {"later_points", gaps_json(t.later_points, false)},
          {"crossovers", t.crossovers},
          {"fit",
           {{"pairs", f.pairs},
            {"first_tokens", f.first_tokens},
            {"last_tokens", f.last_tokens},
            {"intercept", number(f.intercept)},
            {"slope_per_million_tokens", number(f.slope)},
            {"slope_half_width", number(f.slope_half_width)},
            {"residual_sd", number(f.residual_sd)},
            {"zero_tokens", number(f.zero_tokens)},
            {"seed_slopes", f.seed_slopes},
            {"seed_slope_mean", number(f.seed_slope.mean)},
            {"seed_slope_half_width", number(f.seed_slope.half_width)}}},
          {"decayed", gaps_json(t.decayed, true)},
          {"later_decayed", gaps_json(t.later_decayed, true)}};
}

}  // namespace

std::string results_json(const ReportContent& content) {
  ordered_json cohorts = ordered_json::array();
  for (const Cohort& c : content.cohorts) {
    const GroupSummary* standard = c.standard >= 0 ? &c.groups[c.standard] : nullptr;
    ordered_json groups = ordered_json::array();
    for (const GroupSummary& g : c.groups) groups.push_back(group_json(g, standard));
    ordered_json tests = ordered_json::array();
    for (const SeedTest& t : c.tests) tests.push_back(test_json(t, content.options.tost_margin));
    cohorts.push_back({{"id", cohort_id(c)},
                       {"scale", c.scale},
                       {"tokens", c.tokens},
                       {"standard", standard ? ordered_json(standard->name) : ordered_json()},
                       {"groups", groups},
                       {"tests", tests},
                       {"untested_for_lack_of_seeds", c.untested}});
  }
  ordered_json incomplete = ordered_json::array();
  for (const RunRecord& r : content.incomplete)
    incomplete.push_back(
        {{"name", r.name}, {"group", r.group}, {"status", r.status}, {"error", r.error}});
  ordered_json trends = ordered_json::array();
  for (const GapTrend& t : content.trends) trends.push_back(trend_json(t));
  ordered_json figures = ordered_json::array();
  for (const DrawnFigure& f : content.figures)
    figures.push_back({{"file", f.file}, {"title", f.title}});
  const ordered_json j = {{"alpha", content.options.alpha},
                          {"tost_margin", content.options.tost_margin},
                          {"runs_done", content.done.size()},
                          {"runs_incomplete", incomplete},
                          {"cohorts", cohorts},
                          {"trends", trends},
                          {"figures", figures},
                          {"notes", content.notes}};
  return j.dump(2) + "\n";
}

}  // namespace sps::report
