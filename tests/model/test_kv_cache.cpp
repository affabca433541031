// The KV cache's bookkeeping: appends, ring wrap-around (the ring keeps the newest pushes),
// clearing a sequence's document, its sizes, and copying a sequence into another cache (the
// ring oldest first even when the source ring has wrapped around); planned row writes land
// every head's K and V where they belong, in every layer.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <set>
#include <vector>

#include "model/kv_cache.h"
#include "util/float_formats.h"

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

// One slot's q | k | v row ([3·H·D]) whose K values are all `k` and V values all `v`.
std::vector<float> qkv_row(float k, float v, int64_t HD) {
  std::vector<float> row(3 * HD, -99.0f);
  std::fill(row.begin() + HD, row.begin() + 2 * HD, k);
  std::fill(row.begin() + 2 * HD, row.end(), v);
  return row;
}

// Writes one slot as persistent row `persistent` and ring row `ring` (when >= 0) of sequence
// b in every layer, the layer's K and V values being `value + 10·l` and its negation.
void write_slot(KvCache<float>& cache, int64_t b, int64_t persistent, int64_t ring, float value) {
  const int64_t HD = cache.shape().heads * cache.shape().head_dim;
  cache.clear_writes();
  cache.plan_persistent_write(b, persistent, 0);
  if (ring >= 0) cache.plan_ring_write(b, ring, 0);
  for (int64_t l = 0; l < cache.shape().layers; ++l) {
    const std::vector<float> row =
        qkv_row(value + 10.0f * float(l), -(value + 10.0f * float(l)), HD);
    cache.write_layer(l, row.data());
  }
}

// The K values held by ring rows [0, ring_length) of sequence b, head h, layer l.
std::multiset<float> ring_contents(const KvCache<float>& cache, int64_t l, int64_t b, int64_t h) {
  const KvCacheShape& s = cache.shape();
  std::multiset<float> values;
  for (int64_t r = 0; r < cache.ring_length(b); ++r)
    values.insert(cache.layer(l).ring_k[((b * s.heads + h) * s.ring_capacity + r) * s.head_dim]);
  return values;
}

TEST(KvCache, RingWrapsAroundKeepingTheNewestPushes) {
  KvCache<float> cache(small_shape(3));
  for (int step = 0; step < 7; ++step) {
    write_slot(cache, 1, cache.persistent_length(1), cache.ring_slot(1), float(step));
    cache.advance(1);
    EXPECT_EQ(cache.persistent_length(1), step + 1);
    EXPECT_EQ(cache.ring_length(1), std::min(step + 1, 3));
    std::multiset<float> expected;
    for (int s = std::max(0, step - 2); s <= step; ++s) expected.insert(float(s));
    EXPECT_EQ(ring_contents(cache, 0, 1, 0), expected) << step;
    EXPECT_EQ(ring_contents(cache, 0, 1, 1), expected) << step;
  }
  // The persistent stream kept everything in order; sequence 0 was never touched.
  for (int64_t r = 0; r < 7; ++r) EXPECT_EQ(cache.layer(0).persistent_k[((1 * 2 + 1) * 10 + r) * 4], float(r));
  for (int64_t r = 0; r < 7; ++r)
    EXPECT_EQ(cache.layer(1).persistent_v[((1 * 2 + 0) * 10 + r) * 4 + 3], -float(r + 10));
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
  EXPECT_EQ(standard.layer(0).ring_k, nullptr);
  EXPECT_EQ(windowed.used_bytes(), 0);
  windowed.set_lengths(0, 4, 3);
  windowed.advance(1);
  EXPECT_EQ(windowed.used_bytes(), (4 + 3 + 1 + 1) * 2 * 2 * 8 * 4);
}

// The K value of ring row r of sequence b, head h, layer l.
float ring_k_at(const KvCache<float>& cache, int64_t l, int64_t b, int64_t h, int64_t r) {
  const KvCacheShape& s = cache.shape();
  return cache.layer(l).ring_k[((b * s.heads + h) * s.ring_capacity + r) * s.head_dim];
}

TEST(KvCacheCopy, CopiesPersistentRowsAndTheRingOldestFirst) {
  KvCache<float> source(small_shape(3));
  for (int step = 0; step < 7; ++step) {  // the ring wraps: it keeps pushes 4, 5, 6
    write_slot(source, 1, source.persistent_length(1), source.ring_slot(1), float(step));
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
        EXPECT_EQ(target.layer(l).persistent_k[at], float(i + 10 * l));
        EXPECT_EQ(target.layer(l).persistent_v[at + 3], -float(i + 10 * l));
      }
    }
  // Standard (no ring) copies just the persistent rows.
  KvCache<float> plain_source(small_shape(0)), plain_target(small_shape(0));
  write_slot(plain_source, 0, 0, -1, 1.5f);
  plain_source.advance(0);
  plain_target.copy_sequence(1, plain_source, 0);
  EXPECT_EQ(plain_target.persistent_length(1), 1);
  EXPECT_EQ(plain_target.layer(1).persistent_v[(1 * 2 + 1) * 10 * 4], -11.5f);
  // Within one cache: sequence 0 takes sequence 1's rows.
  target.copy_sequence(1, target, 0);
  EXPECT_EQ(target.persistent_length(1), 7);
  for (int64_t r = 0; r < 3; ++r) EXPECT_EQ(ring_k_at(target, 1, 1, 1, r), float(14 + r));
}

