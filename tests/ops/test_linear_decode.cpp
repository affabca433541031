// linear_decode_forward equals linear_forward (BLAS) for every row count, with dimension
// tails and accumulation.
#include <gtest/gtest.h>

#include <vector>

#include "gradcheck.h"
#include "ops/ops.h"

namespace sps {
namespace {

using testing::cast_vector;
using testing::max_relative_error;
using testing::random_vector;

template <typename T>
void check(int64_t rows, int64_t in_dim, int64_t out_dim, bool accumulate, double tolerance) {
  const auto in = cast_vector<T>(random_vector(rows * in_dim, 1 + rows));
  const auto weight = cast_vector<T>(random_vector(out_dim * in_dim, 2 + in_dim));
  const auto start = cast_vector<T>(random_vector(rows * out_dim, 3 + out_dim));
  std::vector<T> expected = start, got = start;
  ops::linear_forward(expected.data(), in.data(), weight.data(), rows, in_dim, out_dim, accumulate);
  ops::linear_decode_forward(got.data(), in.data(), weight.data(), rows, in_dim, out_dim, accumulate);
  EXPECT_LT(max_relative_error(got.data(), expected.data(), rows * out_dim), tolerance)
      << "rows " << rows << " in " << in_dim << " out " << out_dim << " acc " << accumulate;
}

TEST(LinearDecode, EqualsLinearForEveryRowCount) {
  for (int64_t rows = 1; rows <= 20; ++rows)
    for (bool accumulate : {false, true}) {
      check<double>(rows, 37, 13, accumulate, 1e-13);
      check<float>(rows, 64, 10, accumulate, 1e-5);
      check<float>(rows, 3, 5, accumulate, 1e-5);
    }
  check<float>(8, 768, 1031, false, 1e-5);  // large enough to run in parallel
}

}  // namespace
}  // namespace sps
