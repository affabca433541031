#include "experiment/report.h"

#include "util/error.h"

namespace sps {

std::string write_experiment_report(const std::string& dir, const ReportOptions& options) {
  fail("experiment report: not implemented yet ({})", dir);
}

}  // namespace sps
