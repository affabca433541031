// The validation split: md5 of "{seed}:{id}", first 8 bytes big-endian, below
// val_fraction · 2^64. Expected digests come from `printf '1337:doc-1' | md5sum`.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "data/split.h"
#include "util/error.h"

namespace sps {
namespace {

std::string hex(const Md5Digest& digest) {
  std::string out;
  char buffer[3];
  for (uint8_t b : digest) {
    std::snprintf(buffer, sizeof buffer, "%02x", b);
    out += buffer;
  }
  return out;
}

TEST(Split, Md5KnownDigests) {
  EXPECT_EQ(hex(md5("")), "d41d8cd98f00b204e9800998ecf8427e");  // RFC 1321
  EXPECT_EQ(hex(md5("abc")), "900150983cd24fb0d6963f7d28e17f72");
  EXPECT_EQ(hex(md5("1337:doc-1")), "d3cb414ded4748daef22ef5dee433e2e");
  EXPECT_EQ(hex(md5("42:doc-1")), "2e8cfbc63cb1674227bde0aae23d9002");
}

TEST(Split, HashIsTheDigestPrefixBigEndian) {
  EXPECT_EQ(split_hash(1337, "doc-1"), 0xd3cb414ded4748daull);
  EXPECT_EQ(split_hash(1337, "doc-2"), 0x30ec6c04aff1bdd1ull);
  EXPECT_EQ(split_hash(42, "doc-1"), 0x2e8cfbc63cb16742ull);
  EXPECT_EQ(split_hash(1337, ""), 0xd04e1902b8e806c9ull);
  EXPECT_EQ(split_hash(1337, "a.txt:0"), 0xf5fc60207e4951a6ull);
}

TEST(Split, ThresholdIsExact) {
  // 0.0005 · 2^64 = 9223372036854775.808 -> h < 9223372036854776.
  EXPECT_EQ(SplitRule(1337, 0.0005).threshold, 9223372036854776ull);
  EXPECT_EQ(SplitRule(1337, 0.5).threshold, 1ull << 63);
  EXPECT_EQ(SplitRule(1337, 0.25).threshold, 1ull << 62);
  EXPECT_EQ(SplitRule(1337, 0.0).threshold, 0ull);
  EXPECT_EQ(SplitRule(1337, 1e-300).threshold, 1ull);  // only h = 0
  EXPECT_EQ(SplitRule(1337, std::ldexp(1.0, -64)).threshold, 1ull);
  EXPECT_EQ(SplitRule(1337, std::ldexp(3.0, -65)).threshold, 2ull);  // 1.5 -> h < 2
  EXPECT_TRUE(SplitRule(1337, 1.0).all);
  EXPECT_THROW(SplitRule(1337, -0.1), UserError);
  EXPECT_THROW(SplitRule(1337, 1.5), UserError);
  EXPECT_THROW(SplitRule(1337, std::nan("")), UserError);
}

TEST(Split, KnownIdsFollowTheRule) {
  // Of doc-0 .. doc-6000, exactly these have md5("1337:doc-N") below 0x0020c49ba5e353f8
  // (found with md5sum).
  const SplitRule rule(1337, 0.0005);
  std::vector<std::string> val;
  for (int i = 0; i <= 6000; ++i)
    if (rule.is_validation("doc-" + std::to_string(i))) val.push_back("doc-" + std::to_string(i));
  EXPECT_EQ(val, (std::vector<std::string>{"doc-1106", "doc-2486", "doc-3463", "doc-4065", "doc-5947"}));
  EXPECT_EQ(split_hash(1337, "doc-3463"), 0x0002ed0a30f41161ull);
  // Another seed picks other documents.
  EXPECT_FALSE(SplitRule(7, 0.0005).is_validation("doc-3463") &&
               SplitRule(7, 0.0005).is_validation("doc-1106") &&
               SplitRule(7, 0.0005).is_validation("doc-2486"));
}

TEST(Split, FractionIsRespectedAndStable) {
  const SplitRule rule(1337, 0.1);
  int val = 0;
  for (int i = 0; i < 20000; ++i) val += rule.is_validation("id-" + std::to_string(i));
  EXPECT_NEAR(val / 20000.0, 0.1, 0.01);
  // The same ids always land in the same split.
  for (int i = 0; i < 100; ++i)
    EXPECT_EQ(rule.is_validation("id-" + std::to_string(i)),
              SplitRule(1337, 0.1).is_validation("id-" + std::to_string(i)));
  EXPECT_FALSE(SplitRule(1337, 0.0).is_validation("doc-3463"));
  EXPECT_TRUE(SplitRule(1337, 1.0).is_validation("doc-1"));
}

}  // namespace
}  // namespace sps
