// The inference linears against linear_forward (BLAS), for every row count, with dimension
// tails and accumulation: linear_decode_forward on the row layout, and linear_packed_forward
// over pack_linear_weight's layout (with in_dim past one chunk of a panel too), whose result
// for a row is moreover bit for bit the same whatever rows are computed beside it; and the
// embedding gathered from a table in that layout.
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
struct LinearCase {
  int64_t rows, in_dim, out_dim;
  std::vector<T> in, weight, packed, start;
  LinearCase(int64_t rows, int64_t in_dim, int64_t out_dim)
      : rows(rows), in_dim(in_dim), out_dim(out_dim),
        in(cast_vector<T>(random_vector(rows * in_dim, 1 + rows))),
        weight(cast_vector<T>(random_vector(out_dim * in_dim, 2 + in_dim))),
        packed(weight),
        start(cast_vector<T>(random_vector(rows * out_dim, 3 + out_dim))) {
    ops::pack_linear_weight(packed.data(), in_dim, out_dim);
  }
  std::vector<T> blas(bool accumulate) const {
    std::vector<T> out = start;
    ops::linear_forward(out.data(), in.data(), weight.data(), rows, in_dim, out_dim, accumulate);
    return out;
  }
  std::vector<T> decode(bool accumulate) const {
    std::vector<T> out = start;
    ops::linear_decode_forward(out.data(), in.data(), weight.data(), rows, in_dim, out_dim,
                               accumulate);
    return out;
  }
  std::vector<T> packed_forward(bool accumulate) const {
    std::vector<T> out = start;
    ops::linear_packed_forward(out.data(), in.data(), packed.data(), rows, in_dim, out_dim,
                               accumulate);
    return out;
  }
};

template <typename T>
void check(int64_t rows, int64_t in_dim, int64_t out_dim, double tolerance) {
  const LinearCase<T> c(rows, in_dim, out_dim);
  for (bool accumulate : {false, true}) {
    const std::vector<T> expected = c.blas(accumulate);
    EXPECT_LT(max_relative_error(c.decode(accumulate).data(), expected.data(), rows * out_dim),
              tolerance)
        << "decode: rows " << rows << " in " << in_dim << " out " << out_dim << " acc " << accumulate;
    EXPECT_LT(max_relative_error(c.packed_forward(accumulate).data(), expected.data(),
                                 rows * out_dim),
              tolerance)
        << "packed: rows " << rows << " in " << in_dim << " out " << out_dim << " acc " << accumulate;
  }
}

TEST(LinearInference, EqualsLinearForEveryRowCount) {
  for (int64_t rows = 1; rows <= 20; ++rows) {
    check<double>(rows, 37, 13, 1e-13);  // one narrow panel
    check<double>(rows, 21, 40, 1e-13);  // full panels and a narrow one
    check<float>(rows, 64, 10, 1e-5);
    check<float>(rows, 64, 80, 1e-5);
    check<float>(rows, 3, 5, 1e-5);
  }
  check<float>(8, 768, 1031, 1e-5);  // large enough to run in parallel
  check<float>(5, 150, 40, 1e-5);    // in_dim past two of few rows' (smaller) chunks
  check<float>(40, 700, 96, 1e-5);   // in_dim past one chunk of a panel
  check<float>(300, 256, 768, 1e-5); // a prefill's rows
}

TEST(LinearInference, APackedRowsResultIgnoresTheOtherRows) {
  const int64_t in_dim = 600, out_dim = 72, max_rows = 19;
  const LinearCase<float> c(max_rows, in_dim, out_dim);
  for (bool accumulate : {false, true}) {
    const std::vector<float> all = c.packed_forward(accumulate);
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

// The embedding read from a table packed as a LM head (full panels and a narrower last one,
// repeated tokens, the first and last ids) equals the embedding of the table as it was.
TEST(LinearInference, EmbeddingFromAPackedTableEqualsTheTable) {
  for (const int64_t V : {int64_t(13), int64_t(64), int64_t(70)}) {
    const int64_t d = 9;
    const std::vector<float> table = cast_vector<float>(random_vector(V * d, 5));
    std::vector<float> packed = table;
    ops::pack_linear_weight(packed.data(), d, V);
    const std::vector<int32_t> tokens = {0, int32_t(V - 1), 5, int32_t(V / 2), 5, int32_t(V - 2)};
    const int64_t n = int64_t(tokens.size());
    std::vector<float> expected(n * d), got(n * d, -1.0f);
    ops::embedding_forward(expected.data(), tokens.data(), table.data(), n, d);
    ops::embedding_packed_forward(got.data(), tokens.data(), packed.data(), n, d, V);
    EXPECT_EQ(got, expected) << "V " << V;
  }
}

}  // namespace
}  // namespace sps
