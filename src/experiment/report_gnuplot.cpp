#include "experiment/report_gnuplot.h"

#include <fmt/format.h>

#include <filesystem>
#include <sstream>

#include "util/gnuplot.h"

namespace sps::report {

namespace {

std::string script_for(const Figure& f) {
  std::ostringstream s;
  s << gnuplot_png_header(f.title, f.xlabel, f.ylabel);
  s << "set key outside right top\nset grid\n";
  if (f.y_range) s << fmt::format("set yrange [{}:{}]\n", f.y_range->first, f.y_range->second);
  if (!f.categories.empty()) {
    s << "set xrange [-0.5:" << f.categories.size() - 0.5 << "]\nset xtics (";
    for (size_t i = 0; i < f.categories.size(); ++i)
      s << (i ? ", " : "") << gnuplot_quoted(f.categories[i]) << " " << i;
    s << ")\n";
  }
  for (size_t i = 0; i < f.series.size(); ++i) {
    s << "$series" << i << " << EOD\n";
    const FigureSeries& series = f.series[i];
    for (size_t k = 0; k < series.points.size(); ++k) {
      const auto [x, y] = series.points[k];
      s << (series.y_errors.empty() ? fmt::format("{} {}\n", x, y)
                                    : fmt::format("{} {} {}\n", x, y, series.y_errors[k]));
    }
    s << "EOD\n";
  }
  s << "plot ";
  const char* separator = "";
  if (f.reference_y) {
    s << fmt::format("{} with lines lc rgb \"#888888\" dt 2 title {}", *f.reference_y,
                     gnuplot_quoted(f.reference_title));
    separator = ", ";
  }
  for (size_t i = 0; i < f.series.size(); ++i, separator = ", ") {
    const FigureSeries& series = f.series[i];
    const bool errors = !series.y_errors.empty();
    const char* style = series.lines ? (errors ? "yerrorlines" : "linespoints")
                                     : (errors ? "yerrorbars" : "points");
    s << separator
      << fmt::format("$series{} with {} lw 2 lc rgb {} pt {} dt {} title {}", i, style,
                     gnuplot_quoted(series.color), series.point_type, series.dash_type,
                     gnuplot_quoted(series.title));
  }
  s << "\n";
  return s.str();
}

}  // namespace

std::string render_figure(const std::string& figures_dir, const Figure& figure) {
  const std::string problem =
      render_png(script_for(figure), (std::filesystem::path(figures_dir) / figure.file).string());
  return problem.empty() ? "" : "gnuplot failed: " + problem;
}

}  // namespace sps::report
