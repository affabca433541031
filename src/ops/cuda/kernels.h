#pragma once
// The CUDA backend's versions of ops.h, on device pointers, fp32, with the contracts, shapes
// and accumulation rules of ops.h (one declaration per op there). Every reduction sums in a
// fixed order, with no atomics, so a call repeated on the same input gives the same bits.
// linear is in ops/cuda/linear.h (cuBLASLt).
#include <cstdint>
#include <vector>

#include "ops/ops.h"  // AdamWStep, Precision

namespace sps::ops::cuda {

void rmsnorm_forward(float* out, float* rstd, const float* in, const float* gain, int64_t rows,
                     int64_t d, double eps);
void rmsnorm_backward(float* din, float* dgain, const float* dout, const float* in,
                      const float* gain, const float* rstd, int64_t rows, int64_t d);

void swiglu_forward(float* act, const float* gate_up, int64_t rows, int64_t F);
void swiglu_backward(float* dgate_up, const float* dact, const float* gate_up, int64_t rows,
                     int64_t F);

// pos and tokens are device arrays too; the cos/sin tables are ops::rope_tables's, uploaded.
void rope_forward(float* x, const int32_t* pos, int64_t n, int64_t heads, int64_t head_dim,
                  int64_t row_stride, const float* cos_table, const float* sin_table);
void rope_backward(float* dx, const int32_t* pos, int64_t n, int64_t heads, int64_t head_dim,
                   int64_t row_stride, const float* cos_table, const float* sin_table);

void embedding_forward(float* out, const int32_t* tokens, const float* table, int64_t n,
                       int64_t d);
// The backward in two passes over the rows grouped by token (pointwise.cuh), `rows` built
// with runs of kEmbeddingRunRows rows.
constexpr int64_t kEmbeddingRunRows = 64;
void embedding_backward(float* dtable, const float* dout, const int32_t* tokens, int64_t n,
                        int64_t d, const TokenRows& rows);

void cross_entropy_forward(float* nll, float* lse, const float* logits, const int32_t* targets,
                           int64_t rows, int64_t V);
// The k most likely ids per row (ops.h), one block per row (top_k.cuh): k = 1 in one pass,
// larger k by a radix select of the k-th largest value, then a sort of the k candidates.
void top_k_rows(int32_t* ids, float* values, int32_t* first_nonfinite, const float* x, int64_t rows,
                int64_t n, const uint8_t* banned, int64_t k);

void cross_entropy_backward(float* dlogits, const float* logits, const float* lse,
                            const int32_t* targets, const float* dnll, int64_t rows, int64_t V);

// Attention (ops/cuda/attention.cu): the blocked kernels over the layout's tile plan where it
// carries one (attention_tiled.h), else the reference kernels, one warp per slot over exactly
// the visible pairs; the layout's arrays are device memory. Returns the pairs computed.
// Precision::bf16 (the blocked kernels only): forward and backward on bf16 tensor cores.
int64_t attention_forward(float* out, float* lse, const float* qkv, const AttentionLayout& layout,
                          Precision precision = Precision::fp32);
void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* out,
                        const float* lse, const AttentionLayout& layout,
                        Precision precision = Precision::fp32);
// Decode attention: a step of one token per sequence with heads of up to 64 on the split
// kernels (decode_attention.cuh: each cached key read once for both query rows), else the
// reference kernel. The layout's per-sequence counts are device memory; nothing is read
// back (decode_keys.h counts the pairs on the host).
void attention_decode(float* out, const float* qkv, const float* persistent_k,
                      const float* persistent_v, const float* ring_k, const float* ring_v,
                      const DecodeAttentionLayout& layout);

void adamw_update(float* weights, const float* grads, float* m, float* v,
                  const std::vector<AdamWRange>& ranges, const AdamWStep& step);
// Σ x[i]² in double: per-block sums in a fixed tree order, added on the host in block order.
double sum_squares(const float* x, int64_t n);

}  // namespace sps::ops::cuda
