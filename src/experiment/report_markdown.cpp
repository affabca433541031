// results.md: one table per scale and token budget, the seed tests, the crossover lines,
// the runs, and the figures.
#include <fmt/format.h>

#include <cmath>
#include <filesystem>

#include "experiment/report_content.h"
#include "model/family.h"

namespace sps::report {

namespace {

constexpr const char* kMissing = "—";

std::string fixed(double x, int digits) {
  return std::isfinite(x) ? fmt::format("{:.{}f}", x, digits) : kMissing;
}
std::string signed_fixed(double x, int digits) {
  return std::isfinite(x) ? fmt::format("{:+.{}f}", x, digits) : kMissing;
}
std::string probability(double p) { return std::isfinite(p) ? fmt::format("{:.3g}", p) : kMissing; }
std::string ratio(double x) { return std::isfinite(x) ? fmt::format("{:.3f}×", x) : kMissing; }
std::string percent(double fraction) {
  return std::isfinite(fraction) ? fmt::format("{:.2f}%", 100 * fraction) : kMissing;
}
std::string mebibytes(double bytes) {
  return std::isfinite(bytes) ? fmt::format("{:.1f}", bytes / 1048576.0) : kMissing;
}

std::string tokens(double n) {
  if (!std::isfinite(n)) return kMissing;
  if (n >= 1e9) return fmt::format("{:.3g}B", n / 1e9);
  if (n >= 1e6) return fmt::format("{:.3g}M", n / 1e6);
  if (n >= 1e3) return fmt::format("{:.3g}k", n / 1e3);
  return fmt::format("{:.0f}", n);
}

std::string window_cell(const GroupSummary& g) {
  return study_family(g.family, "family").window == WindowRule::none ? kMissing
                                                                     : std::to_string(g.window);
}

std::string reach_cell(const GroupSummary& g, const Cohort& c) {
  if (c.standard < 0) return kMissing;
  if (std::isnan(g.tokens_to_reach_standard)) return "not reached";
  return fmt::format("{} ({:.2f}×)", tokens(g.tokens_to_reach_standard),
                     g.tokens_to_reach_standard / double(c.tokens));
}

std::string group_table(const Cohort& c, int ci_percent) {
  std::string md = fmt::format(
      "| family | window | seeds | val NLL (mean ± {}% CI) | Δ vs standard | Corpus NLL | "
      "Task Acc | train tok/s ratio | peak mem ratio | decode tok/s ratio | KV bytes ratio | "
      "tokens to reach standard |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n",
      ci_percent);
  for (const GroupSummary& g : c.groups) {
    const std::string nll = g.runs.size() < 2
                                ? fixed(g.val_nll.mean, 4)
                                : fixed(g.val_nll.mean, 4) + " ± " + fixed(g.val_nll.half_width, 4);
    md += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", g.family,
                      window_cell(g), g.runs.size(), nll, signed_fixed(g.delta_val_nll, 4),
                      fixed(g.corpus_nll, 4), percent(g.task_accuracy),
                      ratio(g.train_throughput_ratio), ratio(g.peak_memory_ratio),
                      ratio(g.decode_ratio), ratio(g.kv_ratio), reach_cell(g, c));
  }
  return md;
}

std::string seed_tests(const Cohort& c, const ReportOptions& o) {
  std::string md = fmt::format(
      "\nSeed tests on final val NLL: one-sided Welch t-test (H1: sps is lower; Welch–"
      "Satterthwaite d.o.f.) and TOST equivalence within ±{} (both one-sided p < {}).\n\n",
      o.tost_margin, o.alpha);
  if (!c.tests.empty()) {
    md += "| sps | against | Δ mean | t | d.o.f. | p (sps lower) | TOST p (> −margin, < +margin) "
          "| equivalent |\n|---|---|---|---|---|---|---|---|\n";
    for (const SeedTest& t : c.tests)
      md += fmt::format("| {} | {} | {} | {} | {} | {} | {}, {} | {} |\n", t.sps_label,
                        t.other_label, signed_fixed(t.welch.difference, 4), fixed(t.welch.t, 3),
                        fixed(t.welch.dof, 2), probability(t.p_sps_lower),
                        probability(t.tost.p_above_lower), probability(t.tost.p_below_upper),
                        t.tost.equivalent ? "yes" : "no");
  }
  if (!c.untested.empty()) {
    md += "\nThe tests need ≥ 2 seeds in both groups; not tested: ";
    for (size_t i = 0; i < c.untested.size(); ++i) md += (i ? ", " : "") + c.untested[i];
    md += ".\n";
  }
  if (c.tests.empty() && c.untested.empty()) md += "No sps group to test against another family.\n";
  return md;
}

std::string crossover_line(const GroupSummary& g) {
  const std::string name = group_label(g);
  if (g.gap.empty()) return fmt::format("- {}: no evaluation points shared with standard.\n", name);
  const double end = g.gap.back().gap;
  const std::string side = end < 0 ? "below" : end > 0 ? "above" : "level with";
  if (g.crossovers.empty())
    return fmt::format("- {}: no crossover; {} standard throughout ({} shared points, gap at the "
                       "end {}).\n",
                       name, side, g.gap.size(), signed_fixed(end, 4));
  std::string at;
  for (size_t i = 0; i < g.crossovers.size(); ++i) at += (i ? ", " : "") + tokens(g.crossovers[i]);
  return fmt::format("- {}: crosses standard at {} tokens; {} it at the end (gap {}).\n", name, at,
                     side, signed_fixed(end, 4));
}

std::string runs_table(const Cohort& c) {
  std::string md =
      "| run | seed | final val NLL | Corpus NLL | Task Acc | train tok/s (median) | peak MiB | "
      "docs/batch | decode tok/s | KV MiB |\n|---|---|---|---|---|---|---|---|---|---|\n";
  for (const GroupSummary& g : c.groups)
    for (const RunResults* r : g.runs)
      md += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", r->record.name,
                        r->record.seed, fixed(r->final_val_nll, 4), fixed(r->corpus_nll, 4),
                        percent(r->task_accuracy), fixed(r->train_tokens_per_second, 0),
                        mebibytes(r->peak_rss_bytes), fixed(r->documents_per_batch, 1),
                        fixed(r->decode_tokens_per_second, 1), mebibytes(r->kv_cache_bytes));
  // Benchmarks that shared the machine (bench.json's other_cpu_share; older records lack it).
  std::string shared;
  for (const GroupSummary& g : c.groups)
    for (const RunResults* r : g.runs)
      if (r->bench_others_cpu_share >= kSharedBenchmarkShare)
        shared += fmt::format("{}{} ({:.0f}%)", shared.empty() ? "" : ", ", r->record.name,
                              100 * r->bench_others_cpu_share);
  if (!shared.empty())
    md += fmt::format("\nDecode benchmarks timed while other processes took {:.0f}% or more of "
                      "the CPUs: {}. Their decode tok/s are not clean; rerun each alone.\n",
                      100 * kSharedBenchmarkShare, shared);
  return md;
}

