#pragma once
// How a model's projection weights are stored for inference (--weight-type): f32 as trained,
// bf16 (half the bytes), or int8 (symmetric blocks of kQ8Block along in_dim with one fp16
// scale each: GGUF's Q8_0, ~1.06 bytes per weight). Every other tensor stays fp32.
// - bf16: the linear's input rows are rounded to bf16 too (nearest, ties to even), as
//   llama.cpp's BF16 products and AVX512-BF16's vdpbf16ps take them. Each product of two
//   bf16 values is exact in fp32; an output is the chain over the pairs of in_dim, sum ←
//   fma(x[2p + 1], w[2p + 1], sum) then sum ← fma(x[2p], w[2p], sum), p in order (a zero pair
//   element after an odd in_dim), from 0 (or the old value when accumulating): vdpbf16ps's
//   arithmetic, which the builds without it compute with fused multiply-adds. (vdpbf16ps
//   flushes subnormal inputs and sums to zero; nothing else differs.) The embedding reads
//   the rounded weights.
// - int8: the linear's input rows are quantized too, as llama.cpp's Q8_0 × Q8_0 products do,
//   so that blocks multiply as integers: each row's block b of kQ8Block values x gets the
//   scale a_b = max|x| / 127 (fp32) and the integers round(x / a_b) (half away from zero; all
//   0 when a_b = 0; a block holding a NaN or an infinity gets a_b = NaN). An output is then
//   the chain sum ← fma(float(I_b), w_b · a_b, sum) over the blocks in order, from 0 (or the
//   old value when accumulating), I_b the exact integer dot product of the row's and the
//   column's block b and w_b the column's fp16 scale. The embedding reads the dequantized
//   weights q · w_b.
#include <cstdint>
#include <string>

namespace sps::ops {

enum class WeightType { f32, bf16, int8 };

// "f32", "bf16" or "int8"; anything else is a UserError naming `what`.
WeightType parse_weight_type(const std::string& text, const std::string& what);
const char* weight_type_name(WeightType type);

// Bytes one weight takes in a type, rounded for int8's scales (for memory figures).
double bytes_per_weight(WeightType type);

// Elements of one int8 block along in_dim (the last block of a row may be shorter).
inline constexpr int64_t kQ8Block = 32;

// Quantizes x[0..n), n ≤ kQ8Block, as GGUF's Q8_0 does: d = max|x| / 127, q[i] = x[i]·(1/d)
// rounded half away from zero (0 for an all-zero block), and returns d rounded to fp16 (its
// bits), the scale the block is dequantized with: x[i] ≈ q[i] · fp16(d). A UserError when d
// overflows fp16 (|x| above ~8.3e6), naming `what`.
uint16_t quantize_q8_block(const float* x, int64_t n, int8_t* q, const std::string& what);

}  // namespace sps::ops
