// The tile plan of a blocked attention kernel (ops/attention_plan.h) against the dense mask
// of docs/model.md §4: exhaustively at small T for every family, w, ω, tile shape and
// document layout, and its cost at the paper's shape.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "ops/attention_plan.h"
#include "ops/attention_reference.h"
#include "ops/ops.h"

namespace sps {
namespace {

using ops::AttentionLayout;
using ops::AttentionTilePlan;
using ops::TileKind;

// The document layouts of one plan check: ids [B, T] and each token's document start.
struct Documents {
  std::string name;
  std::vector<int32_t> doc, start;  // empty: no document ids (one document)
  bool contiguous = true;           // every document one run, starts exact
};

std::vector<Documents> document_layouts(int64_t B, int64_t T, int64_t tile, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Documents> layouts;
  layouts.push_back({"none", {}, {}, true});
  auto add = [&](std::string name, std::vector<int32_t> doc) {
    std::vector<int32_t> start = testing::document_starts(doc, B, T);
    layouts.push_back({std::move(name), std::move(doc), std::move(start), true});
  };
  add("one document", std::vector<int32_t>(B * T, 4));
  add("random EOS", testing::random_documents(B, T, 0, 3, rng));
  add("left pads and EOS", testing::random_documents(B, T, 2, 2, rng));
  std::vector<int32_t> edges(B * T);  // a new document at every tile edge and every 3 tokens
  for (int64_t i = 0; i < B * T; ++i) edges[i] = int32_t((i % T) / tile + (i % T) / 3 * 100);
  add("EOS on tile edges", edges);
  // A PAD inside a document (never built by the slot layout, still masked right): the PAD is
  // its own document, the tokens after it keep their document and its start.
  Documents hole{"PAD inside a document", std::vector<int32_t>(B * T, 1),
                 std::vector<int32_t>(B * T, 0), false};
  for (int64_t b = 0; b < B; ++b)
    if (T > 2) hole.doc[b * T + T / 2] = -5, hole.start[b * T + T / 2] = int32_t(T / 2);
  layouts.push_back(hole);
  return layouts;
}

// Checks every tile of `plan` against the dense mask; returns the visible pairs counted.
int64_t check_plan(const AttentionTilePlan& plan, const AttentionLayout& L, bool contiguous,
                   const std::string& what) {
  const int64_t T = L.tokens, S = L.streams;
  int64_t computed = 0, full = 0, partial = 0, visible_total = 0;
  for (int64_t b = 0; b < L.batch; ++b) {
    const int32_t* doc = L.doc ? L.doc + b * T : nullptr;
    for (int64_t qt = 0; qt < plan.query_tiles; ++qt)
      for (int64_t qs = 0; qs < S; ++qs)
        for (int64_t ks = 0; ks < S; ++ks) {
          const int64_t span = plan.span_index(b, qt, qs, ks);
          for (int64_t kt = 0; kt < plan.key_tiles; ++kt) {
            const int64_t r0 = qt * plan.query_tile, r1 = std::min(r0 + plan.query_tile, T);
            const int64_t c0 = kt * plan.key_tile, c1 = std::min(c0 + plan.key_tile, T);
            int64_t visible = 0;
            for (int64_t i = r0; i < r1; ++i)
              for (int64_t j = c0; j < c1; ++j)
                visible += testing::reference_visible(L, doc, qs, i, ks, j);
            visible_total += visible;
            const int64_t area = (r1 - r0) * (c1 - c0);
            const TileKind kind = plan.kind(b, qt, qs, ks, kt);
            // Built only when an expectation fails (gtest streams messages lazily).
            const auto where = [&] {
              return what + " b=" + std::to_string(b) + " qt=" + std::to_string(qt) +
                     " qs=" + std::to_string(qs) + " ks=" + std::to_string(ks) +
                     " kt=" + std::to_string(kt);
            };
            if (kind == TileKind::skipped) {
              EXPECT_EQ(visible, 0) << "a skipped tile holds visible pairs: " << where();
              continue;
            }
            EXPECT_GE(kt, plan.first[span]) << where();
            EXPECT_LT(kt, plan.last[span]) << where();
            computed += area;
            if (kind == TileKind::full) {
              ++full;
              EXPECT_EQ(visible, area) << "a full tile holds masked pairs: " << where();
            } else {
              ++partial;
              if (contiguous) {
                EXPECT_GT(visible, 0) << "a partial tile could have been skipped: " << where();
                EXPECT_LT(visible, area) << "a partial tile could have been full: " << where();
              }
            }
          }
        }
  }
  EXPECT_EQ(plan.computed_pairs, computed) << what;
  EXPECT_EQ(plan.full_tiles, full) << what;
  EXPECT_EQ(plan.partial_tiles, partial) << what;
  return visible_total;
}

TEST(AttentionTilePlan, EveryTileMatchesTheDenseMaskExhaustively) {
  const int64_t B = 2;
  const int64_t token_choices[] = {1, 2, 5, 8, 13, 17, 33};
  const int64_t tile_choices[][2] = {{1, 1}, {4, 4}, {8, 4}, {4, 8}, {5, 3}};
  // standard (one stream); sps (input persists); reverse sps (predict persists). 2x_memory
  // is sps with w = T and delayed state sps with w = 0 (docs/model.md §2): both are covered.
  struct Family { int64_t streams, persistent; };
  const Family families[] = {{1, 0}, {2, 0}, {2, 1}};
  const int64_t omegas[] = {-1, 0, 1, 4};
  AttentionTilePlan plan;
  int64_t plans = 0;
  for (int64_t T : token_choices)
    for (const auto& tile : tile_choices)
      for (const Documents& docs : document_layouts(B, T, tile[0], uint64_t(T * 31 + tile[1])))
        for (const Family& family : families)
          for (int64_t window : {0, 1, 2, 3, 7, 40})
            for (int64_t omega : omegas) {
              if (family.streams == 1 && window != 0) continue;  // no windowed stream
              AttentionLayout L = testing::mask_layout(B, T, family.streams, family.persistent,
                                                window, omega);
              L.doc = docs.doc.empty() ? nullptr : docs.doc.data();
              L.doc_start = docs.start.empty() ? nullptr : docs.start.data();
              ops::plan_attention_tiles(plan, L, tile[0], tile[1]);
              const std::string what =
                  "T=" + std::to_string(T) + " tiles " + std::to_string(tile[0]) + "x" +
                  std::to_string(tile[1]) + " streams=" + std::to_string(family.streams) +
                  " persistent=" + std::to_string(family.persistent) +
                  " w=" + std::to_string(window) + " omega=" + std::to_string(omega) + " docs: " +
                  docs.name;
              const int64_t visible = check_plan(plan, L, docs.contiguous, what);
              EXPECT_GE(plan.computed_pairs, visible) << what;
              ++plans;
              if (::testing::Test::HasFailure()) return;  // one case is enough to read
            }
  EXPECT_GT(plans, 5000);
}

TEST(AttentionTilePlan, StorageIsReusedAcrossMicroBatches) {
  std::vector<int32_t> doc(2 * 64, 0), start(2 * 64, 0);
  AttentionLayout L = testing::mask_layout(2, 64, 2, 0, 8, -1);
  L.doc = doc.data();
  L.doc_start = start.data();
  AttentionTilePlan plan;
  ops::plan_attention_tiles(plan, L, 16, 16);
  const void* kinds = plan.kinds.data();
  const int64_t pairs = plan.computed_pairs;
  ops::plan_attention_tiles(plan, L, 16, 16);
  EXPECT_EQ(plan.kinds.data(), kinds);
  EXPECT_EQ(plan.computed_pairs, pairs);  // counters start again from zero
}

// docs/model.md's cost at T = 4096, w = 64, 64-token tiles: persistent keys (input keys, seen
// by both query streams up to the diagonal) 2 · 64² · (1 + … + 64) = 17,039,360 pairs,
// windowed keys two tiles per query tile but one at the first, 2 · 127 · 64² = 1,040,384.
TEST(AttentionTilePlan, SpsAt4096Window64ComputesAtMost55PercentOfDenseCausal) {
  const int64_t T = 4096;
  AttentionLayout sps = testing::mask_layout(1, T, 2, 0, 64, -1);
  AttentionTilePlan plan;
  ops::plan_attention_tiles(plan, sps, 64, 64);
  EXPECT_EQ(plan.computed_pairs, 17039360 + 1040384);
  const double dense = double(2 * T) * double(2 * T + 1) / 2;
  EXPECT_LE(double(plan.computed_pairs) / dense, 0.55);
  // Off-diagonal persistent tiles are full: 2 query streams · (0 + 1 + … + 63).
  EXPECT_EQ(plan.full_tiles, 2 * 63 * 64 / 2);
  // Standard with 128-token tiles: the causal triangle of tiles, 128² · (1 + … + 32).
  AttentionLayout standard = testing::mask_layout(1, T, 1, 0, 0, -1);
  ops::plan_attention_tiles(plan, standard, 128, 128);
  EXPECT_EQ(plan.computed_pairs, 128 * 128 * 32 * 33 / 2);
  EXPECT_EQ(plan.full_tiles, 31 * 32 / 2);
}

}  // namespace
}  // namespace sps
