#pragma once
// bf16 rounding apart from the kernels' bit arithmetic (util/float_formats.h, the CUDA
// copies): the nearest bf16 by the definition in float_reference.h, and the inputs the tests
// sweep.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "float_reference.h"

namespace sps::testing {

// The bits of x rounded to the nearest bf16 by float_reference.h's definition (not for NaN).
inline uint16_t nearest_bf16(float x) {
  const float rounded = float(reference_bf16(x));
  uint32_t u;
  std::memcpy(&u, &rounded, 4);
  return uint16_t(u >> 16);
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
