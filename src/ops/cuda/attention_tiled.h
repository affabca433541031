#pragma once
// The blocked attention kernels (attention_tiled.cuh) behind ops/cuda/kernels.h's attention:
// taken where the layout carries this backend's tile plan and the head fits them; the
// reference kernels (attention.cu) otherwise.
#include <cstdint>

#include "ops/ops.h"

namespace sps::ops::cuda {

// Tokens per query and key tile of the plan the blocked kernels read.
constexpr int64_t kAttentionTile = 64;

bool tiled_attention_applies(const AttentionLayout& layout);
// bf16: forward and backward on bf16 tensor cores (q, k, v, dout, P and dS rounded to bf16;
// fp32 sums and softmax throughout).
void tiled_attention_forward(float* out, float* lse, const float* qkv,
                             const AttentionLayout& layout, Precision precision);
// delta: B·H·S floats of scratch, written by the query kernel and read by the key kernel.
void tiled_attention_backward(float* dqkv, float* delta, const float* dout, const float* qkv,
                              const float* out, const float* lse, const AttentionLayout& layout,
                              Precision precision);

}  // namespace sps::ops::cuda
