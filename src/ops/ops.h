#pragma once
// The tensor operations the model is written against. The ops of training come as a forward
// and an explicit backward (linear, embedding, RMSNorm, RoPE, SwiGLU, cross-entropy,
// attention); the rest run one way: the optimizer's (adamw_update, sum_squares), the row
// copies, and inference's (top-k rows, decode attention, the decode and packed linears, the
// packed embedding). Pointers are to the backend's memory; shapes are in the comments,
// row-major, [rows, cols]. CPU implementations live in ops/cpu/ and are instantiated for
// float (training) and double (tests). The ops a backend runs are listed in op_list.h, whence
// Backend<T>'s virtuals (backend.h); the CPU backend runs these functions, the CUDA backend
// its own in float, without the packed layout (its weights stay in rows,
// packed_panel_rows() == 0).
//
// Conventions: "accumulate" arguments choose between out = f(...) and out += f(...).
// Gradients of parameters are always accumulated (+=), so a step's micro-batches add up.
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "ops/weight_type.h"

namespace sps::ops {

// The operands of a backend's GEMMs (system.precision, --precision), the same on every
// backend. fp32: the operands as they are. bf16 (mixed precision, as the paper's autocast):
// every linear layer's three GEMMs (forward, input gradient, weight gradient) and the tied LM
// head's take their operands rounded to bf16 (util/float_formats.h) and sum their products in fp32 into
// fp32 outputs; the master weights, gradients, AdamW moments, residual stream, norms, softmax,
// loss and every other op stay fp32. The CPU rounds the weights once per change (once per
// optimizer step: backend.h GemmWeightCopies); the CUDA backend rounds them in each GEMM (the
// same numbers). Attention: fp32 on the CPU; its QKᵀ and PV products on bf16 tensor cores on
// CUDA. The ops declared below are fp32 or double; the backends apply the precision.
enum class Precision { fp32, bf16 };

// ---- linear (BLAS GEMM) -------------------------------------------------------------
// out[rows, out_dim] (+)= in[rows, in_dim] · weightᵀ, weight [out_dim, in_dim].
// ld_in / ld_out are the row strides of in / out (0 means dense: in_dim / out_dim).
template <typename T>
void linear_forward(T* out, const T* in, const T* weight, int64_t rows, int64_t in_dim,
                    int64_t out_dim, bool accumulate, int64_t ld_in = 0, int64_t ld_out = 0);

// din[rows, in_dim] (+)= dout · weight  (skipped when din is null);
// dweight[out_dim, in_dim] += doutᵀ · in  (skipped when dweight is null).
template <typename T>
void linear_backward(T* din, T* dweight, const T* dout, const T* in, const T* weight,
                     int64_t rows, int64_t in_dim, int64_t out_dim, bool accumulate_din,
                     int64_t ld_in = 0, int64_t ld_dout = 0);

// ---- embedding ----------------------------------------------------------------------
// out[n, d] = table[tokens[i], :]
template <typename T>
void embedding_forward(T* out, const int32_t* tokens, const T* table, int64_t n, int64_t d);
// dtable[tokens[i], :] += dout[i, :]  (repeated tokens add up)
template <typename T>
void embedding_backward(T* dtable, const T* dout, const int32_t* tokens, int64_t n, int64_t d);

// The rows of an embedding backward grouped by token, for a backend that sums each token's
// rows without atomics (Backend::embedding_run_rows() > 0; token_rows.h builds it on the
// host): [n] rows, each token's together in row order, the long tokens (more than a run of
// rows) first; where each token's rows start; the long tokens' runs; each long token's first
// run. In that backend's memory; the CPU reads none.
struct TokenRows {
  const int32_t* order = nullptr;         // [n]
  const int32_t* token_starts = nullptr;  // [tokens + 1] into order
  const int32_t* run_starts = nullptr;    // [runs + 1] into order
  const int32_t* token_runs = nullptr;    // [long_tokens + 1] into run_starts
  int64_t tokens = 0, long_tokens = 0, runs = 0;
};

// ---- row copies ------------------------------------------------------------------------
// dst[to[i] + j] = src[from[i] + j] for every row i < n and j < width: rows at any element
// offsets (to, from: [n], in the same memory as dst and src). No destination row overlaps
// another or any source row, so the rows may be copied in any order; a device copies them
// all in one launch. What the KV cache's appends, ring pushes and forks and the decoder's
// readout rows are made of, instead of one copy per (layer, row, head).
template <typename T>
void copy_rows(T* dst, const T* src, const int64_t* to, const int64_t* from, int64_t n,
               int64_t width);
// The same into bf16 rows (a bf16 KV cache's appends): each value rounded as float_to_bf16
// (util/float_formats.h). copy_rows<uint16_t> moves such rows as they are.
template <typename T>
void copy_rows_to_bf16(uint16_t* dst, const T* src, const int64_t* to, const int64_t* from,
                       int64_t n, int64_t width);

// ---- RMSNorm: y = x · rsqrt(mean(x²) + eps) · gain ----------------------------------
// in, out: [rows, d]; rstd: [rows] (saved for backward).
template <typename T>
void rmsnorm_forward(T* out, T* rstd, const T* in, const T* gain, int64_t rows, int64_t d,
                     double eps);
// din[rows, d] += ∂/∂in ; dgain[d] += ∂/∂gain
template <typename T>
void rmsnorm_backward(T* din, T* dgain, const T* dout, const T* in, const T* gain,
                      const T* rstd, int64_t rows, int64_t d);

// ---- RoPE, adjacent pairs (Llama-1 layout) ------------------------------------------
// Tables: cos/sin [max_pos, head_dim/2], angle = pos · theta^(-2j/head_dim).
template <typename T>
void rope_tables(T* cos_table, T* sin_table, int64_t max_pos, int64_t head_dim, double theta);
// In place on x: rows n, each holding `heads` heads of head_dim at columns [h·D, (h+1)·D),
// consecutive rows row_stride apart; pos[n] is each row's position.
template <typename T>
void rope_forward(T* x, const int32_t* pos, int64_t n, int64_t heads, int64_t head_dim,
                  int64_t row_stride, const T* cos_table, const T* sin_table);
// In place on dx: the transpose (rotation by the negative angle).
template <typename T>
void rope_backward(T* dx, const int32_t* pos, int64_t n, int64_t heads, int64_t head_dim,
                   int64_t row_stride, const T* cos_table, const T* sin_table);

// ---- SwiGLU: act = silu(gate) ⊙ up ---------------------------------------------------
// gate_up: [rows, 2F] (gate in columns [0, F), up in [F, 2F)); act: [rows, F].
template <typename T>
void swiglu_forward(T* act, const T* gate_up, int64_t rows, int64_t F);
// dgate_up[rows, 2F] = ∂/∂gate_up (written, not accumulated)
template <typename T>
void swiglu_backward(T* dgate_up, const T* dact, const T* gate_up, int64_t rows, int64_t F);

// ---- cross-entropy --------------------------------------------------------------------
// logits [rows, V]; nll[r] = logsumexp(logits[r]) − logits[r, targets[r]]; lse[r] saved.
template <typename T>
void cross_entropy_forward(T* nll, T* lse, const T* logits, const int32_t* targets,
                           int64_t rows, int64_t V);
// dlogits[r, :] = (softmax(logits[r]) − onehot(targets[r])) · dnll[r]. dlogits may alias
// logits (the LM head overwrites its logits with their gradient).
template <typename T>
void cross_entropy_backward(T* dlogits, const T* logits, const T* lse, const int32_t* targets,
                            const T* dnll, int64_t rows, int64_t V);

// ---- choosing tokens ------------------------------------------------------------------
// The most candidates top_k_rows takes per row (every backend).
inline constexpr int64_t kMaxTopK = 1024;

// For each row r of x [rows, n], the k (1..kMaxTopK) largest values among the ids that
// `banned` ([n]; nonzero: never taken) lets through, the largest first and the lower id first
// on a tie (−0 equals +0): ids [rows, k] and their values [rows, k], id −1 and value 0 past
// the row's allowed ids. first_nonfinite[r] = the lowest id of the row (banned or not) whose
// value is not finite, −1 when none; such a row gets ids −1 throughout, as no order would
// mean anything. Greedy choice is k = 1.
template <typename T>
void top_k_rows(int32_t* ids, T* values, int32_t* first_nonfinite, const T* x, int64_t rows,
                int64_t n, const uint8_t* banned, int64_t k);

// ---- family-masked attention ---------------------------------------------------------
// Slots of one sequence are stream-major: streams = 1 (standard) or 2 (interleaved: all
// input slots of the T tokens, then all predict slots). Slot (stream a, token i) may see
// slot (stream b, token j) iff
//   causal:   j < i, or j == i and b <= a (input before predict);
//   document: doc[j] == doc[i];
//   window:   b == persistent_stream, or i − j <= window;
//   ω:        when persistent_key_window >= 0, a persistent key also needs i − j <= ω.
// A tile of a blocked attention kernel (attention_plan.h): no visible pair, some, or all.
enum class TileKind : uint8_t { skipped = 0, partial = 1, full = 2 };

struct AttentionLayout {
  int64_t batch = 0;              // B sequences
  int64_t tokens = 0;             // T tokens per sequence
  int64_t streams = 1;            // slots per sequence S = streams · T
  int64_t persistent_stream = 0;  // which stream's keys persist (0 = input)
  int64_t window = 0;             // w, in tokens, for the other stream's keys
  int64_t persistent_key_window = -1;  // ω, or -1 for none
  int64_t heads = 0;              // H
  int64_t head_dim = 0;           // D
  const int32_t* doc = nullptr;        // [B, T] document id of each token
  const int32_t* doc_start = nullptr;  // [B, T] a lower bound for the first token of
                                       // each token's document (for skipping tiles)
  // For a backend whose attention reads a tile plan (Backend::attention_tile() > 0): this
  // layout's plan (attention_plan.h) in that backend's memory, its tile size in tokens, and
  // the score pairs its tiles hold for one head. Null and 0 elsewhere; the CPU ignores them.
  const TileKind* tile_kinds = nullptr;
  int64_t tile = 0, tile_pairs = 0;
};

// qkv: [B·S, 3·H·D], q | k | v, head h at columns [h·D, (h+1)·D) of each part (after RoPE).
// out: [B·S, H·D]; lse: [B, H, S] log-sum-exp of each query's scaled scores (for backward).
// Scale 1/√D. Returns the number of query-key score pairs computed (tiles not skipped).
template <typename T>
int64_t attention_forward(T* out, T* lse, const T* qkv, const AttentionLayout& layout);

// dqkv: [B·S, 3·H·D] written (not accumulated) with ∂/∂q | ∂/∂k | ∂/∂v.
template <typename T>
void attention_backward(T* dqkv, const T* dout, const T* qkv, const T* out, const T* lse,
                        const AttentionLayout& layout);

}  // namespace sps::ops

