#include "util/progress.h"

#include <fmt/format.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "util/duration_text.h"

namespace sps {

namespace {

constexpr int kBarWidth = 20;
constexpr const char* kClearLine = "\r\033[K";

// How done and total are written: exact below 100000, then in k, M or G (by the larger of the
// two, so both read in the same scale); bytes always in MB.
struct Scale {
  double divisor;
  const char* suffix;
  int decimals;
};

Scale scale_for(int64_t largest, bool bytes) {
  if (bytes) return {1e6, "", 1};
  if (largest < 100000) return {1, "", 0};
  if (largest < 1000000) return {1e3, "k", 1};
  if (largest < 1000000000) return {1e6, "M", 2};
  return {1e9, "G", 2};
}

std::string amount(int64_t n, const Scale& s) {
  return fmt::format("{:.{}f}{}", double(n) / s.divisor, s.decimals, s.suffix);
}

// The terminal's width in columns, 0 when unknown.
int columns_of(std::FILE* stream) {
  winsize size{};
  if (::ioctl(::fileno(stream), TIOCGWINSZ, &size) != 0) return 0;
  return size.ws_col;
}

// The first `columns` characters of UTF-8 text (one column each, close enough for a status
// line), so the line never wraps and "\r" always goes back to its start.
std::string fit(const std::string& text, int columns) {
  if (columns <= 0) return text;
  int seen = 0;
  for (size_t i = 0; i < text.size(); ++i)
    if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80 && seen++ == columns)
      return text.substr(0, i);
  return text;
}

}  // namespace

std::string rate_text(double per_second) {
  if (!(per_second > 0) || !std::isfinite(per_second)) return "0";
  if (per_second >= 999.5e3) return fmt::format("{:.2f}M", per_second / 1e6);
  if (per_second >= 999.5) return fmt::format("{:.1f}k", per_second / 1e3);
  if (per_second >= 99.95) return fmt::format("{:.0f}", per_second);
  return fmt::format("{:#.3g}", per_second);  // three digits: 1.00, 41.2, 0.0123
}

ProgressReporter::ProgressReporter(std::string label, ProgressOptions options)
    : label_(std::move(label)), options_(std::move(options)), mode_(options_.mode) {
  if (mode_ == ProgressMode::automatic)
    mode_ = ::isatty(::fileno(options_.stream)) ? ProgressMode::live : ProgressMode::plain;
  start_ = last_plain_ = now();
}

double ProgressReporter::now() const {
  if (options_.clock) return options_.clock();
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string ProgressReporter::text(bool bar) const {
  const Scale scale = scale_for(std::max(done_, total_), options_.bytes);
  const std::string unit = options_.bytes ? "MB" : options_.unit;
  std::string s = label_ + (bar ? "" : ":");
  if (total_ > 0) {
    const double fraction = std::clamp(double(done_) / double(total_), 0.0, 1.0);
    if (bar) {
      const int fill = int(fraction * kBarWidth);
      s += " [" + std::string(size_t(fill), '#') + std::string(size_t(kBarWidth - fill), ' ') + "]";
    }
    s += fmt::format(" {}%", int(100 * fraction));
  }
  s += fmt::format(" {}", amount(done_, scale));  // (" " + string trips GCC 12's -Wrestrict)
  if (total_ > 0) s += fmt::format("/{}", amount(total_, scale));
  if (!unit.empty()) s += " " + unit;
  const double elapsed = now() - start_;
  const double rate = elapsed > 0 ? double(done_ - skipped_) / elapsed : 0;
  const double shown_rate = options_.bytes ? rate / 1e6 : rate;
  s += "  " + rate_text(shown_rate) + (unit.empty() ? "/s" : " " + unit + "/s");
  s += "  elapsed " + duration_text(elapsed);
  if (total_ > 0) {
    const double left = done_ >= total_ ? 0.0 : rate > 0 ? double(total_ - done_) / rate : NAN;
    s += "  ETA " + duration_text(left);  // "?" before any rate
  }
  if (!detail_.empty()) s += "  " + detail_;
  return s;
}

void ProgressReporter::draw_live() {
  const int columns = columns_of(options_.stream);
  std::fputs((kClearLine + fit(text(true), columns - 1)).c_str(), options_.stream);
  std::fflush(options_.stream);
  shown_ = true;
}

void ProgressReporter::update(int64_t done, int64_t total, const std::string& detail) {
  done_ = done;
  total_ = total;
  detail_ = detail;
  if (mode_ == ProgressMode::live) {
    const double t = now();
    if (t - last_draw_ >= options_.live_interval || (total > 0 && done >= total)) {
      draw_live();
      last_draw_ = t;
    }
  } else if (mode_ == ProgressMode::plain) {
    const double t = now();
    const bool complete = total > 0 && done >= total;
    if (t - last_plain_ >= options_.plain_interval ||
        (complete && plain_lines_ > 0 && !completion_printed_)) {
      std::fputs((text(false) + "\n").c_str(), options_.stream);
      std::fflush(options_.stream);
      last_plain_ = t;
      ++plain_lines_;
      completion_printed_ = complete;
    }
  }
}

void ProgressReporter::print(std::FILE* to, const std::string& line) {
  if (shown_) std::fputs(kClearLine, options_.stream), std::fflush(options_.stream);
  std::fputs((line + "\n").c_str(), to);
  std::fflush(to);
  if (shown_) draw_live();
}

void ProgressReporter::finish() {
  if (shown_) {
    std::fputs(kClearLine, options_.stream);
    std::fflush(options_.stream);
    shown_ = false;
  }
}

}  // namespace sps
