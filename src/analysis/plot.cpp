#include "analysis/plot.h"

#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fmt/format.h>
#include <fstream>
#include <sstream>

#include "util/atomic_file.h"
#include "util/error.h"

namespace sps::analysis {

namespace {

namespace fs = std::filesystem;

// 'text' for the shell.
std::string shell_quoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// "text" for gnuplot, where only \ and " need escaping (enhanced text is off).
std::string gnuplot_quoted(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

// A temporary file that removes itself.
struct TempFile {
  std::string path;
  explicit TempFile(const std::string& suffix) {
    std::string pattern = (fs::temp_directory_path() / ("sps-plot-XXXXXX" + suffix)).string();
    const int fd = ::mkstemps(pattern.data(), int(suffix.size()));
    if (fd < 0) fail("cannot create a temporary file in {}", fs::temp_directory_path().string());
    ::close(fd);
    path = pattern;
  }
  ~TempFile() {
    std::error_code ec;
    fs::remove(path, ec);
  }
};

std::string first_complaint(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line))
    if (line.find_first_not_of(" \t") != std::string::npos) return line;
  return "no output";
}

std::string script_of(const PlotSpec& spec) {
  std::ostringstream s;
  s << "set terminal pngcairo size 960,600 noenhanced\n";
  s << "set title " << gnuplot_quoted(spec.title) << "\n";
  s << "set xlabel " << gnuplot_quoted(spec.xlabel) << "\n";
  s << "set ylabel " << gnuplot_quoted(spec.ylabel) << "\n";
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

bool gnuplot_available() {
  return std::system("gnuplot --version >/dev/null 2>&1") == 0;
}

void write_plot_png(const std::string& path, const PlotSpec& spec) {
  TempFile script(".gp"), errors(".err");
  std::ofstream(script.path) << script_of(spec);
  // gnuplot writes the PNG to stdout; we keep it and write it atomically ourselves.
  FILE* pipe = ::popen(("gnuplot " + shell_quoted(script.path) + " 2>" + shell_quoted(errors.path))
                           .c_str(),
                       "r");
  if (!pipe) fail("cannot run gnuplot for {}", path);
  std::string png;
  char buffer[65536];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) png.append(buffer, n);
  const int status = ::pclose(pipe);
  if (status != 0 || png.empty())
    fail("gnuplot could not draw {}: {}", path, first_complaint(errors.path));
  write_file_atomically(path, png);
}

}  // namespace sps::analysis
