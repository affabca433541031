// Family-masked attention on CPU, flash-style (docs/architecture.md, "The model in one page").
//
// Work is cut into query tiles of kAttentionQueryTile tokens of one stream. For each tile
// and key stream the visible keys lie in one token range (attention_tiles.h); it is walked in
// chunks of kAttentionKeyChunk keys with an online softmax, so no score matrix beyond one
// [chunk, tile] block is ever built, and the mask is computed from token indices and doc ids.
//
// Inside a tile the queries live in vector lanes: scores are kept transposed, St[key][query],
// padded to a full tile of lanes. Then the softmax max and sum over keys are lane-wise (no
// horizontal reductions), the mask is a lane compare of token indices, and every product is
// one small register-blocked kernel C (+)= a(i,k)·B[k, :] whose B rows are contiguous. Q and
// dO are transposed once per tile; K and V are first packed per head into contiguous blocks
// (in qkv a head's rows lie 3·H·D apart, which starves the caches: ≈30% slower unpacked).
// OpenBLAS was slower for these [128 × 64 × 64] products and takes a lock per call when
// called from many threads.
//
// Parallelism: forward over runs of query tiles of one (sequence, head), no barriers;
// backward over (sequence, head), each task owning its head's dK and dV.
//
// A portable build compiles this file for AVX2 and for AVX-512 (attention_variants.h), each
// in its own namespace; the lanes hold queries, so both compute the same chains. Its table
// holds the same variant's decode attention (attention_decode.cpp) too.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <new>
#include <type_traits>

#include "ops/cpu/attention_decode.h"
#include "ops/cpu/attention_kernels.h"
#include "ops/cpu/attention_tiles.h"
#include "ops/cpu/attention_variants.h"
#include "ops/cpu/cpu_common.h"
#include "ops/ops.h"
#include "util/error.h"