std::string cohort_section(const Cohort& c, const ReportOptions& o) {
  const int ci_percent = int(std::lround(100 * (1 - o.alpha)));
  std::string md = fmt::format("\n## Scale {}, {} tokens\n\n", c.scale, tokens(double(c.tokens)));
  if (c.standard < 0) md += "No standard group at this scale and budget: no deltas or ratios.\n\n";
  md += group_table(c, ci_percent);
  md += seed_tests(c, o);
  if (c.standard >= 0) {
    md += "\nGap to standard along training (val NLL difference at shared evaluation points):\n\n";
    for (const GroupSummary& g : c.groups)
      if (&g != &c.groups[c.standard]) md += crossover_line(g);
  }
  md += "\n";
  md += runs_table(c);
  return md;
}

std::string per_seed(const SeedGap& p) {
  std::string s;
  for (size_t i = 0; i < p.gaps.size(); ++i) s += (i ? ", " : "") + signed_fixed(p.gaps[i], 3);
  return s;
}

// The shared points, then the later ones that only some seeds have reached.
std::string seed_gap_table(const GapTrend& t, const std::vector<SeedGap>& shared,
                           const std::vector<SeedGap>& later, bool decayed, int ci_percent) {
  std::string md = fmt::format("| {}tokens | standard | {} | gap | ± {}% | per seed |\n",
                               decayed ? "from | to " : "", t.label, ci_percent);
  md += decayed ? "|---|---|---|---|---|---|---|\n" : "|---|---|---|---|---|---|\n";
  for (const auto* points : {&shared, &later})
    for (const SeedGap& p : *points)
      md += fmt::format("| {}{} | {} | {} | {} | {} | {} |\n",
                        decayed ? tokens(double(p.from)) + " | " : "", tokens(double(p.tokens)),
                        fixed(p.standard_nll, 4), fixed(p.group_nll, 4),
                        signed_fixed(p.gap.mean, 4), fixed(p.gap.half_width, 4), per_seed(p));
  if (!later.empty())
    md += fmt::format(
        "\n{} from the seeds that have reached {} (— where a seed has not): {} over those "
        "seeds{}.\n",
        later.size() == 1 ? "The last row comes"
                          : fmt::format("The last {} rows come", later.size()),
        later.size() == 1 ? "it" : "them", later.size() == 1 ? "its means are" : "their means are",
        decayed ? "" : ", and the crossing and the fit leave them out");
  return md;
}

