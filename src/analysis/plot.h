#pragma once
// Line figures through gnuplot (pngcairo): the analyses' Δℓ(p) and ratio(k) plots.
#include <string>
#include <utility>
#include <vector>

namespace sps::analysis {

struct PlotSeries {
  std::string title;
  std::vector<std::pair<double, double>> points;
  int color = 0;        // gnuplot's line colour number; series of one group share it
  bool dashed = false;  // a variant of the solid series of its colour
};

struct PlotSpec {
  std::string title, xlabel, ylabel;
  bool log_x = false;
  double hline = 0;  // a thin reference line at this y
  std::vector<PlotSeries> series;
};


// Renders `spec` as a PNG and writes it to `path` atomically; gnuplot failing is a
// UserError with its first line of complaint.
void write_plot_png(const std::string& path, const PlotSpec& spec);

}  // namespace sps::analysis
