// `sps train` as a program: signals, exit statuses and messages, MPI data parallelism.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <regex>
#include <sstream>
#include <thread>

#include "model/model.h"
#include "model/weights_io.h"
#include "ops/backend_registry.h"
#include "train/checkpoint.h"
#include "train/train_config.h"
#include "train_fixtures.h"
#include "util/writer_lock.h"

extern char** environ;

namespace sps {
namespace {

namespace fs = std::filesystem;
using testing::kSps;
using testing::TempDir;

std::string quoted(const std::string& s) { return "'" + s + "'"; }

struct MicroRecipe {
  TempDir dir;
  std::string recipe;
  explicit MicroRecipe(int64_t steps, const std::string& family = "sps",
                       const std::string& extra = "") {
    testing::write_micro_data(dir.path().string());
    recipe = dir.file("recipe.yaml");
    testing::write_whole_file(recipe, testing::micro_recipe(dir.path().string(), family, steps, extra));
  }
  std::string train(const std::string& run, const std::string& args = "") const {
    return quoted(kSps) + " train --config " + quoted(recipe) + " system.out_dir=" +
           quoted(dir.file(run)) + " " + args;
  }
};

// Exit status and stderr of a command whose stdout is discarded.
int stderr_of(const std::string& command, std::string* err) {
  return testing::run_command(command + " 2>&1 >/dev/null", err);
}

// `err` without the warning that a micro batch spans few documents (its 4 sequences of 12
// tokens see about 4).
std::string without_documents_warning(const std::string& err) {
  std::string kept, line;
  std::istringstream in(err);
  while (std::getline(in, line))
    if (line.rfind("sps: warning: batches span", 0) != 0) kept += line + "\n";
  return kept;
}

size_t count_lines(const std::string& path) {
  std::ifstream in(path);
  size_t n = 0;
  std::string line;
  while (std::getline(in, line)) ++n;
  return n;
}

TEST(TrainCli, SignalsFinishTheStepCheckpointAndExitZero) {
  for (const int signal : {SIGTERM, SIGINT}) {
    SCOPED_TRACE(signal == SIGTERM ? "SIGTERM" : "SIGINT");
    MicroRecipe r(100000);  // far longer than the test waits
    const std::string run = r.dir.file("run");
    const std::string out_dir = "system.out_dir=" + run;
    std::vector<std::string> args = {kSps, "train", "--config", r.recipe, out_dir};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    pid_t pid = 0;
    ASSERT_EQ(posix_spawn(&pid, kSps.c_str(), &actions, nullptr, argv.data(), environ), 0);
    posix_spawn_file_actions_destroy(&actions);
    // Wait until the loop runs (a few metric lines), then signal.
    const auto start = std::chrono::steady_clock::now();
    while (count_lines(run + "/metrics.jsonl") < 4 &&
           std::chrono::steady_clock::now() - start < std::chrono::seconds(60))
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ASSERT_EQ(::kill(pid, signal), 0);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status)) << "killed by signal " << WTERMSIG(status);
    EXPECT_EQ(WEXITSTATUS(status), 0);

    // A loadable checkpoint at the step where the run stopped.
    const std::string latest = run + "/checkpoints/latest";
    const TrainerState state = trainer_state_from_json(
        testing::read_whole_file(latest + "/trainer_state.json"), latest);
    EXPECT_EQ(state.reason, "interrupted");
    EXPECT_GT(state.step, 0);
    const TrainConfig config = load_train_config(r.recipe, {out_dir});
    Model<float> model(config.model);
    load_weights(latest + "/model.safetensors", model.params(), model.weights());

    // And a resumable run: three more steps from there.
    std::string err;
    ASSERT_EQ(stderr_of(r.train("run", "--resume --stop-after 3"), &err), 0) << err;
    const TrainerState after = trainer_state_from_json(
        testing::read_whole_file(latest + "/trainer_state.json"), latest);
    EXPECT_EQ(after.step, state.step + 3);
  }
}

