// linear_packed_forward over pack_linear_weight's layout equals linear_forward (BLAS) on the
// row layout for every row count, with panel tails, accumulation and in_dim past one chunk;
// and a row's result is bit for bit the same whatever rows are computed beside it.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "gradcheck.h"
#include "ops/ops.h"

namespace sps {
namespace {

using testing::cast_vector;
using testing::max_relative_error;
using testing::random_vector;

template <typename T>
struct PackedCase {
  std::vector<T> in, weight, packed, start;
  PackedCase(int64_t rows, int64_t in_dim, int64_t out_dim)
      : in(cast_vector<T>(random_vector(rows * in_dim, 1 + rows))),
        weight(cast_vector<T>(random_vector(out_dim * in_dim, 2 + in_dim))),
        packed(weight),
        start(cast_vector<T>(random_vector(rows * out_dim, 3 + out_dim))) {
    ops::pack_linear_weight(packed.data(), in_dim, out_dim);
  }
};

template <typename T>
void check_packed(int64_t rows, int64_t in_dim, int64_t out_dim, bool accumulate, double tolerance) {
  const PackedCase<T> c(rows, in_dim, out_dim);
  std::vector<T> expected = c.start, got = c.start;
  ops::linear_forward(expected.data(), c.in.data(), c.weight.data(), rows, in_dim, out_dim,
                      accumulate);
  ops::linear_packed_forward(got.data(), c.in.data(), c.packed.data(), rows, in_dim, out_dim,
                             accumulate);
  EXPECT_LT(max_relative_error(got.data(), expected.data(), rows * out_dim), tolerance)
      << "rows " << rows << " in " << in_dim << " out " << out_dim << " acc " << accumulate;
}

TEST(LinearPacked, EqualsLinearForEveryRowCount) {
  for (int64_t rows = 1; rows <= 20; ++rows)
    for (bool accumulate : {false, true}) {
      check_packed<double>(rows, 37, 13, accumulate, 1e-13);   // one narrow panel
      check_packed<double>(rows, 21, 40, accumulate, 1e-13);   // full panels and a tail
      check_packed<float>(rows, 64, 80, accumulate, 1e-5);
      check_packed<float>(rows, 3, 5, accumulate, 1e-5);
    }
  check_packed<float>(40, 700, 96, true, 1e-5);     // in_dim past one chunk of a panel
  check_packed<float>(8, 768, 1031, false, 1e-5);   // large enough to run in parallel
  check_packed<float>(300, 256, 768, true, 1e-5);   // a prefill's rows
}

TEST(LinearPacked, ARowsResultIgnoresTheOtherRows) {
  const int64_t in_dim = 600, out_dim = 72, max_rows = 19;
  for (bool accumulate : {false, true}) {
    const PackedCase<float> c(max_rows, in_dim, out_dim);
    std::vector<float> all = c.start;
    ops::linear_packed_forward(all.data(), c.in.data(), c.packed.data(), max_rows, in_dim,
                               out_dim, accumulate);
    for (int64_t rows = 1; rows < max_rows; ++rows)
      for (int64_t first = 0; first + rows <= max_rows; first += rows) {
        std::vector<float> part(c.start.begin() + first * out_dim,
                                c.start.begin() + (first + rows) * out_dim);
        ops::linear_packed_forward(part.data(), c.in.data() + first * in_dim, c.packed.data(),
                                   rows, in_dim, out_dim, accumulate);
        EXPECT_EQ(0, std::memcmp(part.data(), all.data() + first * out_dim,
                                 sizeof(float) * rows * out_dim))
            << rows << " rows from row " << first << ", accumulate " << accumulate;
      }
  }
}

}  // namespace
}  // namespace sps