namespace sps::ops {

// ---- AdamW (fused update) and the squared norm for gradient clipping ------------------
// For i in [0, n), with g = grad[i] · grad_scale (the clipping factor):
//   m = β1·m + (1 − β1)·g;  v = β2·v + (1 − β2)·g²;
//   w = w·(1 − lr·weight_decay) − lr · (m / (1 − β1^step)) / (√(v / (1 − β2^step)) + eps)
// (decoupled decay as in PyTorch's AdamW; weight_decay applies to the ranges marked
// `decayed`, none to the others). m and v are fp32 whatever T is; step counts from 1.
struct AdamWStep {
  double lr = 0, beta1 = 0.9, beta2 = 0.95, eps = 1e-8, weight_decay = 0, grad_scale = 1;
  int64_t step = 1;
};
// The update's factors in the arithmetic's type T, formed in double once per call, as every
// backend's kernel takes them.
template <typename T>
struct AdamWFactors {
  T decay, step_size, inv_sqrt_bias2, b1, b2, one_minus_b1, one_minus_b2, eps, scale;
  static AdamWFactors of(const AdamWStep& s, double weight_decay) {
    const double bias1 = 1.0 - std::pow(s.beta1, double(s.step));
    const double bias2 = 1.0 - std::pow(s.beta2, double(s.step));
    return {T(1.0 - s.lr * weight_decay),
            T(s.lr / bias1),
            T(1.0 / std::sqrt(bias2)),
            T(s.beta1),
            T(s.beta2),
            T(1.0 - s.beta1),
            T(1.0 - s.beta2),
            T(s.eps),
            T(s.grad_scale)};
  }
};
// One range [begin, end) of the flat buffers, with or without weight decay.
struct AdamWRange {
  int64_t begin = 0, end = 0;
  bool decayed = false;
};
// Every range in one call (a whole model's parameters: one launch on a GPU, not one per
// tensor). Each element's arithmetic is the same whichever call or launch updates it.
template <typename T>
void adamw_update(T* weights, const T* grads, float* m, float* v,
                  const std::vector<AdamWRange>& ranges, const AdamWStep& step);

// Σ x[i]² in double, in a fixed order (fixed blocks summed serially), so the result does not
// depend on the number of threads or on scheduling: exact resumes need that.
template <typename T>
double sum_squares(const T* x, int64_t n);

}  // namespace sps::ops

