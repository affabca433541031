// Experiment matrices: expansion into runs (counts, names, overrides, 2x_memory's window,
// standard not crossed with windows), one-line errors for bad matrices, and the shipped
// matrices of experiments/ — each parses, expands to its number of runs, and the paper
// matrices give exactly the configs of the paper's recipes.
#include <gtest/gtest.h>

#include <filesystem>

#include "experiment/matrix.h"
#include "train/train_config.h"
#include "util/error.h"
#include "experiment_fixtures.h"

namespace sps::testing {
namespace {

namespace fs = std::filesystem;

const std::string kTinyRecipe = kSource + "/configs/experiments/tiny_standard.yaml";

std::vector<PlannedRun> expand(const std::string& yaml) {
  return expand_matrix(parse_matrix(yaml, kSource + "/experiments/test.yaml"));
}

std::string error_of(const std::string& yaml) {
  try {
    expand(yaml);
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

TEST(Matrix, CrossesAxesWithSeedsInnermost) {
  const auto runs = expand("recipe: ../configs/experiments/tiny_standard.yaml\n"
                           "scales: [tiny]\nfamilies: [standard, sps, 2x_memory]\n"
                           "windows: [16, 64]\nseeds: [1, 2]\ntokens: [1048576]\n"
                           "overrides: [training.log_interval=4,\n"
                           "            {families: [2x_memory], set: [training.log_interval=8]}]\n");
  // standard once, sps per window, 2x_memory once: (1 + 2 + 1) groups × 2 seeds.
  ASSERT_EQ(runs.size(), 8u);
  const std::vector<std::string> names = {
      "tiny_standard_seed1",  "tiny_standard_seed2",  "tiny_sps_w16_seed1",   "tiny_sps_w16_seed2",
      "tiny_sps_w64_seed1",   "tiny_sps_w64_seed2",   "tiny_2x_memory_seed1", "tiny_2x_memory_seed2"};
  for (size_t i = 0; i < runs.size(); ++i) EXPECT_EQ(runs[i].name, names[i]);
  EXPECT_EQ(runs[2].group, "tiny_sps_w16");
  EXPECT_EQ(runs[0].window, 0);
  EXPECT_EQ(runs[3].window, 16);
  EXPECT_EQ(runs[6].family, "2x_memory");
  EXPECT_EQ(runs[6].window, 256);  // the tiny preset's block_size
  EXPECT_EQ(runs[7].seed, 2);
  EXPECT_EQ(runs[7].tokens, 1048576);
  EXPECT_EQ(runs[7].recipe, fs::path(kTinyRecipe).lexically_normal().string());
  const std::vector<std::string> sps_overrides = {
      "training.log_interval=4", "model.preset=tiny",       "model.family=sps",
      "model.window_size=16",    "training.max_tokens=1048576", "training.seed=2"};
  EXPECT_EQ(runs[3].overrides, sps_overrides);
  const std::vector<std::string> memory_overrides = {
      "training.log_interval=4", "model.preset=tiny",        "training.log_interval=8", "model.family=sps",
      "model.window_size=256",   "training.max_tokens=1048576", "training.seed=1"};
  EXPECT_EQ(runs[6].overrides, memory_overrides);
  EXPECT_EQ(runs[0].overrides[2], "model.family=standard");
  EXPECT_EQ(runs[0].overrides[3], "training.max_tokens=1048576");
}

TEST(Matrix, OnlyKeepsTheMatchingRunsInMatrixOrder) {
  const auto runs = expand("recipe: ../configs/experiments/tiny_standard.yaml\n"
                           "scales: [tiny]\nfamilies: [standard, sps]\nwindows: [64]\n"
                           "seeds: [1, 2, 3]\ntokens: [1048576]\n");
  const auto names = [](const std::vector<PlannedRun>& kept) {
    std::vector<std::string> out;
    for (const PlannedRun& run : kept) out.push_back(run.name);
    return out;
  };
  EXPECT_EQ(names(select_runs(runs, {}, "m.yaml")).size(), 6u);
  EXPECT_EQ(names(select_runs(runs, {"*_seed3", "tiny_standard_seed1"}, "m.yaml")),
            (std::vector<std::string>{"tiny_standard_seed1", "tiny_standard_seed3",
                                      "tiny_sps_w64_seed3"}));
  try {
    select_runs(runs, {"*_seed3", "tiny_sps_seed3"}, "m.yaml");
    ADD_FAILURE() << "a pattern matching no run was accepted";
  } catch (const UserError& e) {
    EXPECT_EQ(std::string(e.what()),
              "--only tiny_sps_seed3: no run of m.yaml has that name (its runs: "
              "tiny_standard_seed1, tiny_standard_seed2, tiny_standard_seed3, "
              "tiny_sps_w64_seed1, tiny_sps_w64_seed2, tiny_sps_w64_seed3)");
  }
}

TEST(Matrix, TokenBudgetsNameGroupsOnlyWhenSeveral) {
  const auto one = expand("recipe: ../configs/experiments/tiny_standard.yaml\nscales: [tiny]\n"
                          "families: [standard]\nseeds: [3]\n");
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].name, "tiny_standard_seed3");
  EXPECT_EQ(one[0].tokens, 2097152);  // base/tiny.yaml's max_tokens
  const auto two = expand("recipe: ../configs/experiments/tiny_standard.yaml\nscales: [tiny]\n"
                          "families: [standard]\nseeds: [3]\ntokens: [2000000, 1048576]\n");
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0].name, "tiny_standard_2m_seed3");
  EXPECT_EQ(two[1].name, "tiny_standard_1048576_seed3");
}

