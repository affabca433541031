#include "ops/attention_plan.h"

#include <algorithm>

#include "ops/visible_keys.h"
#include "util/error.h"

namespace sps::ops {

namespace {

// The visible-key interval [lo, hi] of each query token of one sequence for one (query
// stream, key stream) pair; lo > hi when the token sees no key of that stream.
struct RowBounds {
  const int32_t* lo;
  const int32_t* hi;
};

void fill_row_bounds(int32_t* lo, int32_t* hi, const AttentionLayout& L, const int32_t* doc_start,
                     int64_t query_stream, int64_t key_stream) {
  for (int64_t i = 0; i < L.tokens; ++i) {
    const int64_t start = doc_start ? doc_start[i] : 0;
    SPS_ASSERT(start <= i);  // a start after its own token would hide the query from itself
    const KeyInterval keys = visible_keys(L, query_stream, key_stream, i, start);
    lo[i] = int32_t(keys.begin);
    hi[i] = int32_t(keys.end - 1);
  }
}

// The kind of the tile of query tokens [r0, r1] × key tokens [c0, c1]. run_start[j] is the
// first token of the run of equal document ids that ends at j.
TileKind classify(RowBounds rows, const int32_t* run_start, int64_t r0, int64_t r1, int64_t c0,
                  int64_t c1) {
  bool any = false, all = true;
  for (int64_t i = r0; i <= r1; ++i) {
    const int64_t lo = rows.lo[i], hi = rows.hi[i];
    if (lo <= hi && lo <= c1 && hi >= c0) any = true;
    if (lo > c0 || hi < c1) all = false;
  }
  if (!any) return TileKind::skipped;
  // Every pair visible also needs one document over R and C: C lies below R, so the tokens
  // [c0, r1] must be one run.
  if (all && run_start[r1] <= c0) return TileKind::full;
  return TileKind::partial;
}

}  // namespace

void plan_attention_tiles(AttentionTilePlan& plan, const AttentionLayout& L, int64_t query_tile,
                          int64_t key_tile) {
  SPS_ASSERT(query_tile > 0 && key_tile > 0 && (L.streams == 1 || L.streams == 2));
  const int64_t T = L.tokens, S = L.streams;
  plan.batch = L.batch;
  plan.tokens = T;
  plan.streams = S;
  plan.query_tile = query_tile;
  plan.key_tile = key_tile;
  plan.query_tiles = (T + query_tile - 1) / query_tile;
  plan.key_tiles = (T + key_tile - 1) / key_tile;
  const int64_t spans = L.batch * plan.query_tiles * S * S;
  plan.kinds.assign(spans * plan.key_tiles, TileKind::skipped);
  plan.first.assign(spans, 0);
  plan.last.assign(spans, 0);
  plan.computed_pairs = plan.full_tiles = plan.partial_tiles = 0;
  plan.scratch.resize(3 * T);
  int32_t* lo = plan.scratch.data();
  int32_t* hi = lo + T;
  int32_t* run_start = hi + T;

  for (int64_t b = 0; b < L.batch; ++b) {
    // Without document ids the sequence is one document and doc_start says nothing new.
    const int32_t* doc = L.doc ? L.doc + b * T : nullptr;
    const int32_t* doc_start = doc && L.doc_start ? L.doc_start + b * T : nullptr;
    for (int64_t j = 0; j < T; ++j)
      run_start[j] = (doc && j > 0 && doc[j] == doc[j - 1]) ? run_start[j - 1]
                     : doc                                  ? int32_t(j)
                                                            : 0;
    for (int64_t qs = 0; qs < S; ++qs)
      for (int64_t ks = 0; ks < S; ++ks) {
        fill_row_bounds(lo, hi, L, doc_start, qs, ks);
        for (int64_t qt = 0; qt < plan.query_tiles; ++qt) {
          const int64_t r0 = qt * query_tile, r1 = std::min(r0 + query_tile, T) - 1;
          // Only key tiles between the lowest lo and the highest hi can hold a visible key.
          int64_t lowest = T, highest = -1;
          for (int64_t i = r0; i <= r1; ++i)
            if (lo[i] <= hi[i]) lowest = std::min<int64_t>(lowest, lo[i]), highest = hi[i];
          const int64_t span = plan.span_index(b, qt, qs, ks);
          if (highest < 0) continue;
          TileKind* kinds = plan.kinds.data() + span * plan.key_tiles;
          int64_t first = -1, last = -1;
          for (int64_t kt = lowest / key_tile; kt <= highest / key_tile; ++kt) {
            const int64_t c0 = kt * key_tile, c1 = std::min(c0 + key_tile, T) - 1;
            const TileKind kind = classify({lo, hi}, run_start, r0, r1, c0, c1);
            kinds[kt] = kind;
            if (kind == TileKind::skipped) continue;
            if (first < 0) first = kt;
            last = kt + 1;
            plan.computed_pairs += (r1 - r0 + 1) * (c1 - c0 + 1);
            ++(kind == TileKind::full ? plan.full_tiles : plan.partial_tiles);
          }
          if (first >= 0) plan.first[span] = int32_t(first), plan.last[span] = int32_t(last);
        }
      }
  }
}

}  // namespace sps::ops
