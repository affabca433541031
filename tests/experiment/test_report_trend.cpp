// The gap to standard by seed (experiment/report_trend.h) on synthetic experiment folders:
// per-seed gaps, their t-interval, the crossing, the least-squares line and the decayed
// branches, against values worked out by hand; runs still training count as partial.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "experiment/report.h"
#include "experiment/report_figures.h"
#include "experiment/report_trend.h"
#include "util/temp_dir.h"

namespace sps::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr double kT975With1Dof = 12.706204736174698;  // t_{0.975, 1}
constexpr double kT975With4Dof = 2.7764451051977934;  // t_{0.975, 4}

// A branch's config.yaml: 100 tokens per step, so its length is `tokens` exactly.
std::string branch_config(int64_t tokens) {
  return fmt::format(
      "model: {{family: standard, n_layer: 1, n_head: 1, hidden_size: 8, intermediate_size: 8, "
      "vocab_size: 64, block_size: 100, eos_token_id: 60, predict_token_id: 61, pad_token_id: "
      "63}}\ntraining: {{micro_batch_size: 1, global_batch_size: 1, max_tokens: {}}}\n"
      "data: {{dataset: data}}\n",
      tokens);
}

// runs/<name>/ with run.json, train/metrics.jsonl (val NLL at `points`) and decayed branches
// (from, last tokens, val NLL).
void write_run(const fs::path& dir, const std::string& family, int seed, const std::string& status,
               const std::vector<std::pair<int64_t, double>>& points,
               const std::vector<std::tuple<int64_t, int64_t, double>>& branches = {}) {
  const std::string group = family == "standard" ? "tiny_standard" : "tiny_sps_w64";
  const std::string name = fmt::format("{}_seed{}", group, seed);
  const fs::path run = dir / "runs" / name;
  fs::create_directories(run / "train");
  const json record = {{"name", name},     {"group", group},    {"recipe", "r.yaml"},
                       {"family", family}, {"window", 64},      {"scale", "tiny"},
                       {"seed", seed},     {"tokens", 4000000}, {"overrides", json::array()},
                       {"status", status}, {"error", ""}};
  write_whole_file((run / "run.json").string(), record.dump());
  std::string metrics =
      json{{"step", 0}, {"tokens", 0}, {"documents_per_batch", 17.5}}.dump() + "\n";
  for (const auto& [tokens, nll] : points) {
    metrics += json{{"step", tokens / 100}, {"tokens", tokens}, {"lr", 1e-3},
                    {"loss", 5.0},          {"grad_norm", 1.0}, {"tokens_per_second", 1000.0},
                    {"peak_rss_bytes", 1e6}}
                   .dump() +
               "\n";
    metrics += json{{"step", tokens / 100}, {"tokens", tokens}, {"val_nll", nll}}.dump() + "\n";
  }
  write_whole_file((run / "train" / "metrics.jsonl").string(), metrics);
  for (const auto& [from, tokens, nll] : branches) {
    const fs::path branch = run / fmt::format("decay_{}", from);
    fs::create_directories(branch);
    // The branch's length is from + from/10: a last validation short of it is unfinished.
    write_whole_file((branch / "config.yaml").string(), branch_config(from + from / 10));
    write_whole_file(
        (branch / "metrics.jsonl").string(),
        json{{"step", tokens / 100}, {"tokens", tokens}, {"val_nll", nll}}.dump() + "\n");
  }
}

// standard seed s: 5 − 0.2·m + ε_s (m = millions of tokens, ε = 0, 0.02); sps seed 1 is
// standard's + 0.3 − 0.1·m, seed 2 + 0.34 − 0.1·m, so the mean gap is 0.32 − 0.1·m (zero at
// 3.2M) and the two seeds' gaps always differ by 0.04.
std::vector<std::pair<int64_t, double>> curve(int seed, bool sps, int last_million = 4) {
  std::vector<std::pair<int64_t, double>> points;
  for (int m = 0; m <= last_million; ++m) {
    double v = 5.0 - 0.2 * m + (seed == 2 ? 0.02 : 0.0);
    if (sps) v += (seed == 2 ? 0.34 : 0.3) - 0.1 * m;
    points.push_back({int64_t(m) * 1000000, v});
  }
  return points;
}

