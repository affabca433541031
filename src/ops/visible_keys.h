#pragma once
// The visible-key rule of docs/model.md §4 as one interval per (query token, key stream).
// The keys of key stream s that a query at token i of query stream a may see are the keys of
// i's document among the tokens
//   [max(doc_start, i − reach), i − [s comes after a]]      (input before predict at a token)
// where reach is w for the windowed stream and, for the persistent stream, ω when ω ≥ 0 and
// unbounded otherwise; doc_start is the first token of i's document or any lower bound of it
// (0 where documents are checked elsewhere). The CPU attention's tiles
// (cpu/attention_tiles.h), the tile plan of a blocked device kernel (attention_plan.h) and
// the keys of each decode step (decode_keys.h) all take their ranges from here.
#include <algorithm>
#include <cstdint>

namespace sps::ops {

struct KeyInterval {
  int64_t begin = 0;  // first key token
  int64_t end = 0;    // one past the last key token (empty when end <= begin)
};

// Layout: an AttentionLayout or a DecodeAttentionLayout (persistent_stream, window,
// persistent_key_window).
template <typename Layout>
KeyInterval visible_keys(const Layout& layout, int64_t query_stream, int64_t key_stream,
                         int64_t token, int64_t doc_start = 0) {
  const bool persistent = key_stream == layout.persistent_stream;
  const int64_t reach = persistent ? layout.persistent_key_window : layout.window;
  const bool unbounded = persistent && reach < 0;
  const int64_t begin = unbounded ? doc_start : std::max(doc_start, token - reach);
  return {begin, token + (key_stream > query_stream ? 0 : 1)};
}

}  // namespace sps::ops
