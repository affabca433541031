// `sps experiment` as a program: experiments/smoke.yaml end to end (data prepared here, every
// run trained, evaluated and reported), a rerun after an interruption that finishes only the
// unfinished run, the dry run, and one clear line with exit status 2 for a bad matrix.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "run_command.h"
#include "util/temp_dir.h"
#include "util/writer_lock.h"
#include "experiment_fixtures.h"

namespace sps::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kSpsBinary = SPS_BINARY;
// Runs the command with stderr folded into *out.
int run(const std::string& command, std::string* out) {
  return run_command(command + " 2>&1", out);
}

// Paragraphs of pseudo-text from a fixed word list, separated by blank lines.
std::string smoke_text(int paragraphs) {
  static const char* words[] = {"the", "kernel", "reads", "a", "page", "from", "memory", "and",
                                "python", "writes", "each", "line", "to", "its", "buffer", "when",
                                "called", "by", "module", "state", "of", "process", "returns"};
  uint64_t x = 88172645463325252ull;
  std::string text;
  for (int p = 0; p < paragraphs; ++p) {
    for (int w = 0; w < 24; ++w) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      text += words[x % (sizeof words / sizeof *words)];
      text += w == 23 ? ".\n\n" : " ";
    }
  }
  return text;
}

std::string byte_rank_file() {
  static const char* b64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string ranks;
  for (int b = 0; b < 256; ++b) {
    ranks += b64[b >> 2];
    ranks += b64[(b & 3) << 4];
    ranks += "== " + std::to_string(b) + "\n";
  }
  return ranks;
}

// A temporary SPS_HOME holding what experiments/smoke.yaml reads.
struct SmokeHome {
  TempDir dir;
  std::string env;
  SmokeHome() {
    const fs::path smoke = dir.path() / "smoke";
    fs::create_directories(smoke);
    write_whole_file((smoke / "bytes.tok").string(), byte_rank_file());
    write_whole_file((smoke / "text.txt").string(), smoke_text(300));
    write_whole_file((smoke / "corpus.txt").string(), smoke_text(4));
    env = "SPS_HOME='" + dir.path().string() + "' OMP_NUM_THREADS=1 ";
    std::string out;
    const int rc = run(env + "'" + kSpsBinary + "' data prepare " + (smoke / "text.txt").string() +
                           " --split-blank-lines --val-fraction 0.2 --tokenizer " +
                           (smoke / "bytes.tok").string() + " --out " + (smoke / "data").string(),
                       &out);
    if (rc != 0) throw std::runtime_error("sps data prepare failed: " + out);
  }
  std::string experiment(const std::string& args) const {
    return "cd '" + kSource + "' && " + env + "'" + kSpsBinary + "' experiment " + args;
  }
};

json read_json(const fs::path& path) { return json::parse(read_whole_file(path.string())); }

struct FileStamp {
  ino_t inode;
  int64_t mtime_ns;
  bool operator==(const FileStamp&) const = default;
};

FileStamp stamp(const fs::path& path) {
  struct stat s {};
  EXPECT_EQ(::stat(path.c_str(), &s), 0) << path;
  return {s.st_ino, int64_t(s.st_mtim.tv_sec) * 1000000000 + s.st_mtim.tv_nsec};
}

