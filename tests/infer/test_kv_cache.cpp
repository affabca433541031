// The KV cache's bookkeeping: appends, ring wrap-around (the ring keeps the newest pushes),
// clearing a sequence's document, its sizes, and copying a sequence into another cache (the
// ring oldest first even when the source ring has wrapped around).
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

#include "model/kv_cache.h"

namespace sps {
namespace {

KvCacheShape small_shape(int64_t ring) {
  KvCacheShape s;
  s.layers = 2;
  s.batch = 2;
  s.heads = 2;
  s.head_dim = 4;
  s.persistent_capacity = 10;
  s.ring_capacity = ring;
  return s;
}

// A row of H·D values all equal to `value` (K) and −value (V).
std::vector<float> row_of(float value, int64_t n) { return std::vector<float>(n, value); }

// The K values held by ring rows [0, ring_length) of sequence b, head h, layer l.
std::multiset<float> ring_contents(const KvCache<float>& cache, int64_t l, int64_t b, int64_t h) {
  const KvCacheShape& s = cache.shape();
  std::multiset<float> values;
  for (int64_t r = 0; r < cache.ring_length(b); ++r)
    values.insert(cache.ring_k(l)[((b * s.heads + h) * s.ring_capacity + r) * s.head_dim]);
  return values;
}

TEST(KvCache, RingWrapsAroundKeepingTheNewestPushes) {
  KvCache<float> cache(small_shape(3));
  const int64_t HD = 8;
  for (int step = 0; step < 7; ++step) {
    for (int64_t l = 0; l < 2; ++l) {
      const auto k = row_of(float(step), HD), v = row_of(-float(step), HD);
      cache.write_persistent(l, 1, cache.persistent_length(1), k.data(), v.data());
      cache.write_ring(l, 1, cache.ring_slot(1), k.data(), v.data());
    }
    cache.advance(1);
    EXPECT_EQ(cache.persistent_length(1), step + 1);
    EXPECT_EQ(cache.ring_length(1), std::min(step + 1, 3));
    std::multiset<float> expected;
    for (int s = std::max(0, step - 2); s <= step; ++s) expected.insert(float(s));
    for (int64_t l = 0; l < 2; ++l)
      for (int64_t h = 0; h < 2; ++h) EXPECT_EQ(ring_contents(cache, l, 1, h), expected) << step;
  }
  // The persistent stream kept everything in order; sequence 0 was never touched.
  for (int64_t r = 0; r < 7; ++r) EXPECT_EQ(cache.persistent_k(0)[((1 * 2 + 1) * 10 + r) * 4], float(r));
  for (int64_t r = 0; r < 7; ++r) EXPECT_EQ(cache.persistent_v(1)[((1 * 2 + 0) * 10 + r) * 4 + 3], -float(r));
  EXPECT_EQ(cache.persistent_length(0), 0);
  EXPECT_EQ(cache.ring_length(0), 0);
}

TEST(KvCache, ClearStartsANewDocumentForThatSequenceOnly) {
  KvCache<float> cache(small_shape(2));
  for (int step = 0; step < 3; ++step) {
    cache.advance(0);
    cache.advance(1);
  }
  cache.clear(0);
  EXPECT_EQ(cache.persistent_length(0), 0);
  EXPECT_EQ(cache.ring_length(0), 0);
  EXPECT_EQ(cache.ring_slot(0), 0);
  EXPECT_EQ(cache.persistent_length(1), 3);
  EXPECT_EQ(cache.ring_length(1), 2);
  cache.advance(0);
  EXPECT_EQ(cache.persistent_length(0), 1);
  EXPECT_EQ(cache.ring_length(0), 1);
  EXPECT_EQ(cache.ring_slot(0), 1);
}

TEST(KvCache, SetLengthsContinuesTheRingAfterPrefill) {
  KvCache<float> cache(small_shape(3));
  cache.set_lengths(0, 5, 3);
  EXPECT_EQ(cache.ring_slot(0), 0);  // the oldest prefilled row goes first
  cache.set_lengths(1, 2, 2);
  EXPECT_EQ(cache.ring_slot(1), 2);
  cache.advance(1);
  EXPECT_EQ(cache.ring_length(1), 3);
  EXPECT_EQ(cache.ring_slot(1), 0);
}

TEST(KvCache, ReportsAllocatedAndUsedBytes) {
  KvCache<float> standard(small_shape(0)), windowed(small_shape(3));
  // layers · 2 (K, V) · batch · capacity · H · D · 4 bytes
  EXPECT_EQ(standard.allocated_bytes(), 2 * 2 * 2 * 10 * 8 * 4);
  EXPECT_EQ(windowed.allocated_bytes(), 2 * 2 * 2 * (10 + 3) * 8 * 4);
  EXPECT_EQ(standard.ring_k(0), nullptr);
  EXPECT_EQ(windowed.used_bytes(), 0);
  windowed.set_lengths(0, 4, 3);
  windowed.advance(1);
  EXPECT_EQ(windowed.used_bytes(), (4 + 3 + 1 + 1) * 2 * 2 * 8 * 4);
}

// The K value of ring row r of sequence b, head h, layer l.
float ring_k_at(const KvCache<float>& cache, int64_t l, int64_t b, int64_t h, int64_t r) {
  const KvCacheShape& s = cache.shape();
  return cache.ring_k(l)[((b * s.heads + h) * s.ring_capacity + r) * s.head_dim];
}

TEST(KvCacheCopy, CopiesPersistentRowsAndTheRingOldestFirst) {
  KvCache<float> source(small_shape(3));
  const int64_t HD = 8;
  for (int step = 0; step < 7; ++step) {  // the ring wraps: it keeps pushes 4, 5, 6
    for (int64_t l = 0; l < 2; ++l) {
      const std::vector<float> k(HD, float(step + 10 * l)), v(HD, -float(step + 10 * l));
      source.write_persistent(l, 1, source.persistent_length(1), k.data(), v.data());
      source.write_ring(l, 1, source.ring_slot(1), k.data(), v.data());
    }
    source.advance(1);
  }
  KvCache<float> target(small_shape(5));
  target.copy_sequence(0, source, 1);
  EXPECT_EQ(target.persistent_length(0), 7);
  EXPECT_EQ(target.ring_length(0), 3);
  EXPECT_EQ(target.ring_slot(0), 3);
  for (int64_t l = 0; l < 2; ++l)
    for (int64_t h = 0; h < 2; ++h) {
      for (int64_t r = 0; r < 3; ++r)
        EXPECT_EQ(ring_k_at(target, l, 0, h, r), float(4 + r + 10 * l)) << l << " " << h << " " << r;
      for (int64_t i = 0; i < 7; ++i) {
        const int64_t at = ((0 * 2 + h) * 10 + i) * 4;
        EXPECT_EQ(target.persistent_k(l)[at], float(i + 10 * l));
        EXPECT_EQ(target.persistent_v(l)[at + 3], -float(i + 10 * l));
      }
    }
  // Standard (no ring) copies just the persistent rows.
  KvCache<float> plain_source(small_shape(0)), plain_target(small_shape(0));
  const std::vector<float> k(HD, 1.5f), v(HD, 2.5f);
  for (int64_t l = 0; l < 2; ++l) plain_source.write_persistent(l, 0, 0, k.data(), v.data());
  plain_source.advance(0);
  plain_target.copy_sequence(1, plain_source, 0);
  EXPECT_EQ(plain_target.persistent_length(1), 1);
  EXPECT_EQ(plain_target.persistent_v(1)[(1 * 2 + 1) * 10 * 4], 2.5f);
}

}  // namespace
}  // namespace sps
