#pragma once
// Figures through gnuplot (pngcairo), for the analyses and the experiment report: the
// callers build the script, this runs it and writes the PNG atomically.
#include <string>

namespace sps {

// Whether `gnuplot` runs here.
bool gnuplot_available();

// `text` inside gnuplot's double quotes; with enhanced text off only \ and " are escaped.
std::string gnuplot_quoted(const std::string& text);

// The opening of every figure's script: the pngcairo terminal (960×600, plain text), the
// title and the axis labels.
std::string gnuplot_png_header(const std::string& title, const std::string& xlabel,
                               const std::string& ylabel);

// Runs gnuplot on `script`, which sets a pngcairo terminal and no output (the PNG comes on
// stdout), and writes the PNG to `path` atomically. Returns "" on success, else gnuplot's
// first complaint (or why it could not run); `path` is then left as it was.
std::string render_png(const std::string& script, const std::string& path);

}  // namespace sps
