// The one visible-key rule (ops/visible_keys.h) against the dense mask of docs/model.md §4
// written out literally (attention_reference.h): for every family's streams, several w, ω, T
// and document layouts, every (query slot, key slot) pair is visible exactly when its key
// token lies in the interval and in the query's document.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "ops/attention_reference.h"
#include "ops/visible_keys.h"

namespace sps {
namespace {

TEST(VisibleKeys, IntervalAndDocumentAreTheDenseMaskForEveryFamily) {
  struct FamilyStreams {
    const char* name;
    int64_t streams, persistent;
  };
  // 2x_memory is sps with w ≥ T, covered by the widest window.
  const FamilyStreams families[] = {
      {"standard", 1, 0}, {"sps", 2, 0}, {"reverse_sps", 2, 1}, {"delayed_state", 2, 1}};
  std::mt19937_64 rng(39);
  int64_t visible_pairs = 0, pairs = 0;
  for (const FamilyStreams& f : families)
    for (const int64_t T : {1, 4, 9, 16})
      for (const int64_t w : {int64_t(0), int64_t(1), int64_t(3), T + 2})
        for (const int64_t omega : {-1, 0, 2, 5})
          for (const int pads : {0, 2}) {
            const std::vector<int32_t> doc = testing::random_documents(1, T, pads, 2, rng);
            const std::vector<int32_t> start = testing::document_starts(doc, 1, T);
            const ops::AttentionLayout L =
                testing::mask_layout(1, T, f.streams, f.persistent, w, omega);
            for (int64_t a = 0; a < f.streams; ++a)
              for (int64_t i = 0; i < T; ++i)
                for (int64_t b = 0; b < f.streams; ++b) {
                  // The document's first token, and 0: any lower bound of it gives the same
                  // mask once the document is compared.
                  const ops::KeyInterval exact = ops::visible_keys(L, a, b, i, start[i]);
                  const ops::KeyInterval loose = ops::visible_keys(L, a, b, i);
                  for (int64_t j = 0; j < T; ++j) {
                    const bool expected = testing::reference_visible(L, doc.data(), a, i, b, j);
                    const bool in_exact = exact.begin <= j && j < exact.end;
                    const bool in_loose = loose.begin <= j && j < loose.end;
                    EXPECT_EQ(in_exact && doc[j] == doc[i], expected)
                        << f.name << " T=" << T << " w=" << w << " ω=" << omega << " query (" << a
                        << ", " << i << ") key (" << b << ", " << j << ")";
                    EXPECT_EQ(in_loose && doc[j] == doc[i], expected)
                        << f.name << " doc_start 0, T=" << T << " w=" << w << " ω=" << omega;
                    // With the exact start the interval holds no key of another document.
                    if (in_exact) {
                      EXPECT_EQ(doc[j], doc[i]);
                    }
                    visible_pairs += expected;
                    ++pairs;
                  }
                }
          }
  // Both kinds occur, so neither a rule that hides nor one that shows everything passes.
  EXPECT_GT(visible_pairs, pairs / 10);
  EXPECT_LT(visible_pairs, pairs - pairs / 10);
}

}  // namespace
}  // namespace sps
