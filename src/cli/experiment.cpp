// sps experiment run MATRIX.yaml [--out DIR] [--parallel N] [--only PATTERN]... [--dry-run]
// sps experiment report [--margin M] [--no-figures] DIR
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <filesystem>

#include "cli/commands.h"
#include "experiment/matrix.h"
#include "experiment/report.h"
#include "experiment/runner.h"
#include "util/error.h"

namespace sps::cli {
namespace {

namespace fs = std::filesystem;

// The children run this very binary.
std::string own_binary() {
  char path[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", path, sizeof path - 1);
  if (n <= 0) fail("cannot find the sps binary through /proc/self/exe");
  return std::string(path, size_t(n));
}

void register_run(CLI::App& experiment) {
  auto* cmd = experiment.add_subcommand(
      "run", "train, evaluate and benchmark every run of a matrix (rerun to resume)");
  static std::string matrix_path;
  static RunnerOptions options;
  static bool dry_run = false;
  static std::vector<std::string> only;
  cmd->add_option("matrix", matrix_path, "matrix YAML, e.g. experiments/smoke.yaml")->required();
  cmd->add_option("--out", options.out_dir, "experiment folder (default: runs/<matrix name>)");
  cmd->add_option("--parallel", options.parallel, "runs side by side (default: the matrix's)")
      ->check(CLI::Range(int64_t(1), int64_t(1024)));
  cmd->add_option("--only", only,
                  "run only the runs whose name matches this shell pattern, e.g. 'tiny_sps_*' "
                  "(repeatable; the others are left as they are)");
  cmd->add_flag("--dry-run", dry_run, "list the runs and their commands, run nothing");
  cmd->callback([] {
    const ExperimentMatrix matrix = load_matrix(matrix_path);
    const std::vector<PlannedRun> runs = select_runs(expand_matrix(matrix), only, matrix.source);
    if (options.out_dir.empty()) options.out_dir = "runs/" + fs::path(matrix_path).stem().string();
    options.binary = own_binary();
    if (dry_run) {
      std::fputs(describe_dry_run(matrix, runs, options).c_str(), stdout);
      return;
    }
    const ExperimentSummary s = run_experiment(matrix, runs, options);
    std::printf("%s: %lld runs: %lld done now, %lld done before, %lld failed, %lld not done\n",
                options.out_dir.c_str(), (long long)s.runs, (long long)s.done, (long long)s.skipped,
                (long long)s.failed, (long long)s.not_done);
    if (s.stopped) {
      std::printf("stopped by a signal; rerun the same command to continue\n");
      return;
    }
    if (s.failed > 0)
      fail("{} of {} runs failed (their run.json and logs say why); rerun the same command to retry them",
           s.failed, s.runs);
  });
}

void register_report(CLI::App& experiment) {
  auto* cmd = experiment.add_subcommand(
      "report", "statistics, tables and figures of an experiment folder (results.md, results.json)");
  static std::string dir;
  static ReportOptions options;
  static bool no_figures = false;
  cmd->add_option("dir", dir, "experiment folder written by `sps experiment run`")->required();
  cmd->add_option("--margin", options.tost_margin, "equivalence margin of the TOST, in nats")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--no-figures", no_figures, "skip figures/*.png");
  cmd->callback([] {
    options.figures = !no_figures;
    std::fputs(write_experiment_report(dir, options).c_str(), stdout);
  });
}

}  // namespace

void register_experiment(CLI::App& app) {
  auto* experiment = app.add_subcommand("experiment", "matrices of training and evaluation runs");
  experiment->require_subcommand(1);
  register_run(*experiment);
  register_report(*experiment);
}

}  // namespace sps::cli
