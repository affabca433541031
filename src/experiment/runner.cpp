#include "experiment/runner.h"

#include <fmt/format.h>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <exception>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "experiment/run_process.h"
#include "experiment/run_record.h"
#include "train/checkpoint_policy.h"
#include "train/train_config.h"
#include "util/atomic_file.h"
#include "util/duration_text.h"
#include "util/error.h"
#include "util/progress.h"
#include "util/writer_lock.h"

namespace sps {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

fs::path run_dir(const RunnerOptions& options, const PlannedRun& run) {
  return fs::path(options.out_dir) / "runs" / run.name;
}

fs::path final_checkpoint(const fs::path& dir) { return dir / "train" / "checkpoints" / "final"; }

fs::path branch_dir(const fs::path& dir, const PlannedBranch& branch) {
  return dir / decay_folder_name(branch.from);
}

fs::path branch_final(const fs::path& dir, const PlannedBranch& branch) {
  return branch_dir(dir, branch) / "checkpoints" / "final";
}

// The run's checkpoint a branch starts from: named by its tokens, or `final` at the run's end.
fs::path branch_source(const fs::path& dir, const PlannedRun& run, const PlannedBranch& branch) {
  const fs::path named = dir / "train" / "checkpoints" / named_checkpoint(branch.from);
  return branch.from < run.tokens || fs::exists(named) ? named : final_checkpoint(dir);
}

std::vector<std::string> expanded(const std::vector<std::string>& args, const std::string& where) {
  std::vector<std::string> out;
  for (const auto& a : args) out.push_back(expand_path(a, where));
  return out;
}

// Where the run's tokens/s were measured: the CPU's model name (Linux's /proc/cpuinfo) and
// the cores the runner saw.
std::string cpu_description() {
  std::ifstream in("/proc/cpuinfo");
  std::string line, model = "unknown CPU";
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) {
      model = line.substr(line.find(':') + 1);
      model.erase(0, model.find_first_not_of(' '));
      break;
    }
  return fmt::format("{}, {} cores", model, std::thread::hardware_concurrency());
}

void write_run_json(const fs::path& dir, const PlannedRun& run, const std::string& status,
                    const std::string& error) {
  const json record = {{"name", run.name},     {"group", run.group},   {"recipe", run.recipe},
                       {"family", run.family}, {"window", run.window}, {"scale", run.scale},
                       {"seed", run.seed},     {"tokens", run.tokens}, {"overrides", run.overrides},
                       {"status", status},     {"error", error},       {"cpu", cpu_description()}};
  write_file_atomically((dir / "run.json").string(), record.dump(2) + "\n");
}

// A run folder left by an earlier invocation must come from the same recipe and overrides.
void check_unchanged(const RunRecord& old, const PlannedRun& run, const std::string& path) {
  if (old.recipe != run.recipe)
    fail("{}: made with recipe {}, the matrix now gives {}; use another --out, or delete the run "
         "folder to train it again",
         path, old.recipe, run.recipe);
  if (old.overrides != run.overrides)
    fail("{}: made with overrides [{}], the matrix now gives [{}]; use another --out, or delete the "
         "run folder to train it again",
         path, fmt::join(old.overrides, " "), fmt::join(run.overrides, " "));
}

bool outputs_present(const fs::path& dir, const PlannedRun& run, bool bench) {
  for (const PlannedBranch& branch : run.branches)
    if (!fs::exists(branch_final(dir, branch))) return false;
  return fs::exists(dir / "eval.json") && (!bench || fs::exists(dir / "bench.json")) &&
         fs::exists(final_checkpoint(dir));
}

std::string last_line_of(const fs::path& log) {
  std::ifstream in(log);
  std::string line, last;
  while (std::getline(in, line))
    if (line.find_first_not_of(" \t\r") != std::string::npos) last = line;
  return last;
}

// A line per event on stdout and in experiment.jsonl; the progress over the whole matrix (runs
// closed, rate, ETA) on stderr through the reporter.
class ProgressLog {
 public:
  ProgressLog(const fs::path& jsonl, int64_t total)
      : jsonl_(jsonl, std::ios::app), total_(total), t0_(Clock::now()),
        progress_("experiment", progress_in("runs")) {
    if (!jsonl_) fail("{}: cannot write", jsonl.string());
  }

