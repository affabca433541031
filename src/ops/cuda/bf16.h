#pragma once
// bf16 copies of fp32 matrices for the GEMMs that run on bf16 operands (linear.h).
#include <cstdint>

namespace sps::ops::cuda {

// out[r·cols + c] = in[r·ld + c] rounded to the nearest bf16 (ties to even; NaN stays NaN):
// a dense [rows, cols] bf16 copy of a strided fp32 matrix, on the current device.
void round_to_bf16(void* out, const float* in, int64_t rows, int64_t cols, int64_t ld);

}  // namespace sps::ops::cuda
