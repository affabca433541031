#pragma once
// The tile plan of a blocked attention kernel: for each query tile and key tile of each
// (query stream, key stream) pair, whether the tile holds no visible pair (skipped), only
// visible pairs (full: computed with no mask arithmetic) or some of each (partial: masked
// per element). The host builds it once per micro-batch from the AttentionLayout; a device
// kernel reads a tile's kind instead of testing the mask per tile.
//
// Visible keys of query token i in key stream s lie in one interval [lo(i), hi(i)]
// (visible_keys.h, docs/model.md §4), and within it they are the keys of i's document. A
// tile of query tokens R × key tokens C is
//   skipped  when C misses [lo(i), hi(i)] for every i in R;
//   full     when one document holds every token of R and C, and C ⊆ [lo(i), hi(i)] ∀ i ∈ R;
//   partial  otherwise.
// Skipped and full are therefore always right (never a visible pair skipped, never a masked
// one taken). When documents are contiguous runs and doc_start is each run's first token, as
// the slot layout builds them, the plan is also tight: every partial tile holds both kinds.
//
// The CPU kernel (ops/cpu/attention_tiles.h) has its own, coarser rule suited to its vector
// lanes; this plan is the one a device kernel with square tiles uses.
#include <cstdint>
#include <vector>

#include "ops/ops.h"

namespace sps::ops {

struct AttentionTilePlan {
  int64_t batch = 0, tokens = 0, streams = 1;
  int64_t query_tile = 0, key_tile = 0;    // tokens per tile
  int64_t query_tiles = 0, key_tiles = 0;  // tiles per sequence and stream (the last may be short)
  // kinds[index(b, query tile, query stream, key stream, key tile)]
  std::vector<TileKind> kinds;
  // Key tiles [first, last) of each (b, query tile, query stream, key stream) hold every tile
  // not skipped (tiles between them may still be skipped); first == last when none.
  std::vector<int32_t> first, last;
  int64_t computed_pairs = 0;  // score pairs in the tiles not skipped, one head, all sequences
  int64_t full_tiles = 0, partial_tiles = 0;
  std::vector<int32_t> scratch;  // per-token bounds of one sequence, kept to avoid reallocating

  int64_t span_index(int64_t b, int64_t qt, int64_t query_stream, int64_t key_stream) const {
    return ((b * query_tiles + qt) * streams + query_stream) * streams + key_stream;
  }
  TileKind kind(int64_t b, int64_t qt, int64_t query_stream, int64_t key_stream,
                int64_t kt) const {
    return kinds[span_index(b, qt, query_stream, key_stream) * key_tiles + kt];
  }
};

// Fills `plan` for `layout` with tiles of query_tile × key_tile tokens; reuses its storage
// (no allocation once sized). heads and head_dim of the layout are not used.
void plan_attention_tiles(AttentionTilePlan& plan, const AttentionLayout& layout,
                          int64_t query_tile, int64_t key_tile);

}  // namespace sps::ops
