#pragma once
// Line-and-point figures for the experiment report, drawn by gnuplot (pngcairo).
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace sps::report {

struct FigureSeries {
  std::string title;
  std::vector<std::pair<double, double>> points;
  std::string color = "#000000";  // "#rrggbb"
  int point_type = 7;             // gnuplot's pt
  int dash_type = 1;              // gnuplot's dt: 1 solid
  bool lines = true;              // false: the points alone
  std::vector<double> y_errors;   // when set, one per point: error bars of that half width
};

struct Figure {
  std::string file;  // PNG name inside the figures folder
  std::string title, xlabel, ylabel;
  std::vector<FigureSeries> series;
  std::vector<std::string> categories;  // when set, x is the index into these labels
  std::optional<double> reference_y;    // a dashed horizontal line (standard's level, zero)
  std::optional<std::pair<double, double>> y_range;  // unset: gnuplot's own
  std::string reference_title;
};


// Draws `figure` into <figures_dir>/<figure.file>, replacing it only once gnuplot succeeded.
// Returns an empty string on success, else why it could not be drawn.
std::string render_figure(const std::string& figures_dir, const Figure& figure);

}  // namespace sps::report