namespace sps::ops::SPS_KERNEL_VARIANT {
namespace {

using namespace tiles;

// Below this many flops (dense bound) a call stays on the calling thread: waking the team
// costs more than the work, and far more when the cores are oversubscribed.
constexpr double kParallelMinFlops = 1 << 22;

// Where a tile stands in the layout, and what makes a whole key chunk visible.
struct TileGeometry {
  int64_t b, stream, i0, i1, doc_min;
  int64_t uniform_doc_from;  // doc is constant over tokens [this, i1)
};

template <typename T>
TileGeometry make_tile(const AttentionLayout& L, int64_t b, int64_t stream, int64_t i0,
                       TileLanes<T>& lanes) {
  TileGeometry g{b, stream, i0, std::min(i0 + kTile, L.tokens), 0, 0};
  g.doc_min = attention_tile_doc_min(L, b, g.i0, g.i1);
  const int32_t* doc = L.doc ? L.doc + b * L.tokens : nullptr;
  for (int64_t r = 0; r < kTile; ++r) {
    const int64_t i = std::min(i0 + r, g.i1 - 1);
    lanes.token[r] = typename TileLanes<T>::Int(i);
    lanes.doc[r] = doc ? doc[i] : 0;
  }
  if (doc) {
    int64_t lowest = g.i1 - 1;
    for (int64_t key_stream = 0; key_stream < L.streams; ++key_stream)
      lowest = std::min(lowest, attention_key_range(L, key_stream, g.i0, g.i1, g.doc_min).begin);
    int64_t from = g.i1 - 1;
    while (from > lowest && doc[from - 1] == doc[g.i1 - 1]) --from;
    g.uniform_doc_from = from;
  }
  return g;
}

// Visible key tokens of one key stream per lane: [key_lo, key_hi], same document. Returns the
// lowest key token from which a chunk needs no window masking.
template <typename T>
int64_t set_key_bounds(const AttentionLayout& L, const TileGeometry& g, int64_t key_stream,
                       TileLanes<T>& lanes) {
  using Int = typename Simd<T>::Int;
  // The document is the lanes' own test, so each range starts no lower than T below its
  // token, which keeps the lane arithmetic in range.
  const auto keys = [&](int64_t token) {
    return visible_keys(L, g.stream, key_stream, token, token - L.tokens);
  };
  for (int64_t r = 0; r < kTile; ++r) {
    const KeyInterval k = keys(lanes.token[r]);
    lanes.key_lo[r] = Int(k.begin);
    lanes.key_hi[r] = Int(k.end - 1);
  }
  return keys(g.i1 - 1).begin;
}

// One head of one sequence. Q is read in place from qkv; K and V are packed per head into
// contiguous [S, D] blocks first: in qkv a head's rows lie 3·H·D apart, which defeats the
// hardware prefetchers and crowds a few cache sets, and every query tile reads them again.
template <typename T>
struct HeadView {
  const T* q;  // slot s at q + s·q_ld
  int64_t q_ld;
  const T* k;  // [S, D]
  const T* v;  // [S, D]
};

// Copies K and V of (b, h) for slots [s0, s1) into kv ([2, S, D]).
template <typename T>
void pack_head(T* kv, const T* qkv, const AttentionLayout& L, int64_t b, int64_t h, int64_t s0,
               int64_t s1) {
  const int64_t S = L.streams * L.tokens, D = L.head_dim, hd = L.heads * D;
  for (int64_t s = s0; s < s1; ++s) {
    const T* row = qkv + (b * S + s) * 3 * hd + h * D;
    std::memcpy(kv + s * D, row + hd, D * sizeof(T));
    std::memcpy(kv + (S + s) * D, row + 2 * hd, D * sizeof(T));
  }
}

template <typename T>
HeadView<T> head_view(const T* qkv, const T* kv, const AttentionLayout& L, int64_t b, int64_t h) {
  const int64_t S = L.streams * L.tokens, hd = L.heads * L.head_dim;
  return {qkv + b * S * 3 * hd + h * L.head_dim, 3 * hd, kv, kv + S * L.head_dim};
}


template <typename T>
int64_t forward_tile(T* out, T* lse, const HeadView<T>& view, const AttentionLayout& L, int64_t b,
                     int64_t h, int64_t stream, int64_t i0) {
  const int64_t D = L.head_dim, T_ = L.tokens, S = L.streams * T_;
  TileScratch<T>& scratch = thread_tile_scratch<T>();
  T* qt = scratch.qt.get(D * kTile);                   // [D, kTile]
  T* st = scratch.st.get(kAttentionKeyChunk * kTile);  // [chunk, kTile]
  T* ot = scratch.ot.get(D * kTile);                   // [D, kTile] unnormalised output
  alignas(64) T m[kTile], l[kTile], alpha[kTile];
  TileLanes<T> lanes;
  const TileGeometry g = make_tile(L, b, stream, i0, lanes);
  const int64_t rows = g.i1 - g.i0;
  const T scale = T(1) / std::sqrt(T(D));
  load_queries<T>(qt, nullptr, view.q + (stream * T_ + i0) * view.q_ld, view.q_ld, rows, D, scale);
  std::fill(m, m + kTile, -std::numeric_limits<T>::infinity());
  std::fill(l, l + kTile, T(0));
  std::fill(ot, ot + D * kTile, T(0));
  const int32_t* doc = L.doc ? L.doc + b * T_ : nullptr;

  int64_t pairs = 0;
  for (int64_t key_stream = 0; key_stream < L.streams; ++key_stream) {
    const AttentionKeyRange range = attention_key_range(L, key_stream, g.i0, g.i1, g.doc_min);
    if (range.end <= range.begin) continue;
    pairs += rows * (range.end - range.begin);
    const int64_t unwindowed_from = set_key_bounds(L, g, key_stream, lanes);
    const int64_t causal_to = g.i0 - (key_stream <= stream ? 0 : 1);
    for (int64_t j0 = range.begin; j0 < range.end; j0 += kAttentionKeyChunk) {
      const int64_t n = std::min(kAttentionKeyChunk, range.end - j0);
      const int64_t key_row = key_stream * T_ + j0;
      // St = K·(scale·Qᵀ)
      tile_product<T, false>(st, kTile, view.k + key_row * D, D, qt, kTile, n, kTile, D,
                             Store::overwrite);
      const bool whole =
          j0 + n - 1 <= causal_to && j0 >= unwindowed_from && j0 >= g.uniform_doc_from;
      if (!whole) mask_scores(st, n, j0, doc, lanes);
      online_softmax(st, n, m, l, alpha);
      // Oᵀ = Oᵀ ⊙ alpha + Vᵀ·P
      tile_product<T, true>(ot, kTile, view.v + key_row * D, D, st, kTile, D, kTile, n,
                            Store::scale_columns, alpha);
    }
  }

  const int64_t hd = L.heads * D;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t slot = stream * T_ + g.i0 + r;
    T* o = out + (b * S + slot) * hd + h * D;
    const T inv = T(1) / l[r];
    for (int64_t d = 0; d < D; ++d) o[d] = ot[d * kTile + r] * inv;
    lse[(b * L.heads + h) * S + slot] = m[r] + std::log(l[r]);
  }
  return pairs;
}

// dK, dV of the tile's keys are added to dkv ([2, S, D], packed like the head's K and V).
template <typename T>
void backward_tile(T* dqkv, T* dkv, const T* dout, const HeadView<T>& view, const T* out,
                   const T* lse, const AttentionLayout& L, int64_t b, int64_t h, int64_t stream,
                   int64_t i0) {
  using V = typename Simd<T>::V;
  constexpr int W = kLanes<T>;
  const int64_t D = L.head_dim, T_ = L.tokens, S = L.streams * T_, hd = L.heads * D;
  TileScratch<T>& scratch = thread_tile_scratch<T>();
  T* qt = scratch.qt.get(D * kTile);                     // [D, kTile]  scale·Qᵀ
  T* qs = scratch.qs.get(kTile * D);                     // [kTile, D]  scale·Q
  T* dot = scratch.dot.get(D * kTile);                   // [D, kTile]  dOᵀ
  T* dos = scratch.dos.get(kTile * D);                   // [kTile, D]  dO
  T* st = scratch.st.get(kAttentionKeyChunk * kTile);    // [chunk, kTile]  P
  T* dpt = scratch.dpt.get(kAttentionKeyChunk * kTile);  // [chunk, kTile]  dP, then dS
  T* dqt = scratch.ot.get(D * kTile);                    // [D, kTile]  Σ Kᵀ·dS
  alignas(64) T row_lse[kTile], row_delta[kTile];
  TileLanes<T> lanes;
  const TileGeometry g = make_tile(L, b, stream, i0, lanes);
  const int64_t rows = g.i1 - g.i0;
  const T scale = T(1) / std::sqrt(T(D));
  load_queries<T>(qt, qs, view.q + (stream * T_ + i0) * view.q_ld, view.q_ld, rows, D, scale);
  const int64_t first_slot = stream * T_ + g.i0;
  for (int64_t r = 0; r < kTile; ++r) {
    const int64_t real = std::min(r, rows - 1);
    const T* d_o = dout + (b * S + first_slot + real) * hd + h * D;
    const T* o = out + (b * S + first_slot + real) * hd + h * D;
    T delta = 0;  // Δ_r = rowsum(dO ⊙ O) = Σ_j P_rj dP_rj
    for (int64_t d = 0; d < D; ++d) {
      const T value = r < rows ? d_o[d] : T(0);
      dot[d * kTile + r] = value;
      dos[r * D + d] = value;
      delta = cpu::multiply_then_add(value, o[d], delta);  // (unfused in every build)
    }
    row_delta[r] = delta;
    row_lse[r] = lse[(b * L.heads + h) * S + first_slot + real];
  }
  std::fill(dqt, dqt + D * kTile, T(0));
  const int32_t* doc = L.doc ? L.doc + b * T_ : nullptr;
  T* dk_base = dkv;
  T* dv_base = dkv + S * D;

  for (int64_t key_stream = 0; key_stream < L.streams; ++key_stream) {
    const AttentionKeyRange range = attention_key_range(L, key_stream, g.i0, g.i1, g.doc_min);
    if (range.end <= range.begin) continue;
    const int64_t unwindowed_from = set_key_bounds(L, g, key_stream, lanes);
    const int64_t causal_to = g.i0 - (key_stream <= stream ? 0 : 1);
    for (int64_t j0 = range.begin; j0 < range.end; j0 += kAttentionKeyChunk) {
      const int64_t n = std::min(kAttentionKeyChunk, range.end - j0);
      const int64_t key_row = key_stream * T_ + j0;
      const T* k = view.k + key_row * D;
      const T* v = view.v + key_row * D;
      tile_product<T, false>(st, kTile, k, D, qt, kTile, n, kTile, D, Store::overwrite);
      const bool whole =
          j0 + n - 1 <= causal_to && j0 >= unwindowed_from && j0 >= g.uniform_doc_from;
      if (!whole) mask_scores(st, n, j0, doc, lanes);
      tile_product<T, false>(dpt, kTile, v, D, dot, kTile, n, kTile, D, Store::overwrite);
      // P = exp(S − lse); dS = P ⊙ (dP − Δ)
      for (int64_t c = 0; c < n; ++c)
        for (int u = 0; u < kTile / W; ++u) {
          T* p_at = st + c * kTile + u * W;
          T* ds_at = dpt + c * kTile + u * W;
          const V p = vexp(load<V>(p_at) - load<V>(row_lse + u * W));
          store(p_at, p);
          store(ds_at, p * (load<V>(ds_at) - load<V>(row_delta + u * W)));
        }
      // dQᵀ += Kᵀ·dS;  dK += dS·(scale·Q);  dV += P·dO
      tile_product<T, true>(dqt, kTile, k, D, dpt, kTile, D, kTile, n, Store::accumulate);
      tile_product<T, false>(dk_base + key_row * D, D, dpt, kTile, qs, D, n, D, kTile,
                             Store::accumulate);
      tile_product<T, false>(dv_base + key_row * D, D, st, kTile, dos, D, n, D, kTile,
                             Store::accumulate);
    }
  }

  for (int64_t r = 0; r < rows; ++r) {
    T* dq = dqkv + (b * S + first_slot + r) * 3 * hd + h * D;
    for (int64_t d = 0; d < D; ++d) dq[d] = dqt[d * kTile + r] * scale;
  }
}

void check_layout(const AttentionLayout& L) {
  SPS_ASSERT(L.batch >= 0 && L.tokens >= 0 && L.heads >= 0 && L.head_dim >= 0);
  SPS_ASSERT(L.streams == 1 || L.streams == 2);
  SPS_ASSERT(L.persistent_stream >= 0 && L.persistent_stream < L.streams);
  SPS_ASSERT(L.window >= 0);
  SPS_ASSERT(L.tokens < (int64_t(1) << 30));  // token indices fit 32-bit lanes
}

bool worth_parallel(const AttentionLayout& L) {
  const double slots = double(L.streams * L.tokens);
  return double(L.batch * L.heads) * slots * slots * double(L.head_dim) >= kParallelMinFlops;
}

template <typename T>
int64_t attention_forward(T* out, T* lse, const T* qkv, const AttentionLayout& layout) {
  check_layout(layout);
  if (layout.head_dim == 0) return 0;
  const int64_t S = layout.streams * layout.tokens, D = layout.head_dim, T_ = layout.tokens;
  const bool parallel = worth_parallel(layout);
  // A task is a run of consecutive query tiles of one (sequence, head), in every query
  // stream (they see the same key ranges, so the keys are packed once and walked while hot).
  // The task packs those keys into its thread's scratch, then walks them. Runs are cut
  // finely enough for about 4 tasks per thread, and no team-wide barrier is needed.
  const int64_t tiles = (T_ + kTile - 1) / kTile;
  const int64_t heads = layout.batch * layout.heads;
  if (tiles == 0 || heads == 0) return 0;
  const int64_t threads = parallel ? omp_get_max_threads() : 1;
  const int64_t runs_wanted = std::clamp<int64_t>((4 * threads + heads - 1) / heads, 1, tiles);
  const int64_t run_tiles = (tiles + runs_wanted - 1) / runs_wanted;
  const int64_t runs = (tiles + run_tiles - 1) / run_tiles;
  const int64_t tasks = heads * runs;
  int64_t pairs = 0;
#pragma omp parallel reduction(+ : pairs) if (parallel)
  {
    TileScratch<T>& scratch = thread_tile_scratch<T>();
    scratch.reserve(D);
    T* kv = scratch.head_kv.get(2 * S * D);
#pragma omp for schedule(dynamic, 1)
    for (int64_t task = 0; task < tasks; ++task) {
      // Later tiles see more keys: hand them out first so the tail of the loop is short.
      const int64_t run = runs - 1 - task % runs;
      const int64_t bh = task / runs;
      const int64_t b = bh / layout.heads, h = bh % layout.heads;
      const int64_t first = run * run_tiles, last = std::min(tiles, first + run_tiles);
      for (int64_t key_stream = 0; key_stream < layout.streams; ++key_stream) {
        int64_t begin = T_, end = 0;
        for (int64_t tile = first; tile < last; ++tile) {
          const int64_t i0 = tile * kTile, i1 = std::min(i0 + kTile, T_);
          const AttentionKeyRange range = attention_key_range(
              layout, key_stream, i0, i1, attention_tile_doc_min(layout, b, i0, i1));
          begin = std::min(begin, range.begin);
          end = std::max(end, range.end);
        }
        if (end > begin)
          pack_head(kv, qkv, layout, b, h, key_stream * T_ + begin, key_stream * T_ + end);
      }
      const HeadView<T> view = head_view(qkv, kv, layout, b, h);
      for (int64_t tile = last - 1; tile >= first; --tile)
        for (int64_t stream = 0; stream < layout.streams; ++stream)
          pairs += forward_tile(out, lse, view, layout, b, h, stream, tile * kTile);
    }
  }
  return pairs;
}

template <typename T>
void attention_backward(T* dqkv, const T* dout, const T* qkv, const T* out, const T* lse,
                        const AttentionLayout& layout) {
  check_layout(layout);
  if (layout.head_dim == 0) return;
  const int64_t S = layout.streams * layout.tokens, D = layout.head_dim;
  const int64_t hd = layout.heads * D;
  // One task per (sequence, head): it owns that head's dK and dV, so the += over query
  // tiles needs no synchronisation. K, V and dK, dV live packed in the thread's scratch.
#pragma omp parallel if (worth_parallel(layout))
  {
    TileScratch<T>& scratch = thread_tile_scratch<T>();
    scratch.reserve(D);
    T* kv = scratch.head_kv.get(2 * S * D);
    T* dkv = scratch.head_dkv.get(2 * S * D);
#pragma omp for schedule(dynamic, 1)
    for (int64_t bh = 0; bh < layout.batch * layout.heads; ++bh) {
      const int64_t b = bh / layout.heads, h = bh % layout.heads;
      pack_head(kv, qkv, layout, b, h, 0, S);
      std::fill(dkv, dkv + 2 * S * D, T(0));
      const HeadView<T> view = head_view(qkv, kv, layout, b, h);
      for (int64_t stream = 0; stream < layout.streams; ++stream)
        for (int64_t i0 = 0; i0 < layout.tokens; i0 += kTile)
          backward_tile(dqkv, dkv, dout, view, out, lse, layout, b, h, stream, i0);
      for (int64_t s = 0; s < S; ++s) {
        T* row = dqkv + (b * S + s) * 3 * hd + h * D;
        std::memcpy(row + hd, dkv + s * D, D * sizeof(T));
        std::memcpy(row + 2 * hd, dkv + (S + s) * D, D * sizeof(T));
      }
    }
  }
}

}  // namespace

template <typename T>
const AttentionKernels<T>& attention_kernels() {
  static const AttentionKernels<T> kernels = [] {
    AttentionKernels<T> k{};
    k.variant = SPS_STRINGIFY(SPS_KERNEL_VARIANT);
    k.vector_bytes = cpu::kVecBytes;
    k.forward = attention_forward<T>;
    k.backward = attention_backward<T>;
    add_decode_kernels(k);  // attention_decode.cpp's, of the same variant
    return k;
  }();
  return kernels;
}
template const AttentionKernels<float>& attention_kernels<float>();
template const AttentionKernels<double>& attention_kernels<double>();

}  // namespace sps::ops::SPS_KERNEL_VARIANT
