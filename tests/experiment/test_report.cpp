// `sps experiment report` on a synthetic experiment folder: 3 seeds × 3 families with
// hand-chosen curves, plus runs that are not done. Checks the numbers in results.json
// against values worked out by hand, the Markdown rows, and the errors for damaged files.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "experiment/report.h"
#include "experiment/report_analysis.h"
#include "util/error.h"
#include "util/temp_dir.h"

namespace sps::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::vector<int64_t> kEvalTokens = {1000, 2000, 3000, 4000};
const std::vector<double> kSeedOffsets = {-0.01, 0.0, 0.01};

struct RunSpec {
  std::string family;
  int64_t window = 64;
  int seed = 1;
  std::string status = "done";
  std::vector<double> val_curve = {};      // at kEvalTokens
  std::vector<double> rates = {100, 100};  // tokens_per_second of the logged intervals
  double peak_rss = 1e6;
  std::optional<std::pair<double, double>> corpus_and_accuracy = {};
  std::optional<std::pair<double, double>> decode_and_kv = {};
};

std::string group_of(const RunSpec& r) {
  return r.family == "standard" ? "tiny_standard" : fmt::format("tiny_{}_w{}", r.family, r.window);
}

void write_run(const fs::path& dir, const RunSpec& r) {
  const std::string name = fmt::format("{}_seed{}", group_of(r), r.seed);
  const fs::path run = dir / "runs" / name;
  fs::create_directories(run / "train");
  const json record = {
      {"name", name},       {"group", group_of(r)}, {"recipe", "configs/experiments/tiny.yaml"},
      {"family", r.family}, {"window", r.window},   {"scale", "tiny"},
      {"seed", r.seed},     {"tokens", 4000},       {"overrides", {"training.max_tokens=4000"}},
      {"status", r.status}, {"error", ""}};
  write_whole_file((run / "run.json").string(), record.dump());
  std::string metrics;
  for (size_t i = 0; i < r.val_curve.size(); ++i) {
    if (i < r.rates.size())
      metrics += json{{"step", i + 1},
                      {"tokens", kEvalTokens[i] - 500},
                      {"lr", 1e-3},
                      {"loss", 5.0},
                      {"grad_norm", 1.0},
                      {"tokens_per_second", r.rates[i]},
                      {"peak_rss_bytes", r.peak_rss}}
                     .dump() +
                 "\n";
    metrics += json{{"step", i + 1},
                    {"tokens", kEvalTokens[i]},
                    {"val_nll", r.val_curve[i]},
                    {"eval_seconds", 0.1}}
                   .dump() +
               "\n";
  }
  write_whole_file((run / "train" / "metrics.jsonl").string(), metrics);
  if (r.corpus_and_accuracy)
    write_whole_file((run / "eval.json").string(),
                     json{{"family", r.family},
                          {"summary",
                           {{"val_nll", r.val_curve.back()},
                            {"corpus_nll", r.corpus_and_accuracy->first},
                            {"task_accuracy", r.corpus_and_accuracy->second}}}}
                         .dump());
  if (r.decode_and_kv)
    write_whole_file((run / "bench.json").string(),
                     json{{"model", name},
                          {"family", r.family},
                          {"decode_tokens_per_second", r.decode_and_kv->first},
                          {"kv_cache_allocated_bytes", r.decode_and_kv->second},
                          {"peak_rss_bytes", 123}}
                             .dump() +
                         "\n");
}

std::vector<double> shifted(std::vector<double> curve, double offset) {
  for (double& x : curve) x += offset;
  return curve;
}