  void event(const std::string& kind, size_t index, const PlannedRun& run, const std::string& detail,
             double run_seconds = -1) {
    std::lock_guard lock(mutex_);
    const double elapsed = std::chrono::duration<double>(Clock::now() - t0_).count();
    if (kind == "start") ++running_;
    if (kind == "done" || kind == "failed" || kind == "stopped") --running_;
    if (kind == "done" || kind == "failed" || kind == "skipped") ++closed_;
    if (kind == "skipped") progress_.skip(1);  // no work: not in the rate
    const std::string text = fmt::format("[run {} of {}] {} {}{} (elapsed {})", index + 1, total_,
                                         kind, run.name, detail.empty() ? "" : ": " + detail,
                                         duration_text(elapsed));
    progress_.print(stdout, text);
    progress_.update(closed_, total_, fmt::format("{} running", running_));
    json line = {{"event", kind},         {"run", run.name},      {"index", index + 1},
                 {"total", total_},       {"elapsed_s", elapsed}, {"time", std::time(nullptr)}};
    if (!detail.empty()) line["detail"] = detail;
    if (run_seconds >= 0) line["run_s"] = run_seconds;
    jsonl_ << line.dump() << "\n";
    jsonl_.flush();
  }

 private:
  std::mutex mutex_;
  std::ofstream jsonl_;
  int64_t total_, closed_ = 0, running_ = 0;
  Clock::time_point t0_;
  ProgressReporter progress_;
};

enum class Outcome { done, skipped, failed, stopped };

// Waits `length` (a second at most per look) unless a stop is asked for; false if one was.
bool pause_unless_stopped(Clock::duration length) {
  const auto end = Clock::now() + length;
  while (Clock::now() < end) {
    if (stop_requested()) return false;
    std::this_thread::sleep_for(
        std::min<Clock::duration>(end - Clock::now(), std::chrono::seconds(1)));
  }
  return !stop_requested();
}

struct Stage {
  const char* status;  // run.json status while it runs
  const char* program;
  std::string log;  // <run>/<log>
  std::vector<std::string> argv;
  std::string output;  // bench: stdout goes here (renamed on success); otherwise the log
  fs::path checkpoint;  // training and branches: the final checkpoint it must leave
};

class Runner {
 public:
  Runner(const ExperimentMatrix& matrix, const std::vector<PlannedRun>& runs,
         const RunnerOptions& options, int64_t parallel)
      : matrix_(matrix), runs_(runs), options_(options), parallel_(parallel),
        progress_(fs::path(options.out_dir) / "experiment.jsonl", int64_t(runs.size())) {
    const int64_t cores = options.cores > 0 ? options.cores : int64_t(std::thread::hardware_concurrency());
    if (!std::getenv("OMP_NUM_THREADS"))
      child_env_.push_back(fmt::format("OMP_NUM_THREADS={}", std::max<int64_t>(1, cores / parallel)));
  }

  ExperimentSummary run_all() {
    std::vector<std::thread> workers;
    for (int64_t i = 0; i < parallel_; ++i) workers.emplace_back([this] { work(); });
    for (auto& w : workers) w.join();
    if (error_) std::rethrow_exception(error_);
    summary_.runs = int64_t(runs_.size());
    summary_.stopped = stop_requested();
    summary_.not_done = summary_.runs - summary_.done - summary_.skipped - summary_.failed;
    return summary_;
  }

 private:
  void work() {
    for (;;) {
      size_t index;
      {
        std::lock_guard lock(mutex_);
        if (next_ >= runs_.size() || stop_requested() || error_) return;
        index = next_++;
      }
      Outcome outcome;
      try {
        outcome = run_one(index);
      } catch (...) {  // a damaged folder or a child that cannot start: stop taking runs
        std::lock_guard lock(mutex_);
        if (!error_) error_ = std::current_exception();
        return;
      }
      std::lock_guard lock(mutex_);
      if (outcome == Outcome::done) ++summary_.done;
      if (outcome == Outcome::skipped) ++summary_.skipped;
      if (outcome == Outcome::failed) ++summary_.failed;
    }
  }

