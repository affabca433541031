#pragma once
// The progress of long-running commands (train, data prepare, tokenizer train, eval, analyze,
// experiment run), on stderr and alike for all of them. On a terminal one line is redrawn in
// place, with a bar:
//   val [######              ] 30% 120/400 windows  40.0 windows/s  elapsed 3s  ETA 7s
// Elsewhere (a log file, a pipe) plain lines are printed instead, at most one per
// `plain_interval` seconds and one at completion when any came before, so a log holds a
// bounded number of them and a short command prints none:
//   val: 30% 120/400 windows  4.00 windows/s  elapsed 30s  ETA 1m10s
// The areas report through a ProgressCallback; the commands own the reporter.
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>

namespace sps {

// (done, total) as a computation advances; total ≤ 0 when it is not known.
using ProgressCallback = std::function<void(int64_t done, int64_t total)>;

enum class ProgressMode {
  automatic,  // live when stderr is a terminal, else plain
  live,       // one line redrawn in place
  plain,      // lines at a bounded frequency
  off,        // nothing (--quiet, or not the process that reports)
};

struct ProgressOptions {
  std::string unit;    // of done and total: "windows", "tokens", "runs"
  bool bytes = false;  // done and total are bytes: shown in MB, the rate in MB/s
  ProgressMode mode = ProgressMode::automatic;
  double plain_interval = 30;  // seconds between plain lines
  double live_interval = 0.1;  // seconds between redraws of the live line
  std::FILE* stream = stderr;
  std::function<double()> clock;  // seconds; a steady clock when empty (tests pass theirs)
};

// Progress counted in `unit`s, nothing shown when `quiet` (a command's --quiet).
inline ProgressOptions progress_in(std::string unit, bool quiet = false) {
  ProgressOptions options;
  options.unit = std::move(unit);
  if (quiet) options.mode = ProgressMode::off;
  return options;
}

// Progress counted in bytes, shown in MB.
inline ProgressOptions progress_in_bytes() {
  ProgressOptions options;
  options.bytes = true;
  return options;
}

// Not thread-safe: callers on several threads serialise their calls.
class ProgressReporter {
 public:
  explicit ProgressReporter(std::string label, ProgressOptions options = {});
  ~ProgressReporter() { finish(); }
  ProgressReporter(const ProgressReporter&) = delete;
  ProgressReporter& operator=(const ProgressReporter&) = delete;

  // `done` of `total` units (total ≤ 0: unknown); `detail` goes at the end of the line.
  void update(int64_t done, int64_t total, const std::string& detail = "");
  // n of the units done came without work (resumed, already done): they count in `done`,
  // not in the rate or the ETA.
  void skip(int64_t n) { skipped_ += n; }
  // A line of its own on `to` (stdout or stderr): a live line is cleared first and drawn
  // again after it, so the two never mix.
  void print(std::FILE* to, const std::string& line);
  // The end: a live line is cleared (before other output, or an error message).
  void finish();
  // update() as a callback for an area's progress parameter.
  ProgressCallback callback() {
    return [this](int64_t done, int64_t total) { update(done, total); };
  }

  ProgressMode mode() const { return mode_; }

 private:
  std::string text(bool bar) const;
  void draw_live();
  double now() const;

  std::string label_;
  ProgressOptions options_;
  ProgressMode mode_;
  double start_;
  int64_t done_ = 0, total_ = 0, skipped_ = 0;
  std::string detail_;
  bool shown_ = false;         // a live line is on the terminal
  double last_draw_ = -1e300;  // when the live line was last drawn
  double last_plain_;          // when the last plain line was printed (or the start)
  int64_t plain_lines_ = 0;
  bool completion_printed_ = false;
};

// A rate in progress lines: "0.0123", "1.00", "41.2", "812", "12.3k", "1.23M".
std::string rate_text(double per_second);

}  // namespace sps
