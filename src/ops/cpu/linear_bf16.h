#pragma once
// linear_forward / linear_backward of ops.h in bf16 precision (ops.h Precision::bf16) on the
// CPU: each of the three GEMMs takes its operands rounded to bf16 (util/float_formats.h) and sums the
// products in fp32. Two paths compute it:
// - onednn: oneDNN's bf16 matmul (onednn_matmul.h) on bf16 operands, the weights reordered
//   into its layout once per change;
// - rounded_sgemm: the operands rounded to bf16 into fp32 arrays and multiplied by the fp32
//   GEMM (linear.cpp, BLAS). A product of two bf16 values is exact in fp32, so both paths give
//   the same numbers up to the order of the sums.
// A process takes one, chosen on first use by measured speed (oneDNN 2.6's bf16 on AVX512-BF16
// without AMX is slower than fp32 sgemm; on AVX2 it has none at all).
#include <cstdint>
#include <memory>
#include <string>

#include "ops/backend.h"

namespace sps::ops::cpu {

enum class Bf16Path { onednn, rounded_sgemm };

struct Bf16Choice {
  Bf16Path path = Bf16Path::rounded_sgemm;
  std::string description;  // one line: the path taken, and why
};
// This process's path, chosen on the first call: rounded_sgemm where oneDNN cannot make a bf16
// matmul, else whichever of the two ran a 1024³ GEMM faster.
const Bf16Choice& bf16_gemm_choice();

// The ops.h contracts on `path`. A weight inside a buffer of bf16_weight_copies() is read
// from its copy there; any other weight is rounded by each call.
void linear_forward_bf16(Bf16Path path, float* out, const float* in, const float* weight,
                         int64_t rows, int64_t in_dim, int64_t out_dim, bool accumulate,
                         int64_t ld_in = 0, int64_t ld_out = 0);
void linear_backward_bf16(Bf16Path path, float* din, float* dweight, const float* dout,
                          const float* in, const float* weight, int64_t rows, int64_t in_dim,
                          int64_t out_dim, bool accumulate_din, int64_t ld_in = 0,
                          int64_t ld_dout = 0);

// The copies of weights [n] the functions above read (backend.h GemmWeightCopies).
std::unique_ptr<GemmWeightCopies> bf16_weight_copies(const float* weights, int64_t n);

// out[r·ld_out + c] = in[r·ld_in + c] rounded to bf16 (util/float_formats.h), for c < cols: as a float,
// or as its 16 bits.
void round_rows_to_bf16(float* out, int64_t ld_out, const float* in, int64_t ld_in, int64_t rows,
                        int64_t cols);
void round_rows_to_bf16(uint16_t* out, int64_t ld_out, const float* in, int64_t ld_in, int64_t rows,
                        int64_t cols);

}  // namespace sps::ops::cpu
