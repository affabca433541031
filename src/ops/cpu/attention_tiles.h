#pragma once
// The tiling rule of the CPU attention kernel (ops/cpu/attention.cpp), exposed so that tests
// and benchmarks can count the score pairs it computes without running it.
//
// Queries are taken in tiles of kAttentionQueryTile tokens of one stream. For each tile and
// each key stream the visible keys lie in one token range [begin, end):
//   persistent stream: [max(doc_min, i0 − ω if ω ≥ 0), i1)
//   windowed stream:   [max(doc_min, i0 − w), i1)
// where the tile holds tokens [i0, i1) and doc_min = min doc_start over the tile. The kernel
// computes scores for every (query, key) in these ranges (area rows · (end − begin)) and
// masks exactly inside them; everything outside is skipped.
#include <algorithm>
#include <cstdint>

#include "ops/ops.h"
#include "ops/visible_keys.h"

namespace sps::ops {

inline constexpr int64_t kAttentionQueryTile = 64;  // 64 keeps sps at T=4096, w=64 ≈ 0.54 dense
// Keys per online-softmax step of attention_forward and attention_backward (decode
// attention has its own step, kDecodeKeyChunk in attention_decode.cpp).
inline constexpr int64_t kAttentionKeyChunk = 128;

struct AttentionKeyRange {
  int64_t begin = 0;  // first key token
  int64_t end = 0;    // one past the last key token (empty when end <= begin)
};

// min doc_start over tokens [i0, i1) of sequence b (0 when doc_start is null).
int64_t attention_tile_doc_min(const AttentionLayout& layout, int64_t b, int64_t i0, int64_t i1);

// The key tokens of `key_stream` that the query tile [i0, i1) may see (see above): from its
// first token's visible keys (ops/visible_keys.h) with the tile's lowest document start, to
// its last token's own key.
inline AttentionKeyRange attention_key_range(const AttentionLayout& layout, int64_t key_stream,
                                             int64_t i0, int64_t i1, int64_t doc_min) {
  const KeyInterval first =
      visible_keys(layout, key_stream, key_stream, i0, std::max<int64_t>(doc_min, 0));
  const KeyInterval last = visible_keys(layout, key_stream, key_stream, i1 - 1);
  return {first.begin, last.end};
}

// The number of score pairs attention_forward computes for this layout (all sequences and
// heads); attention_forward returns the same number.
int64_t attention_pair_count(const AttentionLayout& layout);

}  // namespace sps::ops
