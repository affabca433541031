// The runner without children: the command lines of a run, the dry-run listing, and the
// refusal to continue an experiment folder made by a different matrix.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "experiment/runner.h"
#include "util/error.h"
#include "util/sps_home.h"
#include "util/temp_dir.h"
#include "experiment_fixtures.h"

namespace sps::testing {
namespace {

namespace fs = std::filesystem;

ExperimentMatrix two_run_matrix(const std::string& extra = "") {
  return parse_matrix("recipe: ../configs/experiments/tiny_standard.yaml\nscales: [tiny]\n"
                      "families: [sps]\nwindows: [8]\nseeds: [1, 2]\ntokens: [1048576]\n"
                      "eval: [--tasks, \"val,corpus:c=${SPS_HOME}/c.txt\"]\n" + extra,
                      kSource + "/experiments/test.yaml");
}

bool contains(const std::vector<std::string>& argv, const std::string& item) {
  return std::find(argv.begin(), argv.end(), item) != argv.end();
}

TEST(Runner, CommandsTrainEvaluateAndBenchTheFinalCheckpoint) {
  const ExperimentMatrix m = two_run_matrix("bench: [--new-tokens, \"8\"]\n");
  const auto runs = expand_matrix(m);
  RunnerOptions options;
  options.out_dir = "out";
  options.binary = "/bin/sps";
  const RunCommands fresh = run_commands(m, runs[1], options, false);
  const std::vector<std::string> train_head = {"/bin/sps", "train", "--config", runs[1].recipe};
  EXPECT_TRUE(std::equal(train_head.begin(), train_head.end(), fresh.train.begin()));
  EXPECT_TRUE(contains(fresh.train, "training.seed=2"));
  EXPECT_EQ(fresh.train.back(), "system.out_dir=out/runs/tiny_sps_w8_seed2/train");
  EXPECT_FALSE(contains(fresh.train, "--resume"));
  EXPECT_TRUE(contains(run_commands(m, runs[1], options, true).train, "--resume"));

  const std::vector<std::string> eval = {"/bin/sps", "eval", "--quiet", "--checkpoint",
                                         "out/runs/tiny_sps_w8_seed2/train/checkpoints/final",
                                         "--tasks", "val,corpus:c=" + sps_home() + "/c.txt",
                                         "--out", "out/runs/tiny_sps_w8_seed2/eval.json"};
  EXPECT_EQ(fresh.eval, eval);
  const std::vector<std::string> bench = {"/bin/sps", "bench", "generate", "--checkpoint",
                                          "out/runs/tiny_sps_w8_seed2/train/checkpoints/final",
                                          "--json", "--new-tokens", "8"};
  EXPECT_EQ(fresh.bench, bench);
  EXPECT_TRUE(run_commands(two_run_matrix(), runs[1], options, false).bench.empty());
}

TEST(Runner, DecayBranchesStartFromTheRunsCheckpoints) {
  const ExperimentMatrix m =
      two_run_matrix("overrides: [training.save_every=524288]\n"
                     "decay: {from: [524288, 1048576], fraction: 0.1, min_lr: 0.0002}\n");
  const auto runs = expand_matrix(m);
  RunnerOptions options;
  options.out_dir = "out";
  options.binary = "/bin/sps";
  const RunCommands c = run_commands(m, runs[0], options, false);
  ASSERT_EQ(c.branches.size(), 2u);
  const std::string run = "out/runs/tiny_sps_w8_seed1";
  std::vector<std::string> expected = {"/bin/sps", "train", "--config", runs[0].recipe};
  expected.insert(expected.end(), runs[0].branches[0].overrides.begin(),
                  runs[0].branches[0].overrides.end());
  for (const std::string& a :
       {"system.out_dir=" + run + "/decay_524288", std::string("--init-from"),
        run + "/train/checkpoints/tokens_000000524288"})
    expected.push_back(a);
  EXPECT_EQ(c.branches[0], expected);
  // At the run's end the branch starts from `final`.
  EXPECT_EQ(c.branches[1].back(), run + "/train/checkpoints/final");
  EXPECT_TRUE(contains(c.branches[1], "system.out_dir=" + run + "/decay_1048576"));
  EXPECT_NE(describe_dry_run(m, runs, options).find("--init-from"), std::string::npos);
}

TEST(Runner, DryRunListsEveryRunAndItsCommands) {
  const ExperimentMatrix m = two_run_matrix();
  RunnerOptions options;
  options.out_dir = "out";
  options.binary = "sps";
  const std::string text = describe_dry_run(m, expand_matrix(m), options);
  EXPECT_NE(text.find("2 runs into out"), std::string::npos) << text;
  for (const char* name : {"tiny_sps_w8_seed1", "tiny_sps_w8_seed2"})
    EXPECT_NE(text.find(std::string(name) + ":\n  sps train --config"), std::string::npos) << text;
  EXPECT_NE(text.find("sps eval --quiet --checkpoint out/runs/tiny_sps_w8_seed1/train/checkpoints/final"),
            std::string::npos)
      << text;
}

TEST(Runner, RefusesAFolderMadeByAnotherMatrix) {
  TempDir dir;
  const ExperimentMatrix m = two_run_matrix();
  const auto runs = expand_matrix(m);
  const fs::path run = dir.path() / "runs" / runs[0].name;
  fs::create_directories(run);
  const nlohmann::json record = {
      {"name", runs[0].name}, {"group", runs[0].group}, {"recipe", runs[0].recipe},
      {"family", "sps"},      {"window", 8},            {"scale", "tiny"},
      {"seed", 1},            {"tokens", 1048576},      {"overrides", {"model.preset=tiny"}},
      {"status", "done"},     {"error", ""}};
  write_whole_file((run / "run.json").string(), record.dump());
  RunnerOptions options;
  options.out_dir = dir.path().string();
  options.binary = "/nonexistent/sps";  // nothing may start
  try {
    run_experiment(m, runs, options);
    FAIL() << "a changed matrix was accepted";
  } catch (const UserError& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("run.json: made with overrides [model.preset=tiny]"), std::string::npos)
        << message;
    EXPECT_NE(message.find("training.seed=1"), std::string::npos) << message;
  }
  EXPECT_FALSE(fs::exists(dir.path() / "runs" / runs[1].name)) << "started despite the refusal";
}

}  // namespace
}  // namespace sps::testing
