// The validation split: md5 of "{seed}:{id}", first 8 bytes little-endian, below
// floor(val_fraction · 2^64). Expected digests come from `printf '42:doc-1' | md5sum`.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

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

// The paper's rule: the first 8 bytes read little-endian, seed 42 by default (its
// val_split_seed is never set), val_fraction 0.0005. Values from Python:
//   int.from_bytes(hashlib.md5(b"42:doc-1").digest()[:8], "little")
TEST(Split, HashIsTheDigestPrefixLittleEndian) {
  EXPECT_EQ(split_hash(42, "doc-1"), 4784988003698969646ull);  // 0x4267b13cc6fb8c2e
  EXPECT_EQ(split_hash(42, "doc-2"), 14779618119649011343ull);
  EXPECT_EQ(split_hash(42, "a.txt:0"), 7103024556322273341ull);
  EXPECT_EQ(split_hash(42, "<urn:uuid:7f3e2a10-5b6c-4d7e-8f90-a1b2c3d4e5f6>"), 15271572484075992324ull);
  EXPECT_EQ(split_hash(42, ""), 18295426983937667311ull);
  EXPECT_EQ(split_hash(1337, "doc-1"), 15728900783120436179ull);
}

TEST(Split, DefaultsAreThePapers) {
  EXPECT_EQ(kDefaultSplitSeed, 42u);
  EXPECT_EQ(kDefaultValFraction, 0.0005);
  const SplitRule rule(kDefaultSplitSeed, 0.3);
  EXPECT_TRUE(rule.is_validation("doc-1"));
  EXPECT_FALSE(rule.is_validation("doc-2"));
  EXPECT_FALSE(rule.is_validation("a.txt:0"));
  EXPECT_FALSE(rule.is_validation("<urn:uuid:7f3e2a10-5b6c-4d7e-8f90-a1b2c3d4e5f6>"));
}

TEST(Split, ThresholdIsTheFloorOfFractionTimesTwoToThe64) {
  // Python: int(0.0005 * 2**64) = 9223372036854776 (0.0005 in double is a hair above 0.0005).
  EXPECT_EQ(SplitRule(42, 0.0005).threshold, 9223372036854776ull);
  EXPECT_EQ(SplitRule(42, 0.3).threshold, 5534023222112865280ull);
  EXPECT_EQ(SplitRule(42, 0.5).threshold, 1ull << 63);
  EXPECT_EQ(SplitRule(42, 0.25).threshold, 1ull << 62);
  EXPECT_EQ(SplitRule(42, 0.0).threshold, 0ull);
  EXPECT_EQ(SplitRule(42, 1e-300).threshold, 0ull);  // int(1e-300 * 2**64) = 0
  EXPECT_EQ(SplitRule(42, std::ldexp(1.0, -64)).threshold, 1ull);
  EXPECT_EQ(SplitRule(42, std::ldexp(3.0, -65)).threshold, 1ull);  // 1.5 -> 1
  EXPECT_EQ(SplitRule(42, std::ldexp(3.0, -64) - std::ldexp(1.0, -100)).threshold, 2ull);
  EXPECT_TRUE(SplitRule(42, 1.0).all);
  EXPECT_THROW(SplitRule(42, -0.1), UserError);
  EXPECT_THROW(SplitRule(42, 1.5), UserError);
  EXPECT_THROW(SplitRule(42, std::nan("")), UserError);
}

TEST(Split, AHashAtTheThresholdIsTrain) {
  const SplitRule rule(42, 0.0005);
  EXPECT_TRUE(rule.is_validation_hash(0));
  EXPECT_TRUE(rule.is_validation_hash(rule.threshold - 1));
  EXPECT_FALSE(rule.is_validation_hash(rule.threshold));
  EXPECT_FALSE(rule.is_validation_hash(rule.threshold + 1));
  EXPECT_FALSE(SplitRule(42, 0.0).is_validation_hash(0));
  EXPECT_TRUE(SplitRule(42, 1.0).is_validation_hash(UINT64_MAX));
}

TEST(Split, KnownIdsFollowTheRule) {
  // Of doc-0 .. doc-20000, exactly these have a hash below int(0.0005 * 2**64) with seed 42
  // (found with Python's hashlib). Big-endian or seed 1337 would pick others.
  const SplitRule rule(42, 0.0005);
  std::vector<std::string> val;
  for (int i = 0; i <= 20000; ++i)
    if (rule.is_validation("doc-" + std::to_string(i))) val.push_back("doc-" + std::to_string(i));
  EXPECT_EQ(val, (std::vector<std::string>{"doc-7011", "doc-8641", "doc-10758", "doc-13687", "doc-18116"}));
  EXPECT_EQ(split_hash(42, "doc-13687"), 0x470c34d5ab569ull);
}

TEST(Split, FractionIsRespectedAndStable) {
  const SplitRule rule(42, 0.1);
  int val = 0;
  for (int i = 0; i < 20000; ++i) val += rule.is_validation("id-" + std::to_string(i));
  EXPECT_NEAR(val / 20000.0, 0.1, 0.01);
  // The same ids always land in the same split.
  for (int i = 0; i < 100; ++i)
    EXPECT_EQ(rule.is_validation("id-" + std::to_string(i)),
              SplitRule(42, 0.1).is_validation("id-" + std::to_string(i)));
  EXPECT_FALSE(SplitRule(42, 0.0).is_validation("doc-13687"));
  EXPECT_TRUE(SplitRule(42, 1.0).is_validation("doc-1"));
}

}  // namespace
}  // namespace sps
