#pragma once
// linear_forward / linear_backward of ops.h on the GPU, through cuBLASLt: device pointers,
// the same shapes, strides and accumulation rules, fp32 in and out. The operands are read as
// fp32 (CUBLAS_COMPUTE_32F, no TF32: results match the CPU backend to rounding) or rounded
// to bf16 first for the tensor cores (the reference's bf16 autocast); sums are fp32 either way.
#include <cstdint>
#include <vector>

#include "ops/device.h"

namespace sps::ops::cuda {

void linear_forward(float* out, const float* in, const float* weight, int64_t rows,
                    int64_t in_dim, int64_t out_dim, bool accumulate, int64_t ld_in = 0,
                    int64_t ld_out = 0, Precision operands = Precision::fp32);

void linear_backward(float* din, float* dweight, const float* dout, const float* in,
                     const float* weight, int64_t rows, int64_t in_dim, int64_t out_dim,
                     bool accumulate_din, int64_t ld_in = 0, int64_t ld_dout = 0,
                     Precision operands = Precision::fp32);

// Backend::time_gemm: `repeats` products out[n, n] = a · bᵀ (linear_forward's GEMM on
// `operands`), each timed to its end. bf16 copies of a and b are made once, before the first,
// so only the GEMMs are timed (linear_forward rounds both operands inside every call).
std::vector<double> time_gemm(float* out, const float* a, const float* b, int64_t n, int repeats,
                              Precision operands);

}  // namespace sps::ops::cuda
