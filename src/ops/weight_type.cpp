#include "ops/weight_type.h"

#include <cmath>

#include "util/error.h"
#include "util/float_formats.h"

namespace sps::ops {

WeightType parse_weight_type(const std::string& text, const std::string& what) {
  if (text == "f32") return WeightType::f32;
  if (text == "bf16") return WeightType::bf16;
  if (text == "int8") return WeightType::int8;
  fail("{}: '{}' is not a weight type; expected f32, bf16 or int8", what, text);
}

const char* weight_type_name(WeightType type) {
  switch (type) {
    case WeightType::f32: return "f32";
    case WeightType::bf16: return "bf16";
    case WeightType::int8: return "int8";
  }
  return "?";
}

double bytes_per_weight(WeightType type) {
  switch (type) {
    case WeightType::f32: return 4;
    case WeightType::bf16: return 2;
    case WeightType::int8: return 1 + 2.0 / double(kQ8Block);
  }
  return 4;
}

uint16_t quantize_q8_block(const float* x, int64_t n, int8_t* q, const std::string& what) {
  float amax = 0;
  for (int64_t i = 0; i < n; ++i) amax = std::fmax(amax, std::fabs(x[i]));
  const float d = amax / 127.0f;
  const float id = d != 0 ? 1.0f / d : 0.0f;
  const uint16_t scale = float_to_f16(d);
  if (std::isinf(f16_to_float(scale)))
    fail("{}: a block of weights reaches {}, beyond what int8 with an fp16 scale holds", what,
         amax);
  for (int64_t i = 0; i < n; ++i) q[i] = int8_t(std::round(x[i] * id));
  return scale;
}

}  // namespace sps::ops