// standard: 4.0, 3.5, 3.2, 3.0. sps w64: 4.1, 3.4, 2.95, 2.9 (gap +0.1, −0.1, −0.25, −0.1).
// delayed_state w64: 4.05, 3.55, 3.25, 3.02 (gap +0.05, +0.05, +0.05, +0.02). Seeds shift a
// whole curve by −0.01, 0, +0.01, so the seed means are these curves.
void write_experiment(const fs::path& dir, int seeds = 3) {
  for (int s = 0; s < seeds; ++s) {
    const double o = kSeedOffsets[size_t(s)];
    RunSpec standard{.family = "standard",
                     .window = 0,
                     .seed = s + 1,
                     .val_curve = shifted({4.0, 3.5, 3.2, 3.0}, o),
                     .rates = {100, 200, 300},
                     .peak_rss = 1e6,
                     .corpus_and_accuracy = std::pair{3.5 + o, 0.40 + o},
                     .decode_and_kv = std::pair{100.0, 1000.0}};
    RunSpec sps{.family = "sps",
                .seed = s + 1,
                .val_curve = shifted({4.1, 3.4, 2.95, 2.9}, o),
                .rates = {90, 100, 110, 120},
                .peak_rss = 1.5e6,
                .corpus_and_accuracy = std::pair{3.4 + o, 0.43 + o},
                .decode_and_kv = std::pair{80.0, 2000.0}};
    RunSpec delayed{.family = "delayed_state",
                    .seed = s + 1,
                    .val_curve = shifted({4.05, 3.55, 3.25, 3.02}, o)};
    write_run(dir, standard);
    write_run(dir, sps);
    write_run(dir, delayed);
  }
}

json read_results(const fs::path& dir) {
  return json::parse(read_whole_file((dir / "results.json").string()));
}

const json& group_named(const json& cohort, const std::string& label) {
  for (const json& g : cohort["groups"])
    if (g["label"] == label) return g;
  throw std::runtime_error("no group " + label);
}

ReportOptions no_figures() {
  ReportOptions o;
  o.figures = false;
  return o;
}