std::string trend_lines(const GapTrend& t) {
  std::string md;
  if (t.points.empty()) return "- No evaluation point shared by every run yet.\n";
  const double end = t.points.back().gap.mean;
  const std::string side = end < 0 ? "below" : end > 0 ? "above" : "level with";
  if (t.crossovers.empty()) {
    md += fmt::format("- Crossing: none; {} {} standard at the end of the {} shared points (mean "
                      "gap {}).\n",
                      t.label, side, t.points.size(), signed_fixed(end, 4));
  } else {
    std::string at;
    for (size_t i = 0; i < t.crossovers.size(); ++i)
      at += (i ? ", " : "") + tokens(t.crossovers[i]);
    md += fmt::format("- Crossing: the mean gap changes sign at {} tokens; {} {} standard at the "
                      "end (mean gap {}).\n",
                      at, t.label, side, signed_fixed(end, 4));
  }
  const GapFit& f = t.fit;
  if (!std::isfinite(f.slope)) {
    md += fmt::format("- Fit: too few per-seed gaps ({}) from {} tokens on for a line.\n", f.pairs,
                      tokens(double(f.first_tokens)));
  } else {
    std::string zero = "the line is flat";
    if (std::isfinite(f.zero_tokens))
      zero = f.zero_tokens > double(f.last_tokens)
                 ? fmt::format("the line would reach 0 at {} tokens (an extrapolation)",
                               tokens(f.zero_tokens))
             : f.zero_tokens >= double(f.first_tokens)
                 ? fmt::format("the line is 0 at {} tokens", tokens(f.zero_tokens))
                 : fmt::format("the line moves away from 0 (0 at {} tokens)",
                               f.zero_tokens > 0 ? tokens(f.zero_tokens) : "none > 0");
    md += fmt::format(
        "- Fit over {}–{} tokens ({} per-seed gaps): gap = {} {} {} per 1M tokens (slope ± {}), "
        "residual sd {}; {}.\n",
        tokens(double(f.first_tokens)), tokens(double(f.last_tokens)), f.pairs,
        signed_fixed(f.intercept, 4), f.slope < 0 ? "−" : "+", fixed(std::fabs(f.slope), 4),
        fixed(f.slope_half_width, 4), fixed(f.residual_sd, 4), zero);
    if (f.seed_slopes.size() >= 2) {
      std::string slopes;
      for (size_t i = 0; i < f.seed_slopes.size(); ++i)
        slopes += (i ? ", " : "") + signed_fixed(f.seed_slopes[i], 4);
      md += fmt::format(
          "- Slope seed by seed (each seed's line alone, over the same tokens): {} per 1M "
          "tokens; mean {} ± {} over the seeds (n − 1 d.o.f.), the interval that counts each "
          "seed's curve once.\n",
          slopes, signed_fixed(f.seed_slope.mean, 4), fixed(f.seed_slope.half_width, 4));
    }
  }
  return md;
}