  Outcome run_one(size_t index) {
    const PlannedRun& run = runs_[index];
    const fs::path dir = run_dir(options_, run);
    const fs::path record = dir / "run.json";
    if (fs::exists(record) && read_run_record(record.string()).done() &&
        outputs_present(dir, run, matrix_.bench)) {
      progress_.event("skipped", index, run, "already done");
      return Outcome::skipped;
    }
    fs::create_directories(dir);
    progress_.event("start", index, run, "");
    const auto t0 = Clock::now();
    const RunCommands commands = run_commands(matrix_, run, options_, fs::exists(dir / "train"));
    std::vector<Stage> stages;
    if (!fs::exists(final_checkpoint(dir)))
      stages.push_back(
          {"training", "sps train", "train.log", commands.train, "", final_checkpoint(dir)});
    for (size_t b = 0; b < run.branches.size(); ++b)
      if (!fs::exists(branch_final(dir, run.branches[b])))
        stages.push_back({"decaying", "sps train", decay_folder_name(run.branches[b].from) + ".log",
                          commands.branches[b], "", branch_final(dir, run.branches[b])});
    stages.push_back({"evaluating", "sps eval", "eval.log", commands.eval, "", ""});
    if (matrix_.bench)
      stages.push_back({"benchmarking", "sps bench generate", "bench.log", commands.bench,
                        (dir / "bench.json").string(), ""});
    for (const Stage& stage : stages) {
      write_run_json(dir, run, stage.status, "");
      // The benchmark is timed again while other work shares the machine (the matrix's
      // bench_tries in all, each after a pause as long as the try took); the least shared
      // try is kept.
      double kept_share = 0;
      for (int attempt = 1;; ++attempt) {
        const auto t_stage = Clock::now();
        ChildCommand child;
        child.argv = stage.argv;
        child.extra_env = child_env_;
        const std::string log = (dir / stage.log).string();
        child.stdout_path = stage.output.empty() ? log : stage.output + ".partial";
        child.stderr_path = stage.output.empty() ? "" : log;
        const ChildResult result = run_child(child);
        if (stop_requested()) {
          progress_.event("stopped", index, run,
                          fmt::format("{} interrupted; rerun to resume", stage.status));
          return Outcome::stopped;
        }
        std::string error;
        if (!result.ok())
          error = fmt::format("{} {}; see {}: {}", stage.program, result.describe(), log,
                              last_line_of(log));
        else if (!stage.checkpoint.empty() && !fs::exists(stage.checkpoint))
          error =
              fmt::format("sps train ended without {}; see {}", stage.checkpoint.string(), log);
        if (!error.empty()) {
          write_run_json(dir, run, "failed", error);
          progress_.event("failed", index, run, error);
          return Outcome::failed;
        }
        if (stage.output.empty()) break;
        const double share = benchmark_others_share(stage.output + ".partial");
        if (attempt == 1 || share < kept_share) {
          fs::rename(stage.output + ".partial", stage.output);
          kept_share = share;
        } else {
          fs::remove(stage.output + ".partial");
        }
        if (!(kept_share >= kSharedBenchmarkShare) || attempt >= matrix_.bench_tries) break;
        progress_.event("retiming", index, run,
                        fmt::format("other processes took {:.0f}% of the CPUs during the decode "
                                    "benchmark; timing it again ({} of {})",
                                    100 * kept_share, attempt + 1, matrix_.bench_tries));
        if (!pause_unless_stopped(Clock::now() - t_stage)) {
          progress_.event("stopped", index, run, "benchmarking interrupted; rerun to resume");
          return Outcome::stopped;
        }
      }
    }
    write_run_json(dir, run, "done", "");
    progress_.event("done", index, run, "", std::chrono::duration<double>(Clock::now() - t0).count());
    return Outcome::done;
  }

  const ExperimentMatrix& matrix_;
  const std::vector<PlannedRun>& runs_;
  const RunnerOptions& options_;
  int64_t parallel_;
  ProgressLog progress_;
  std::vector<std::string> child_env_;
  std::mutex mutex_;
  size_t next_ = 0;
  std::exception_ptr error_;
  ExperimentSummary summary_;
};

}  // namespace

