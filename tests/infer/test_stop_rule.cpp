// The one stop rule of the generator and the server (infer/stop_rule.h), token by token.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "infer/infer_fixtures.h"
#include "infer/stop_rule.h"

namespace sps::testing {
namespace {

constexpr int32_t kEos = 256;  // byte_level_tokenizer's ids are the bytes

// Pushes `tokens` until the row stops; returns the concatenated text it released.
std::string push_all(RowStop& stop, const std::vector<int32_t>& tokens) {
  std::string text;
  for (int32_t t : tokens) {
    if (stop.stopped()) break;
    text += stop.push(t);
  }
  return text;
}

TEST(RowStop, EosEndsTheRowWithoutText) {
  RowStop stop({.eos_token_id = kEos, .max_new_tokens = 10}, &byte_level_tokenizer());
  EXPECT_EQ(push_all(stop, {'a', 'b', kEos, 'c'}), "ab");
  EXPECT_TRUE(stop.stopped());
  EXPECT_EQ(stop.reason(), StopReason::eos);
  EXPECT_EQ(stop.generated(), 3);
  EXPECT_EQ(stop.text(), "ab");
}

TEST(RowStop, WithoutStopAtEosTheRowGoesOnToItsLength) {
  RowStop stop({.eos_token_id = kEos, .stop_at_eos = false, .max_new_tokens = 3}, nullptr);
  EXPECT_EQ(push_all(stop, {kEos, kEos, kEos, kEos}), "");
  EXPECT_EQ(stop.reason(), StopReason::length);
  EXPECT_EQ(stop.generated(), 3);
}

TEST(RowStop, StopStringCutsTheTextAndWinsOverTheLength) {
  RowStop stop({.eos_token_id = kEos, .max_new_tokens = 4, .stop_strings = {"cd"}},
               &byte_level_tokenizer());
  // 'c' is held back (it may start "cd"); the fourth token completes the stop string, which
  // would also have been the length.
  EXPECT_EQ(stop.push('a'), "a");
  EXPECT_EQ(stop.push('b'), "b");
  EXPECT_EQ(stop.push('c'), "");
  EXPECT_EQ(stop.push('d'), "");
  EXPECT_EQ(stop.reason(), StopReason::stop_string);
  EXPECT_EQ(stop.text(), "ab");
}

TEST(RowStop, TheLengthReleasesTheHeldBackText) {
  RowStop stop({.eos_token_id = kEos, .max_new_tokens = 2, .stop_strings = {"cd"}},
               &byte_level_tokenizer());
  EXPECT_EQ(stop.push('a'), "a");
  EXPECT_EQ(stop.push('c'), "c");  // held back, then released as the row ends
  EXPECT_EQ(stop.reason(), StopReason::length);
  EXPECT_EQ(stop.text(), "ac");
}

TEST(RowStop, ReasonNames) {
  EXPECT_STREQ(stop_reason_name(StopReason::eos), "eos");
  EXPECT_STREQ(stop_reason_name(StopReason::stop_string), "stop");
  EXPECT_STREQ(stop_reason_name(StopReason::length), "length");
}

}  // namespace
}  // namespace sps::testing
