#pragma once
// The ops a Backend<T> runs (backend.h), listed once: each line is
//   OP(result, name, (parameters), (arguments))
// with T the backend's element type. The contract of each (shapes, accumulation rules, what
// may alias) is its namesake's in ops.h; fill is x[i] = value for i in [0, n), and
// copy_bf16_rows is copy_rows of bf16 rows. Every pointer is to the backend's memory, and so
// are the arrays a layout or by_token points to, except pack_weight_rows' rows (host memory).
// by_token (ops.h TokenRows) is null unless the backend's embedding_run_rows() > 0.
//
// From this list come Backend<T>'s pure virtuals (SPS_DECLARE_BACKEND_OP), each backend's
// overrides (SPS_OVERRIDE_FROM_OP_TABLE: a backend says in its op table, a line per op, what
// it runs) and the checking backend's wrappers (tests/model/checking_backend.h). An op's
// parameters are so written three times: here, in ops.h (the CPU's function, with the
// contract) and in the declaration of a backend's own version (ops/cuda/kernels.h).
#include <cstdint>
#include <string>
#include <vector>

#include "ops/ops.h"
#include "ops/weight_type.h"

// clang-format off
#define SPS_BACKEND_OPS(OP)                                                                      \
  OP(void, fill, (T* x, int64_t n, T value), (x, n, value))                                      \
  OP(void, copy_rows, (T* dst, const T* src, const int64_t* to, const int64_t* from, int64_t n,   \
                       int64_t width),                                                           \
     (dst, src, to, from, n, width))                                                             \
  OP(void, copy_rows_to_bf16, (uint16_t* dst, const T* src, const int64_t* to,                 \
                               const int64_t* from, int64_t n, int64_t width),                   \
     (dst, src, to, from, n, width))                                                             \
  OP(void, copy_bf16_rows, (uint16_t* dst, const uint16_t* src, const int64_t* to,               \
                            const int64_t* from, int64_t n, int64_t width),                      \
     (dst, src, to, from, n, width))                                                             \
  OP(void, linear_forward, (T* out, const T* in, const T* weight, int64_t rows, int64_t in_dim,  \
                            int64_t out_dim, bool accumulate, int64_t ld_in = 0,                 \
                            int64_t ld_out = 0),                                                 \
     (out, in, weight, rows, in_dim, out_dim, accumulate, ld_in, ld_out))                        \
  OP(void, linear_backward, (T* din, T* dweight, const T* dout, const T* in, const T* weight,    \
                             int64_t rows, int64_t in_dim, int64_t out_dim, bool accumulate_din, \
                             int64_t ld_in = 0, int64_t ld_dout = 0),                            \
     (din, dweight, dout, in, weight, rows, in_dim, out_dim, accumulate_din, ld_in, ld_dout))    \
  OP(void, linear_decode_forward, (T* out, const T* in, const T* weight, int64_t rows,           \
                                   int64_t in_dim, int64_t out_dim, bool accumulate),            \
     (out, in, weight, rows, in_dim, out_dim, accumulate))                                       \
  OP(int64_t, packed_weight_bytes, (ops::WeightType type, int64_t in_dim, int64_t out_dim),      \
     (type, in_dim, out_dim))                                                                    \
  OP(void, pack_weight_rows, (ops::WeightType type, void* packed, const T* rows,                 \
                              int64_t first_row, int64_t row_count, int64_t in_dim,              \
                              int64_t out_dim, const std::string& what),                         \
     (type, packed, rows, first_row, row_count, in_dim, out_dim, what))                          \
  OP(void, linear_packed_forward, (T* out, const T* in, const void* packed,                      \
                                   ops::WeightType type, int64_t rows, int64_t in_dim,           \
                                   int64_t out_dim, bool accumulate),                            \
     (out, in, packed, type, rows, in_dim, out_dim, accumulate))                                 \
  OP(void, embedding_packed_forward, (T* out, const int32_t* tokens, const void* packed,         \
                                      ops::WeightType type, int64_t n, int64_t d, int64_t V),    \
     (out, tokens, packed, type, n, d, V))                                                       \
  OP(void, embedding_forward, (T* out, const int32_t* tokens, const T* table, int64_t n,         \
                               int64_t d),                                                       \
     (out, tokens, table, n, d))                                                                 \
  OP(void, embedding_backward, (T* dtable, const T* dout, const int32_t* tokens, int64_t n,      \
                                int64_t d, const ops::TokenRows* by_token),                      \
     (dtable, dout, tokens, n, d, by_token))                                                     \
  OP(void, rmsnorm_forward, (T* out, T* rstd, const T* in, const T* gain, int64_t rows,          \
                             int64_t d, double eps),                                             \
     (out, rstd, in, gain, rows, d, eps))                                                        \
  OP(void, rmsnorm_backward, (T* din, T* dgain, const T* dout, const T* in, const T* gain,       \
                              const T* rstd, int64_t rows, int64_t d),                           \
     (din, dgain, dout, in, gain, rstd, rows, d))                                                \
  OP(void, rope_forward, (T* x, const int32_t* pos, int64_t n, int64_t heads, int64_t head_dim,  \
                          int64_t row_stride, const T* cos_table, const T* sin_table),           \
     (x, pos, n, heads, head_dim, row_stride, cos_table, sin_table))                             \
  OP(void, rope_backward, (T* dx, const int32_t* pos, int64_t n, int64_t heads,                  \
                           int64_t head_dim, int64_t row_stride, const T* cos_table,             \
                           const T* sin_table),                                                  \
     (dx, pos, n, heads, head_dim, row_stride, cos_table, sin_table))                            \
  OP(void, swiglu_forward, (T* act, const T* gate_up, int64_t rows, int64_t F),                  \
     (act, gate_up, rows, F))                                                                    \
  OP(void, swiglu_backward, (T* dgate_up, const T* dact, const T* gate_up, int64_t rows,         \
                             int64_t F),                                                         \
     (dgate_up, dact, gate_up, rows, F))                                                         \
  OP(void, cross_entropy_forward, (T* nll, T* lse, const T* logits, const int32_t* targets,      \
                                   int64_t rows, int64_t V),                                     \
     (nll, lse, logits, targets, rows, V))                                                       \
  OP(void, cross_entropy_backward, (T* dlogits, const T* logits, const T* lse,                   \
                                    const int32_t* targets, const T* dnll, int64_t rows,         \
                                    int64_t V),                                                  \
     (dlogits, logits, lse, targets, dnll, rows, V))                                             \
  OP(void, top_k_rows, (int32_t* ids, T* values, int32_t* first_nonfinite, const T* x,           \
                        int64_t rows, int64_t n, const uint8_t* banned, int64_t k),              \
     (ids, values, first_nonfinite, x, rows, n, banned, k))                                      \
  OP(int64_t, attention_forward, (T* out, T* lse, const T* qkv,                                  \
                                  const ops::AttentionLayout& layout),                           \
     (out, lse, qkv, layout))                                                                    \
  OP(void, attention_backward, (T* dqkv, const T* dout, const T* qkv, const T* out,              \
                                const T* lse, const ops::AttentionLayout& layout),               \
     (dqkv, dout, qkv, out, lse, layout))                                                        \
  OP(void, attention_decode, (T* out, const T* qkv, const T* persistent_k,                       \
                              const T* persistent_v, const T* ring_k, const T* ring_v,           \
                              const ops::DecodeAttentionLayout& layout),                         \
     (out, qkv, persistent_k, persistent_v, ring_k, ring_v, layout))                             \
  OP(void, attention_decode_bf16_cache, (T* out, const T* qkv, const uint16_t* persistent_k,    \
                                        const uint16_t* persistent_v, const uint16_t* ring_k,    \
                                        const uint16_t* ring_v,                                  \
                                        const ops::DecodeAttentionLayout& layout),               \
     (out, qkv, persistent_k, persistent_v, ring_k, ring_v, layout))                             \
  OP(void, adamw_update, (T* weights, const T* grads, float* m, float* v,                        \
                          const std::vector<ops::AdamWRange>& ranges,                            \
                          const ops::AdamWStep& step),                                           \
     (weights, grads, m, v, ranges, step))                                                       \
  OP(double, sum_squares, (const T* x, int64_t n), (x, n))
// clang-format on

// An op of the list as a pure virtual of Backend<T>.
#define SPS_DECLARE_BACKEND_OP(result, name, parameters, arguments) \
  virtual result name parameters const = 0;

// An op of the list as an override that calls the member of the same name of the class's
// `op_table_`: a struct that says, one line per op, what this backend runs for it, e.g.
//   auto rmsnorm_forward(auto... a) const { return cuda::rmsnorm_forward(a...); }
// The class names its element type T.
#define SPS_OVERRIDE_FROM_OP_TABLE(result, name, parameters, arguments) \
  result name parameters const override { return op_table_.name arguments; }
