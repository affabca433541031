#pragma once
// `sps experiment report`: the statistics and figures of one experiment folder (docs/model.md §9–§10).
#include <string>

namespace sps {

struct ReportOptions { double tost_margin = 0.01; double alpha = 0.05; bool figures = true; };
// Reads <dir>/runs/*/run.json (+ train/metrics.jsonl, eval.json, bench.json where present) and writes
// <dir>/results.md, <dir>/results.json and <dir>/figures/*.png atomically. Runs whose status is not "done"
// are listed as incomplete and left out of the statistics. Returns a short summary for the terminal.
std::string write_experiment_report(const std::string& dir, const ReportOptions& options);

}  // namespace sps