RunCommands run_commands(const ExperimentMatrix& matrix, const PlannedRun& run,
                         const RunnerOptions& options, bool resume) {
  const fs::path dir = run_dir(options, run);
  RunCommands c;
  c.train = {options.binary, "train", "--config", run.recipe};
  c.train.insert(c.train.end(), run.overrides.begin(), run.overrides.end());
  c.train.push_back("system.out_dir=" + (dir / "train").string());
  if (resume) c.train.push_back("--resume");
  for (const PlannedBranch& branch : run.branches) {
    std::vector<std::string> argv = {options.binary, "train", "--config", run.recipe};
    argv.insert(argv.end(), branch.overrides.begin(), branch.overrides.end());
    argv.push_back("system.out_dir=" + branch_dir(dir, branch).string());
    argv.insert(argv.end(), {"--init-from", branch_source(dir, run, branch).string()});
    c.branches.push_back(std::move(argv));
  }
  const std::string checkpoint = final_checkpoint(dir).string();
  c.eval = {options.binary, "eval", "--quiet", "--checkpoint", checkpoint};
  const auto eval_args = expanded(matrix.eval_args, matrix.source + ": eval");
  c.eval.insert(c.eval.end(), eval_args.begin(), eval_args.end());
  c.eval.insert(c.eval.end(), {"--out", (dir / "eval.json").string()});
  if (matrix.bench) {
    c.bench = {options.binary, "bench", "generate", "--checkpoint", checkpoint, "--json"};
    const auto bench_args = expanded(matrix.bench_args, matrix.source + ": bench");
    c.bench.insert(c.bench.end(), bench_args.begin(), bench_args.end());
  }
  return c;
}

std::string describe_dry_run(const ExperimentMatrix& matrix, const std::vector<PlannedRun>& runs,
                             const RunnerOptions& options) {
  std::string out = fmt::format("{}: {} runs into {}\n", matrix.source, runs.size(), options.out_dir);
  out += fmt::format("{:<36} {:<14} {:>6} {:>5} {:<6} {:>14}\n", "name", "family", "window", "seed",
                     "scale", "tokens");
  for (const auto& run : runs)
    out += fmt::format("{:<36} {:<14} {:>6} {:>5} {:<6} {:>14}\n", run.name, run.family, run.window,
                       run.seed, run.scale, run.tokens);
  for (const auto& run : runs) {
    const RunCommands c = run_commands(matrix, run, options, false);
    out += fmt::format("\n{}:\n  {}\n", run.name, quote_command(c.train));
    for (const auto& branch : c.branches) out += fmt::format("  {}\n", quote_command(branch));
    out += fmt::format("  {}\n", quote_command(c.eval));
    if (!c.bench.empty())
      out += fmt::format("  {} > {}\n", quote_command(c.bench),
                         (run_dir(options, run) / "bench.json").string());
  }
  return out;
}

ExperimentSummary run_experiment(const ExperimentMatrix& matrix, const std::vector<PlannedRun>& runs,
                                 const RunnerOptions& options) {
  const int64_t parallel = options.parallel > 0 ? options.parallel : matrix.parallel;
  for (const auto& run : runs) {
    const fs::path record = run_dir(options, run) / "run.json";
    if (fs::exists(record)) check_unchanged(read_run_record(record.string()), run, record.string());
  }
  fs::create_directories(options.out_dir);
  const WriterLock lock(folder_lock_path(options.out_dir), options.out_dir);  // one runner
  fs::create_directories(fs::path(options.out_dir) / "runs");
  write_file_atomically((fs::path(options.out_dir) / "matrix.yaml").string(), matrix.text);
  for (const auto& run : runs) {
    const fs::path dir = run_dir(options, run);
    if (!fs::exists(dir / "run.json")) {
      fs::create_directories(dir);
      write_run_json(dir, run, "pending", "");
    }
  }
  StopForwarding forwarding;
  Runner runner(matrix, runs, options, std::min<int64_t>(parallel, int64_t(runs.size())));
  return runner.run_all();
}

}  // namespace sps