TEST(Matrix, BadMatricesNameTheKey) {
  const std::string head = "recipe: ../configs/experiments/tiny_standard.yaml\nscales: [tiny]\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {head + "families: [standard]\nseeds: [1]\nseed: 3\n", "seed"},
      {head + "families: [transformer]\nseeds: [1]\n", "transformer"},
      {head + "families: []\nseeds: [1]\n", "families: the list is empty"},
      {head + "families: [standard]\n", "seeds: missing"},
      {head + "families: [gpt]\nseeds: [1]\n",
       "test.yaml: families: 'gpt': expected one of standard, 2x_memory,"},
      {head + "families: [sps]\nseeds: [1]\n", "windows: missing"},
      {head + "families: [standard]\nseeds: [1]\nbench: []\nbench_tries: 0\n",
       "bench_tries: expected an integer from 1 to 10, got 0"},
      {head + "families: [standard]\nseeds: [1]\nbench_tries: 3\n",
       "bench_tries: there is no bench section to try again"},
      {head + "families: [sps]\nwindows: [-4]\nseeds: [1]\n", "windows[0]"},
      {head + "families: [standard]\nseeds: [1, 1]\n", "appears twice"},
      {head + "families: [standard]\nseeds: [1]\nwindows: [64]\n", "windows: none of the families"},
      {head + "families: [standard]\nseeds: [1]\nparallel: 0\n", "parallel"},
      {head + "families: [standard]\nseeds: [1]\noverrides: [model.n_layer=many]\n", "model.n_layer"},
      {head + "families: [standard]\nseeds: [1]\noverrides: [system.out_dir=x]\n", "system.out_dir"},
      {head + "families: [standard]\nseeds: [1]\noverrides: [{family: [sps], set: [a.b=1]}]\n",
       "overrides[0].family: unknown key"},
      {head + "families: [standard]\nseeds: [1]\noverrides: [{scales: [tiny]}]\n", "set: missing"},
      {"recipe: nowhere.yaml\nscales: [tiny]\nfamilies: [standard]\nseeds: [1]\n", "nowhere.yaml"},
      {"scales: [tiny]\nfamilies: [standard]\nseeds: [1]\n", "recipe: missing"},
      {"recipe: ../configs/experiments/{scale}_standard_20b.yaml\nscales: [xxs]\n"
       "families: [standard]\nseeds: [1]\n", "xxs_standard_20b.yaml"},
      {"[1, 2]", "expected a mapping"},
      {head + "families: [standard\n", "line"},
  };
  for (const auto& [yaml, expected] : cases) {
    const std::string error = error_of(yaml);
    EXPECT_NE(error.find(expected), std::string::npos) << yaml << "\n→ " << error;
    EXPECT_EQ(error.find('\n'), std::string::npos) << error;
  }
}

// tiny: 4096 tokens per step. A run of 3 × 1048576 tokens with named checkpoints every
// 1048576: branches from 1M (a named checkpoint) and 3M (the run's end, `final`).
TEST(Matrix, DecayBranchesGetTheirLengthAndSchedule) {
  const auto runs = expand("recipe: ../configs/experiments/tiny_standard.yaml\nscales: [tiny]\n"
                           "families: [standard]\nseeds: [1]\ntokens: [3145728]\n"
                           "overrides: [training.save_every=1048576]\n"
                           "decay: {from: [1048576, 3145728], fraction: 0.1, min_lr: 0.0002}\n");
  ASSERT_EQ(runs.size(), 1u);
  ASSERT_EQ(runs[0].branches.size(), 2u);
  // 0.1 × 1048576 = 104857.6 tokens: 26 steps of 4096 rounded up = 106496.
  const PlannedBranch& first = runs[0].branches[0];
  EXPECT_EQ(first.from, 1048576);
  EXPECT_EQ(first.tokens, 1048576 + 106496);
  std::vector<std::string> expected = runs[0].overrides;
  for (const char* o : {"training.max_tokens=1155072", "scheduler.decay_lr=true",
                        "scheduler.lr_decay_tokens=106496", "scheduler.min_lr=0.0002"})
    expected.push_back(o);
  EXPECT_EQ(first.overrides, expected);
  // 0.1 × 3145728 = 314572.8: 77 steps = 315392.
  EXPECT_EQ(runs[0].branches[1].tokens, 3145728 + 315392);
  const TrainConfig config = load_train_config(kTinyRecipe, runs[0].branches[1].overrides);
  EXPECT_EQ(config.training.max_tokens, 3145728 + 315392);
  EXPECT_EQ(config.decay_start_tokens(), 3145728);
  EXPECT_DOUBLE_EQ(config.scheduler.min_lr, 0.0002);
  EXPECT_TRUE(expand("recipe: ../configs/experiments/tiny_standard.yaml\nscales: [tiny]\n"
                     "families: [standard]\nseeds: [1]\n")[0]
                  .branches.empty());
}

