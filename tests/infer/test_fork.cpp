// Forking a prefilled row (Decoder::fork, KvCache::copy_sequence): a row forked from another
// decoder continues exactly as a row that prefilled the same prompt itself, for every family
// and window (w = 0, w < prompt, w ≥ T), with an EOS inside a prompt and one ending it; the
// ring is copied oldest first even when the source ring has wrapped around.
#include <gtest/gtest.h>

#include <vector>

#include "gradcheck.h"
#include "model/decoder.h"
#include "model/kv_cache.h"
#include "model/model_fixtures.h"

namespace sps::testing {
namespace {

// Left-pads each prompt to the longest.
std::vector<int32_t> padded(const std::vector<std::vector<int32_t>>& prompts, int32_t pad,
                            int64_t& P) {
  P = 0;
  for (const auto& p : prompts) P = std::max<int64_t>(P, int64_t(p.size()));
  std::vector<int32_t> out;
  for (const auto& p : prompts) {
    out.insert(out.end(), size_t(P) - p.size(), pad);
    out.insert(out.end(), p.begin(), p.end());
  }
  return out;
}

TEST(DecoderFork, ForkedRowsContinueAsIfTheyHadPrefilled) {
  for (const std::string& family : kFamilies)
    for (int64_t w : {0, 2, 20}) {
      const ModelConfig c = micro_config(family, w);
      Model<float> model(c);
      randomize_weights(model, 8);
      const int32_t eos = int32_t(c.eos_token_id);
      const std::vector<std::vector<int32_t>> prompts = {
          {5, 9, eos, 3, 7, 11, 2}, {4, 8, eos}, {6}};
      // The source prefills the three prompts; the target forks them into rows in another
      // order (one twice) and with more capacity.
      int64_t P = 0;
      const auto source_tokens = padded(prompts, int32_t(c.pad_token_id), P);
      DecoderShape source_shape;
      source_shape.batch = 3;
      source_shape.max_prompt_tokens = P;
      Decoder<float> source(model, source_shape);
      source.prefill(source_tokens.data(), P);

      const std::vector<int64_t> from = {2, 0, 1, 0};
      const int64_t steps = 4;
      DecoderShape shape;
      shape.batch = 4;
      shape.max_prompt_tokens = P + 1;
      shape.max_new_tokens = steps;
      Decoder<float> forked(model, shape);
      for (int64_t r = 0; r < 4; ++r) forked.fork(r, source, from[size_t(r)]);

      std::vector<std::vector<int32_t>> reordered;
      for (int64_t s : from) reordered.push_back(prompts[size_t(s)]);
      int64_t P2 = 0;
      const auto direct_tokens = padded(reordered, int32_t(c.pad_token_id), P2);
      DecoderShape direct_shape = shape;
      direct_shape.max_prompt_tokens = P2;
      Decoder<float> direct(model, direct_shape);
      direct.prefill(direct_tokens.data(), P2);

      const std::vector<std::vector<int32_t>> feeds = {
          {1, 2, 3, 4}, {10, eos, 12, 13}, {20, 21, 22, 23}, {30, 31, 32, 33}};
      for (int64_t k = 0; k <= steps; ++k) {
        for (int64_t r = 0; r < 4; ++r) {
          EXPECT_EQ(forked.next_position(r), direct.next_position(r));
          EXPECT_LT(max_relative_error(forked.logits() + r * c.vocab_size,
                                       direct.logits() + r * c.vocab_size, c.vocab_size),
                    1e-5)
              << family << " w=" << w << " row " << r << " step " << k;
        }
        if (k == steps) break;
        std::vector<int32_t> next;
        for (const auto& f : feeds) next.push_back(f[size_t(k)]);
        forked.step(next.data());
        direct.step(next.data());
      }
    }
}

KvCacheShape cache_shape(int64_t ring) {
  KvCacheShape s;
  s.layers = 2;
  s.batch = 2;
  s.heads = 2;
  s.head_dim = 3;
  s.persistent_capacity = 10;
  s.ring_capacity = ring;
  return s;
}

// The K value of ring row r of sequence b, head h, layer l.
float ring_k_at(const KvCache<float>& cache, int64_t l, int64_t b, int64_t h, int64_t r) {
  const KvCacheShape& s = cache.shape();
  return cache.ring_k(l)[((b * s.heads + h) * s.ring_capacity + r) * s.head_dim];
}

TEST(KvCacheCopy, CopiesPersistentRowsAndTheRingOldestFirst) {
  KvCache<float> source(cache_shape(3));
  const int64_t HD = 6;
  for (int step = 0; step < 7; ++step) {  // the ring wraps: it keeps pushes 4, 5, 6
    for (int64_t l = 0; l < 2; ++l) {
      const std::vector<float> k(HD, float(step + 10 * l)), v(HD, -float(step + 10 * l));
      source.write_persistent(l, 1, source.persistent_length(1), k.data(), v.data());
      source.write_ring(l, 1, source.ring_slot(1), k.data(), v.data());
    }
    source.advance(1);
  }
  KvCache<float> target(cache_shape(5));
  target.copy_sequence(0, source, 1);
  EXPECT_EQ(target.persistent_length(0), 7);
  EXPECT_EQ(target.ring_length(0), 3);
  EXPECT_EQ(target.ring_slot(0), 3);
  for (int64_t l = 0; l < 2; ++l)
    for (int64_t h = 0; h < 2; ++h) {
      for (int64_t r = 0; r < 3; ++r)
        EXPECT_EQ(ring_k_at(target, l, 0, h, r), float(4 + r + 10 * l)) << l << " " << h << " " << r;
      for (int64_t i = 0; i < 7; ++i) {
        const int64_t at = ((0 * 2 + h) * 10 + i) * 3;
        EXPECT_EQ(target.persistent_k(l)[at], float(i + 10 * l));
        EXPECT_EQ(target.persistent_v(l)[at + 2], -float(i + 10 * l));
      }
    }
  // Standard (no ring) copies just the persistent rows.
  KvCache<float> plain_source(cache_shape(0)), plain_target(cache_shape(0));
  const std::vector<float> k(HD, 1.5f), v(HD, 2.5f);
  for (int64_t l = 0; l < 2; ++l) plain_source.write_persistent(l, 0, 0, k.data(), v.data());
  plain_source.advance(0);
  plain_target.copy_sequence(1, plain_source, 0);
  EXPECT_EQ(plain_target.persistent_length(1), 1);
  EXPECT_EQ(plain_target.persistent_v(1)[(1 * 2 + 1) * 10 * 3], 2.5f);
}

}  // namespace
}  // namespace sps::testing
