// The ring split of the decode cache's windowed rows (ops/cpu/ring_split.h): the two runs
// hold exactly the newest n rows, inside the ring, and ring_age counts back from the newest.
#include <gtest/gtest.h>

#include <vector>

#include "ops/cpu/ring_split.h"

namespace sps::ops::cpu {
namespace {

// Rows of both runs, oldest first: the wrapped run at the top, then the one below `next`.
std::vector<int64_t> rows_oldest_first(const RingSplit& split) {
  std::vector<int64_t> rows;
  for (const RowRun& run : {split.wrapped, split.below})
    for (int64_t r = run.first; r < run.first + run.count; ++r) rows.push_back(r);
  return rows;
}

TEST(RingSplit, EmptyRing) {
  const RingSplit split = split_ring(0, 0, 0);
  EXPECT_EQ(split.below.count, 0);
  EXPECT_EQ(split.wrapped.count, 0);
  for (int64_t next = 0; next <= 8; ++next) {  // nothing asked of a ring with rows
    const RingSplit none = split_ring(next, 0, 8);
    EXPECT_EQ(none.below.count, 0) << next;
    EXPECT_EQ(none.wrapped.count, 0) << next;
  }
}

TEST(RingSplit, NoWrapIsOneRunBelowNext) {
  const RingSplit split = split_ring(5, 3, 8);
  EXPECT_EQ(split.below.first, 2);
  EXPECT_EQ(split.below.count, 3);
  EXPECT_EQ(split.wrapped.count, 0);
  // A ring not yet full (next = its length) read whole.
  const RingSplit whole = split_ring(6, 6, 8);
  EXPECT_EQ(whole.below.first, 0);
  EXPECT_EQ(whole.below.count, 6);
  EXPECT_EQ(whole.wrapped.count, 0);
}

TEST(RingSplit, WrapAtEveryPosition) {
  for (int64_t capacity : {1, 2, 5, 8})
    for (int64_t next = 0; next <= capacity; ++next)
      for (int64_t n = 0; n <= capacity; ++n) {
        const RingSplit split = split_ring(next, n, capacity);
        std::vector<int64_t> expected;  // row next − 1 − k is the k-th newest
        for (int64_t k = n - 1; k >= 0; --k)
          expected.push_back(((next - 1 - k) % capacity + capacity) % capacity);
        const std::vector<int64_t> rows = rows_oldest_first(split);
        EXPECT_EQ(rows, expected) << "capacity " << capacity << " next " << next << " n " << n;
        EXPECT_EQ(split.wrapped.first + split.wrapped.count, capacity);
        EXPECT_EQ(split.below.first + split.below.count, next);
        for (size_t i = 0; i < rows.size(); ++i)
          EXPECT_EQ(ring_age(rows[i], next, capacity), n - 1 - int64_t(i))
              << "capacity " << capacity << " next " << next << " row " << rows[i];
      }
}

}  // namespace
}  // namespace sps::ops::cpu
