// embedding_forward / embedding_backward: row copies, scatter-add with repeated tokens
// (also on the multi-threaded path), finite differences, float against double.
#include <gtest/gtest.h>
#include <omp.h>

#include <vector>

#include "gradcheck.h"
#include "ops/ops.h"

namespace sps::ops {
namespace {

using testing::cast_vector;
using testing::max_relative_error;
using testing::numeric_gradient;
using testing::random_vector;

TEST(Embedding, ForwardCopiesRows) {
  const int64_t V = 5, d = 3;
  const std::vector<int32_t> tokens = {4, 0, 4, 2};
  const auto table = random_vector(V * d, 1);
  std::vector<double> out(tokens.size() * d, -1.0);
  embedding_forward(out.data(), tokens.data(), table.data(), tokens.size(), d);
  for (size_t i = 0; i < tokens.size(); ++i)
    for (int64_t c = 0; c < d; ++c) EXPECT_EQ(out[i * d + c], table[tokens[i] * d + c]);
}

TEST(Embedding, BackwardAddsRepeatedTokens) {
  const int64_t d = 2;
  const std::vector<int32_t> tokens = {1, 3, 1, 1};
  const std::vector<double> dout = {1, 2, 10, 20, 100, 200, 1000, 2000};
  std::vector<double> dtable(4 * d, 0.5);
  embedding_backward(dtable.data(), dout.data(), tokens.data(), tokens.size(), d);
  // token 1 gets rows 0, 2, 3; token 3 gets row 1; tokens 0 and 2 keep their values.
  EXPECT_EQ(dtable, (std::vector<double>{0.5, 0.5, 1101.5, 2202.5, 0.5, 0.5, 10.5, 20.5}));
}

TEST(Embedding, BackwardMatchesFiniteDifferences) {
  const int64_t V = 6, d = 5, n = 9;
  const std::vector<int32_t> tokens = {2, 5, 2, 0, 2, 5, 1, 1, 3};
  auto table = random_vector(V * d, 2);
  const auto R = random_vector(n * d, 3);  // loss = Σ out · R
  auto loss = [&] {
    std::vector<double> out(n * d);
    embedding_forward(out.data(), tokens.data(), table.data(), n, d);
    double total = 0;
    for (int64_t k = 0; k < n * d; ++k) total += out[k] * R[k];
    return total;
  };
  const auto numeric = numeric_gradient(loss, table.data(), table.size());
  const auto initial = random_vector(V * d, 4);
  auto dtable = initial;
  embedding_backward(dtable.data(), R.data(), tokens.data(), n, d);
  for (size_t k = 0; k < dtable.size(); ++k) dtable[k] -= initial[k];  // it accumulates
  EXPECT_LT(max_relative_error(dtable.data(), numeric.data(), numeric.size()), 1e-8);
}

// Big enough for the parallel path, with few distinct tokens so rows collide, a width that
// is not a whole number of cache lines, and more threads than this machine has cores.
TEST(Embedding, ParallelBackwardIsRaceFree) {
  const int64_t V = 7, d = 83, n = 1024;
  std::vector<int32_t> tokens(n);
  for (int64_t i = 0; i < n; ++i) tokens[i] = int32_t((i * i + 3 * i) % V);
  const auto dout = random_vector(n * d, 5);
  std::vector<double> expected(V * d, 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = 0; c < d; ++c) expected[tokens[i] * d + c] += dout[i * d + c];

  const int saved_threads = omp_get_max_threads();
  for (int threads : {1, 3, 8}) {
    omp_set_num_threads(threads);
    std::vector<double> dtable(V * d, 0.0);
    embedding_backward(dtable.data(), dout.data(), tokens.data(), n, d);
    // Rows are added in order for every column, so the result matches exactly.
    EXPECT_EQ(dtable, expected) << threads << " threads";
  }
  omp_set_num_threads(saved_threads);
}

TEST(Embedding, FloatAgreesWithDouble) {
  const int64_t V = 11, d = 40, n = 900;
  std::vector<int32_t> tokens(n);
  for (int64_t i = 0; i < n; ++i) tokens[i] = int32_t((7 * i) % V);
  const auto table = random_vector(V * d, 6);
  const auto dout = random_vector(n * d, 7);
  std::vector<double> out(n * d), dtable(V * d, 0.0);
  embedding_forward(out.data(), tokens.data(), table.data(), n, d);
  embedding_backward(dtable.data(), dout.data(), tokens.data(), n, d);
  const auto table_f = cast_vector<float>(table), dout_f = cast_vector<float>(dout);
  std::vector<float> out_f(n * d), dtable_f(V * d, 0.0f);
  embedding_forward(out_f.data(), tokens.data(), table_f.data(), n, d);
  embedding_backward(dtable_f.data(), dout_f.data(), tokens.data(), n, d);
  EXPECT_LT(max_relative_error(out_f.data(), out.data(), out.size()), 1e-7);
  EXPECT_LT(max_relative_error(dtable_f.data(), dtable.data(), dtable.size()), 1e-5);
}

}  // namespace
}  // namespace sps::ops