json report(const fs::path& dir) {
  ReportOptions options;
  options.figures = false;
  write_experiment_report(dir.string(), options);
  return json::parse(read_whole_file((dir / "results.json").string()));
}

TEST(ReportTrend, GapIntervalCrossingFitAndDecayFromSyntheticRecords) {
  TempDir dir;
  // Branches from 2M to 2.2M: gaps 0.1 and 0.14. The branches from 3M have not finished.
  write_run(dir.path(), "standard", 1, "done", curve(1, false),
            {{2000000, 2200000, 4.5}, {3000000, 3100000, 4.3}});
  write_run(dir.path(), "standard", 2, "done", curve(2, false),
            {{2000000, 2200000, 4.52}, {3000000, 3100000, 4.3}});
  write_run(dir.path(), "sps", 1, "done", curve(1, true), {{2000000, 2200000, 4.6}});
  write_run(dir.path(), "sps", 2, "done", curve(2, true), {{2000000, 2200000, 4.66}});
  const json j = report(dir.path());
  ASSERT_EQ(j["trends"].size(), 1u) << j.dump(1);
  const json& t = j["trends"][0];
  EXPECT_EQ(t["label"], "sps w64");
  EXPECT_EQ(t["seeds"], json::array({1, 2}));
  EXPECT_TRUE(t["partial_runs"].empty());
  ASSERT_EQ(t["points"].size(), 5u);
  // Two seeds 0.04 apart: sd = 0.04/√2, half width = t_{0.975,1} · sd/√2 = t · 0.02.
  for (size_t i = 0; i < 5; ++i) {
    const json& p = t["points"][i];
    EXPECT_EQ(p["tokens"], int64_t(i) * 1000000);
    EXPECT_NEAR(p["gap"].get<double>(), 0.32 - 0.1 * double(i), 1e-12);
    EXPECT_NEAR(p["gap_half_width"].get<double>(), kT975With1Dof * 0.02, 1e-9);
    EXPECT_NEAR(p["gaps_per_seed"][0].get<double>(), 0.3 - 0.1 * double(i), 1e-12);
    EXPECT_NEAR(p["gaps_per_seed"][1].get<double>(), 0.34 - 0.1 * double(i), 1e-12);
    EXPECT_NEAR(p["standard_val_nll"].get<double>(), 5.01 - 0.2 * double(i), 1e-12);
  }
  ASSERT_EQ(t["crossovers"].size(), 1u);
  EXPECT_NEAR(t["crossovers"][0].get<double>(), 3.2e6, 1e-3);
  // The fit over 2M..4M (half of 4M on): 6 per-seed gaps, slope −0.1 per 1M, intercept 0.32,
  // residuals ±0.02 (rss 0.0024, 4 d.o.f.), slope se = √(0.0006)/√4.
  const json& f = t["fit"];
  EXPECT_EQ(f["pairs"], 6);
  EXPECT_EQ(f["first_tokens"], 2000000);
  EXPECT_EQ(f["last_tokens"], 4000000);
  EXPECT_NEAR(f["slope_per_million_tokens"].get<double>(), -0.1, 1e-12);
  EXPECT_NEAR(f["intercept"].get<double>(), 0.32, 1e-12);
  EXPECT_NEAR(f["residual_sd"].get<double>(), std::sqrt(0.0006), 1e-12);
  EXPECT_NEAR(f["slope_half_width"].get<double>(), kT975With4Dof * std::sqrt(0.0006) / 2, 1e-9);
  EXPECT_NEAR(f["zero_tokens"].get<double>(), 3.2e6, 1e-3);
  // Each seed's line alone has the same slope (their gaps differ by a constant): no spread.
  ASSERT_EQ(f["seed_slopes"].size(), 2u);
  for (const json& slope : f["seed_slopes"]) EXPECT_NEAR(slope.get<double>(), -0.1, 1e-12);
  EXPECT_NEAR(f["seed_slope_half_width"].get<double>(), 0.0, 1e-12);
  // Only the branch every run finished: from 2M, gaps 0.1 and 0.14.
  ASSERT_EQ(t["decayed"].size(), 1u);
  const json& d = t["decayed"][0];
  EXPECT_EQ(d["from"], 2000000);
  EXPECT_EQ(d["tokens"], 2200000);
  EXPECT_NEAR(d["gap"].get<double>(), 0.12, 1e-12);
  EXPECT_NEAR(d["gap_half_width"].get<double>(), kT975With1Dof * 0.02, 1e-9);
  EXPECT_NEAR(d["standard_val_nll"].get<double>(), 4.51, 1e-12);
  EXPECT_EQ(j["cohorts"][0]["groups"][0]["runs"][0]["documents_per_batch"], 17.5);

  const std::string md = read_whole_file((dir.path() / "results.md").string());
  for (const char* text :
       {"## Gap to standard by seed",
        "### Scale tiny, 4M tokens: sps w64 against standard, seeds 1, 2",
        "| 1M | 4.8100 | 5.0300 | +0.2200 | 0.2541 | +0.200, +0.240 |",
        "- Crossing: the mean gap changes sign at 3.2M tokens; sps w64 below standard at the end",
        "- Fit over 2M–4M tokens (6 per-seed gaps): gap = +0.3200 − 0.1000 per 1M tokens (slope ± "
        "0.0340), residual sd 0.0245; the line is 0 at 3.2M tokens.",
        "| 2M | 2.2M | 4.5100 | 4.6300 | +0.1200 | 0.2541 | +0.100, +0.140 |"})
    EXPECT_NE(md.find(text), std::string::npos) << text << "\n" << md;
}

