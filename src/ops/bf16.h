#pragma once
// The rounding of bf16 precision (ops.h Precision::bf16) on the host: fp32 to the nearest
// bf16, ties to the even one. bf16 is fp32's upper 16 bits (sign, the 8 exponent bits, 7 of
// the 23 mantissa bits), so a number keeps its range: ±0 and ±∞ stay themselves, fp32
// subnormals round to bf16 subnormals or to a signed zero (nothing is flushed), values within
// half a step of the largest float round to ∞ as IEEE rounding does, and a NaN stays a NaN of
// the same sign with its quiet bit set. The GPU's copies (ops/cuda/elementwise.cuh) are this
// same function; tests/ops/test_bf16.cpp checks both against a separately written reference.
#include <bit>
#include <cstdint>

namespace sps::ops {

// x rounded to bf16, as its 16 bits.
inline uint16_t bf16_bits(float x) {
  const uint32_t u = std::bit_cast<uint32_t>(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40u);  // NaN: made quiet
  // Adding 0x7fff (0x8000 for an odd upper half) carries into the upper half exactly when the
  // lower half is past the midpoint (at it, for an odd upper half): round to nearest even.
  return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// The float a bf16 holds (exact).
inline float bf16_value(uint16_t bits) { return std::bit_cast<float>(uint32_t(bits) << 16); }

// x rounded to bf16, as a float.
inline float round_to_bf16(float x) { return bf16_value(bf16_bits(x)); }

}  // namespace sps::ops