namespace sps::ops {

// ---- decode attention (cached generation, docs/model.md §7) -----------------------------------
// K new tokens of each of B sequences over that sequence's KV cache of the current
// document: K = 1 is a decode step, K > 1 extends a cached prefix by a chunk in one pass.
// Each new token has Q = 1 (standard) or Q = 2 (interleaved: the input slot's row, then the
// predict slot's row) query rows. Query row r of the chunk's token t in sequence b sees
//   persistent cache rows [max(0, end + t − ω), end), end = persistent_end[b] (all with ω < 0);
//   the newest min(ring_len[b], w − t) ring rows (the ring ends at ring_next[b]: row
//     ring_next − 1 is the newest, the rows wrap around ring_capacity; a ring not yet full
//     holds rows [0, ring_len), so ring_next = ring_len until it wraps);
//   the persistent-slot keys of the chunk's tokens u < t with t − u ≤ ω (all with ω < 0),
//     the windowed-slot keys of those with t − u ≤ w, and rows 0..r of token t itself,
// which is exactly the mask of docs/model.md §4 when the caller keeps the cache to the current document
// (no EOS in the chunk before its last token) and the ring to the last w windowed keys.
// Cost is proportional to the rows visible, not to the capacity.
struct DecodeAttentionLayout {
  int64_t batch = 0;                // B sequences
  int64_t tokens = 1;               // K new tokens per sequence
  int64_t queries = 1;              // Q rows per new token (1 or 2)
  int64_t heads = 0;                // H
  int64_t head_dim = 0;             // D
  int64_t persistent_stream = 0;    // which of a token's rows persists (0 = input)
  int64_t window = 0;               // w, in tokens, for the other row's keys (Q = 2)
  int64_t persistent_key_window = -1;  // ω, or -1 for none
  int64_t persistent_capacity = 0;  // rows per (sequence, head) of the persistent arrays
  int64_t ring_capacity = 0;        // rows per (sequence, head) of the ring arrays (0: none)
  const int64_t* persistent_end = nullptr;  // [B] persistent rows cached
  const int64_t* ring_len = nullptr;        // [B] ring rows in use (null: none)
  const int64_t* ring_next = nullptr;       // [B] the ring row after the newest (null: ring_len)
};

// qkv: [B·K·Q, 3·H·D] the chunk's rows, q | k | v after RoPE, token t of sequence b at rows
// (b·K + t)·Q .. +Q−1. persistent_k, persistent_v: [B, H, persistent_capacity, D]; ring_k,
// ring_v: [B, H, ring_capacity, D] (K after RoPE). out: [B·K·Q, H·D]. Scale 1/√D, fp32 softmax
// statistics for float. decode_keys.h counts the score pairs it computes.
template <typename T>
void attention_decode(T* out, const T* qkv, const T* persistent_k, const T* persistent_v,
                      const T* ring_k, const T* ring_v, const DecodeAttentionLayout& layout);
// The same over a bf16 cache (--kv-type bf16): each cached K and V value is the bf16 of
// util/float_formats.h and is widened to the exact T it stands for, so the result equals
// attention_decode's over those widened rows, bit for bit; the chunk's own rows stay T.
template <typename T>
void attention_decode_bf16_cache(T* out, const T* qkv, const uint16_t* persistent_k,
                                 const uint16_t* persistent_v, const uint16_t* ring_k,
                                 const uint16_t* ring_v, const DecodeAttentionLayout& layout);

}  // namespace sps::ops

