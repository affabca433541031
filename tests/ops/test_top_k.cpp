// The k most likely ids per row (ops::top_k_rows), the order every backend gives: against a
// full sort of the allowed ids, with ties (−0 and +0 among them), banned ids, fewer allowed
// ids than k, and rows holding NaN or infinity.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "ops/ops.h"

namespace sps {
namespace {

// Every allowed id of the row, sorted by value (largest first) and then id.
std::vector<int32_t> sorted_allowed(const float* row, int64_t n,
                                    const std::vector<uint8_t>& banned) {
  std::vector<int32_t> ids;
  for (int32_t id = 0; id < int32_t(n); ++id)
    if (!banned[id]) ids.push_back(id);
  std::stable_sort(ids.begin(), ids.end(), [row](int32_t a, int32_t b) { return row[a] > row[b]; });
  return ids;
}

TEST(TopKRows, HandPickedRows) {
  const std::vector<float> x = {1, 5,     5, 2,   // tie: 1 before 2
                                9, 3,     9, 9,   // 0 banned: 2, then 3
                                5, -0.0f, 0, -1,  // −0 equals +0: 1 before 2
                                7, 7,     7, 7};
  std::vector<uint8_t> banned = {1, 0, 0, 0};
  std::vector<int32_t> ids(8, -7), nonfinite(4, -7);
  std::vector<float> values(8, -7);
  ops::top_k_rows(ids.data(), values.data(), nonfinite.data(), x.data(), 4, 4, banned.data(), 2);
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 2, 2, 3, 1, 2, 1, 2}));
  EXPECT_EQ(values, (std::vector<float>{5, 5, 9, 9, 0, 0, 7, 7}));
  EXPECT_EQ(nonfinite, (std::vector<int32_t>{-1, -1, -1, -1}));
  ops::top_k_rows(ids.data(), values.data(), nonfinite.data(), x.data(), 4, 4, banned.data(), 1);
  EXPECT_EQ((std::vector<int32_t>(ids.begin(), ids.begin() + 4)),
            (std::vector<int32_t>{1, 2, 1, 1}));
  // More than the allowed ids: −1 and 0 past them.
  std::vector<int32_t> ids5(20);
  std::vector<float> values5(20);
  ops::top_k_rows(ids5.data(), values5.data(), nonfinite.data(), x.data(), 4, 4, banned.data(), 5);
  EXPECT_EQ((std::vector<int32_t>(ids5.begin(), ids5.begin() + 5)),
            (std::vector<int32_t>{1, 2, 3, -1, -1}));
  EXPECT_EQ(values5[3], 0.0f);
}

TEST(TopKRows, NonFiniteRowsNameTheirLowestSuchIdAndTakeNothing) {
  std::vector<float> x = {1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4};
  x[3] = std::numeric_limits<float>::infinity();
  x[5] = std::nanf("");
  x[6] = -std::numeric_limits<float>::infinity();  // a later one in the same row
  const std::vector<uint8_t> banned(4, 0);
  for (const int64_t k : {1, 3}) {
    std::vector<int32_t> ids(3 * k), nonfinite(3);
    std::vector<float> values(3 * k);
    ops::top_k_rows(ids.data(), values.data(), nonfinite.data(), x.data(), 3, 4, banned.data(), k);
    EXPECT_EQ(nonfinite, (std::vector<int32_t>{3, 1, -1}));
    for (int64_t j = 0; j < 2 * k; ++j) EXPECT_EQ(ids[j], -1);
    EXPECT_EQ(ids[2 * k], 3);
  }
}

TEST(TopKRows, MatchesAFullSortOfTheAllowedIds) {
  std::mt19937 rng(4);
  for (const int64_t n : {1, 5, 300, 2000}) {
    const int64_t rows = 3;
    std::vector<float> x(rows * n);
    std::uniform_int_distribution<int> level(-6, 6);
    for (float& v : x) v = float(level(rng)) * 0.25f;  // many ties
    std::vector<uint8_t> banned(n, 0);
    for (int64_t id = 0; id < n; id += 7) banned[id] = 1;
    for (const int64_t k :
         {int64_t(1), int64_t(2), int64_t(17), std::min(n, ops::kMaxTopK), ops::kMaxTopK}) {
      std::vector<int32_t> ids(rows * k), nonfinite(rows);
      std::vector<float> values(rows * k);
      ops::top_k_rows(ids.data(), values.data(), nonfinite.data(), x.data(), rows, n, banned.data(),
                      k);
      for (int64_t r = 0; r < rows; ++r) {
        const std::vector<int32_t> all = sorted_allowed(x.data() + r * n, n, banned);
        for (int64_t j = 0; j < k; ++j) {
          const int32_t expected = j < int64_t(all.size()) ? all[j] : -1;
          ASSERT_EQ(ids[r * k + j], expected) << "n " << n << " k " << k << " row " << r;
          EXPECT_EQ(values[r * k + j], expected < 0 ? 0.0f : x[r * n + expected]);
        }
        EXPECT_EQ(nonfinite[r], -1);
      }
    }
  }
}

}  // namespace
}  // namespace sps
