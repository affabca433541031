// Decode attention on CPU (docs/model.md §7): one or two new query rows per token, K tokens per
// sequence, over that sequence's cached keys and the chunk's earlier keys. Each (sequence,
// head) is one task. Two ways to run it, by the number of query rows K·Q of a task:
// - few rows (a decode step, a short extend): each query walks its visible persistent rows,
//   ring rows, chunk rows and own keys in chunks of kDecodeKeyChunk keys with an online
//   softmax, so nothing beyond the rows it sees is touched. The two queries of an interleaved
//   step share every key load; scores and P·V are vectorised along D.
// - many rows (an extend that scores a continuation): the rows go into the lanes of a query
//   tile of the training kernel (attention_kernels.h), and each group of keys (cached
//   persistent rows, ring rows by age, the chunk's persistent and windowed rows) is one run of
//   small products, masked per lane to the range that row sees. Each cached key is then read
//   once per tile instead of once per query, without per-key horizontal sums.
// A portable build compiles this file for AVX2 and for AVX-512 (attention_variants.h), each
// in its own namespace, with the same bits: see KeyLanes.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <utility>

#include "ops/cpu/attention_decode.h"
#include "ops/cpu/attention_kernels.h"
#include "ops/cpu/cpu_common.h"
#include "ops/cpu/ring_split.h"
#include "ops/cpu/widen.h"
#include "ops/decode_keys.h"
#include "ops/ops.h"
#include "util/error.h"

