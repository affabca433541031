// UTF-8 repair: each maximal ill-formed subpart becomes one U+FFFD, as Python's
// bytes.decode("utf-8", errors="replace"). Expected values derived by hand from the
// Unicode "maximal subpart" rule (and checked against Node's TextDecoder in
// test_reference.cpp).
#include <gtest/gtest.h>

#include <string>

#include "tokenizer/utf8.h"

namespace sps {
namespace {

const std::string R = "\xEF\xBF\xBD";  // U+FFFD

struct Case {
  std::string in, out;
  size_t replacements;
};

TEST(Utf8Repair, ValidTextIsUntouched) {
  for (const std::string& s : {std::string(""), std::string("plain ascii"), std::string("a\0b", 3),
                              std::string("caf\xC3\xA9"), std::string("\xE4\xBD\xA0\xE5\xA5\xBD"),
                              std::string("\xF0\x9F\x98\x80"), std::string("\xEF\xBB\xBF" "bom"),
                              std::string("\xF4\x8F\xBF\xBF"), std::string("\xED\x9F\xBF")}) {
    EXPECT_EQ(find_invalid_utf8(s), std::string::npos) << s;
    std::string out;
    EXPECT_EQ(append_repaired_utf8(s, out), 0u);
    EXPECT_EQ(out, s);
  }
}

TEST(Utf8Repair, MaximalSubparts) {
  const Case cases[] = {
      {"\xFF", R, 1},
      {"\x80", R, 1},
      {"a\x80" "b", "a" + R + "b", 1},
      {"\xC3", R, 1},                          // truncated 2-byte
      {"\xC3" "A", R + "A", 1},
      {"\xC0\xAF", R + R, 2},                  // overlong lead: each byte alone
      {"\xC1\xBF", R + R, 2},
      {"\xE2\x82", R, 1},                      // truncated 3-byte: one subpart
      {"\xE2\x82" "x", R + "x", 1},
      {"\xE0\x80\x80", R + R + R, 3},          // overlong: E0 needs A0..BF
      {"\xE0\xA0", R, 1},
      {"\xED\xA0\x80", R + R + R, 3},          // surrogate: ED needs 80..9F
      {"\xED\x9F", R, 1},
      {"\xF0\x80\x80\x80", R + R + R + R, 4},  // F0 needs 90..BF
      {"\xF0\x9F\x98", R, 1},                  // truncated emoji
      {"\xF0\x9F\x98" "A", R + "A", 1},
      {"\xF0\x9F" "\xF0\x9F\x98\x80", R + "\xF0\x9F\x98\x80", 1},
      {"\xF4\x90\x80\x80", R + R + R + R, 4},  // above U+10FFFF
      {"\xF5\x80", R + R, 2},
      {"\xFE\xFF", R + R, 2},
      {"\xE2\x82\xAC\xE2\x82", "\xE2\x82\xAC" + R, 1},
      {"\x80\x80\x80", R + R + R, 3},
  };
  for (const Case& c : cases) {
    std::string out = "prefix:";
    EXPECT_EQ(append_repaired_utf8(c.in, out), c.replacements) << c.in;
    EXPECT_EQ(out, "prefix:" + c.out) << c.in;
    EXPECT_NE(find_invalid_utf8(c.in), std::string::npos);
    EXPECT_EQ(find_invalid_utf8(out), std::string::npos);
  }
}

TEST(Utf8Repair, FindsFirstInvalidByteAfterLongAscii) {
  std::string s(1000, 'a');
  s += "\xC3\xA9";
  s += std::string(37, 'b');
  EXPECT_EQ(find_invalid_utf8(s), std::string::npos);
  s += "\xFF";
  EXPECT_EQ(find_invalid_utf8(s), 1039u);
}

}  // namespace
}  // namespace sps
