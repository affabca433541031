#pragma once
// The 16-bit float formats: bf16 (fp32's upper half: sign, the 8 exponent bits, 7 of the 23
// mantissa bits) and IEEE fp16, for weights in files and packed weights, and bf16 as the
// operands of bf16 precision (ops.h Precision::bf16; the GPU's copies in ops/cuda are the same
// function bit for bit, tests/ops/test_bf16.cpp). Conversions from fp32 round to nearest, ties
// to even; nothing is flushed (subnormals round to subnormals or a signed zero); values past
// the largest finite round to infinity; a NaN stays a NaN of its sign with the quiet bit set.
// Conversions to fp32 are exact.
#include <bit>
#include <cmath>
#include <cstdint>

namespace sps {

inline uint16_t float_to_bf16(float f) {
  uint32_t bits = std::bit_cast<uint32_t>(f);
  if (std::isnan(f)) return uint16_t((bits >> 16) | 0x40);  // keep it a (quiet) NaN
  bits += 0x7FFF + ((bits >> 16) & 1);
  return uint16_t(bits >> 16);
}

inline float bf16_to_float(uint16_t h) { return std::bit_cast<float>(uint32_t(h) << 16); }

// f rounded to the nearest bf16, as an fp32 value.
inline float round_to_bf16(float f) { return bf16_to_float(float_to_bf16(f)); }

inline uint16_t float_to_f16(float f) {
  const uint32_t bits = std::bit_cast<uint32_t>(f);
  const uint16_t sign = uint16_t((bits >> 16) & 0x8000);
  const float a = std::fabs(f);
  if (std::isnan(f)) return sign | 0x7E00;
  if (a >= 65520.0f) return sign | 0x7C00;  // halfway past the largest, 65504: infinity
  if (a < 6.103515625e-05f)                 // subnormal: multiples of 2^-24
    return sign | uint16_t(std::nearbyint(a * 16777216.0f));
  int exponent;
  const float mantissa = std::frexp(a, &exponent);            // a = m · 2^e, m in [0.5, 1)
  uint32_t m = uint32_t(std::nearbyint(mantissa * 2048.0f));  // 11 bits with the leading one
  if (m == 2048) m = 1024, ++exponent;
  return sign | uint16_t(((exponent + 14) << 10) | (m & 0x3FF));
}

inline float f16_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000) << 16, exponent = (h >> 10) & 0x1F,
                 mantissa = h & 0x3FF;
  if (exponent == 0)  // zero or subnormal: mantissa · 2^-24, exact
    return std::bit_cast<float>(sign | std::bit_cast<uint32_t>(float(mantissa) * 0x1p-24f));
  if (exponent == 31) return std::bit_cast<float>(sign | 0x7F800000u | (mantissa << 13));
  return std::bit_cast<float>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

}  // namespace sps