TEST(ReportTrend, RunsStillTrainingGivePartialCurves) {
  TempDir dir;
  // Every run has a branch from 1M; seed 1's finished runs one from 4M too.
  write_run(dir.path(), "standard", 1, "done", curve(1, false),
            {{1000000, 1100000, 4.7}, {4000000, 4400000, 4.1}});
  write_run(dir.path(), "standard", 2, "training", curve(2, false, 2), {{1000000, 1100000, 4.72}});
  write_run(dir.path(), "sps", 1, "done", curve(1, true),
            {{1000000, 1100000, 4.9}, {4000000, 4400000, 4.0}});
  write_run(dir.path(), "sps", 2, "training", curve(2, true, 3), {{1000000, 1100000, 4.96}});
  const json j = report(dir.path());
  ASSERT_EQ(j["trends"].size(), 1u);
  const json& t = j["trends"][0];
  EXPECT_EQ(t["partial_runs"], json::array({"tiny_sps_w64_seed2", "tiny_standard_seed2"}));
  ASSERT_EQ(t["points"].size(), 3u);  // 0, 1M, 2M: what every run has
  EXPECT_EQ(t["points"].back()["tokens"], 2000000);
  EXPECT_EQ(t["points"].back()["seeds_present"], 2);
  // 3M and 4M: seed 1's pair only (sps seed 2 reached 3M, its standard did not).
  ASSERT_EQ(t["later_points"].size(), 2u);
  for (int i = 0; i < 2; ++i) {
    const json& p = t["later_points"][i];
    const int m = 3 + i;
    EXPECT_EQ(p["tokens"], m * 1000000);
    EXPECT_EQ(p["seeds_present"], 1);
    EXPECT_TRUE(p["gap_half_width"].is_null());
    ASSERT_EQ(p["gaps_per_seed"].size(), 2u);
    EXPECT_NEAR(p["gaps_per_seed"][0].get<double>(), 0.3 - 0.1 * m, 1e-12);
    EXPECT_TRUE(p["gaps_per_seed"][1].is_null());
    EXPECT_NEAR(p["gap"].get<double>(), 0.3 - 0.1 * m, 1e-12);
    EXPECT_NEAR(p["standard_val_nll"].get<double>(), 5.0 - 0.2 * m, 1e-12);
  }
  // The crossing (seed 1 alone reaches 0 at 3M) and the fit keep to the shared points.
  EXPECT_TRUE(t["crossovers"].empty());
  EXPECT_EQ(t["fit"]["pairs"], 4);  // 1M and 2M, two seeds
  ASSERT_EQ(t["decayed"].size(), 1u);
  EXPECT_EQ(t["decayed"][0]["from"], 1000000);
  EXPECT_NEAR(t["decayed"][0]["gap"].get<double>(), (0.2 + 0.24) / 2, 1e-12);
  ASSERT_EQ(t["later_decayed"].size(), 1u);
  EXPECT_EQ(t["later_decayed"][0]["from"], 4000000);
  EXPECT_EQ(t["later_decayed"][0]["tokens"], 4400000);
  EXPECT_EQ(t["later_decayed"][0]["seeds_present"], 1);
  // The statistics of finished runs still leave them out.
  EXPECT_EQ(j["runs_done"], 2);
  const std::string md = read_whole_file((dir.path() / "results.md").string());
  for (const std::string text :
       {"(partial: tiny_sps_w64_seed2, tiny_standard_seed2 not finished)",
        "| 4M | 4.2000 | 4.1000 | -0.1000 | — | -0.100, — |",
        "The last 2 rows come from the seeds that have reached them (— where a seed has not): "
        "their means are over those seeds, and the crossing and the fit leave them out.",
        "| 4M | 4.4M | 4.1000 | 4.0000 | -0.1000 | — | -0.100, — |",
        "The last row comes from the seeds that have reached it (— where a seed has not): its "
        "means are over those seeds."})
    EXPECT_NE(md.find(text), std::string::npos) << text << "\n" << md;
}

