// The one progress reporter: plain lines at a bounded frequency off a terminal, one line
// redrawn in place on it, the rate and ETA text, and lines of their own that never mix with
// the live line. A fake clock makes every number exact.
#include "util/progress.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace sps {
namespace {

// Everything a reporter writes, and a clock the test moves.
class Capture {
 public:
  Capture() : stream_(::open_memstream(&buffer_, &size_)) {}
  ~Capture() {
    std::fclose(stream_);
    std::free(buffer_);
  }
  ProgressOptions options(std::string unit, ProgressMode mode) {
    ProgressOptions o;
    o.unit = std::move(unit);
    o.mode = mode;
    o.stream = stream_;
    o.clock = [this] { return seconds; };
    return o;
  }
  std::string text() {
    std::fflush(stream_);
    return std::string(buffer_, size_);
  }
  int64_t lines() {
    const std::string t = text();
    return std::count(t.begin(), t.end(), '\n');
  }
  std::FILE* stream() { return stream_; }
  double seconds = 1000;

 private:
  char* buffer_ = nullptr;
  size_t size_ = 0;
  std::FILE* stream_;
};

TEST(RateText, ThreeDigitsThenThousandsAndMillions) {
  EXPECT_EQ(rate_text(0), "0");
  EXPECT_EQ(rate_text(-1), "0");
  EXPECT_EQ(rate_text(0.0123), "0.0123");
  EXPECT_EQ(rate_text(1), "1.00");
  EXPECT_EQ(rate_text(4.123), "4.12");
  EXPECT_EQ(rate_text(41.23), "41.2");
  EXPECT_EQ(rate_text(812.4), "812");
  EXPECT_EQ(rate_text(999.7), "1.0k");
  EXPECT_EQ(rate_text(12345), "12.3k");
  EXPECT_EQ(rate_text(1.234e6), "1.23M");
}

TEST(Progress, PlainLinesCarryPercentRateElapsedAndEta) {
  Capture out;
  {
    ProgressReporter progress("val", out.options("windows", ProgressMode::plain));
    out.seconds += 29;
    progress.update(29, 100);
    EXPECT_EQ(out.text(), "");  // not yet plain_interval (30 s) since the start
    out.seconds += 1;
    progress.update(30, 100, "note");
    EXPECT_EQ(out.text(),
              "val: 30% 30/100 windows  1.00 windows/s  elapsed 30s  ETA 1m10s  note\n");
    out.seconds += 5;
    progress.update(60, 100);  // within the interval: nothing
    EXPECT_EQ(out.lines(), 1);
    out.seconds += 5;
    progress.update(100, 100);  // completion, after a line came: printed at once
    EXPECT_EQ(out.lines(), 2);
    progress.update(100, 100);  // and once
  }
  EXPECT_EQ(out.lines(), 2);
  EXPECT_NE(out.text().find("val: 100% 100/100 windows  2.50 windows/s  elapsed 40s  ETA 0s\n"),
            std::string::npos)
      << out.text();
}

TEST(Progress, PlainLineCountIsBoundedByTheInterval) {
  Capture out;
  {
    ProgressReporter progress("train", out.options("steps", ProgressMode::plain));
    for (int64_t step = 1; step <= 10000; ++step) {  // 1000 s, an update every 0.1 s
      out.seconds += 0.1;
      progress.update(step, 10000);
    }
  }
  EXPECT_LE(out.lines(), 1000 / 30 + 1);
  EXPECT_GE(out.lines(), 1000 / 30);
}

TEST(Progress, ShortRunPrintsNothingOffATerminal) {
  Capture out;
  {
    ProgressReporter progress("eval", out.options("items", ProgressMode::plain));
    for (int64_t i = 1; i <= 50; ++i) {
      out.seconds += 0.5;
      progress.update(i, 50);
    }
  }
  EXPECT_EQ(out.text(), "");
}

TEST(Progress, LiveLineIsRedrawnInPlaceWithABarAndCleared) {
  Capture out;
  {
    ProgressReporter progress("val", out.options("windows", ProgressMode::live));
    out.seconds += 2;
    progress.update(5, 20);
    EXPECT_EQ(out.text(), "\r\033[Kval [#####               ] 25% 5/20 windows  2.50 windows/s  "
                          "elapsed 2s  ETA 6s");
    out.seconds += 0.01;
    progress.update(6, 20);  // within live_interval: not redrawn
    EXPECT_EQ(out.text().find("6/20"), std::string::npos);
    out.seconds += 1;
    progress.update(20, 20);
    EXPECT_NE(out.text().find("[####################] 100% 20/20"), std::string::npos);
  }
  const std::string text = out.text();
  EXPECT_EQ(text.substr(text.size() - 4), "\r\033[K");  // finished: the line is gone
  EXPECT_EQ(text.find('\n'), std::string::npos);
}

TEST(Progress, LinesOfTheirOwnClearAndRedrawTheLiveLine) {
  Capture out;
  ProgressReporter progress("run", out.options("runs", ProgressMode::live));
  out.seconds += 10;
  progress.update(1, 4);
  const std::string before = out.text();
  progress.print(out.stream(), "[run 1 of 4] done");
  const std::string after = out.text().substr(before.size());
  EXPECT_EQ(after.rfind("\r\033[K[run 1 of 4] done\n\r\033[Krun [#####", 0), 0u) << after;
}

TEST(Progress, SkippedUnitsCountInDoneButNotInTheRate) {
  Capture out;
  {
    ProgressReporter progress("train", out.options("tokens", ProgressMode::plain));
    progress.skip(500);  // resumed at 500 tokens
    out.seconds += 50;
    progress.update(1000, 2000);
  }
  EXPECT_EQ(out.text(), "train: 50% 1000/2000 tokens  10.0 tokens/s  elapsed 50s  ETA 1m40s\n");
}

TEST(Progress, BytesInMegabytesAndLargeCountsScaled) {
  Capture out;
  ProgressOptions bytes = out.options("", ProgressMode::plain);
  bytes.bytes = true;
  {
    ProgressReporter progress("prepare", bytes);
    out.seconds += 40;
    progress.update(20000000, 80000000, "12 documents");
  }
  EXPECT_EQ(out.text(),
            "prepare: 25% 20.0/80.0 MB  0.500 MB/s  elapsed 40s  ETA 2m00s  12 documents\n");
  Capture counts;
  {
    ProgressReporter progress("train", counts.options("tokens", ProgressMode::plain));
    counts.seconds += 30;
    progress.update(65536, 131072);
  }
  EXPECT_EQ(counts.text(), "train: 50% 65.5k/131.1k tokens  2.2k tokens/s  elapsed 30s  ETA 30s\n");
}

TEST(Progress, UnknownTotalHasNoBarPercentOrEta) {
  Capture out;
  {
    ProgressReporter progress("count", out.options("files", ProgressMode::live));
    out.seconds += 4;
    progress.update(8, 0);
  }
  EXPECT_EQ(out.text(), "\r\033[Kcount 8 files  2.00 files/s  elapsed 4s\r\033[K");
}

TEST(Progress, OffPrintsNothingButLinesOfTheirOwn) {
  Capture out;
  {
    ProgressReporter progress("train", out.options("steps", ProgressMode::off));
    out.seconds += 100;
    progress.update(1, 2);
    progress.print(out.stream(), "hello");
  }
  EXPECT_EQ(out.text(), "hello\n");
}

}  // namespace
}  // namespace sps
