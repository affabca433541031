#pragma once
// Everything one experiment report shows, gathered before it is written as Markdown and JSON.
#include <string>
#include <vector>

#include "experiment/report.h"
#include "experiment/report_analysis.h"
#include "experiment/report_trend.h"
#include "experiment/run_record.h"

namespace sps::report {

struct DrawnFigure {
  std::string file, title;  // file relative to the experiment folder
};

struct ReportContent {
  ReportOptions options;
  std::vector<RunResults> done;       // the runs the statistics use
  std::vector<RunRecord> incomplete;  // status not "done"
  std::vector<RunResults> partial;    // the incomplete runs that have a validation curve
  std::vector<Cohort> cohorts;        // points into `done`
  std::vector<GapTrend> trends;       // from `done` and `partial`
  std::vector<DrawnFigure> figures;
  std::vector<std::string> notes;  // skipped figures, missing gnuplot
};

std::string results_markdown(const ReportContent& content);
std::string results_json(const ReportContent& content);

}  // namespace sps::report