// Planned writes put every value of every head where the cache's layout says, for several
// slots of one forward in one call per layer: slot s of a q | k | v buffer holds distinct
// values, each persistent and ring row receives exactly its slot's K and V of its head.
TEST(KvCache, PlannedWritesPlaceEveryHeadsKAndVOfEachSlot) {
  KvCacheShape s = small_shape(3);
  s.heads = 3;
  s.head_dim = 5;
  KvCache<float> cache(s);
  const int64_t H = s.heads, D = s.head_dim, slots = 4;
  std::vector<float> qkv(slots * 3 * H * D);
  for (size_t i = 0; i < qkv.size(); ++i) qkv[i] = float(i);
  const auto value = [&](int64_t slot, int64_t part, int64_t h, int64_t j) {
    return qkv[(slot * 3 + part) * H * D + h * D + j];
  };
  // (sequence, row, slot) of each planned write.
  const std::vector<std::array<int64_t, 3>> persistent = {{0, 4, 2}, {1, 0, 0}, {1, 9, 3}},
                                            ring = {{0, 2, 1}, {1, 0, 3}};
  cache.clear_writes();
  for (const auto& [b, row, slot] : persistent) cache.plan_persistent_write(b, row, slot);
  for (const auto& [b, row, slot] : ring) cache.plan_ring_write(b, row, slot);
  for (int64_t l = 0; l < s.layers; ++l) cache.write_layer(l, qkv.data());
  for (int64_t l = 0; l < s.layers; ++l)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t j = 0; j < D; ++j) {
        for (const auto& [b, row, slot] : persistent) {
          const int64_t at = ((b * H + h) * s.persistent_capacity + row) * D + j;
          EXPECT_EQ(cache.layer(l).persistent_k[at], value(slot, 1, h, j));
          EXPECT_EQ(cache.layer(l).persistent_v[at], value(slot, 2, h, j));
        }
        for (const auto& [b, row, slot] : ring) {
          const int64_t at = ((b * H + h) * s.ring_capacity + row) * D + j;
          EXPECT_EQ(cache.layer(l).ring_k[at], value(slot, 1, h, j));
          EXPECT_EQ(cache.layer(l).ring_v[at], value(slot, 2, h, j));
        }
      }
}

// A bf16 cache: each written value is float_to_bf16 of the slot's, at the f32 cache's place;
// a copied sequence keeps those bits; the rows take half the bytes.
TEST(KvCache, Bf16RowsAreTheRoundedValuesInHalfTheBytes) {
  KvCacheShape s = small_shape(3);
  KvCache<float> f32(s);
  s.type = KvType::bf16;
  KvCache<float> bf16(s), copy(s);
  const int64_t H = s.heads, D = s.head_dim, slots = 2;
  std::vector<float> qkv(slots * 3 * H * D);
  for (size_t i = 0; i < qkv.size(); ++i) qkv[i] = 1.0f + float(i) * 0.0123f;  // not bf16 values
  qkv[H * D] = 1.00390625f;  // a tie between two bf16 values: rounds to the even one, 1.0
  for (KvCache<float>* cache : {&f32, &bf16}) {
    cache->clear_writes();
    cache->plan_persistent_write(1, 0, 0);
    cache->plan_ring_write(1, 0, 1);
    for (int64_t l = 0; l < s.layers; ++l) cache->write_layer(l, qkv.data());
    cache->advance(1);
  }
  copy.copy_sequence(0, bf16, 1);
  EXPECT_EQ(bf16.allocated_bytes() * 2, f32.allocated_bytes());
  EXPECT_EQ(bf16.used_bytes() * 2, f32.used_bytes());
  EXPECT_EQ(bf16_to_float(bf16.bf16_layer(0).persistent_k[(1 * H + 0) * s.persistent_capacity * D]),
            1.0f);
  for (int64_t l = 0; l < s.layers; ++l)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t j = 0; j < D; ++j) {
        const int64_t p = ((1 * H + h) * s.persistent_capacity + 0) * D + j;
        const int64_t r = ((1 * H + h) * s.ring_capacity + 0) * D + j;
        const auto rows = bf16.bf16_layer(l);
        const auto wide = f32.layer(l);
        EXPECT_EQ(rows.persistent_k[p], float_to_bf16(wide.persistent_k[p]));
        EXPECT_EQ(rows.persistent_v[p], float_to_bf16(wide.persistent_v[p]));
        EXPECT_EQ(rows.ring_k[r], float_to_bf16(wide.ring_k[r]));
        EXPECT_EQ(rows.ring_v[r], float_to_bf16(wide.ring_v[r]));
        // The copy: the same rows of sequence 0.
        const auto copied = copy.bf16_layer(l);
        EXPECT_EQ(copied.persistent_v[p - H * s.persistent_capacity * D], rows.persistent_v[p]);
        EXPECT_EQ(copied.ring_k[(h * s.ring_capacity + 0) * D + j], rows.ring_k[r]);
      }
  EXPECT_EQ(parse_kv_type("bf16", "--kv-type"), KvType::bf16);
  EXPECT_THROW(parse_kv_type("fp16", "--kv-type"), UserError);
}

}  // namespace
}  // namespace sps
