#pragma once
// Which figures an experiment report draws, from the numbers it has: val NLL against tokens,
// the window ablation, Task Accuracy gain by scale, and the gap to standard against tokens.
#include <string>
#include <vector>

#include "experiment/report_analysis.h"
#include "experiment/report_gnuplot.h"

namespace sps::report {

// The figures the data allows; a figure whose data is missing adds a line to `skipped`.
std::vector<Figure> plan_figures(const std::vector<Cohort>& cohorts,
                                 std::vector<std::string>& skipped);

}  // namespace sps::report