TEST(ExperimentCli, SmokeMatrixRunsReportsAndResumesOnlyUnfinishedRuns) {
  SmokeHome home;
  const fs::path out = home.dir.path() / "experiment";
  std::string log;
  ASSERT_EQ(run(home.experiment("run experiments/smoke.yaml --out " + out.string()), &log), 0) << log;
  EXPECT_NE(log.find("[run 4 of 4]"), std::string::npos) << log;
  const std::vector<std::string> names = {"tiny_standard_seed1", "tiny_standard_seed2",
                                          "tiny_sps_w8_seed1", "tiny_sps_w8_seed2"};
  for (const auto& name : names) {
    const fs::path dir = out / "runs" / name;
    EXPECT_EQ(read_json(dir / "run.json")["status"], "done") << name << "\n" << log;
    EXPECT_TRUE(fs::exists(dir / "eval.json")) << name;
    EXPECT_TRUE(fs::exists(dir / "bench.json") && fs::exists(dir / "bench.log")) << name;
    EXPECT_TRUE(fs::exists(dir / "train" / "checkpoints" / "final")) << name;
    EXPECT_TRUE(fs::exists(dir / "train.log") && fs::exists(dir / "eval.log")) << name;
    EXPECT_TRUE(fs::exists(dir / "decay_4096" / "checkpoints" / "final")) << name;
    EXPECT_TRUE(fs::exists(dir / "decay_4096.log")) << name;
  }
  EXPECT_EQ(read_whole_file((out / "matrix.yaml").string()),
            read_whole_file(kSource + "/experiments/smoke.yaml"));
  EXPECT_NE(read_whole_file((out / "experiment.jsonl").string()).find("\"event\":\"done\""),
            std::string::npos);

  ASSERT_EQ(run(home.experiment("report --no-figures " + out.string()), &log), 0) << log;
  EXPECT_TRUE(fs::exists(out / "results.md"));
  EXPECT_TRUE(fs::exists(out / "results.json"));
  const json results = read_json(out / "results.json");
  ASSERT_EQ(results["trends"].size(), 1u) << results.dump(1);
  ASSERT_EQ(results["trends"][0]["decayed"].size(), 1u) << results.dump(1);
  EXPECT_EQ(results["trends"][0]["decayed"][0]["tokens"], 4096 + 1024);

  // Interrupted while evaluating the second run: status back, its eval.json gone.
  const fs::path first = out / "runs" / names[0], second = out / "runs" / names[1];
  json record = read_json(second / "run.json");
  record["status"] = "training";
  write_whole_file((second / "run.json").string(), record.dump());
  fs::remove(second / "eval.json");
  const FileStamp first_eval = stamp(first / "eval.json"),
                  first_model = stamp(first / "train/checkpoints/final/model.safetensors"),
                  second_model = stamp(second / "train/checkpoints/final/model.safetensors");
  ASSERT_EQ(run(home.experiment("run experiments/smoke.yaml --out " + out.string()), &log), 0) << log;
  EXPECT_NE(log.find("1 done now, 3 done before, 0 failed, 0 not done"), std::string::npos) << log;
  EXPECT_TRUE(stamp(first / "eval.json") == first_eval) << "a finished run was evaluated again";
  EXPECT_TRUE(stamp(first / "train/checkpoints/final/model.safetensors") == first_model);
  EXPECT_TRUE(stamp(second / "train/checkpoints/final/model.safetensors") == second_model)
      << "a trained run was trained again";
  EXPECT_EQ(read_json(second / "run.json")["status"], "done");
  EXPECT_TRUE(fs::exists(second / "eval.json"));
}

