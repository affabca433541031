#include "experiment/report_gnuplot.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "util/atomic_file.h"

namespace sps::report {

namespace {

namespace fs = std::filesystem;

std::string shell_quoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// Enhanced text is off, so only \ and " need escaping inside gnuplot's double quotes.
std::string gnuplot_string(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string script_for(const Figure& f, const std::string& output) {
  std::ostringstream s;
  s << "set terminal pngcairo size 960,600 noenhanced\n";
  s << "set output " << gnuplot_string(output) << "\n";
  s << "set title " << gnuplot_string(f.title) << "\n";
  s << "set xlabel " << gnuplot_string(f.xlabel) << "\n";
  s << "set ylabel " << gnuplot_string(f.ylabel) << "\n";
  s << "set key outside right top\nset grid\n";
  if (!f.categories.empty()) {
    s << "set xrange [-0.5:" << f.categories.size() - 0.5 << "]\nset xtics (";
    for (size_t i = 0; i < f.categories.size(); ++i)
      s << (i ? ", " : "") << gnuplot_string(f.categories[i]) << " " << i;
    s << ")\n";
  }
  for (size_t i = 0; i < f.series.size(); ++i) {
    s << "$series" << i << " << EOD\n";
    for (const auto& [x, y] : f.series[i].points) s << fmt::format("{} {}\n", x, y);
    s << "EOD\n";
  }
  s << "plot ";
  const char* separator = "";
  if (f.reference_y) {
    s << fmt::format("{} with lines lc rgb \"#888888\" dt 2 title {}", *f.reference_y,
                     gnuplot_string(f.reference_title));
    separator = ", ";
  }
  for (size_t i = 0; i < f.series.size(); ++i, separator = ", ")
    s << separator
      << fmt::format("$series{} with linespoints lw 2 lc rgb {} pt {} dt {} title {}", i,
                     gnuplot_string(f.series[i].color), f.series[i].point_type,
                     f.series[i].dash_type, gnuplot_string(f.series[i].title));
  s << "\n";
  return s.str();
}

std::string first_line(const std::string& text) {
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line))
    if (line.find_first_not_of(" \t^") != std::string::npos) return line;
  return "no output";
}

}  // namespace

bool gnuplot_available() { return std::system("gnuplot --version >/dev/null 2>&1") == 0; }

std::string render_figure(const std::string& figures_dir, const Figure& figure) {
  const fs::path target = fs::path(figures_dir) / figure.file;
  const std::string suffix = fmt::format(".tmp.{}", ::getpid());
  const std::string png = target.string() + suffix;
  const std::string script = target.string() + ".gp" + suffix;
  write_file_atomically(script, script_for(figure, png));
  FILE* pipe = ::popen(("gnuplot " + shell_quoted(script) + " 2>&1").c_str(), "r");
  std::string complaints;
  int status = -1;
  if (pipe) {
    char buffer[4096];
    size_t n;
    while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) complaints.append(buffer, n);
    status = ::pclose(pipe);
  }
  std::error_code ec;
  fs::remove(script, ec);
  if (status != 0 || !fs::exists(png) || fs::file_size(png, ec) == 0) {
    fs::remove(png, ec);
    return pipe ? "gnuplot failed: " + first_line(complaints) : "cannot run gnuplot";
  }
  fs::rename(png, target, ec);
  if (ec) {
    fs::remove(png, ec);
    return "cannot write " + target.string();
  }
  return "";
}

}  // namespace sps::report
