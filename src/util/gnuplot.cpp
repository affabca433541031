#include "util/gnuplot.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "util/atomic_file.h"

namespace sps {

namespace {

namespace fs = std::filesystem;

std::string shell_quoted(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// A temporary file that removes itself; empty path when it could not be made.
struct TempFile {
  std::string path;
  explicit TempFile(const std::string& suffix) {
    std::string pattern = (fs::temp_directory_path() / ("sps-plot-XXXXXX" + suffix)).string();
    const int fd = ::mkstemps(pattern.data(), int(suffix.size()));
    if (fd < 0) return;
    ::close(fd);
    path = pattern;
  }
  ~TempFile() {
    std::error_code ec;
    if (!path.empty()) fs::remove(path, ec);
  }
};

// The first line of gnuplot's complaints that says something (not just a ^ marker).
std::string first_complaint(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line))
    if (line.find_first_not_of(" \t^") != std::string::npos) return line;
  return "no output";
}

}  // namespace

bool gnuplot_available() { return std::system("gnuplot --version >/dev/null 2>&1") == 0; }

std::string gnuplot_quoted(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string gnuplot_png_header(const std::string& title, const std::string& xlabel,
                               const std::string& ylabel) {
  return "set terminal pngcairo size 960,600 noenhanced\nset title " + gnuplot_quoted(title) +
         "\nset xlabel " + gnuplot_quoted(xlabel) + "\nset ylabel " + gnuplot_quoted(ylabel) + "\n";
}

std::string render_png(const std::string& script, const std::string& path) {
  TempFile script_file(".gp"), errors(".err");
  if (script_file.path.empty() || errors.path.empty())
    return "cannot create a temporary file in " + fs::temp_directory_path().string();
  std::ofstream(script_file.path) << script;
  FILE* pipe = ::popen(
      ("gnuplot " + shell_quoted(script_file.path) + " 2>" + shell_quoted(errors.path)).c_str(),
      "r");
  if (!pipe) return "cannot run gnuplot";
  std::string png;
  char buffer[65536];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0) png.append(buffer, n);
  if (::pclose(pipe) != 0 || png.empty()) return first_complaint(errors.path);
  write_file_atomically(path, png);
  return "";
}

}  // namespace sps