TEST(TrainCli, BadInputIsOneLineAndStatusTwo) {
  MicroRecipe r(10);
  struct Case {
    std::string name, command, expected;
  };
  const std::string bad_recipe = r.dir.file("bad.yaml");
  std::string text = testing::micro_recipe(r.dir.path().string(), "sps", 10);
  text.replace(text.find("warmup_tokens"), 13, "warmup_tokenz");
  testing::write_whole_file(bad_recipe, text);
  // Token ids outside the vocabulary, in a data folder of their own.
  const std::string bad_data = r.dir.file("bad_data");
  fs::create_directories(bad_data);
  testing::write_tokens(bad_data + "/train.bin", 3000, 1, 10);
  testing::write_tokens(bad_data + "/val.bin", 400, 2);
  // meta.json of another tokenizer.
  const std::string other_meta = r.dir.file("other_meta");
  fs::create_directories(other_meta);
  testing::write_micro_data(other_meta);
  testing::write_whole_file(other_meta + "/meta.json", R"({"dtype": "uint16", "eos_token_id": 50256, "vocab_size": 50257})");

  const std::vector<Case> cases = {
      {"unknown key in the recipe",
       quoted(kSps) + " train --config " + quoted(r.dir.file("recipe.yaml")) + " training.max_tokenz=5",
       "training.max_tokenz: unknown key"},
      {"unknown key in a file",
       quoted(kSps) + " train --config " + quoted(bad_recipe),
       "scheduler.warmup_tokenz: unknown key"},
      {"missing token file", r.train("a", "data.dataset=" + r.dir.file("nowhere")),
       "cannot open the token file"},
      {"token ids outside the vocabulary", r.train("b", "data.dataset=" + bad_data),
       "token id 100 at position"},
      {"data of another tokenizer", r.train("c", "data.dataset=" + other_meta),
       "eos_token_id 50256 differs from model.eos_token_id 60"},
      {"missing recipe", quoted(kSps) + " train --config " + quoted(r.dir.file("none.yaml")),
       "none.yaml: cannot open"},
  };
  for (const Case& c : cases) {
    std::string err;
    EXPECT_EQ(stderr_of(c.command, &err), 2) << c.name << ": " << err;
    EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << c.name << ": " << err;
    EXPECT_NE(err.find(c.expected), std::string::npos) << c.name << ": " << err;
    EXPECT_EQ(err.rfind("sps: ", 0), 0u) << c.name << ": " << err;
  }
  // No checkpoint was written by the failed runs.
  EXPECT_FALSE(fs::exists(r.dir.file("b") + "/checkpoints"));

  // A checkpoint from another config, and a run folder that already holds a run.
  std::string err;
  ASSERT_EQ(stderr_of(r.train("run", "--stop-after 2"), &err), 0) << err;
  EXPECT_EQ(stderr_of(r.train("run", "--resume model.family=standard"), &err), 2);
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  EXPECT_NE(err.find("another config: model.family is sps there, standard here"), std::string::npos) << err;
  EXPECT_EQ(stderr_of(r.train("run"), &err), 2);
  EXPECT_NE(err.find("already holds a run"), std::string::npos) << err;
}

TEST(TrainCli, NonFiniteLossStopsWithoutTouchingTheLastGoodCheckpoint) {
  MicroRecipe r(40);
  const std::string run = r.dir.file("run");
  std::string err;
  ASSERT_EQ(stderr_of(r.train("run", "--stop-after 3"), &err), 0) << err;
  const TrainConfig config = load_train_config(r.recipe, {"system.out_dir=" + run});
  Model<float> good(config.model), after(config.model);
  load_weights(run + "/checkpoints/latest/model.safetensors", good.params(), good.weights());
  // A learning rate that overflows the weights: the run stops with a clear message.
  const int status = stderr_of(r.train("run", "--resume optimizer.learning_rate=1e38"), &err);
  err = without_documents_warning(err);
  EXPECT_EQ(status, 2);
  EXPECT_NE(err.find("not finite"), std::string::npos) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  // Every checkpoint still holds finite weights; `latest` the good ones of step 3.
  for (const auto& entry : fs::directory_iterator(run + "/checkpoints")) {
    Model<float> m(config.model);
    load_weights(entry.path().string() + "/model.safetensors", m.params(), m.weights());
    for (int64_t i = 0; i < m.params().total(); ++i)
      ASSERT_TRUE(std::isfinite(m.weights()[i])) << entry.path();
  }
  load_weights(run + "/checkpoints/latest/model.safetensors", after.params(), after.weights());
  EXPECT_EQ(std::memcmp(good.weights(), after.weights(), sizeof(float) * good.params().total()), 0);
}

