#pragma once
// linear_forward / linear_backward of ops.h on the GPU, through cuBLASLt: device pointers,
// the same shapes, strides and accumulation rules. fp32 in and out with fp32 accumulation
// (CUBLAS_COMPUTE_32F, no TF32), so results match the CPU backend to rounding; the bf16
// path of training comes with the training step.
#include <cstdint>

namespace sps::ops::cuda {

void linear_forward(float* out, const float* in, const float* weight, int64_t rows,
                    int64_t in_dim, int64_t out_dim, bool accumulate, int64_t ld_in = 0,
                    int64_t ld_out = 0);

void linear_backward(float* din, float* dweight, const float* dout, const float* in,
                     const float* weight, int64_t rows, int64_t in_dim, int64_t out_dim,
                     bool accumulate_din, int64_t ld_in = 0, int64_t ld_dout = 0);

}  // namespace sps::ops::cuda