namespace sps::ops::SPS_KERNEL_VARIANT {
namespace {

// Keys per online-softmax step of decode, in both ways of running it. Not attention.cpp's
// kAttentionKeyChunk: decode takes only the tile machinery from attention_kernels.h, by name.
constexpr int64_t kDecodeKeyChunk = 64;
constexpr int64_t kMaxHeadDim = 512;   // stack space per query
constexpr int64_t kMinTiledRows = 16;  // K·Q from which a task runs as query tiles

// One (sequence, head): the scaled queries, their running max, sum and output.
template <typename T, int Q>
struct HeadState {
  alignas(64) T q[Q][kMaxHeadDim];
  alignas(64) T acc[Q][kMaxHeadDim];
  T max[Q], sum[Q];
};

// Key rows ahead of the one being scored that the score loop asks for; it also asks for each
// scored key's value row, read by the P·V pass that follows. The hardware prefetcher alone
// leaves memory idle while a chunk's arithmetic runs. Measured at s's head size, B = 16,
// 1,100 cached rows, 2 threads (docs/performance.md): 4 rows ahead read the cache at 86% (one
// query) and 82% (two queries) of the read bandwidth, 8 rows at 84% and 78%, 16 at 77% and
// 74%, none at 79% and 77%; leaving the value rows to the hardware cost 10% with two
// queries, and asking for the next chunk's keys during P·V was slower.
constexpr int64_t kPrefetchRows = 4;

template <typename S>
inline void prefetch_row(const S* row, int64_t D) {
  for (int64_t d = 0; d < D; d += 64 / int64_t(sizeof(S))) __builtin_prefetch(row + d);
}

// Key and value rows are T, or bf16 (uint16_t) in a bf16 cache: loads widen each bf16 to the
// exact T it stands for, so the arithmetic after them is the same either way.
template <typename V>
inline V load_row(const cpu::LaneOf<V>* p) {
  return cpu::load<V>(p);
}
template <typename V>
inline V load_row(const uint16_t* p) {
  return cpu::widen_bf16<V>(p);
}
template <typename T>
inline T row_value(T x) {
  return x;
}
template <typename T>
inline T row_value(uint16_t x) {
  return T(bf16_to_float(x));
}

// One lane from all of a vector's lanes, by halving: `combine` of the low and the high half
// until one lane is left (a tree of log2(lanes) shuffles, not a chain of lanes − 1 scalar
// steps).
template <typename V, typename Combine, size_t... I>
inline auto halves_combined(V v, Combine combine, std::index_sequence<I...>) {
  return combine(__builtin_shufflevector(v, v, I...),
                 __builtin_shufflevector(v, v, (I + sizeof...(I))...));
}
template <typename V, typename Combine>
inline auto lane_reduce(V v, Combine combine) {
  constexpr size_t lanes = sizeof(V) / sizeof(v[0]);
  if constexpr (lanes == 1)
    return v[0];
  else
    return lane_reduce(halves_combined(v, combine, std::make_index_sequence<lanes / 2>{}), combine);
}
template <typename V>
inline auto lane_sum(V v) {
  return lane_reduce(v, [](auto a, auto b) { return a + b; });
}
template <typename V>
inline auto lane_max(V v) {
  return lane_reduce(v, [](auto a, auto b) { return tiles::vmax(a, b); });
}

// The lane sums of eight vectors of eight lanes, as one vector (lane i: the sum of v[i]):
// three rounds of pairwise shuffles and adds, each halving the partial sums per vector, with
// the inputs taken in bit-reversed order so the sums come out in order: 19 operations, where
// eight lane_sum trees take about 50.
template <typename V>
inline V lane_sums8(const V* v) {
  static_assert(sizeof(V) / sizeof(v[0][0]) == 8);
  const auto halve4 = [](V a, V b) {  // [a0+a4 .. a3+a7, b0+b4 .. b3+b7]
    return __builtin_shufflevector(a, b, 0, 1, 2, 3, 8, 9, 10, 11) +
           __builtin_shufflevector(a, b, 4, 5, 6, 7, 12, 13, 14, 15);
  };
  const auto halve2 = [](V a, V b) {  // each 4-lane group of a and b summed to 2 lanes
    return __builtin_shufflevector(a, b, 0, 1, 8, 9, 4, 5, 12, 13) +
           __builtin_shufflevector(a, b, 2, 3, 10, 11, 6, 7, 14, 15);
  };
  const auto halve1 = [](V a, V b) {  // each 2-lane group summed to 1 lane
    return __builtin_shufflevector(a, b, 0, 8, 2, 10, 4, 12, 6, 14) +
           __builtin_shufflevector(a, b, 1, 9, 3, 11, 5, 13, 7, 15);
  };
  return halve1(halve2(halve4(v[0], v[4]), halve4(v[2], v[6])),
                halve2(halve4(v[1], v[5]), halve4(v[3], v[7])));
}

// The vectors a key's dot product is summed in: 32 bytes (a portable x86 build's own width),
// or the build's vectors where narrower, so every build of this file sums each dot product in
// the same lanes and the same tree (attention_variants.h). A build with vectors twice that
// wide (AVX-512) holds two keys per vector, one in each half.
template <typename T>
struct KeyLanes {
  static constexpr int bytes = std::min(cpu::kVecBytes, 32);
  typedef T V __attribute__((vector_size(bytes)));
  static constexpr int lanes = bytes / int(sizeof(T));
  static constexpr bool paired = cpu::kVecBytes == 2 * bytes;
};

// Two vectors side by side, and one half of a vector.
template <typename H, size_t... I>
inline auto joined(H low, H high, std::index_sequence<I...>) {
  return __builtin_shufflevector(low, high, I...);
}
template <typename H>
inline auto joined(H low, H high) {
  return joined(low, high, std::make_index_sequence<2 * sizeof(H) / sizeof(low[0])>{});
}
template <typename H, int Half, typename V, size_t... I>
inline H half_of(V v, std::index_sequence<I...>) {
  return __builtin_shufflevector(v, v, (I + Half * sizeof...(I))...);
}
template <typename H, int Half, typename V>
inline H half_of(V v) {
  return half_of<H, Half>(v, std::make_index_sequence<sizeof(H) / sizeof(v[0])>{});
}

// scores[r][k] = q_r · key k for n keys, G keys at a time: Q·G vectors' worth of partial sums
// along D stay in registers (8 accumulators of 32 bytes, or 4 of two keys: enough
// independent FMA chains to fill both units, and room for the loads), summed across lanes at
// the end. While scoring, each key's
// value row and the key row kPrefetchRows ahead are asked for, so memory works during the
// arithmetic. K and V rows are T or bf16 (S).
template <typename T, int Q, typename S>
inline void chunk_scores(T (*scores)[kDecodeKeyChunk], const HeadState<T, Q>& s, const S* K,
                         const S* V, int64_t ld, int64_t n, int64_t D) {
  using Key = typename KeyLanes<T>::V;  // one key along D; a scalar tail past the last whole one
  constexpr int W = KeyLanes<T>::lanes;
  constexpr int per_vector = KeyLanes<T>::paired ? 2 : 1;  // keys per accumulator
  // Keys per group whatever the width: with 16 keys per group (8 accumulators of pairs) the
  // prefetches below came too late to help, and Q = 1 ran 8–12% slower than in 32-byte
  // vectors (docs/performance.md).
  constexpr int G = 8 / Q;
  const int64_t Dv = D - D % W;
  int64_t k = 0;
  const auto score_keys = [&]<int N>(std::integral_constant<int, N>) {
    // N keys, in vectors of two keys where N is even and the build has them.
    constexpr int P = N % 2 == 0 ? per_vector : 1;
    using Acc = std::conditional_t<P == 2, typename cpu::Vec<T>::V, Key>;
    Acc acc[Q][N / P];
    for (int r = 0; r < Q; ++r)
      for (int j = 0; j < N / P; ++j) acc[r][j] = Acc{};
    for (int64_t d = 0; d < Dv; d += W) {
      Acc q[Q];
      for (int r = 0; r < Q; ++r) {
        const Key q_d = cpu::load<Key>(s.q[r] + d);
        if constexpr (P == 2)
          q[r] = joined(q_d, q_d);
        else
          q[r] = q_d;
      }
      for (int j = 0; j < N / P; ++j) {
        const S* row = K + (k + j * P) * ld + d;
        Acc key;
        if constexpr (P == 2)
          key = joined(load_row<Key>(row), load_row<Key>(row + ld));
        else
          key = load_row<Key>(row);
        for (int r = 0; r < Q; ++r)
          acc[r][j] = cpu::fused_multiply_add_lanes(q[r], key, acc[r][j]);
      }
    }
    // Each key's own vector of partial sums, then its lane sum.
    Key parts[Q][N];
    for (int r = 0; r < Q; ++r)
      for (int j = 0; j < N / P; ++j) {
        if constexpr (P == 2) {
          parts[r][2 * j] = half_of<Key, 0>(acc[r][j]);
          parts[r][2 * j + 1] = half_of<Key, 1>(acc[r][j]);
        } else {
          parts[r][j] = acc[r][j];
        }
      }
    alignas(64) T dots[Q][N];
    if constexpr (W == 8 && Q * N % 8 == 0) {
      for (int i = 0; i < Q * N; i += 8) cpu::store(&dots[0][0] + i, lane_sums8(&parts[0][0] + i));
    } else {
      for (int r = 0; r < Q; ++r)
        for (int g = 0; g < N; ++g) dots[r][g] = lane_sum(parts[r][g]);
    }
    for (int g = 0; g < N; ++g) {
      const S* key = K + (k + g) * ld;
      prefetch_row(key + kPrefetchRows * ld, D);
      prefetch_row(V + (k + g) * ld, D);
      for (int r = 0; r < Q; ++r) {
        T dot = dots[r][g];
        for (int64_t d = Dv; d < D; ++d)  // (fused, as the lanes are, in every instantiation)
          dot = cpu::fused_multiply_add(s.q[r][d], row_value<T>(key[d]), dot);
        scores[r][k + g] = dot;
      }
    }
  };
  for (; k + G <= n; k += G) score_keys(std::integral_constant<int, G>{});
  for (; k + per_vector <= n; k += per_vector)
    score_keys(std::integral_constant<int, per_vector>{});
  for (; k < n; ++k) score_keys(std::integral_constant<int, 1>{});
}

// acc[r][d0 .. d0 + S·W) = acc · correction[r] + Σ_k p[r][k] · value k, that slice of the
// accumulators held in registers over all n keys. Each element is the chain of the scalar
// tail below: one product by the correction, then fused multiply-adds in key order, written
// out so no build contracts the product into the first of them.
template <typename T, int Q, int S, typename E>
inline void chunk_values_slice(HeadState<T, Q>& s, const T (*p)[kDecodeKeyChunk],
                               const T* correction, const E* V, int64_t ld, int64_t n, int64_t d0) {
  using Vec = typename cpu::Vec<T>::V;
  constexpr int W = cpu::Vec<T>::lanes;
  Vec acc[Q][S];
  for (int r = 0; r < Q; ++r)
    for (int j = 0; j < S; ++j) acc[r][j] = cpu::load<Vec>(s.acc[r] + d0 + j * W) * correction[r];
  for (int64_t k = 0; k < n; ++k) {
    const E* value = V + k * ld + d0;
    for (int j = 0; j < S; ++j) {
      const Vec v = load_row<Vec>(value + j * W);
      for (int r = 0; r < Q; ++r)
        acc[r][j] = cpu::fused_multiply_add_lanes(Vec{} + p[r][k], v, acc[r][j]);
    }
  }
  for (int r = 0; r < Q; ++r)
    for (int j = 0; j < S; ++j) cpu::store(s.acc[r] + d0 + j * W, acc[r][j]);
}

// chunk_values_slice over [d0, Dv) in slices of S vectors, then of S/2 on what is left, and so on.
template <typename T, int Q, int S, typename E>
inline void values_in_slices(HeadState<T, Q>& s, const T (*p)[kDecodeKeyChunk], const T* correction,
                             const E* V, int64_t ld, int64_t n, int64_t d0, int64_t Dv) {
  constexpr int W = cpu::Vec<T>::lanes;
  for (; d0 + S * W <= Dv; d0 += S * W) chunk_values_slice<T, Q, S>(s, p, correction, V, ld, n, d0);
  if constexpr (S > 1) values_in_slices<T, Q, S / 2>(s, p, correction, V, ld, n, d0, Dv);
}

// Folds n keys (rows ld apart in K and V, T or bf16) into the state. Query r sees the first
// visible[r] keys (all n when visible is null).
template <typename T, int Q, typename S>
inline void absorb(HeadState<T, Q>& s, const S* K, const S* V, int64_t ld, int64_t n,
                   int64_t D, const int64_t* visible) {
  alignas(64) T scores[Q][kDecodeKeyChunk];
  chunk_scores<T, Q>(scores, s, K, V, ld, n, D);
  // The online softmax of each query over the chunk, whole vectors of scores at a time: the
  // keys a query does not see, and the lanes past n, score −∞ and so weigh 0. The sum runs in
  // KeyLanes' vectors, the same chains in every build; a build's wider padding only adds
  // zeros to them.
  using Vec = typename cpu::Vec<T>::V;
  using Sum = typename KeyLanes<T>::V;
  constexpr int W = cpu::Vec<T>::lanes;
  static_assert(kDecodeKeyChunk % W == 0);
  const int64_t n_padded = (n + W - 1) / W * W;
  T correction[Q];
  for (int r = 0; r < Q; ++r) {
    const int64_t count = visible ? std::min(visible[r], n) : n;
    std::fill(scores[r] + count, scores[r] + n_padded, -std::numeric_limits<T>::infinity());
    correction[r] = 1;
    if (count == 0) {
      std::fill(scores[r], scores[r] + n, T(0));
      continue;
    }
    Vec chunk_max = cpu::load<Vec>(scores[r]);
    for (int64_t k = W; k < n_padded; k += W)
      chunk_max = tiles::vmax(chunk_max, cpu::load<Vec>(scores[r] + k));
    const T new_max = std::max(s.max[r], lane_max(chunk_max));
    // exp(−∞) is 0 on the first chunk, when nothing has been summed yet.
    correction[r] = s.max[r] == -std::numeric_limits<T>::infinity()
                        ? T(0)
                        : cpu::exp_approx(s.max[r] - new_max);
    Sum chunk_sum{};
    for (int64_t k = 0; k < n_padded; k += W) {
      const Vec p = tiles::vexp(cpu::load<Vec>(scores[r] + k) - new_max);
      cpu::store(scores[r] + k, p);
      if constexpr (KeyLanes<T>::paired) {
        chunk_sum += half_of<Sum, 0>(p);
        chunk_sum += half_of<Sum, 1>(p);
      } else {
        chunk_sum += p;
      }
    }
    s.sum[r] = s.sum[r] * correction[r] + lane_sum(chunk_sum);
    s.max[r] = new_max;
  }
  const int64_t Dv = D - D % W;
  // Eight accumulators (8 / Q vectors of each query), as in chunk_scores, or fewer where
  // fewer vectors of D are left.
  values_in_slices<T, Q, 8 / Q>(s, scores, correction, V, ld, n, 0, Dv);
  for (int r = 0; r < Q; ++r)
    for (int64_t d = Dv; d < D; ++d) {
      T a = s.acc[r][d] * correction[r];
      for (int64_t k = 0; k < n; ++k)
        a = cpu::fused_multiply_add(scores[r][k], row_value<T>(V[k * ld + d]), a);
      s.acc[r][d] = a;
    }
}

// Folds `rows` keys, `ld` apart in K and V, in chunks.
template <typename T, int Q, typename S>
inline void absorb_rows(HeadState<T, Q>& s, const S* K, const S* V, int64_t ld, int64_t rows,
                        int64_t D) {
  for (int64_t k0 = 0; k0 < rows; k0 += kDecodeKeyChunk) {
    const int64_t n = std::min(kDecodeKeyChunk, rows - k0);
    absorb(s, K + k0 * ld, V + k0 * ld, ld, n, D, nullptr);
  }
}

// The cache's rows are S: T, or bf16 (uint16_t); the chunk's, in qkv, are T.
template <typename T, int Q, typename S>
void decode_head(T* out, const T* qkv, const S* persistent_k, const S* persistent_v,
                 const S* ring_k, const S* ring_v, const DecodeAttentionLayout& L, int64_t b,
                 int64_t h) {
  const int64_t H = L.heads, D = L.head_dim, HD = H * D, K = L.tokens;
  const int64_t token_ld = Q * 3 * HD;  // from one chunk token's row to the next one's
  const T scale = T(1) / std::sqrt(T(D));
  const int64_t persistent_stream = Q == 2 ? L.persistent_stream : 0;
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
    } else if (k.ring > 0) {  // the newest k.ring rows: those below ring_next, then the top
      const cpu::RingSplit split = cpu::split_ring(ring_next, k.ring, L.ring_capacity);
      for (const cpu::RowRun& run : {split.below, split.wrapped}) {
        const int64_t row = r_block + run.first;
        absorb_rows(s, ring_k + row * D, ring_v + row * D, D, run.count, D);
      }
    }
    // The chunk's earlier tokens: their persistent rows, then (Q = 2) their windowed rows.
    const T* p_key = chunk + k.chunk_persistent_begin * token_ld + persistent_stream * 3 * HD + HD;
    absorb_rows(s, p_key, p_key + HD, token_ld, t - k.chunk_persistent_begin, D);
    if constexpr (Q == 2) {
      const T* w_key =
          chunk + k.chunk_window_begin * token_ld + (1 - persistent_stream) * 3 * HD + HD;
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

// The K·Q query rows of (b, h) as query tiles: row i is token i / Q, query i % Q, and in qkv
// the rows lie 3·H·D apart in that order. A lane sees, of each key group, the positions
// [key_lo, key_hi] (TileLanes); positions are cache rows, minus ring ages, or chunk tokens.
template <typename T, typename S>
void decode_head_tiled(T* out, const T* qkv, const S* persistent_k, const S* persistent_v,
                       const S* ring_k, const S* ring_v, const DecodeAttentionLayout& L,
                       int64_t b, int64_t h) {
  // The tile machinery by name, not `using namespace tiles`: the key step is decode's own.
  using tiles::kTile, tiles::load_queries, tiles::mask_scores, tiles::online_softmax, tiles::Store,
      tiles::tile_product, tiles::TileLanes, tiles::TileScratch;
  using Int = typename TileLanes<T>::Int;
  const int64_t H = L.heads, D = L.head_dim, HD = H * D, K = L.tokens, Q = L.queries;
  const int64_t row_ld = 3 * HD;
  const int64_t persistent_stream = Q == 2 ? L.persistent_stream : 0;
  const int64_t end = L.persistent_end ? L.persistent_end[b] : 0;
  const int64_t ring_len = L.ring_len ? L.ring_len[b] : 0;
  const int64_t ring_next = L.ring_next ? L.ring_next[b] : ring_len;
  const S* persistent_kb = persistent_k + (b * H + h) * L.persistent_capacity * D;
  const S* persistent_vb = persistent_v + (b * H + h) * L.persistent_capacity * D;
  const int64_t r_block = (b * H + h) * L.ring_capacity * D;
  const T* rows = qkv + b * K * Q * row_ld + h * D;  // query row 0 of head h
  TileScratch<T>& scratch = tiles::thread_tile_scratch<T>();
  T* qt = scratch.qt.get(D * kTile);
  T* st = scratch.st.get(kDecodeKeyChunk * kTile);
  T* ot = scratch.ot.get(D * kTile);
  // A chunk of bf16 cache rows, widened: [2, kDecodeKeyChunk, D] keys then values.
  T* widened = std::is_same_v<S, T> ? nullptr : scratch.head_kv.get(2 * kDecodeKeyChunk * D);
  alignas(64) T m[kTile], l[kTile], alpha[kTile];
  alignas(64) int64_t token[kTile], query[kTile];
  TokenKeys keys[kTile];  // what each lane's token sees
  TileLanes<T> lanes;
  std::fill(lanes.doc, lanes.doc + kTile, Int(0));
  const T scale = T(1) / std::sqrt(T(D));

  for (int64_t i0 = 0; i0 < K * Q; i0 += kTile) {
    const int64_t n_rows = std::min(kTile, K * Q - i0);
    load_queries<T>(qt, nullptr, rows + i0 * row_ld, row_ld, n_rows, D, scale);
    std::fill(m, m + kTile, -std::numeric_limits<T>::infinity());
    std::fill(l, l + kTile, T(0));
    std::fill(ot, ot + D * kTile, T(0));
    for (int64_t r = 0; r < kTile; ++r) {  // lanes past the rows repeat the last one
      const int64_t i = i0 + std::min(r, n_rows - 1);
      token[r] = i / Q;
      query[r] = i % Q;
      keys[r] = token_keys(L, b, token[r]);
    }
    // Folds keys at positions [first, first + n) into the tile, each lane masked to its range.
    // Rows of a bf16 cache are widened a chunk at a time into T rows first.
    const auto absorb_keys = [&]<typename E>(const E* keys, const E* values, int64_t ld,
                                             int64_t first, int64_t n) {
      for (int64_t j0 = 0; j0 < n; j0 += kDecodeKeyChunk) {
        const int64_t c = std::min(kDecodeKeyChunk, n - j0);
        const T* k_rows = nullptr;
        const T* v_rows = nullptr;
        int64_t row_ld = ld;
        if constexpr (std::is_same_v<E, T>) {
          k_rows = keys + j0 * ld;
          v_rows = values + j0 * ld;
        } else {
          T* k_wide = widened;
          T* v_wide = widened + kDecodeKeyChunk * D;
          for (int64_t j = 0; j < c; ++j)
            for (int64_t d = 0; d < D; ++d) {
              k_wide[j * D + d] = row_value<T>(keys[(j0 + j) * ld + d]);
              v_wide[j * D + d] = row_value<T>(values[(j0 + j) * ld + d]);
            }
          k_rows = k_wide;
          v_rows = v_wide;
          row_ld = D;
        }
        tile_product<T, false>(st, kTile, k_rows, row_ld, qt, kTile, c, kTile, D, Store::overwrite);
        mask_scores(st, c, first + j0, nullptr, lanes);
        online_softmax(st, c, m, l, alpha);
        tile_product<T, true>(ot, kTile, v_rows, row_ld, st, kTile, D, kTile, c,
                              Store::scale_columns, alpha);
      }
    };
    const TokenKeys& first_keys = keys[0];  // tokens only grow along the tile

    // Cached persistent rows: token t sees [persistent_begin(t), end).
    for (int64_t r = 0; r < kTile; ++r) {
      lanes.key_lo[r] = Int(keys[r].persistent_begin);
      lanes.key_hi[r] = Int(end - 1);
    }
    absorb_keys(persistent_kb + first_keys.persistent_begin * D,
                persistent_vb + first_keys.persistent_begin * D, D, first_keys.persistent_begin,
                end - first_keys.persistent_begin);

    // Ring rows at position −age (the newest is 0): token t sees ages below ring(t).
    if (first_keys.ring > 0) {
      for (int64_t r = 0; r < kTile; ++r) {
        lanes.key_lo[r] = Int(1 - keys[r].ring);
        lanes.key_hi[r] = 0;
      }
      const cpu::RingSplit split = cpu::split_ring(ring_next, first_keys.ring, L.ring_capacity);
      for (const cpu::RowRun& run : {split.below, split.wrapped}) {
        if (run.count == 0) continue;
        const int64_t at = r_block + run.first * D;
        absorb_keys(ring_k + at, ring_v + at, D,
                    -cpu::ring_age(run.first, ring_next, L.ring_capacity), run.count);
      }
    }

    // The chunk's tokens u before each row's token within its reach, and the row's own key
    // when its query comes at or after that key's row (input before predict).
    const int64_t last_token = token[kTile - 1];
    for (int64_t group = 0; group < Q; ++group) {
      const bool persistent = group == 0;
      const int64_t key_row = persistent ? persistent_stream : 1 - persistent_stream;
      for (int64_t r = 0; r < kTile; ++r) {
        lanes.key_lo[r] = Int(persistent ? keys[r].chunk_persistent_begin : keys[r].chunk_window_begin);
        lanes.key_hi[r] = Int(token[r] - (query[r] >= key_row ? 0 : 1));
      }
      const int64_t u0 = persistent ? first_keys.chunk_persistent_begin : first_keys.chunk_window_begin;
      const T* key = rows + (u0 * Q + key_row) * row_ld + HD;
      absorb_keys(key, key + HD, Q * row_ld, u0, last_token + 1 - u0);
    }

    for (int64_t r = 0; r < n_rows; ++r) {
      T* o = out + (b * K * Q + i0 + r) * HD + h * D;
      const T inv = T(1) / l[r];
      for (int64_t d = 0; d < D; ++d) o[d] = ot[d * kTile + r] * inv;
    }
  }
}

template <typename T, int Q, typename S>
void decode_all(T* out, const T* qkv, const S* persistent_k, const S* persistent_v, const S* ring_k,
                const S* ring_v, const DecodeAttentionLayout& L) {
  const int64_t B = L.batch, H = L.heads;
  for (int64_t b = 0; b < B; ++b) {
    const int64_t end = L.persistent_end ? L.persistent_end[b] : 0;
    const int64_t ring = L.ring_len ? L.ring_len[b] : 0;
    const int64_t next = L.ring_next ? L.ring_next[b] : ring;
    SPS_ASSERT(0 <= end && end <= L.persistent_capacity);
    SPS_ASSERT(0 <= ring && ring <= L.ring_capacity && 0 <= next && next <= L.ring_capacity);
    SPS_ASSERT(L.ring_capacity == 0 || (ring_k != nullptr && ring_v != nullptr));
  }
  const int64_t pairs = decode_attention_pairs(L);
  const bool parallel = pairs * L.head_dim >= cpu::kParallelThreshold && B * H > 1;
  const bool tiled = L.tokens * Q >= kMinTiledRows;
#pragma omp parallel for schedule(dynamic, 1) if (parallel)
  for (int64_t task = 0; task < B * H; ++task)
    if (tiled)
      decode_head_tiled<T, S>(out, qkv, persistent_k, persistent_v, ring_k, ring_v, L, task / H, task % H);
    else
      decode_head<T, Q, S>(out, qkv, persistent_k, persistent_v, ring_k, ring_v, L, task / H,
                           task % H);
}

// Both ops, for the cache's element type S.
template <typename T, typename S>
void decode_over_cache(T* out, const T* qkv, const S* persistent_k, const S* persistent_v,
                       const S* ring_k, const S* ring_v, const DecodeAttentionLayout& layout) {
  SPS_ASSERT(layout.batch >= 0 && layout.tokens >= 1 && layout.heads > 0 && layout.head_dim > 0);
  SPS_ASSERT(layout.window >= 0 && (layout.persistent_stream == 0 || layout.persistent_stream == 1));
  SPS_ASSERT(layout.head_dim <= kMaxHeadDim);
  SPS_ASSERT(layout.persistent_capacity == 0 || (persistent_k != nullptr && persistent_v != nullptr));
  if (layout.queries == 1) {
    decode_all<T, 1, S>(out, qkv, persistent_k, persistent_v, ring_k, ring_v, layout);
    return;
  }
  SPS_ASSERT(layout.queries == 2);
  decode_all<T, 2, S>(out, qkv, persistent_k, persistent_v, ring_k, ring_v, layout);
}

}  // namespace

template <typename T>
void add_decode_kernels(AttentionKernels<T>& table) {
  table.decode = decode_over_cache<T, T>;
  table.decode_bf16_cache = decode_over_cache<T, uint16_t>;
}
template void add_decode_kernels<float>(AttentionKernels<float>&);
template void add_decode_kernels<double>(AttentionKernels<double>&);

}  // namespace sps::ops::SPS_KERNEL_VARIANT