TEST(TrainCli, DryRunPrintsThePlan) {
  std::string out;
  const std::string recipe = std::string(SPS_SOURCE_DIR) + "/configs/experiments/s_sps_w64_20b.yaml";
  ASSERT_EQ(testing::run_command(quoted(kSps) + " train --dry-run --config " + quoted(recipe), &out), 0);
  for (const char* text : {"parameters    130665216", "tokens/step   393216", "steps         50863",
                           "FLOPs/step", "memory", "AdamW", "activations"})
    EXPECT_NE(out.find(text), std::string::npos) << text << "\n" << out;
}

// The documents a global batch spans, in the plan: the micro recipe's batches of 4 windows
// in chunks of 7 see about 4 (a warning), windows of their own about 6.6 (still one), and
// the paper's recipe without its data says nothing about them.
TEST(TrainCli, DryRunSaysHowManyDocumentsABatchSpans) {
  MicroRecipe r(30);
  std::string out;
  ASSERT_EQ(testing::run_command(r.train("run", "--dry-run") + " 2>&1", &out), 0) << out;
  EXPECT_NE(out.find("documents     ~"), std::string::npos) << out;
  EXPECT_NE(out.find("per global batch of 4 sequences (mean over 30 steps)"), std::string::npos)
      << out;
  EXPECT_NE(out.find("warning: batches span ~"), std::string::npos) << out;
  EXPECT_NE(out.find("see docs/data.md"), std::string::npos) << out;
  ASSERT_EQ(testing::run_command(r.train("run", "--dry-run training.global_batch_size=40 "
                                                "training.chunk_size_units=1") +
                                     " 2>&1",
                                 &out),
            0)
      << out;
  EXPECT_NE(out.find("documents     ~"), std::string::npos) << out;
  EXPECT_EQ(out.find("warning"), std::string::npos) << out;
  // At the start of a run: said on stdout, warned on stderr.
  std::string err;
  ASSERT_EQ(stderr_of(r.train("run", "--stop-after 1"), &err), 0) << err;
  EXPECT_NE(err.find("sps: warning: batches span ~"), std::string::npos) << err;
}

TEST(TrainCli, OneTrainerPerRunFolder) {
  MicroRecipe r(6);
  const std::string run = r.dir.file("run");
  fs::create_directories(run);
  std::string err;
  {
    // Held by this process, as another trainer would hold it.
    const WriterLock other(folder_lock_path(run), run);
    EXPECT_EQ(stderr_of(r.train("run"), &err), 2) << err;
    EXPECT_EQ(err, "sps: " + run + ": in use by another sps process (PID " + std::to_string(::getpid()) +
                       "); wait for it to end or choose another output\n");
    EXPECT_FALSE(fs::exists(run + "/metrics.jsonl"));
  }
  // A lock file left by a killed trainer holds no lock.
  testing::write_whole_file(run + "/.sps.lock", "999999999\n");
  EXPECT_EQ(stderr_of(r.train("run"), &err), 0) << err;
  EXPECT_FALSE(fs::exists(run + "/.sps.lock"));
}

TEST(TrainCli, ResumeWithAnotherThreadCountSaysItIsNotBitIdentical) {
  MicroRecipe r(8);
  std::string err;
  ASSERT_EQ(stderr_of(r.train("run", "--stop-after 2"), &err), 0) << err;
  ASSERT_EQ(stderr_of(r.train("run", "--resume --stop-after 2"), &err), 0) << err;
  EXPECT_EQ(err.find("bit-identical"), std::string::npos) << err;  // same threads: silent
  ASSERT_EQ(stderr_of(r.train("run", "--resume system.threads=2"), &err), 0) << err;
  EXPECT_NE(err.find("with 1 thread per process, this run has 2; the continuation is not "
                     "bit-identical to an uninterrupted run (set system.threads=1 for that)"),
            std::string::npos)
      << err;
}

TEST(TrainCli, DamagedNewestCheckpointIsNamedOnResume) {
  MicroRecipe r(20);
  const std::string run = r.dir.file("run");
  std::string err;
  ASSERT_EQ(stderr_of(r.train("run", "--stop-after 9"), &err), 0) << err;  // tokens_… at 8, latest at 9
  const std::string latest = run + "/checkpoints/latest";
  fs::resize_file(latest + "/model.safetensors", fs::file_size(latest + "/model.safetensors") - 1);
  ASSERT_EQ(stderr_of(r.train("run", "--resume --stop-after 1"), &err), 0) << err;
  EXPECT_NE(err.find("sps: skipped " + latest + ": " + latest + "/model.safetensors:"), std::string::npos) << err;
  const TrainerState state = trainer_state_from_json(
      testing::read_whole_file(latest + "/trainer_state.json"), latest);
  EXPECT_EQ(state.step, 9);  // resumed from step 8, the named checkpoint
}