std::string trends_section(const ReportContent& content) {
  if (content.trends.empty()) return "";
  const int ci_percent = int(std::lround(100 * (1 - content.options.alpha)));
  std::string md = fmt::format(
      "\n## Gap to standard by seed\n\nThe gap is a run's val NLL minus that of standard's run "
      "with the same seed at the same point; ± is the two-sided {}% t-interval over seeds (n − 1 "
      "d.o.f.; none with one seed). Crossings are where the mean gap changes sign (linear "
      "interpolation). The fit is a least-squares line through the per-seed gaps from half the "
      "last shared tokens on; its slope's interval has n − 2 d.o.f. Runs that are still going "
      "count with their curve so far.\n",
      ci_percent);
  for (const GapTrend& t : content.trends) {
    std::string seeds;
    for (size_t i = 0; i < t.seeds.size(); ++i)
      seeds += (i ? ", " : "") + std::to_string(t.seeds[i]);
    std::string partial;
    for (size_t i = 0; i < t.partial_runs.size(); ++i)
      partial += (i ? ", " : "") + t.partial_runs[i];
    md += fmt::format("\n### Scale {}, {} tokens: {} against standard, seed{} {}{}\n\n", t.scale,
                      tokens(double(t.budget)), t.label, t.seeds.size() == 1 ? "" : "s", seeds,
                      partial.empty() ? "" : " (partial: " + partial + " not finished)");
    md += seed_gap_table(t, t.points, t.later_points, false, ci_percent);
    md += "\n" + trend_lines(t);
    if (!t.decayed.empty() || !t.later_decayed.empty()) {
      md += "\nAfter decay (a branch from the constant-LR run's checkpoint, learning rate "
            "decayed linearly to the end of the branch):\n\n";
      md += seed_gap_table(t, t.decayed, t.later_decayed, true, ci_percent);
    }
  }
  return md;
}

}  // namespace

std::string results_markdown(const ReportContent& content) {
  const ReportOptions& o = content.options;
  std::string md = "# Experiment results\n\n";
  md += fmt::format(
      "{} finished run(s), {} incomplete. Final val NLL is the last validation of each run's "
      "training; ± is the two-sided {:.0f}% t-interval over seeds (n − 1 d.o.f.). Δ and ratios "
      "compare group means with the standard group of the same scale and token budget; "
      "\"tokens to reach standard\" is where the group's mean val-NLL curve first reaches "
      "standard's final val NLL (linear interpolation), with its fraction of the budget.\n",
      content.done.size(), content.incomplete.size(), 100 * (1 - o.alpha));
  if (content.cohorts.empty()) md += "\nNo finished run yet: nothing to compare.\n";
  for (const Cohort& c : content.cohorts) md += cohort_section(c, o);
  md += trends_section(content);
  if (!content.incomplete.empty()) {
    md += "\n## Incomplete runs (left out of the statistics but the gap by seed)\n\n";
    for (const RunRecord& r : content.incomplete)
      md += fmt::format("- {}: {}{}\n", r.name, r.status, r.error.empty() ? "" : " — " + r.error);
  }
  if (!content.figures.empty() || !content.notes.empty()) md += "\n## Figures\n\n";
  for (const DrawnFigure& f : content.figures) md += fmt::format("![{}]({})\n\n", f.title, f.file);
  for (const std::string& note : content.notes) md += "- " + note + "\n";
  return md;
}

}  // namespace sps::report
