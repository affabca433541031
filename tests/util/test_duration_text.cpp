// The one duration format of progress lines (util/progress.h, for every long-running command).
#include <gtest/gtest.h>

#include <cmath>

#include "util/duration_text.h"

namespace sps {
namespace {

TEST(DurationText, SecondsMinutesHoursAndNonsense) {
  EXPECT_EQ(duration_text(0), "0s");
  EXPECT_EQ(duration_text(59.4), "59s");
  EXPECT_EQ(duration_text(59.6), "1m00s");  // rounded to the second first
  EXPECT_EQ(duration_text(187), "3m07s");
  EXPECT_EQ(duration_text(3599.6), "1h00m");
  EXPECT_EQ(duration_text(7500), "2h05m");
  EXPECT_EQ(duration_text(-1), "?");
  EXPECT_EQ(duration_text(NAN), "?");
  EXPECT_EQ(duration_text(INFINITY), "?");
}

}  // namespace
}  // namespace sps
