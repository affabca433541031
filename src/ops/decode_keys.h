#pragma once
// What each new token of a decode chunk sees before its own rows (the rule of
// attention_decode in ops.h), computed on the host from a DecodeAttentionLayout whose length
// arrays are host memory: the CPU kernel walks these ranges, and the caller counts a step's
// score pairs from them without reading anything back from a device.
#include <algorithm>
#include <cstdint>

#include "ops/ops.h"
#include "ops/visible_keys.h"

namespace sps::ops {

struct TokenKeys {
  int64_t persistent_begin = 0, persistent_end = 0;  // cache rows
  int64_t ring = 0;                                  // newest ring rows
  int64_t chunk_persistent_begin = 0;                // chunk tokens [begin, t)
  int64_t chunk_window_begin = 0;                    // chunk tokens [begin, t), Q = 2
};

// Each stream's cached rows are the newest of that stream before the chunk (persistent rows
// [0, persistent_end), ring rows [0, ring_len) in order of their tokens), so token t of the
// chunk stands at end + t in the coordinates of each stream's own rows.
inline TokenKeys token_keys(const DecodeAttentionLayout& L, int64_t b, int64_t t) {
  TokenKeys k;
  k.persistent_end = L.persistent_end ? L.persistent_end[b] : 0;
  const int64_t ring_len = L.ring_len ? L.ring_len[b] : 0;
  const int64_t persistent = L.persistent_stream, windowed = 1 - persistent;
  const int64_t persistent_begin =
      visible_keys(L, persistent, persistent, k.persistent_end + t).begin;
  const int64_t window_begin = visible_keys(L, windowed, windowed, ring_len + t).begin;
  k.persistent_begin = std::min(persistent_begin, k.persistent_end);
  k.ring = std::max<int64_t>(0, ring_len - window_begin);
  k.chunk_persistent_begin = std::max<int64_t>(0, persistent_begin - k.persistent_end);
  k.chunk_window_begin = std::max<int64_t>(0, window_begin - ring_len);
  return k;
}

// Keys token t's query rows see before its own rows.
inline int64_t keys_before(const TokenKeys& k, int64_t t, int64_t Q) {
  return k.persistent_end - k.persistent_begin + k.ring + (t - k.chunk_persistent_begin) +
         (Q == 2 ? t - k.chunk_window_begin : 0);
}

// The query-key score pairs attention_decode computes for `layout` (host length arrays):
// per head, every query row's keys before its token, plus the own rows (1 for Q = 1; 1 + 2
// for the two rows of an interleaved token).
inline int64_t decode_attention_pairs(const DecodeAttentionLayout& layout) {
  const int64_t Q = layout.queries;
  int64_t keys = 0;
  for (int64_t b = 0; b < layout.batch; ++b)
    for (int64_t t = 0; t < layout.tokens; ++t) keys += keys_before(token_keys(layout, b, t), t, Q);
  return layout.heads * (Q * keys + layout.batch * layout.tokens * Q * (Q + 1) / 2);
}

}  // namespace sps::ops
