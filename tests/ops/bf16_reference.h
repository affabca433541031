#pragma once
// bf16 rounding written apart from the kernels' bit arithmetic (ops/bf16.h, the CUDA copies):
// x rounded to the nearest bf16 by comparing the two bf16 values around it in double, a tie
// to the even one. Past the largest bf16 the value one step above is 2^128, which IEEE
// rounding reaches as infinity. Not for NaN (callers check NaNs by their class). Below it,
// the inputs the tests sweep.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

namespace sps::testing {

inline uint16_t nearest_bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  const uint32_t below = u >> 16, above = below + 1;  // toward zero, and one step away
  if (std::isinf(x)) return uint16_t(below);
  const auto value = [](uint32_t bits) {
    if ((bits & 0x7f80u) == 0x7f80u)
      return std::copysign(std::ldexp(1.0, 128), double(bits & 0x8000u ? -1 : 1));
    const uint32_t w = bits << 16;
    float f;
    std::memcpy(&f, &w, 4);
    return double(f);
  };
  const double d_below = std::fabs(double(x) - value(below)),
               d_above = std::fabs(value(above) - double(x));
  if (d_below != d_above) return uint16_t(d_below < d_above ? below : above);
  return uint16_t(below % 2 == 0 ? below : above);
}

inline float float_of(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Every upper half (all signs, exponents and 7-bit mantissas, NaNs and infinities among
// them) with the lower halves that decide a rounding: 0, just past it, just below, at and just
// past the midpoint, and the largest.
inline std::vector<float> bf16_sweep() {
  std::vector<float> values;
  for (uint32_t upper = 0; upper < 0x10000u; ++upper)
    for (uint32_t lower : {0x0000u, 0x0001u, 0x7fffu, 0x8000u, 0x8001u, 0xffffu})
      values.push_back(float_of(upper << 16 | lower));
  return values;
}

// Whether bits are a quiet bf16 NaN of the given sign.
inline bool quiet_bf16_nan(uint16_t bits, bool negative) {
  return (bits & 0x7f80u) == 0x7f80u && (bits & 0x40u) != 0 && bool(bits & 0x8000u) == negative;
}

}  // namespace sps::testing
