// The rounding of bf16 precision (util/float_formats.h) against the separately written reference of
// bf16_reference.h, on every upper half with the lower halves around the midpoint and on the
// special values; and the GPU's copies (ops/cuda/elementwise.cuh, run by the emulator) bit
// for bit against the host's, NaNs included: one definition on both backends.
#include "cuda_emulator.h"  // first: the CUDA keywords the kernel source uses
#include "ops/cuda/elementwise.cuh"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "bf16_reference.h"
#include "util/float_formats.h"

namespace sps::testing {
namespace {

TEST(Bf16Rounding, MatchesTheReferenceOnEveryUpperHalf) {
  int64_t nans = 0;
  for (const float x : bf16_sweep()) {
    uint32_t u;
    std::memcpy(&u, &x, 4);
    const uint16_t got = float_to_bf16(x);
    if (std::isnan(x)) {
      ++nans;
      EXPECT_TRUE(quiet_bf16_nan(got, std::signbit(x))) << std::hex << u << " -> " << got;
      continue;
    }
    ASSERT_EQ(got, nearest_bf16(x)) << std::hex << u;
    EXPECT_EQ(round_to_bf16(x), bf16_to_float(got));
  }
  EXPECT_GT(nans, 0);
}

TEST(Bf16Rounding, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  const float denorm_min = std::numeric_limits<float>::denorm_min();
  const struct {
    float x;
    uint16_t bits;
  } cases[] = {
      {0.0f, 0x0000},
      {-0.0f, 0x8000},
      {inf, 0x7f80},
      {-inf, 0xff80},
      {1.0f, 0x3f80},
      {float_of(0x3f808000u), 0x3f80},  // a tie below an even upper half stays
      {float_of(0x3f818000u), 0x3f82},  // a tie below an odd one goes up to the even
      {float_of(0x3f808001u), 0x3f81},  // just past the midpoint goes up
      {float_of(0x3f7fffffu), 0x3f80},  // rounds up into the next power of two
      {float_of(0xbf818000u), 0xbf82},  // negative values alike
      {denorm_min, 0x0000},             // the smallest subnormal rounds to +0
      {-denorm_min, 0x8000},            // and its negative to −0
      {float_of(0x00008000u), 0x0000},  // a tie at the bottom: to the even zero
      {float_of(0x00018000u), 0x0002},  // a subnormal tie to the even subnormal
      {float_of(0x007fffffu), 0x0080},  // the largest subnormal up to the smallest normal
      {float_of(0x00400000u), 0x0040},  // a subnormal bf16 holds exactly
      {std::numeric_limits<float>::max(), 0x7f80},  // past the largest bf16: to infinity
      {float_of(0x7f7f7fffu), 0x7f7f},              // just below the midpoint: the largest bf16
      {float_of(0xff7f8000u), 0xff80},              // a tie above the largest (odd) bf16: to −∞
  };
  for (const auto& c : cases) {
    EXPECT_EQ(float_to_bf16(c.x), c.bits) << c.x;
    EXPECT_EQ(nearest_bf16(c.x), c.bits) << c.x;  // the reference agrees with the table
  }
  EXPECT_EQ(std::signbit(round_to_bf16(-0.0f)), true);
  for (const uint32_t nan : {0x7fc00000u, 0x7f800001u, 0xffc00001u, 0xff800100u, 0x7fffffffu}) {
    const float x = float_of(nan);
    EXPECT_TRUE(quiet_bf16_nan(float_to_bf16(x), nan >> 31)) << std::hex << nan;
    EXPECT_TRUE(std::isnan(round_to_bf16(x)));
  }
  // A signalling NaN whose payload sits only in the low half still comes out a NaN.
  EXPECT_EQ(float_to_bf16(float_of(0x7f800001u)), 0x7fc0);
}

// The GPU's bf16 operand copies are the host's function: the same bits for every input.
TEST(Bf16Rounding, GpuCopiesAreTheSameFunction) {
  const std::vector<float> sweep = bf16_sweep();
  const int64_t n = int64_t(sweep.size());
  std::vector<uint16_t> gpu(n, 0);
  cuda_emulator::launch(dim3{16, 1, 1}, dim3{64, 1, 1}, 0,
                        ops::cuda::elementwise::round_bf16_kernel<uint16_t>, gpu.data(),
                        static_cast<const float*>(sweep.data()), n, n, n);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(gpu[i], float_to_bf16(sweep[i])) << i;
}

}  // namespace
}  // namespace sps::testing
