// bf16 and IEEE half conversions (util/float_formats.h) against float_reference.h, written in
// double arithmetic from the formats' definitions: ties to even, ±0, infinities, NaN,
// subnormals, overflow; the conversions back exact for every 16-bit pattern.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>

#include "float_reference.h"
#include "util/float_formats.h"

namespace sps {
namespace {

using testing::reference_bf16;
using testing::reference_f16;

float from_bits(uint32_t bits) { return std::bit_cast<float>(bits); }

// Equal values, or both NaN; ±0 told apart.
void expect_same(double got, double expected, uint32_t input) {
  if (std::isnan(expected)) {
    EXPECT_TRUE(std::isnan(got)) << std::hex << input;
    return;
  }
  EXPECT_EQ(got, expected) << std::hex << "input bits 0x" << input;
  EXPECT_EQ(std::signbit(got), std::signbit(expected)) << std::hex << input;
}

TEST(FloatFormats, Bf16SpecialValuesAndTies) {
  EXPECT_EQ(float_to_bf16(0.0f), 0x0000);
  EXPECT_EQ(float_to_bf16(-0.0f), 0x8000);
  EXPECT_EQ(float_to_bf16(INFINITY), 0x7F80);
  EXPECT_EQ(float_to_bf16(-INFINITY), 0xFF80);
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(NAN))));
  // A NaN whose payload sits in the low half only must not become infinity.
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(from_bits(0x7F800001)))));
  EXPECT_EQ(float_to_bf16(from_bits(0x3F808000)), 0x3F80);  // halfway, even below
  EXPECT_EQ(float_to_bf16(from_bits(0x3F818000)), 0x3F82);  // halfway, even above
  EXPECT_EQ(float_to_bf16(from_bits(0x3F808001)), 0x3F81);  // past halfway
  EXPECT_EQ(float_to_bf16(from_bits(0x00008000)), 0x0000);  // subnormal tie to even zero
  EXPECT_EQ(float_to_bf16(from_bits(0x00018000)), 0x0002);  // subnormal tie up to even
  EXPECT_EQ(float_to_bf16(from_bits(0x007FFFFF)), 0x0080);  // rounds up into the normals
  EXPECT_EQ(float_to_bf16(from_bits(0x7F7FFFFF)), 0x7F80);  // past the largest: infinity
  EXPECT_EQ(float_to_bf16(from_bits(0x7F7F7FFF)), 0x7F7F);  // the largest stays
}

TEST(FloatFormats, Bf16EqualsTheReferenceForRandomAndSubnormalFloats) {
  std::mt19937 rng(1);
  for (int i = 0; i < 400000; ++i) {
    uint32_t bits = rng();
    if (i % 4 == 0) bits &= 0x807FFFFF;                 // subnormals
    if (i % 4 == 1) bits = (bits & 0xFFFF0000) | 0x8000;  // exact ties
    const float x = from_bits(bits);
    expect_same(bf16_to_float(float_to_bf16(x)), reference_bf16(x), bits);
    expect_same(round_to_bf16(x), reference_bf16(x), bits);
  }
}

TEST(FloatFormats, HalfToFloatIsExactForEveryPattern) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const int exponent = (h >> 10) & 0x1F, mantissa = h & 0x3FF;
    const double sign = (h & 0x8000) ? -1 : 1;
    double expected;
    if (exponent == 31)
      expected = mantissa ? NAN : sign * INFINITY;
    else if (exponent == 0)
      expected = sign * std::ldexp(double(mantissa), -24);
    else
      expected = sign * std::ldexp(double(1024 + mantissa), exponent - 25);
    expect_same(f16_to_float(uint16_t(h)), expected, h);
    if (exponent != 31) {
      EXPECT_EQ(float_to_f16(f16_to_float(uint16_t(h))), h);  // round trip
    }
  }
}

TEST(FloatFormats, FloatToHalfEqualsTheReference) {
  EXPECT_EQ(float_to_f16(-0.0f), 0x8000);
  EXPECT_EQ(float_to_f16(65504.0f), 0x7BFF);
  EXPECT_EQ(float_to_f16(65519.99f), 0x7BFF);
  EXPECT_EQ(float_to_f16(65520.0f), 0x7C00);  // the tie past the largest goes to infinity
  EXPECT_EQ(float_to_f16(-1e9f), 0xFC00);
  EXPECT_TRUE(std::isnan(f16_to_float(float_to_f16(NAN))));
  EXPECT_EQ(float_to_f16(std::ldexp(1.0f, -25)), 0x0000);       // tie: even zero
  EXPECT_EQ(float_to_f16(std::ldexp(3.0f, -25)), 0x0002);       // tie: even 2·2^-24
  EXPECT_EQ(float_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);  // tie: even 1
  std::mt19937 rng(2);
  std::uniform_real_distribution<double> exponent(-27, 17);
  for (int i = 0; i < 200000; ++i) {
    const float x = float((rng() & 1 ? -1 : 1) * std::exp2(exponent(rng)));
    const uint32_t bits = std::bit_cast<uint32_t>(x);
    expect_same(f16_to_float(float_to_f16(x)), reference_f16(x), bits);
  }
}

}  // namespace
}  // namespace sps
