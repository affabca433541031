#pragma once
// Which figures an experiment report draws, from the numbers it has: val NLL against tokens,
// the window ablation, Task Accuracy gain by scale, the gap to standard against tokens, and
// each group's gap by seed with its interval and its decayed branches.
#include <string>
#include <vector>

#include "experiment/report_analysis.h"
#include "experiment/report_gnuplot.h"
#include "experiment/report_trend.h"

namespace sps::report {

// The figures the data allows; a figure whose data is missing adds a line to `skipped`.
std::vector<Figure> plan_figures(const std::vector<Cohort>& cohorts,
                                 const std::vector<GapTrend>& trends, double alpha,
                                 std::vector<std::string>& skipped);

}  // namespace sps::report
