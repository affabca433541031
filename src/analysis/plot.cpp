#include "analysis/plot.h"

#include <fmt/format.h>

#include <sstream>

#include "util/error.h"
#include "util/gnuplot.h"

namespace sps::analysis {

namespace {

std::string script_of(const PlotSpec& spec) {
  std::ostringstream s;
  s << gnuplot_png_header(spec.title, spec.xlabel, spec.ylabel);
  s << "set key outside below\nset grid\n";
  if (spec.log_x) s << "set logscale x 2\n";
  for (size_t i = 0; i < spec.series.size(); ++i) {
    s << "$series" << i << " << EOD\n";
    for (const auto& [x, y] : spec.series[i].points) s << fmt::format("{} {}\n", x, y);
    s << "EOD\n";
  }
  s << "plot " << fmt::format("{} with lines lc rgb \"#999999\" dt 2 notitle", spec.hline);
  for (size_t i = 0; i < spec.series.size(); ++i)
    s << ", $series" << i << " with lines lw 2 lc " << spec.series[i].color + 1 << " dt "
      << (spec.series[i].dashed ? 2 : 1) << " title " << gnuplot_quoted(spec.series[i].title);
  s << "\n";
  return s.str();
}

}  // namespace

void write_plot_png(const std::string& path, const PlotSpec& spec) {
  const std::string problem = render_png(script_of(spec), path);
  if (!problem.empty()) fail("gnuplot could not draw {}: {}", path, problem);
}

}  // namespace sps::analysis
