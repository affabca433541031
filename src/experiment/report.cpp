#include "experiment/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "experiment/report_content.h"
#include "experiment/report_figures.h"
#include "util/atomic_file.h"
#include "util/error.h"
#include "util/gnuplot.h"

namespace sps {

namespace {

namespace fs = std::filesystem;
using report::ReportContent;

// Runs of one group differ only by seed; anything else would make their statistics meaningless.
void check_groups(const std::vector<RunResults>& runs, const fs::path& runs_dir) {
  std::map<std::string, const RunRecord*> first_of_group;
  for (const RunResults& r : runs) {
    const RunRecord& a = r.record;
    const auto [it, fresh] = first_of_group.try_emplace(a.group, &a);
    const RunRecord& b = *it->second;
    if (!fresh && (a.family != b.family || a.window != b.window || a.scale != b.scale ||
                   a.tokens != b.tokens))
      fail("{}: group \"{}\" also holds run {} with another family, window, scale or token "
           "budget; runs of one group may differ only by seed",
           (runs_dir / a.name / "run.json").string(), a.group, b.name);
  }
}

void read_runs(const std::string& dir, ReportContent& content) {
  const fs::path runs_dir = fs::path(dir) / "runs";
  if (!fs::is_directory(runs_dir))
    fail("{}: no such folder; expected an experiment folder written by sps experiment run",
         runs_dir.string());
  std::vector<fs::path> run_dirs;
  for (const auto& entry : fs::directory_iterator(runs_dir))
    if (entry.is_directory() && entry.path().filename().string()[0] != '.')
      run_dirs.push_back(entry.path());
  std::sort(run_dirs.begin(), run_dirs.end());
  for (const fs::path& run_dir : run_dirs) {
    RunRecord record = read_run_record((run_dir / "run.json").string());
    if (record.done()) {
      content.done.push_back(read_run_results(record, run_dir.string()));
    } else {
      if (auto partial = read_partial_results(record, run_dir.string()))
        content.partial.push_back(std::move(*partial));
      content.incomplete.push_back(std::move(record));
    }
  }
  check_groups(content.done, runs_dir);
}

void draw_figures(const std::string& dir, ReportContent& content) {
  if (!content.options.figures) {
    content.notes.push_back("figures not drawn (--no-figures)");
    return;
  }
  std::vector<std::string> skipped;
  const std::vector<report::Figure> figures =
      report::plan_figures(content.cohorts, content.trends, content.options.alpha, skipped);
  for (const std::string& s : skipped) content.notes.push_back("skipped: " + s);
  if (figures.empty()) return;
  if (!gnuplot_available()) {
    content.notes.push_back("gnuplot not found: no figures drawn (install gnuplot-nox)");
    return;
  }
  const fs::path figures_dir = fs::path(dir) / "figures";
  std::error_code ec;
  fs::create_directories(figures_dir, ec);
  if (ec) fail("{}: cannot create the folder: {}", figures_dir.string(), ec.message());
  for (const report::Figure& f : figures) {
    const std::string problem = report::render_figure(figures_dir.string(), f);
    if (problem.empty())
      content.figures.push_back({"figures/" + f.file, f.title});
    else
      content.notes.push_back(fmt::format("figure {} not drawn: {}", f.file, problem));
  }
}

std::string terminal_summary(const std::string& dir, const ReportContent& content) {
  size_t groups = 0;
  for (const report::Cohort& c : content.cohorts) groups += c.groups.size();
  std::string s = fmt::format(
      "experiment report: {} run(s) done, {} incomplete; {} group(s) at {} scale/budget "
      "pair(s); wrote {}/results.md, results.json and {} figure(s)\n",
      content.done.size(), content.incomplete.size(), groups, content.cohorts.size(), dir,
      content.figures.size());
  size_t width = 0;
  for (const report::Cohort& c : content.cohorts)
    for (const report::GroupSummary& g : c.groups)
      width = std::max(width, c.scale.size() + 1 + report::group_label(g).size());
  for (const report::Cohort& c : content.cohorts)
    for (const report::GroupSummary& g : c.groups)
      s +=
          fmt::format("  {:<{}}  seeds {}  final val NLL {:.4f}\n",
                      c.scale + " " + report::group_label(g), width, g.runs.size(), g.val_nll.mean);
  for (const std::string& note : content.notes)
    if (note.rfind("skipped: ", 0) != 0) s += "note: " + note + "\n";
  return s;
}

}  // namespace

std::string write_experiment_report(const std::string& dir, const ReportOptions& options) {
  if (!(options.tost_margin > 0)) fail("--margin must be > 0 (got {})", options.tost_margin);
  if (!(options.alpha > 0 && options.alpha < 1))
    fail("alpha must be in (0, 1) (got {})", options.alpha);
  ReportContent content;
  content.options = options;
  read_runs(dir, content);
  content.cohorts = report::analyse_runs(content.done, options.alpha, options.tost_margin);
  std::vector<const RunResults*> with_curves;
  for (const auto* list : {&content.done, &content.partial})
    for (const RunResults& r : *list) with_curves.push_back(&r);
  content.trends = report::analyse_trends(with_curves, options.alpha);
  draw_figures(dir, content);
  write_file_atomically((fs::path(dir) / "results.json").string(), report::results_json(content));
  write_file_atomically((fs::path(dir) / "results.md").string(), report::results_markdown(content));
  return terminal_summary(dir, content);
}

}  // namespace sps
