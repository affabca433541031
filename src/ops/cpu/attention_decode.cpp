// Decode attention on CPU (SPEC §7): one or two new query rows per sequence over that
// sequence's cached keys. Each (sequence, head) is one task: its persistent rows, its ring
// rows and the step's own keys are walked in chunks of kChunk keys with an online softmax, so
// K and V are read once, in order, and nothing beyond the rows in use is touched. The two
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

// Folds rows [0, rows) of one (sequence, head) block of a cache, in chunks.
template <typename T, int Q>
inline void absorb_rows(HeadState<T, Q>& s, const T* K, const T* V, int64_t rows, int64_t D) {
  for (int64_t k0 = 0; k0 < rows; k0 += kChunk) {
    const int64_t n = std::min(kChunk, rows - k0);
    absorb(s, K + k0 * D, V + k0 * D, D, n, D, nullptr);
  }
}

template <typename T, int Q>
void decode_head(T* out, const T* qkv, const T* persistent_k, const T* persistent_v,
                 const T* ring_k, const T* ring_v, const DecodeAttentionLayout& L, int64_t b,
                 int64_t h, int64_t p_begin, int64_t p_end, int64_t ring_rows) {
  const int64_t H = L.heads, D = L.head_dim, HD = H * D;
  const T scale = T(1) / std::sqrt(T(D));
  HeadState<T, Q> s;
  for (int r = 0; r < Q; ++r) {
    const T* q = qkv + (b * Q + r) * 3 * HD + h * D;
    for (int64_t d = 0; d < D; ++d) {
      s.q[r][d] = q[d] * scale;
      s.acc[r][d] = 0;
    }
    s.max[r] = -std::numeric_limits<T>::infinity();
    s.sum[r] = 0;
  }
  if (p_end > p_begin) {
    const int64_t block = (b * H + h) * L.persistent_capacity;
    absorb_rows(s, persistent_k + (block + p_begin) * D, persistent_v + (block + p_begin) * D,
                p_end - p_begin, D);
  }
  if (ring_rows > 0) {
    const int64_t block = (b * H + h) * L.ring_capacity;
    absorb_rows(s, ring_k + block * D, ring_v + block * D, ring_rows, D);
  }
  // The step's own keys: query r sees rows 0..r (input before predict).
  const int64_t visible[2] = {1, 2};
  const T* current = qkv + b * Q * 3 * HD + h * D;
  absorb(s, current + HD, current + 2 * HD, 3 * HD, Q, D, visible);
  for (int r = 0; r < Q; ++r) {
    T* o = out + (b * Q + r) * HD + h * D;
    const T inv = T(1) / s.sum[r];
    for (int64_t d = 0; d < D; ++d) o[d] = s.acc[r][d] * inv;
  }
}

template <typename T, int Q>
int64_t decode_all(T* out, const T* qkv, const T* persistent_k, const T* persistent_v,
                   const T* ring_k, const T* ring_v, const DecodeAttentionLayout& L) {
  const int64_t B = L.batch, H = L.heads;
  int64_t keys = 0;  // cached keys summed over sequences
  for (int64_t b = 0; b < B; ++b) {
    const int64_t begin = L.persistent_begin ? L.persistent_begin[b] : 0;
    const int64_t end = L.persistent_end ? L.persistent_end[b] : 0;
    const int64_t ring = L.ring_len ? L.ring_len[b] : 0;
    SPS_ASSERT(0 <= begin && begin <= end && end <= L.persistent_capacity);
    SPS_ASSERT(0 <= ring && ring <= L.ring_capacity);
    SPS_ASSERT(L.ring_capacity == 0 || (ring_k != nullptr && ring_v != nullptr));
    keys += end - begin + ring;
  }
  const int64_t pairs = H * (Q * keys + B * Q * (Q + 1) / 2);
  const bool parallel = pairs * L.head_dim >= cpu::kParallelThreshold && B * H > 1;
#pragma omp parallel for schedule(dynamic, 1) if (parallel)
  for (int64_t task = 0; task < B * H; ++task) {
    const int64_t b = task / H, h = task % H;
    const int64_t begin = L.persistent_begin ? L.persistent_begin[b] : 0;
    const int64_t end = L.persistent_end ? L.persistent_end[b] : 0;
    const int64_t ring = L.ring_len ? L.ring_len[b] : 0;
    decode_head<T, Q>(out, qkv, persistent_k, persistent_v, ring_k, ring_v, L, b, h, begin, end,
                      ring);
  }
  return pairs;
}

}  // namespace

template <typename T>
int64_t attention_decode(T* out, const T* qkv, const T* persistent_k, const T* persistent_v,
                         const T* ring_k, const T* ring_v, const DecodeAttentionLayout& layout) {
  SPS_ASSERT(layout.batch >= 0 && layout.heads > 0 && layout.head_dim > 0);
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
