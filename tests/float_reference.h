#pragma once
// The 16-bit float formats written from their definitions, in double arithmetic, apart from
// the library's bit manipulations (util/float_formats.h): the value a float becomes once
// rounded to nearest, ties to even, with `bits` significant bits and normal exponents from
// `min_exponent` (subnormals below keep that exponent's spacing). bf16: 8 bits, exponents of
// fp32; IEEE half: 11 bits, minimum normal 2^-14, largest 65504. And GGUF's Q8_0.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

namespace sps::testing {

inline double round_to_format(double x, int bits, int min_exponent, double largest) {
  if (x == 0 || !std::isfinite(x)) return x;
  int exponent;
  std::frexp(x, &exponent);  // |x| in [2^(e-1), 2^e)
  const double ulp = std::ldexp(1.0, std::max(exponent, min_exponent + 1) - bits);
  const double q = x / ulp, lower = std::floor(q);
  const bool up = q - lower > 0.5 || (q - lower == 0.5 && std::fmod(lower, 2) != 0);
  const double rounded = std::copysign((up ? lower + 1 : lower) * ulp, x);
  return std::fabs(rounded) > largest ? std::copysign(INFINITY, x) : rounded;
}

inline double reference_bf16(float x) {
  return round_to_format(x, 8, -126, std::ldexp(255.0, 127 - 7));  // 0x7F7F
}

inline double reference_f16(float x) { return round_to_format(x, 11, -14, 65504.0); }

// A row's values as Q8_0 dequantizes them: d = max|x| / 127 (fp32), q = round(x · (1/d)),
// half away from zero, the value q · f16(d).
inline std::vector<double> reference_q8_row(const float* x, int64_t n) {
  std::vector<double> out(n);
  for (int64_t k0 = 0; k0 < n; k0 += 32) {
    const int64_t end = std::min(n, k0 + 32);
    float amax = 0;
    for (int64_t k = k0; k < end; ++k) amax = std::max(amax, std::fabs(x[k]));
    const float d = amax / 127.0f, inverse = d != 0 ? 1.0f / d : 0.0f;
    for (int64_t k = k0; k < end; ++k) {
      const float scaled = x[k] * inverse;
      const double q = scaled < 0 ? -std::floor(-double(scaled) + 0.5) : std::floor(double(scaled) + 0.5);
      out[k] = q * reference_f16(d);
    }
  }
  return out;
}

}  // namespace sps::testing