// SIGTERM while the first run trains: the trainer checkpoints, the runner exits 0 with the
// run not done, and the next invocation resumes it from that checkpoint.
TEST(ExperimentCli, SigtermMidRunLeavesItResumable) {
  SmokeHome home;
  std::string matrix = read_whole_file(kSource + "/experiments/smoke.yaml");
  const auto replace = [&](const std::string& from, const std::string& to) {
    const size_t at = matrix.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    matrix.replace(at, from.size(), to);
  };
  replace("recipe: ../", "recipe: " + kSource + "/");
  replace("families: [standard, sps]", "families: [standard]");
  replace("windows: [8]\n", "");
  replace("seeds: [1, 2]", "seeds: [1]");
  replace("tokens: [4096]", "tokens: [131072]");
  replace("decay: {from: [4096], fraction: 0.25, min_lr: 0.0002}\n", "");
  const std::string matrix_path = home.dir.file("long.yaml");
  write_whole_file(matrix_path, matrix);
  const fs::path out = home.dir.path() / "long";
  const fs::path train = out / "runs" / "tiny_standard_seed1" / "train";
  const std::string command = home.env + "exec '" + kSpsBinary + "' experiment run " + matrix_path +
                              " --out " + out.string() + " > " + home.dir.file("long.log") + " 2>&1";
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::execl("/bin/sh", "sh", "-c", command.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  int status = 0;
  bool ended = false;  // early: the log says why
  for (int i = 0; i < 600 && !ended && !fs::exists(train / "checkpoints" / "latest"); ++i) {
    ended = ::waitpid(pid, &status, WNOHANG) == pid;
    ::usleep(100000);
  }
  const bool checkpointed = fs::exists(train / "checkpoints" / "latest");
  if (!ended) {
    ::kill(pid, SIGTERM);
    ::waitpid(pid, &status, 0);
  }
  const std::string log = read_whole_file(home.dir.file("long.log"));
  ASSERT_TRUE(checkpointed) << log;
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << log;
  EXPECT_NE(log.find("stopped by a signal"), std::string::npos) << log;
  EXPECT_EQ(read_json(train.parent_path() / "run.json")["status"], "training");
  EXPECT_FALSE(fs::exists(train / "checkpoints" / "final"));

  // The same command continues from the checkpoint.
  std::string again;
  ASSERT_EQ(run(home.env + "'" + kSpsBinary + "' experiment run " + matrix_path + " --out " + out.string(),
                &again),
            0)
      << again;
  EXPECT_EQ(read_json(train.parent_path() / "run.json")["status"], "done") << again;
  EXPECT_NE(read_whole_file((train.parent_path() / "train.log").string()).find("resumed from"),
            std::string::npos);
}

// With bench_tries, a decode benchmark that other processes shared (here threads spinning on a
// quarter of the CPUs) is timed again after a pause, up to that many tries (two here, to keep
// the test short), and the least shared is kept; the report names it still shared.
TEST(ExperimentCli, ABenchmarkThatSharedTheMachineIsTimedAgain) {
  SmokeHome home;
  const fs::path out = home.dir.path() / "experiment";
  std::string matrix = read_whole_file(kSource + "/experiments/smoke.yaml");
  matrix.replace(matrix.find("recipe: .."), 10, "recipe: " + kSource);
  matrix.replace(matrix.find("parallel: 2"), 11, "parallel: 1");
  write_whole_file(home.dir.file("once.yaml"), matrix);
  write_whole_file(home.dir.file("retry.yaml"), matrix + "bench_tries: 2\n");
  const auto command = [&](const std::string& yaml) {
    return home.experiment("run " + home.dir.file(yaml) + " --only tiny_standard_seed1 --out " +
                           out.string());
  };
  // Trained and benchmarked once; then the benchmark is taken again beside the spinners.
  std::string log;
  ASSERT_EQ(run(command("once.yaml"), &log), 0) << log;
  const fs::path run_dir = out / "runs" / "tiny_standard_seed1";
  json record = read_json(run_dir / "run.json");
  record["status"] = "benchmarking";
  write_whole_file((run_dir / "run.json").string(), record.dump());
  fs::remove(run_dir / "bench.json");
  std::atomic<bool> stop = false;
  std::vector<std::thread> spinners;
  for (unsigned i = 0; i < std::max(1u, (std::thread::hardware_concurrency() + 3) / 4); ++i)
    spinners.emplace_back([&stop] {
      while (!stop.load(std::memory_order_relaxed)) {
      }
    });
  const int status = run(command("retry.yaml"), &log);
  stop = true;
  for (std::thread& t : spinners) t.join();
  ASSERT_EQ(status, 0) << log;
  EXPECT_NE(log.find("timing it again (2 of 2)"), std::string::npos) << log;
  EXPECT_EQ(log.find("timing it again (3 of"), std::string::npos) << log;
  EXPECT_EQ(read_json(run_dir / "run.json")["status"], "done");
  EXPECT_FALSE(fs::exists(run_dir / "bench.json.partial"));
  EXPECT_GE(read_json(run_dir / "bench.json")["other_cpu_share"].get<double>(), 0.10);
  ASSERT_EQ(run(home.experiment("report --no-figures " + out.string()), &log), 0) << log;
  EXPECT_NE(read_whole_file((out / "results.md").string())
                .find("other processes took 10% or more of the CPUs: tiny_standard_seed1 ("),
            std::string::npos);
}

// The published tables (docs/results/*/results.md and .json) are what `sps experiment report`
// makes of the records beside them, byte for byte: a copy of each folder without its report is
// reported again and compared.
TEST(ExperimentCli, PublishedResultsAreRebuiltExactlyFromTheirRecords) {
  TempDir tmp;
  int folders = 0;
  const fs::path published = fs::path(SPS_SOURCE_DIR) / "docs" / "results";
  const bool gnuplot = std::system("gnuplot --version >/dev/null 2>&1") == 0;
  for (const auto& entry : fs::recursive_directory_iterator(published)) {
    if (entry.path().filename() != "matrix.yaml") continue;
    const fs::path folder = entry.path().parent_path();
    // A folder published with its figures names them in results.md: rebuilt with them too
    // (their pixels depend on gnuplot's version and fonts; their names and titles do not).
    const bool figures = fs::exists(folder / "figures");
    if (figures && !gnuplot) {
      ADD_FAILURE() << folder << " has figures, and this machine has no gnuplot to draw them";
      continue;
    }
    const fs::path copy = tmp.path() / std::to_string(folders++);
    fs::copy(folder, copy, fs::copy_options::recursive);
    for (const char* report : {"results.md", "results.json"}) fs::remove(copy / report);
    fs::remove_all(copy / "figures");
    std::string out;
    ASSERT_EQ(run(kSpsBinary + " experiment report " + (figures ? "" : "--no-figures ") +
                      copy.string(),
                  &out),
              0)
        << folder << "\n" << out;
    for (const char* report : {"results.md", "results.json"})
      EXPECT_EQ(read_whole_file((copy / report).string()),
                read_whole_file((folder / report).string()))
          << folder / report << " is not what the report makes of its records";
    if (!figures) continue;
    for (const auto& png : fs::directory_iterator(folder / "figures")) {
      EXPECT_TRUE(fs::exists(copy / "figures" / png.path().filename()))
          << png.path() << " is a figure the report no longer draws";
    }
  }
  EXPECT_GE(folders, 2);  // the tiny family table and the crossover at least
}

TEST(ExperimentCli, DryRunListsRunsWithoutRunning) {
  SmokeHome home;
  const fs::path out = home.dir.path() / "experiment";
  std::string log;
  ASSERT_EQ(run(home.experiment("run experiments/smoke.yaml --dry-run --out " + out.string()), &log), 0)
      << log;
  EXPECT_NE(log.find("4 runs"), std::string::npos) << log;
  EXPECT_NE(log.find("tiny_sps_w8_seed2"), std::string::npos) << log;
  EXPECT_NE(log.find(" train --config configs/experiments/tiny_standard.yaml"), std::string::npos) << log;
  EXPECT_FALSE(fs::exists(out));
  // --only narrows the plan to the named runs; a pattern that names none is refused.
  const std::string smoke = "run experiments/smoke.yaml --out " + out.string();
  ASSERT_EQ(run(home.experiment(smoke + " --dry-run --only '*_seed2'"), &log), 0) << log;
  EXPECT_NE(log.find("2 runs"), std::string::npos) << log;
  EXPECT_EQ(log.find("_seed1"), std::string::npos) << log;
  EXPECT_EQ(run(home.experiment(smoke + " --only tiny_sps_seed2"), &log), 2) << log;
  EXPECT_NE(log.find("--only tiny_sps_seed2: no run of"), std::string::npos) << log;
  EXPECT_FALSE(fs::exists(out));
}

TEST(ExperimentCli, OneRunnerPerExperimentFolder) {
  SmokeHome home;
  const fs::path out = home.dir.path() / "experiment";
  fs::create_directories(out);
  const WriterLock other(folder_lock_path(out.string()), out.string());
  std::string log;
  EXPECT_EQ(run(home.experiment("run experiments/smoke.yaml --out " + out.string()), &log), 2) << log;
  EXPECT_EQ(log, "sps: " + out.string() + ": in use by another sps process (PID " + std::to_string(::getpid()) +
                     "); wait for it to end or choose another output\n");
}

TEST(ExperimentCli, BadMatrixIsOneLineAndStatus2) {
  TempDir dir;
  write_whole_file(dir.file("bad.yaml"), "recipe: x.yaml\nfamilies: [standard]\nseeds: [1]\nscale: [tiny]\n");
  std::string out;
  EXPECT_EQ(run("'" + kSpsBinary + "' experiment run " + dir.file("bad.yaml"), &out), 2) << out;
  EXPECT_NE(out.find("bad.yaml: matrix.scale: unknown key"), std::string::npos) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 1) << out;
  EXPECT_EQ(run("'" + kSpsBinary + "' experiment report " + dir.file("missing"), &out), 2) << out;
}

}  // namespace
}  // namespace sps::testing