TEST(ReportTrend, SlopeSeedBySeedCountsEachSeedsCurveOnce) {
  TempDir dir;
  // sps seed 1 is standard's + 0.3 − 0.1·m, seed 2 standard's + 0.5 − 0.2·m: exact lines.
  for (int seed : {1, 2}) {
    std::vector<std::pair<int64_t, double>> sps = curve(seed, false);
    for (auto& [tokens, nll] : sps)
      nll += seed == 1 ? 0.3 - 0.1 * double(tokens) / 1e6 : 0.5 - 0.2 * double(tokens) / 1e6;
    write_run(dir.path(), "standard", seed, "done", curve(seed, false));
    write_run(dir.path(), "sps", seed, "done", sps);
  }
  const json f = report(dir.path())["trends"][0]["fit"];
  ASSERT_EQ(f["seed_slopes"].size(), 2u);
  EXPECT_NEAR(f["seed_slopes"][0].get<double>(), -0.1, 1e-12);
  EXPECT_NEAR(f["seed_slopes"][1].get<double>(), -0.2, 1e-12);
  EXPECT_NEAR(f["seed_slope_mean"].get<double>(), -0.15, 1e-12);
  // sd of (−0.1, −0.2) is 0.05·√2; over √2 seeds: 0.05, times t_{0.975, 1}.
  EXPECT_NEAR(f["seed_slope_half_width"].get<double>(), kT975With1Dof * 0.05, 1e-9);
  const std::string md = read_whole_file((dir.path() / "results.md").string());
  const std::string line =
      "- Slope seed by seed (each seed's line alone, over the same tokens): -0.1000, -0.2000 per "
      "1M tokens; mean -0.1500 ± 0.6353 over the seeds (n − 1 d.o.f.), the interval that counts "
      "each seed's curve once.";
  EXPECT_NE(md.find(line), std::string::npos) << md;
}