TEST(Report, NumbersFromASyntheticExperiment) {
  TempDir dir;
  write_experiment(dir.path());
  // Not done: a training run whose metrics would pull sps's mean far down, and a failed one
  // with nothing but its run.json.
  write_run(dir.path(),
            {.family = "sps", .seed = 4, .status = "training", .val_curve = {3.0, 1.0, 0.5, 0.1}});
  write_run(dir.path(), {.family = "delayed_state", .seed = 5, .status = "failed"});
  fs::remove_all(dir.path() / "runs" / "tiny_delayed_state_w64_seed5" / "train");

  const std::string summary = write_experiment_report(dir.path().string(), no_figures());
  EXPECT_NE(summary.find("9 run(s) done, 2 incomplete"), std::string::npos) << summary;

  const json j = read_results(dir.path());
  ASSERT_EQ(j["runs_incomplete"].size(), 2u);
  EXPECT_EQ(j["runs_incomplete"][0]["name"], "tiny_delayed_state_w64_seed5");
  EXPECT_EQ(j["runs_incomplete"][1]["status"], "training");
  ASSERT_EQ(j["cohorts"].size(), 1u);
  const json& c = j["cohorts"][0];
  EXPECT_EQ(c["standard"], "tiny_standard");
  ASSERT_EQ(c["groups"].size(), 3u);
  EXPECT_EQ(c["groups"][0]["family"], "standard");  // family order: standard first, sps last
  EXPECT_EQ(c["groups"][2]["family"], "sps");

  const json& standard = group_named(c, "standard");
  const json& sps = group_named(c, "sps w64");
  const json& delayed = group_named(c, "delayed_state w64");
  EXPECT_EQ(sps["seeds"], 3);  // the training seed 4 is left out
  EXPECT_NEAR(standard["final_val_nll"]["mean"].get<double>(), 3.0, 1e-12);
  EXPECT_NEAR(sps["final_val_nll"]["mean"].get<double>(), 2.9, 1e-12);
  // sd 0.01; half width t_{0.975,2} · 0.01/√3, t_{0.975,2} = √(1.805/0.0975) = 4.30265272975.
  EXPECT_NEAR(sps["final_val_nll"]["sd"].get<double>(), 0.01, 1e-12);
  EXPECT_NEAR(sps["final_val_nll"]["ci_half_width"].get<double>(),
              4.30265272975 * 0.01 / std::sqrt(3.0), 1e-9);
  EXPECT_NEAR(sps["delta_val_nll"].get<double>(), -0.1, 1e-12);
  EXPECT_NEAR(delayed["delta_val_nll"].get<double>(), 0.02, 1e-12);
  EXPECT_NEAR(standard["delta_val_nll"].get<double>(), 0.0, 1e-12);

  // eval.json: corpus 3.4 vs 3.5, accuracy 0.43 vs 0.40; delayed_state has no eval.json.
  EXPECT_NEAR(sps["delta_corpus_nll"].get<double>(), -0.1, 1e-12);
  EXPECT_NEAR(sps["delta_task_accuracy"].get<double>(), 0.03, 1e-12);
  EXPECT_TRUE(delayed["task_accuracy"].is_null());
  // Medians of the logged rates: 105 (of 90..120) vs 200 (of 100, 200, 300); peak 1.5e6/1e6.
  EXPECT_NEAR(sps["train_throughput_ratio"].get<double>(), 105.0 / 200.0, 1e-12);
  EXPECT_NEAR(sps["peak_memory_ratio"].get<double>(), 1.5, 1e-12);
  // bench.json: decode 80 vs 100 tokens/s, KV 2000 vs 1000 bytes.
  EXPECT_NEAR(sps["decode_ratio"].get<double>(), 0.8, 1e-12);
  EXPECT_NEAR(sps["kv_ratio"].get<double>(), 2.0, 1e-12);
  EXPECT_TRUE(delayed["decode_ratio"].is_null());

  // sps reaches 3.0 between 2000 (3.4) and 3000 (2.95): 2000 + 0.4/0.45 · 1000.
  EXPECT_NEAR(sps["tokens_to_reach_standard"].get<double>(), 2000 + 1000 * 0.4 / 0.45, 1e-6);
  EXPECT_TRUE(delayed["tokens_to_reach_standard"].is_null());
  // Gap +0.1 at 1000 and −0.1 at 2000: the sign changes half way, at 1500.
  ASSERT_EQ(sps["crossovers"].size(), 1u);
  EXPECT_NEAR(sps["crossovers"][0].get<double>(), 1500, 1e-6);
  EXPECT_TRUE(delayed["crossovers"].empty());
  // Per run against standard's means: seed 3 of sps ends at 2.91 with accuracy 0.44.
  const json& sps_seed3 = sps["runs"][2];
  EXPECT_EQ(sps_seed3["seed"], 3);
  EXPECT_NEAR(sps_seed3["vs_standard"]["delta_val_nll"].get<double>(), -0.09, 1e-12);
  EXPECT_NEAR(sps_seed3["vs_standard"]["delta_task_accuracy"].get<double>(), 0.04, 1e-12);
  EXPECT_NEAR(sps_seed3["vs_standard"]["kv_ratio"].get<double>(), 2.0, 1e-12);
  ASSERT_EQ(sps["gap_to_standard"].size(), 4u);
  EXPECT_NEAR(sps["gap_to_standard"][2]["gap"].get<double>(), -0.25, 1e-12);

  // sps against standard: difference −0.1, se √(2e-4/3), t = −√150, 4 d.o.f.,
  // p = F_4(t) = 1/2 + (3/8)·u·(1 − v/12) with u = t/√(1+t²/4), v = t²/(1+t²/4).
  ASSERT_EQ(c["tests"].size(), 2u);
  const json& vs_standard = c["tests"][0];
  EXPECT_EQ(vs_standard["other"], "tiny_standard");
  EXPECT_NEAR(vs_standard["welch_t"].get<double>(), -std::sqrt(150.0), 1e-6);
  EXPECT_NEAR(vs_standard["dof"].get<double>(), 4.0, 1e-6);
  const double t = -std::sqrt(150.0), q = 1 + t * t / 4;
  EXPECT_NEAR(vs_standard["p_sps_lower"].get<double>(),
              0.5 + 0.375 * t / std::sqrt(q) * (1 - t * t / q / 12), 1e-9);
  EXPECT_FALSE(vs_standard["tost"]["equivalent"].get<bool>());  // 0.1 apart, margin 0.01
  EXPECT_EQ(c["tests"][1]["other"], "tiny_delayed_state_w64");
  EXPECT_TRUE(c["untested_for_lack_of_seeds"].empty());

  const std::string md = read_whole_file((dir.path() / "results.md").string());
  EXPECT_NE(md.find("| standard | — | 3 | 3.0000 ± 0.0248 | +0.0000 | 3.5000 | 40.00% | 1.000× | "
                    "1.000× | 1.000× | 1.000× | 4k (1.00×) |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| sps | 64 | 3 | 2.9000 ± 0.0248 | -0.1000 | 3.4000 | 43.00% | 0.525× | "
                    "1.500× | 0.800× | 2.000× | 2.89k (0.72×) |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("| delayed_state | 64 | 3 | 3.0200 ± 0.0248 | +0.0200 | — | — |"),
            std::string::npos);
  EXPECT_NE(md.find("not reached"), std::string::npos);
  EXPECT_NE(md.find("- sps w64: crosses standard at 1.5k tokens; below it at the end"),
            std::string::npos);
  EXPECT_NE(md.find("- delayed_state w64: no crossover; above standard throughout"),
            std::string::npos);
  EXPECT_NE(md.find("- tiny_sps_w64_seed4: training"), std::string::npos);
  EXPECT_EQ(md.find("| tiny_sps_w64_seed4 |"), std::string::npos);  // not among the runs
  EXPECT_NE(md.find("| tiny_sps_w64_seed3 | 3 | 2.9100 |"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir.path() / "figures"));
}

TEST(Report, OneSeedSaysTheTestsNeedTwo) {
  TempDir dir;
  write_experiment(dir.path(), 1);
  write_experiment_report(dir.path().string(), no_figures());
  const json j = read_results(dir.path());
  const json& c = j["cohorts"][0];
  EXPECT_TRUE(c["tests"].empty());
  EXPECT_EQ(c["untested_for_lack_of_seeds"].size(), 2u);
  EXPECT_TRUE(group_named(c, "sps w64")["final_val_nll"]["ci_half_width"].is_null());
  const std::string md = read_whole_file((dir.path() / "results.md").string());
  EXPECT_NE(md.find("The tests need ≥ 2 seeds"), std::string::npos);
  EXPECT_NE(md.find("| sps | 64 | 1 | 2.8900 | -0.1000 |"), std::string::npos) << md;
}

// A decode benchmark that other processes shared (bench.json's other_cpu_share ≥ 10%) is named
// under the runs' table; records without the field, or below it, are not.
TEST(Report, BenchmarksThatSharedTheMachineAreNamed) {
  TempDir dir;
  write_experiment(dir.path(), 1);
  write_experiment_report(dir.path().string(), no_figures());
  EXPECT_EQ(read_whole_file((dir.path() / "results.md").string()).find("Decode benchmarks timed"),
            std::string::npos);
  const auto add_share = [&](const std::string& run, double share) {
    const fs::path bench = dir.path() / "runs" / run / "bench.json";
    json j = json::parse(read_whole_file(bench.string()));
    j["other_cpu_share"] = share;
    write_whole_file(bench.string(), j.dump() + "\n");
  };
  add_share("tiny_standard_seed1", 0.05);
  add_share("tiny_sps_w64_seed1", 0.234);
  write_experiment_report(dir.path().string(), no_figures());
  const std::string md = read_whole_file((dir.path() / "results.md").string());
  EXPECT_NE(md.find("\nDecode benchmarks timed while other processes took 10% or more of the "
                    "CPUs: tiny_sps_w64_seed1 (23%). Their decode tok/s are not clean; rerun each "
                    "alone.\n"),
            std::string::npos)
      << md;
}

TEST(Report, SeedsWithoutSpreadLeaveTheTestsUndefined) {
  TempDir dir;
  for (int seed : {1, 2}) {
    write_run(dir.path(),
              {.family = "standard", .window = 0, .seed = seed, .val_curve = {3.5, 3.0}});
    write_run(dir.path(), {.family = "sps", .seed = seed, .val_curve = {3.4, 2.9}});
  }
  write_experiment_report(dir.path().string(), no_figures());
  const std::string md = read_whole_file((dir.path() / "results.md").string());
  EXPECT_NE(md.find("| sps w64 | standard | -0.1000 | — | — | — | —, — | no |"), std::string::npos)
      << md;
  EXPECT_TRUE(read_results(dir.path())["cohorts"][0]["tests"][0]["p_sps_lower"].is_null());
}

TEST(Report, FiguresAreDrawnOrNoted) {
  TempDir dir;
  write_experiment(dir.path(), 2);
  write_experiment_report(dir.path().string(), ReportOptions{});
  const json j = read_results(dir.path());
  const std::string md = read_whole_file((dir.path() / "results.md").string());
  // One window per family here: the ablation figure is skipped with a note.
  EXPECT_NE(md.find("window ablation"), std::string::npos);
  if (std::system("gnuplot --version >/dev/null 2>&1") != 0) {
    EXPECT_NE(md.find("gnuplot not found"), std::string::npos);
    return;
  }
  for (const char* file : {"val_nll_tiny_4000.png", "gap_tiny_4000.png", "accuracy_gain.png",
                           "gap_by_seed_tiny_4000_tiny_sps_w64.png",
                           "gap_by_seed_tiny_4000_tiny_delayed_state_w64.png"}) {
    const std::string png = read_whole_file((dir.path() / "figures" / file).string());
    EXPECT_EQ(png.substr(0, 4), "\x89PNG") << file;
    EXPECT_NE(md.find(std::string("(figures/") + file + ")"), std::string::npos) << file;
  }
  EXPECT_EQ(j["figures"].size(), 5u);
  for (const auto& entry : fs::directory_iterator(dir.path() / "figures"))
    EXPECT_EQ(entry.path().extension(), ".png") << "leftover " << entry.path();
}

TEST(Report, WindowAblationFigureWithTwoWindows) {
  if (std::system("gnuplot --version >/dev/null 2>&1") != 0) GTEST_SKIP() << "no gnuplot";
  TempDir dir;
  write_experiment(dir.path(), 2);
  for (int seed : {1, 2})
    write_run(dir.path(),
              {.family = "sps", .window = 16, .seed = seed, .val_curve = {4, 3.5, 3, 2.95}});
  write_experiment_report(dir.path().string(), ReportOptions{});
  EXPECT_TRUE(fs::exists(dir.path() / "figures" / "window_ablation_tiny_4000.png"));
  const std::string md = read_whole_file((dir.path() / "results.md").string());
  EXPECT_NE(md.find("(figures/window_ablation_tiny_4000.png)"), std::string::npos);
  EXPECT_EQ(md.find("skipped: window ablation"), std::string::npos);
}

TEST(Report, MissingGnuplotStillWritesTheResults) {
  TempDir dir;
  write_experiment(dir.path(), 2);
  const std::string path = std::getenv("PATH") ? std::getenv("PATH") : "";
  ::setenv("PATH", dir.path().c_str(), 1);
  const std::string summary = write_experiment_report(dir.path().string(), ReportOptions{});
  ::setenv("PATH", path.c_str(), 1);
  EXPECT_NE(summary.find("gnuplot not found"), std::string::npos) << summary;
  EXPECT_TRUE(fs::exists(dir.path() / "results.json"));
  EXPECT_NE(read_whole_file((dir.path() / "results.md").string()).find("gnuplot not found"),
            std::string::npos);
}

std::string report_error(const fs::path& dir) {
  try {
    write_experiment_report(dir.string(), no_figures());
  } catch (const UserError& e) {
    return e.what();
  }
  return "no error";
}

TEST(Report, DamagedFilesNameThemselves) {
  TempDir dir;
  write_experiment(dir.path(), 2);
  const fs::path run = dir.path() / "runs" / "tiny_sps_w64_seed2";
  const std::string metrics = read_whole_file((run / "train" / "metrics.jsonl").string());

  write_whole_file((run / "train" / "metrics.jsonl").string(),
                   metrics.substr(0, metrics.find('\n') + 1) + "{\"tokens\": 10, \"val_n\n");
  EXPECT_NE(report_error(dir.path())
                .find((run / "train" / "metrics.jsonl").string() + ":2: not a JSON object"),
            std::string::npos);
  EXPECT_FALSE(fs::exists(dir.path() / "results.md"));  // nothing half-written
  // The same damage in a run that is not done is not read at all.
  json record = json::parse(read_whole_file((run / "run.json").string()));
  record["status"] = "training";
  write_whole_file((run / "run.json").string(), record.dump());
  EXPECT_EQ(report_error(dir.path()), "no error");

  record["seed"] = "two";
  write_whole_file((run / "run.json").string(), record.dump());
  EXPECT_EQ(report_error(dir.path()),
            (run / "run.json").string() + ": field \"seed\" must be an integer");
  record["seed"] = 2;
  record["family"] = "gpt";
  write_whole_file((run / "run.json").string(), record.dump());
  EXPECT_NE(report_error(dir.path()).find("field \"family\" is \"gpt\"; expected one of"),
            std::string::npos);
  record["family"] = "sps";
  record["status"] = "done";
  write_whole_file((run / "train" / "metrics.jsonl").string(), metrics);
  write_whole_file((run / "run.json").string(), record.dump());
  write_whole_file((run / "eval.json").string(), R"({"summary": {"corpus_nll": "low"}})");
  EXPECT_EQ(report_error(dir.path()),
            (run / "eval.json").string() + " summary: field \"corpus_nll\" must be a number");
  write_whole_file((run / "eval.json").string(), R"({"summary": {}})");
  write_whole_file((run / "bench.json").string(), "{\"model\": \"x\"}\n");
  EXPECT_EQ(report_error(dir.path()),
            (run / "bench.json").string() + ":1: field \"decode_tokens_per_second\" is missing");
  fs::remove(run / "bench.json");
  EXPECT_EQ(report_error(dir.path()), "no error");
  write_whole_file((run / "run.json").string(), "{\"name\": ");
  EXPECT_EQ(report_error(dir.path()), (run / "run.json").string() + ": not a JSON object");
  fs::remove(run / "run.json");
  EXPECT_NE(report_error(dir.path()).find((run / "run.json").string() + ": missing"),
            std::string::npos);

  EXPECT_NE(report_error(dir.path() / "nowhere").find("runs: no such folder"), std::string::npos);
}

TEST(Report, GroupMembersMayDifferOnlyBySeed) {
  TempDir dir;
  write_experiment(dir.path(), 2);
  const fs::path path = dir.path() / "runs" / "tiny_sps_w64_seed2" / "run.json";
  json record = json::parse(read_whole_file(path.string()));
  record["window"] = 16;
  write_whole_file(path.string(), record.dump());
  EXPECT_NE(report_error(dir.path())
                .find(path.string() + ": group \"tiny_sps_w64\" also holds run tiny_sps_w64_seed1"),
            std::string::npos)
      << report_error(dir.path());
}

TEST(Report, DoneRunWithoutValidationIsAnError) {
  TempDir dir;
  write_experiment(dir.path(), 2);
  const fs::path metrics = dir.path() / "runs" / "tiny_standard_seed1" / "train" / "metrics.jsonl";
  write_whole_file(metrics.string(), "{\"step\": 1, \"tokens\": 500, \"tokens_per_second\": 9}\n");
  EXPECT_NE(report_error(dir.path()).find(metrics.string() + ": no val_nll record"),
            std::string::npos);
  fs::remove(metrics);
  EXPECT_NE(report_error(dir.path()).find(metrics.string() + ": missing"), std::string::npos);
}

TEST(ReportCurves, TokensToReachAndSignChanges) {
  using report::tokens_to_reach;
  const std::vector<ValPoint> curve = {{100, 3.0}, {200, 2.0}, {300, 1.5}};
  EXPECT_DOUBLE_EQ(tokens_to_reach(curve, 3.5), 100);  // already there at the first point
  EXPECT_DOUBLE_EQ(tokens_to_reach(curve, 2.5), 150);
  EXPECT_DOUBLE_EQ(tokens_to_reach(curve, 1.5), 300);
  EXPECT_TRUE(std::isnan(tokens_to_reach(curve, 1.0)));

  // +0.2 → 0 → 0 → −0.1: the change sits at the first zero; then −0.1 → +0.3 at 3/4 of the way.
  const std::vector<report::GapPoint> gap = {
      {100, 0.2}, {200, 0}, {300, 0}, {400, -0.1}, {500, 0.3}};
  const std::vector<double> changes = report::sign_changes(gap);
  ASSERT_EQ(changes.size(), 2u);
  EXPECT_DOUBLE_EQ(changes[0], 200);
  EXPECT_DOUBLE_EQ(changes[1], 425);
  EXPECT_TRUE(report::sign_changes({{100, 0.1}, {200, 0.0}, {300, 0.2}}).empty());

  const std::vector<ValPoint> a = {{100, 3.0}, {200, 2.0}},
                              b = {{100, 4.0}, {150, 9.0}, {200, 3.0}};
  const std::vector<ValPoint> mean = report::mean_curve({&a, &b});
  ASSERT_EQ(mean.size(), 2u);  // 150 is not shared
  EXPECT_DOUBLE_EQ(mean[1].val_nll, 2.5);
}

}  // namespace
}  // namespace sps::testing