TEST(Matrix, DecayBranchesNeedACheckpointToStartFrom) {
  const std::string head = "recipe: ../configs/experiments/tiny_standard.yaml\nscales: [tiny]\n"
                           "families: [standard]\nseeds: [1]\ntokens: [3145728]\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      // The recipe's named checkpoints come every 1048576 tokens: none at 2M + 4096.
      {head + "decay: {from: [2101248], fraction: 0.1, min_lr: 0.0002}\n",
       "decay.from: run tiny_standard_seed1 has no checkpoint at 2101248 tokens"},
      {head + "decay: {from: [4194304], fraction: 0.1, min_lr: 0.0002}\n", "at most the run's"},
      {head + "decay: {from: [1048576], fraction: 0, min_lr: 0.0002}\n", "decay.fraction"},
      {head + "decay: {from: [1048576], fraction: 0.1}\n", "decay.min_lr: missing"},
      {head + "decay: {from: [1048576], fraction: 0.1, min_lr: 0.1, to: 3}\n", "to"},
      {head + "decay: [1048576]\n", "decay: expected a mapping"},
  };
  for (const auto& [yaml, expected] : cases) {
    const std::string error = error_of(yaml);
    EXPECT_NE(error.find(expected), std::string::npos) << yaml << "\n→ " << error;
    EXPECT_EQ(error.find('\n'), std::string::npos) << error;
  }
}

struct Shipped {
  const char* file;
  size_t runs;
};

TEST(Matrix, ShippedMatricesExpandAndValidate) {
  const std::vector<Shipped> shipped = {
      {"smoke.yaml", 4},       {"tiny_families.yaml", 15},         {"crossover.yaml", 4},
      {"paper_main.yaml", 25}, {"paper_window_ablation.yaml", 13}, {"paper_seeds.yaml", 12}};
  for (const auto& s : shipped) {
    const ExperimentMatrix m = load_matrix(kSource + "/experiments/" + s.file);
    EXPECT_EQ(expand_matrix(m).size(), s.runs) << s.file;
  }
  size_t files = 0;
  for (const auto& entry : fs::directory_iterator(kSource + "/experiments"))
    files += entry.path().extension() == ".yaml";
  EXPECT_EQ(files, shipped.size()) << "a shipped matrix without a test";
}

// The recipe file of the paper that a run of a paper matrix stands for.
std::string paper_recipe(const PlannedRun& run, const std::string& length) {
  std::string family = run.family == "2x_memory" ? "sps" : run.family;
  if (run.family != "standard") family += "_w" + std::to_string(run.window);
  std::string name = run.scale + "_" + family + "_" + length;
  if (length == "10b") name += "_seed" + std::to_string(run.seed);
  return kSource + "/configs/experiments/" + name + ".yaml";
}

std::string resolved(const std::string& recipe, const std::vector<std::string>& overrides) {
  std::vector<std::string> all = overrides;
  all.push_back("system.out_dir=same");
  TrainConfig c = load_train_config(recipe, all);
  c.source = "";
  return train_config_yaml(c);
}

TEST(Matrix, PaperMatricesGiveThePaperRecipes) {
  const std::vector<std::pair<std::string, std::string>> matrices = {
      {"paper_main.yaml", "20b"}, {"paper_window_ablation.yaml", "20b"}, {"paper_seeds.yaml", "10b"}};
  for (const auto& [file, length] : matrices) {
    for (const auto& run : expand_matrix(load_matrix(kSource + "/experiments/" + file))) {
      const std::string recipe = paper_recipe(run, length);
      ASSERT_TRUE(fs::exists(recipe)) << file << ": " << run.name << " has no recipe " << recipe;
      EXPECT_EQ(resolved(run.recipe, run.overrides), resolved(recipe, {})) << file << ": " << run.name;
    }
  }
}

}  // namespace
}  // namespace sps::testing