namespace sps::ops {

// ---- linear for a decode step's few rows ------------------------------------------------
// out[rows, out_dim] (+)= in[rows, in_dim] · weightᵀ, dense rows, the contract of
// linear_forward. For the handful of rows of a decode step (up to 16) each weight row is read
// once and applied to every input row, so the step runs at the speed of reading the weights;
// more rows go to linear_forward (BLAS).
template <typename T>
void linear_decode_forward(T* out, const T* in, const T* weight, int64_t rows, int64_t in_dim,
                           int64_t out_dim, bool accumulate);

// ---- linear over weights packed for inference -------------------------------------------
// A weight [out_dim, in_dim] packed into column panels of packed_panel_rows() output rows,
// [panel][in_dim][width], in a weight type (weight_type.h; int8 panels hold their blocks'
// scales too), is what linear_packed_forward multiplies: out[rows, out_dim] (+)= in[rows,
// in_dim] · weightᵀ, dense rows, the contract of linear_forward, for any number of rows. Each
// output is one chain of fused multiply-adds along in_dim over the widened weights, so a row's
// result does not depend on the other rows, and a bf16 or int8 result equals the f32 layout's
// result for the rounded (dequantized) weights.
template <typename T>
int64_t packed_panel_rows();
// Bytes of the packed layout of one weight.
template <typename T>
int64_t packed_weight_bytes(WeightType type, int64_t in_dim, int64_t out_dim);
// Packs weight rows [first_row, first_row + row_count), given dense in rows[row_count, in_dim],
// into `packed` (packed_weight_bytes of the whole weight): first_row a multiple of
// packed_panel_rows(), row_count too unless the rows end the weight. A weight can so be packed
// a few panels at a time, straight from a file. int8 errors name `what`.
template <typename T>
void pack_weight_rows(WeightType type, void* packed, const T* rows, int64_t first_row,
                      int64_t row_count, int64_t in_dim, int64_t out_dim, const std::string& what);
template <typename T>
void linear_packed_forward(T* out, const T* in, const void* packed, WeightType type, int64_t rows,
                           int64_t in_dim, int64_t out_dim, bool accumulate);
// out[n, d] = row tokens[i] of a table [V, d] packed as a weight (in_dim d, out_dim V),
// widened: the embedding of the tied table that also serves as a packed LM head.
template <typename T>
void embedding_packed_forward(T* out, const int32_t* tokens, const void* packed, WeightType type,
                              int64_t n, int64_t d, int64_t V);

}  // namespace sps::ops