TEST(ReportTrend, FitNeedsThreePairsAndASpreadOfTokens) {
  EXPECT_TRUE(std::isnan(report::fit_gap({{1000000, 0.1}, {2000000, 0.2}}, 0.05).slope));
  EXPECT_TRUE(
      std::isnan(report::fit_gap({{1000000, 0.1}, {1000000, 0.2}, {1000000, 0.3}}, 0.05).slope));
  // An exact line: no residual, zero interval, the zero where the line says.
  const report::GapFit f = report::fit_gap({{1000000, 0.5}, {2000000, 0.3}, {3000000, 0.1}}, 0.05);
  EXPECT_NEAR(f.slope, -0.2, 1e-12);
  EXPECT_NEAR(f.intercept, 0.7, 1e-12);
  EXPECT_NEAR(f.residual_sd, 0.0, 1e-12);
  EXPECT_NEAR(f.zero_tokens, 3.5e6, 1e-3);
}

TEST(ReportTrend, GapBySeedFigureDrawsEachSeedTheMeanWithItsIntervalAndTheDecayedGaps) {
  report::GapTrend t;
  t.scale = "tiny";
  t.budget = 4000000;
  t.group = "tiny_sps_w64";
  t.label = "sps w64";
  t.family = "sps";
  t.seeds = {1, 2};
  const auto point = [](int64_t tokens, std::vector<double> gaps, double mean, double half) {
    report::SeedGap p;
    p.tokens = tokens;
    p.gaps = std::move(gaps);
    p.gap = {mean, half};
    return p;
  };
  const double nan = std::nan("");
  t.points = {point(1000000, {0.3, 0.5}, 0.4, 1.27), point(2000000, {0.2, 0.3}, 0.25, 0.64)};
  t.later_points = {point(3000000, {0.1, nan}, 0.1, nan)};
  t.decayed = {point(2200000, {0.15, 0.25}, 0.2, 0.64)};
  std::vector<std::string> skipped;
  const std::vector<report::Figure> figures = report::plan_figures({}, {t}, 0.10, skipped);
  ASSERT_EQ(figures.size(), 1u);  // no cohort: no other figure
  const report::Figure& f = figures[0];
  EXPECT_EQ(f.file, "gap_by_seed_tiny_4000000_tiny_sps_w64.png");
  ASSERT_EQ(f.series.size(), 4u);
  using Points = std::vector<std::pair<double, double>>;
  EXPECT_EQ(f.series[0].title, "seed 1");
  EXPECT_EQ(f.series[0].points, (Points{{1, 0.3}, {2, 0.2}, {3, 0.1}}));  // past the shared ones
  EXPECT_EQ(f.series[1].title, "seed 2");
  EXPECT_EQ(f.series[1].points, (Points{{1, 0.5}, {2, 0.3}}));  // seed 2 has not reached 3M
  EXPECT_EQ(f.series[2].title, "mean ± 90% over seeds");
  EXPECT_EQ(f.series[2].points, (Points{{1, 0.4}, {2, 0.25}}));  // the shared points only
  EXPECT_EQ(f.series[2].y_errors, (std::vector<double>{1.27, 0.64}));
  EXPECT_EQ(f.series[3].title, "after decay, mean ± 90%");
  EXPECT_FALSE(f.series[3].lines);
  EXPECT_EQ(f.series[3].points, (Points{{2.2, 0.2}}));
  EXPECT_EQ(f.series[3].y_errors, (std::vector<double>{0.64}));
  ASSERT_TRUE(f.reference_y.has_value());
  EXPECT_EQ(*f.reference_y, 0.0);
  // The axis spans 0 to the largest gap (0.5) with a margin, whatever the intervals.
  ASSERT_TRUE(f.y_range.has_value());
  EXPECT_NEAR(f.y_range->first, -0.051, 1e-12);
  EXPECT_NEAR(f.y_range->second, 0.551, 1e-12);
}

}  // namespace
}  // namespace sps::testing
