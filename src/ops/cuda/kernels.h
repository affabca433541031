#pragma once
// The CUDA backend's versions of ops.h, on device pointers, fp32, with the contracts, shapes
// and accumulation rules of ops.h (one declaration per op there). Every reduction sums in a
// fixed order, with no atomics, so a call repeated on the same input gives the same bits.
// linear is in ops/cuda/linear.h (cuBLASLt).
#include <cstdint>

namespace sps::ops::cuda {

void rmsnorm_forward(float* out, float* rstd, const float* in, const float* gain, int64_t rows,
                     int64_t d, double eps);
void rmsnorm_backward(float* din, float* dgain, const float* dout, const float* in,
                      const float* gain, const float* rstd, int64_t rows, int64_t d);

void swiglu_forward(float* act, const float* gate_up, int64_t rows, int64_t F);
void swiglu_backward(float* dgate_up, const float* dact, const float* gate_up, int64_t rows,
                     int64_t F);

}  // namespace sps::ops::cuda