TEST(TrainCli, SameModelInTwoFoldersIsTheSameWeightsFile) {
  MicroRecipe r(4);
  std::string err;
  ASSERT_EQ(stderr_of(r.train("one"), &err), 0) << err;
  ASSERT_EQ(stderr_of(r.train("two"), &err), 0) << err;
  const std::string one = testing::read_whole_file(r.dir.file("one") + "/checkpoints/final/model.safetensors");
  EXPECT_EQ(one, testing::read_whole_file(r.dir.file("two") + "/checkpoints/final/model.safetensors"));
  EXPECT_EQ(one.find(r.dir.file("one")), std::string::npos);  // no run path inside
}

TEST(TrainCli, DataIdsBeyondTheTokenizerAreRefusedBeforeTheRunStarts) {
  MicroRecipe r(4);
  // PREDICT (61) in train.bin, where meta.json says the tokenizer has ids below 61.
  const std::string data = r.dir.file("data");
  fs::create_directories(data);
  testing::write_micro_data(data);
  std::string bytes = testing::read_whole_file(data + "/train.bin");
  bytes[2 * 1000] = 61, bytes[2 * 1000 + 1] = 0;
  testing::write_whole_file(data + "/train.bin", bytes);
  testing::write_whole_file(data + "/meta.json", R"({"dtype": "uint16", "eos_token_id": 60, "vocab_size": 61})");
  std::string err;
  EXPECT_EQ(stderr_of(r.train("run", "data.dataset=" + data), &err), 2) << err;
  EXPECT_NE(err.find("train.bin: token id 61 at position 1000 is outside the tokenizer's ids"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(r.dir.file("run")));
}

// A checkpoint write that fails (here past a file-size limit, as on a full disk) stops the
// run with one line and leaves no partial checkpoint folder behind.
TEST(TrainCli, FailedCheckpointWriteLeavesNoTemporaryFolder) {
  if (!testing::has_command("bash")) GTEST_SKIP() << "no bash for ulimit";
  MicroRecipe r(8);
  std::string err;
  // 8 KiB per file: the metrics fit, the 22 KB weights file of the first checkpoint does not.
  EXPECT_EQ(stderr_of("bash -c \"ulimit -f 8 && exec " + r.train("run") + "\"", &err), 2) << err;
  err = without_documents_warning(err);
  EXPECT_NE(err.find("File too large"), std::string::npos) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
  std::vector<std::string> left;
  for (const auto& entry : fs::directory_iterator(r.dir.file("run") + "/checkpoints")) left.push_back(entry.path().filename());
  EXPECT_TRUE(left.empty()) << left.front();
}

TEST(TrainCli, AbsurdSizesAreRefusedWithoutAllocating) {
  MicroRecipe r(4);
  std::string out;
  // A dry run plans a billion layers without building them; FLOPs stay positive.
  ASSERT_EQ(testing::run_command(r.train("run", "--dry-run model.n_layer=1000000000") + " 2>&1", &out), 0) << out;
  EXPECT_NE(out.find("parameters"), std::string::npos) << out;
  ASSERT_EQ(testing::run_command(r.train("run", "--dry-run model.block_size=1000000000") + " 2>&1", &out), 0) << out;
  EXPECT_EQ(out.find("FLOPs/step    -"), std::string::npos) << out;
  EXPECT_NE(out.find("documents     not computed: "), std::string::npos) << out;
  // A real run that cannot fit says what it needs.
  std::string err;
  EXPECT_EQ(stderr_of(r.train("run", "model.hidden_size=1048576 model.intermediate_size=1048576"), &err), 2) << err;
  EXPECT_NE(err.find("needs "), std::string::npos) << err;
  EXPECT_NE(err.find(" of memory is available"), std::string::npos) << err;
  EXPECT_EQ(std::count(err.begin(), err.end(), '\n'), 1) << err;
}

// Two MPI processes with the global batch split between them train the same model as one
// process: chunks of one window and micro-batches of one sequence make each step see the
// same sequences and the same per-sequence losses.
TEST(TrainCliSlow, TwoMpiProcessesEqualOneProcess) {
  if (!testing::has_command("mpirun")) GTEST_SKIP() << "mpirun is absent";
  MicroRecipe r(20, "sps");
  const std::string overrides = "training.micro_batch_size=1 training.chunk_size_units=1";
  std::string err;
  ASSERT_EQ(stderr_of(r.train("one", overrides), &err), 0) << err;
  const std::string mpi = "OMP_NUM_THREADS=1 mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 ";
  ASSERT_EQ(stderr_of(mpi + r.train("two", overrides), &err), 0) << err;
  const TrainConfig config = load_train_config(r.recipe, {overrides.substr(0, overrides.find(' '))});
  Model<float> one(config.model), two(config.model);
  load_weights(r.dir.file("one") + "/checkpoints/final/model.safetensors", one.params(), one.weights());
  load_weights(r.dir.file("two") + "/checkpoints/final/model.safetensors", two.params(), two.weights());
  double worst = 0;
  int64_t moved = 0;
  for (const auto& e : one.params().entries()) {
    double scale = 0;
    for (int64_t k = 0; k < e.numel; ++k) scale = std::max(scale, double(std::abs(one.weights()[e.offset + k])));
    for (int64_t k = 0; k < e.numel; ++k) {
      const double a = one.weights()[e.offset + k], b = two.weights()[e.offset + k];
      worst = std::max(worst, std::abs(a - b) / scale);
    }
  }
  Model<float> init(config.model);
  init.init_weights(uint64_t(config.training.seed));
  for (int64_t i = 0; i < init.params().total(); ++i) moved += init.weights()[i] != one.weights()[i];
  EXPECT_LT(worst, 1e-5);
  EXPECT_GT(moved, init.params().total() / 2);  // training did change the weights
  // The metric lines agree too (losses to float accuracy), and only rank 0 wrote them.
  const auto a = testing::read_metrics(r.dir.file("one") + "/metrics.jsonl");
  const auto b = testing::read_metrics(r.dir.file("two") + "/metrics.jsonl");
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i]["step"], b[i]["step"]);
    for (const char* key : {"loss", "val_nll", "grad_norm", "lr"})
      if (a[i].contains(key)) {
        EXPECT_NEAR(a[i][key].get<double>(), b[i][key].get<double>(), 1e-5) << i << " " << key;
      }
  }
  // The gradients summed in 1 KiB buckets as the backward finishes them, instead of one: with
  // two processes every element's sum is a + b whatever the buckets, so the same weights.
  ASSERT_EQ(
      stderr_of(mpi + r.train("buckets", overrides + " system.all_reduce_bucket_mb=0.001"), &err),
      0)
      << err;
  Model<float> buckets(config.model);
  load_weights(r.dir.file("buckets") + "/checkpoints/final/model.safetensors", buckets.params(),
               buckets.weights());
  ASSERT_GT(buckets.params().total() * sizeof(float), 8u << 10);  // several buckets
  EXPECT_EQ(std::memcmp(buckets.weights(), two.weights(), two.params().total() * sizeof(float)), 0);
}

// Under mpirun, `--device cuda` gives each process the GPU of its rank on the machine. Where
// fewer than two GPUs are usable, a process whose GPU is missing refuses with its index;
// every refusal that gets printed before the job is aborted names the process's own GPU.
TEST(TrainCliSlow, EachMpiProcessTakesTheGpuOfItsLocalRank) {
  if (!testing::has_command("mpirun")) GTEST_SKIP() << "mpirun is absent";
  std::string problem;
  if (ops::find_backend("cuda")->devices(&problem) >= 2)
    GTEST_SKIP() << "two GPUs here: nothing is refused";
  MicroRecipe r(4, "sps");
  const std::string mpi =
      "OMP_NUM_THREADS=1 mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 ";
  std::string err;
  EXPECT_EQ(stderr_of(mpi + r.train("run", "--device cuda --dry-run"), &err), 2) << err;
  const std::regex refusal(R"(sps: rank (\d): --device: cuda:(\d) asked for)");
  int refusals = 0;
  for (std::sregex_iterator m(err.begin(), err.end(), refusal), end; m != end; ++m, ++refusals)
    EXPECT_EQ((*m)[1], (*m)[2]) << err;
  EXPECT_GE(refusals, 1) << err;
}

}  // namespace
}  // namespace sps
