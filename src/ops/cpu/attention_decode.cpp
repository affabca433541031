// Decode attention on CPU (SPEC §7): one or two new query rows per token, K tokens per
// sequence, over that sequence's cached keys and the chunk's earlier keys. Each (sequence,
// head) is one task; for each token its visible persistent rows, ring rows, chunk rows and own
// keys are walked in chunks of kChunk keys with an online softmax, so K and V are read in
// order, and nothing beyond the rows visible is touched. The two
// queries of an interleaved step share every key load (the loops over D carry both dot
// products); scores and P·V are vectorised along D, which holds whole vectors at D = 64.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "ops/cpu/cpu_common.h"
#include "ops/ops.h"
#include "util/error.h"

namespace sps::ops {
namespace {

constexpr int64_t kChunk = 64;         // keys per online-softmax block
constexpr int64_t kMaxHeadDim = 512;   // stack space per query

// One (sequence, head): the scaled queries, their running max, sum and output.
template <typename T, int Q>
struct HeadState {
  alignas(64) T q[Q][kMaxHeadDim];
  alignas(64) T acc[Q][kMaxHeadDim];
  T max[Q], sum[Q];
};

// Folds n keys (rows ld apart in K and V) into the state. Query r sees the first
// visible[r] keys (all n when visible is null).
template <typename T, int Q>
inline void absorb(HeadState<T, Q>& s, const T* K, const T* V, int64_t ld, int64_t n,
                   int64_t D, const int64_t* visible) {
  alignas(64) T scores[Q][kChunk];
  for (int64_t k = 0; k < n; ++k) {
    const T* __restrict key = K + k * ld;
    if constexpr (Q == 1) {
      T dot = 0;
#pragma omp simd reduction(+ : dot)
      for (int64_t d = 0; d < D; ++d) dot += s.q[0][d] * key[d];
      scores[0][k] = dot;
    } else {
      T dot0 = 0, dot1 = 0;
#pragma omp simd reduction(+ : dot0, dot1)
      for (int64_t d = 0; d < D; ++d) {
        dot0 += s.q[0][d] * key[d];
        dot1 += s.q[1][d] * key[d];
      }
      scores[0][k] = dot0;
      scores[1][k] = dot1;
    }
  }
  int64_t count[Q];
  for (int r = 0; r < Q; ++r) {
    count[r] = visible ? std::min(visible[r], n) : n;
    if (count[r] == 0) continue;
    T chunk_max = scores[r][0];
    for (int64_t k = 1; k < count[r]; ++k) chunk_max = std::max(chunk_max, scores[r][k]);
    const T new_max = std::max(s.max[r], chunk_max);
    // exp(−∞) is 0 on the first chunk, when nothing has been summed yet.
    const T correction = s.max[r] == -std::numeric_limits<T>::infinity()
                             ? T(0)
                             : cpu::exp_approx(s.max[r] - new_max);
    T chunk_sum = 0;
#pragma omp simd reduction(+ : chunk_sum)
    for (int64_t k = 0; k < count[r]; ++k) {
      const T p = cpu::exp_approx(scores[r][k] - new_max);
      scores[r][k] = p;
      chunk_sum += p;
    }
    for (int64_t k = count[r]; k < n; ++k) scores[r][k] = 0;
    s.sum[r] = s.sum[r] * correction + chunk_sum;
    s.max[r] = new_max;
    if (correction != T(1)) {
#pragma omp simd
      for (int64_t d = 0; d < D; ++d) s.acc[r][d] *= correction;
    }
  }
  for (int64_t k = 0; k < n; ++k) {
    const T* __restrict value = V + k * ld;
    if constexpr (Q == 1) {
      const T p = scores[0][k];
#pragma omp simd
      for (int64_t d = 0; d < D; ++d) s.acc[0][d] += p * value[d];
    } else {
      const T p0 = scores[0][k], p1 = scores[1][k];
#pragma omp simd
      for (int64_t d = 0; d < D; ++d) {
        s.acc[0][d] += p0 * value[d];
        s.acc[1][d] += p1 * value[d];
      }
    }
  }
}

// Folds `rows` keys, `ld` apart in K and V, in chunks.
template <typename T, int Q>
inline void absorb_rows(HeadState<T, Q>& s, const T* K, const T* V, int64_t ld, int64_t rows,
                        int64_t D) {
  for (int64_t k0 = 0; k0 < rows; k0 += kChunk) {
    const int64_t n = std::min(kChunk, rows - k0);
    absorb(s, K + k0 * ld, V + k0 * ld, ld, n, D, nullptr);
  }
}

// What token t of sequence b sees before its own rows (the rule in ops.h).
struct TokenKeys {
  int64_t persistent_begin = 0, persistent_end = 0;  // cache rows
  int64_t ring = 0;                                  // newest ring rows
  int64_t chunk_persistent_begin = 0;                // chunk tokens [begin, t)
  int64_t chunk_window_begin = 0;                    // chunk tokens [begin, t), Q = 2
};

inline TokenKeys token_keys(const DecodeAttentionLayout& L, int64_t b, int64_t t) {
  TokenKeys k;
  const int64_t omega = L.persistent_window;
  k.persistent_end = L.persistent_end ? L.persistent_end[b] : 0;
  k.persistent_begin = omega >= 0 ? std::clamp<int64_t>(k.persistent_end + t - omega, 0, k.persistent_end) : 0;
  k.ring = std::clamp<int64_t>(L.window - t, 0, L.ring_len ? L.ring_len[b] : 0);
  k.chunk_persistent_begin = omega >= 0 ? std::max<int64_t>(0, t - omega) : 0;
  k.chunk_window_begin = std::max<int64_t>(0, t - L.window);
  return k;
}

// Keys token t's query rows see before its own rows.
inline int64_t keys_before(const TokenKeys& k, int64_t t, int64_t Q) {
  return k.persistent_end - k.persistent_begin + k.ring + (t - k.chunk_persistent_begin) +
         (Q == 2 ? t - k.chunk_window_begin : 0);
}

template <typename T, int Q>
void decode_head(T* out, const T* qkv, const T* persistent_k, const T* persistent_v,
                 const T* ring_k, const T* ring_v, const DecodeAttentionLayout& L, int64_t b,
                 int64_t h) {
  const int64_t H = L.heads, D = L.head_dim, HD = H * D, K = L.tokens;
  const int64_t token_ld = Q * 3 * HD;  // from one chunk token's row to the next one's
  const T scale = T(1) / std::sqrt(T(D));
  const int64_t persistent_row = Q == 2 ? L.persistent_stream : 0;
  const int64_t ring_len = L.ring_len ? L.ring_len[b] : 0;
  const int64_t ring_next = L.ring_next ? L.ring_next[b] : ring_len;
  const int64_t p_block = (b * H + h) * L.persistent_capacity;
  const int64_t r_block = (b * H + h) * L.ring_capacity;
  const T* chunk = qkv + b * K * token_ld + h * D;  // token 0, row 0, q of head h
  HeadState<T, Q> s;
  for (int64_t t = 0; t < K; ++t) {
    const T* current = chunk + t * token_ld;
    for (int r = 0; r < Q; ++r) {
      const T* q = current + r * 3 * HD;
      for (int64_t d = 0; d < D; ++d) {
        s.q[r][d] = q[d] * scale;
        s.acc[r][d] = 0;
      }
      s.max[r] = -std::numeric_limits<T>::infinity();
      s.sum[r] = 0;
    }
    const TokenKeys k = token_keys(L, b, t);
    absorb_rows(s, persistent_k + (p_block + k.persistent_begin) * D,
                persistent_v + (p_block + k.persistent_begin) * D, D,
                k.persistent_end - k.persistent_begin, D);
    if (k.ring == ring_len) {  // the whole ring (every decode step): one run, any order
      absorb_rows(s, ring_k + r_block * D, ring_v + r_block * D, D, ring_len, D);
    } else if (k.ring > 0) {   // the newest k.ring rows: those before ring_next, then the top
      const int64_t low = std::max<int64_t>(0, ring_next - k.ring), wrapped = k.ring - (ring_next - low);
      absorb_rows(s, ring_k + (r_block + low) * D, ring_v + (r_block + low) * D, D, ring_next - low, D);
      const int64_t top = r_block + L.ring_capacity - wrapped;
      absorb_rows(s, ring_k + top * D, ring_v + top * D, D, wrapped, D);
    }
    // The chunk's earlier tokens: their persistent rows, then (Q = 2) their windowed rows.
    const T* p_key = chunk + k.chunk_persistent_begin * token_ld + persistent_row * 3 * HD + HD;
    absorb_rows(s, p_key, p_key + HD, token_ld, t - k.chunk_persistent_begin, D);
    if constexpr (Q == 2) {
      const T* w_key = chunk + k.chunk_window_begin * token_ld + (1 - persistent_row) * 3 * HD + HD;
      absorb_rows(s, w_key, w_key + HD, token_ld, t - k.chunk_window_begin, D);
    }
    // The token's own keys: query r sees rows 0..r (input before predict).
    const int64_t visible[2] = {1, 2};
    absorb(s, current + HD, current + 2 * HD, 3 * HD, Q, D, visible);
    for (int r = 0; r < Q; ++r) {
      T* o = out + ((b * K + t) * Q + r) * HD + h * D;
      const T inv = T(1) / s.sum[r];
      for (int64_t d = 0; d < D; ++d) o[d] = s.acc[r][d] * inv;
    }
  }
}

template <typename T, int Q>
int64_t decode_all(T* out, const T* qkv, const T* persistent_k, const T* persistent_v,
                   const T* ring_k, const T* ring_v, const DecodeAttentionLayout& L) {
  const int64_t B = L.batch, H = L.heads;
  int64_t keys = 0;  // keys seen before the own rows, summed over sequences and tokens
  for (int64_t b = 0; b < B; ++b) {
    const int64_t end = L.persistent_end ? L.persistent_end[b] : 0;
    const int64_t ring = L.ring_len ? L.ring_len[b] : 0;
    const int64_t next = L.ring_next ? L.ring_next[b] : ring;
    SPS_ASSERT(0 <= end && end <= L.persistent_capacity);
    SPS_ASSERT(0 <= ring && ring <= L.ring_capacity && 0 <= next && next <= L.ring_capacity);
    SPS_ASSERT(L.ring_capacity == 0 || (ring_k != nullptr && ring_v != nullptr));
    for (int64_t t = 0; t < L.tokens; ++t) keys += keys_before(token_keys(L, b, t), t, Q);
  }
  const int64_t pairs = H * (Q * keys + B * L.tokens * Q * (Q + 1) / 2);
  const bool parallel = pairs * L.head_dim >= cpu::kParallelThreshold && B * H > 1;
#pragma omp parallel for schedule(dynamic, 1) if (parallel)
  for (int64_t task = 0; task < B * H; ++task)
    decode_head<T, Q>(out, qkv, persistent_k, persistent_v, ring_k, ring_v, L, task / H, task % H);
  return pairs;
}

}  // namespace

template <typename T>
int64_t attention_decode(T* out, const T* qkv, const T* persistent_k, const T* persistent_v,
                         const T* ring_k, const T* ring_v, const DecodeAttentionLayout& layout) {
  SPS_ASSERT(layout.batch >= 0 && layout.tokens >= 1 && layout.heads > 0 && layout.head_dim > 0);
  SPS_ASSERT(layout.window >= 0 && (layout.persistent_stream == 0 || layout.persistent_stream == 1));
  SPS_ASSERT(layout.head_dim <= kMaxHeadDim);
  SPS_ASSERT(layout.persistent_capacity == 0 || (persistent_k != nullptr && persistent_v != nullptr));
  if (layout.queries == 1)
    return decode_all<T, 1>(out, qkv, persistent_k, persistent_v, ring_k, ring_v, layout);
  SPS_ASSERT(layout.queries == 2);
  return decode_all<T, 2>(out, qkv, persistent_k, persistent_v, ring_k, ring_v, layout);
}

template int64_t attention_decode<float>(float*, const float*, const float*, const float*,
                                         const float*, const float*, const DecodeAttentionLayout&);
template int64_t attention_decode<double>(double*, const double*, const double*, const double*,
                                          const double*, const double*,
                                          const DecodeAttentionLayout&);

}  // namespace sps::ops
