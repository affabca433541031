// Greedy choice per row: the largest value's id, the lowest id on a tie, never an excluded id.
#include <gtest/gtest.h>

#include <vector>

#include "ops/ops.h"

namespace sps {
namespace {

TEST(ArgmaxRows, LargestValueLowestIdOnTiesNeverExcluded) {
  const std::vector<float> x = {1,  5,  5,  2,   // tie: 1 before 2
                                9,  3,  9,  9,   // 0 excluded: 2, the first remaining 9
                                -1, -4, -2, -3,  // 0 excluded: -2 at 2
                                7,  7,  7,  7};  // all but 3 excluded or lower in id order
  ops::ExcludedIds excluded;
  excluded.ids[0] = 0;
  std::vector<int32_t> ids(4, -7);
  ops::argmax_rows(ids.data(), x.data(), 4, 4, excluded);
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 2, 2, 1}));
  ops::ExcludedIds all;
  for (int e = 0; e < 4; ++e) all.ids[e] = e;
  ops::argmax_rows(ids.data(), x.data(), 4, 4, all);
  EXPECT_EQ(ids, (std::vector<int32_t>{-1, -1, -1, -1}));
  ops::argmax_rows(ids.data(), x.data(), 4, 4, ops::ExcludedIds{});
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 0, 0, 0}));
}

}  // namespace
}  // namespace sps
