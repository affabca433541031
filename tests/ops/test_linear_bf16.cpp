// The CPU's linear in bf16 precision (ops/cpu/linear_bf16.h): the rows it rounds are
// util/float_formats.h's rounding, strides kept; each of the three GEMMs equals the exact product of its
// operands rounded to bf16 within the error of fp32 sums, and is farther than that from the
// product of the unrounded operands (so every operand is rounded);
// on both paths (on a CPU without a bf16 matmul the oneDNN path takes the rounded one). The
// weight copies: made once per change, reused by every GEMM until changed(), never stale,
// and the same numbers as a weight rounded by the call itself. A planned call allocates
// nothing; the backend's bf16 linears are these.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <ostream>
#include <vector>

#include "bf16_reference.h"
#include "gemm_bound.h"
#include "ops/backend.h"
#include "util/float_formats.h"
#include "ops/cpu/linear_bf16.h"
#include "util/alloc_counter.h"

namespace sps::ops::cpu {
void PrintTo(Bf16Path path, std::ostream* out) {
  *out << (path == Bf16Path::onednn ? "onednn" : "rounded_sgemm");
}
}  // namespace sps::ops::cpu

namespace sps::testing {
namespace {

using ops::cpu::Bf16Path;

std::vector<float> floats(int64_t n, uint64_t seed) {
  const std::vector<double> d = random_vector(n, seed);
  return std::vector<float>(d.begin(), d.end());
}

std::vector<float> rounded(std::vector<float> v) {
  for (float& x : v) x = round_to_bf16(x);
  return v;
}

// Every entry of C [M, ldc] within the bound of `exact` (columns < N), and the padding as
// `start` left it. Returns how many entries lie outside the bound of `other`.
int64_t expect_within(const std::vector<float>& C, const ExactGemm& exact, const ExactGemm& other,
                      const std::vector<float>& start, int64_t M, int64_t N, int64_t ldc) {
  int64_t outside_other = 0;
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < ldc; ++j) {
      const int64_t k = i * ldc + j;
      if (j >= N) {
        EXPECT_EQ(C[k], start[k]) << i << "," << j;
        continue;
      }
      EXPECT_LE(std::abs(C[k] - exact.c[k]), exact.bound[k]) << i << "," << j;
      outside_other += std::abs(C[k] - other.c[k]) > other.bound[k];
    }
  return outside_other;
}

struct LinearCase {
  int64_t rows, in_dim, out_dim, ld_in, ld_out;
  bool accumulate;
};

// The rows the CPU's GEMMs round: strided, into floats and into bits, the columns past
// `cols` left alone; large enough to take the parallel loop.
TEST(LinearBf16Rounding, RowsMatchTheScalarRoundingAndKeepPadding) {
  const std::vector<float> sweep = bf16_sweep();
  const int64_t cols = 1000, ld_in = 1003, ld_out = 1010, rows = int64_t(sweep.size()) / ld_in;
  ASSERT_GT(rows * cols, int64_t(1) << 16);
  std::vector<float> as_float(rows * ld_out, 7.0f);
  std::vector<uint16_t> as_bits(rows * ld_out, 7);
  ops::cpu::round_rows_to_bf16(as_float.data(), ld_out, sweep.data(), ld_in, rows, cols);
  ops::cpu::round_rows_to_bf16(as_bits.data(), ld_out, sweep.data(), ld_in, rows, cols);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < ld_out; ++c) {
      const int64_t k = r * ld_out + c;
      if (c >= cols) {
        ASSERT_EQ(as_float[k], 7.0f);
        ASSERT_EQ(as_bits[k], 7);
        continue;
      }
      const float x = sweep[r * ld_in + c];
      const uint16_t expected = float_to_bf16(x);
      ASSERT_EQ(as_bits[k], expected) << r << "," << c;
      uint32_t got;
      std::memcpy(&got, &as_float[k], 4);
      ASSERT_EQ(got, uint32_t(expected) << 16) << r << "," << c;
    }
}

class LinearBf16 : public ::testing::TestWithParam<Bf16Path> {};

TEST_P(LinearBf16, EveryGemmTakesRoundedOperandsAndSumsInFp32) {
  const Bf16Path path = GetParam();
  const LinearCase cases[] = {{33, 72, 40, 72, 40, false},
                              {33, 72, 40, 75, 43, true},
                              {1, 16, 8, 16, 8, false},
                              {64, 40, 96, 41, 99, true}};
  uint64_t seed = 1;
  for (const LinearCase& c : cases) {
    SCOPED_TRACE(::testing::Message() << c.rows << "x" << c.in_dim << "x" << c.out_dim << " ld "
                                      << c.ld_in << "," << c.ld_out << " acc " << c.accumulate);
    const std::vector<float> in = floats(c.rows * c.ld_in, seed++),
                             weight = floats(c.out_dim * c.in_dim, seed++),
                             dout = floats(c.rows * c.ld_out, seed++),
                             out0 = floats(c.rows * c.ld_out, seed++),
                             din0 = floats(c.rows * c.ld_in, seed++),
                             dweight0 = floats(c.out_dim * c.in_dim, seed++);
    const std::vector<float> in16 = rounded(in), weight16 = rounded(weight), dout16 = rounded(dout);
    // forward: out[rows, out] (+)= in · Wᵀ
    std::vector<float> out = out0;
    ops::cpu::linear_forward_bf16(path, out.data(), in.data(), weight.data(), c.rows, c.in_dim,
                                  c.out_dim, c.accumulate, c.ld_in, c.ld_out);
    const StridedGemm forward{false,    true,    c.rows,   c.out_dim,
                              c.in_dim, c.ld_in, c.in_dim, c.ld_out};
    EXPECT_GT(expect_within(out, exact_gemm(forward, in16, weight16, out0, c.accumulate),
                            exact_gemm(forward, in, weight, out0, c.accumulate), out0, c.rows,
                            c.out_dim, c.ld_out),
              0);
    // backward: din[rows, in] (+)= dout · W (in's stride), dW[out, in] += doutᵀ · in
    std::vector<float> din = din0, dweight = dweight0;
    ops::cpu::linear_backward_bf16(path, din.data(), dweight.data(), dout.data(), in.data(),
                                   weight.data(), c.rows, c.in_dim, c.out_dim, c.accumulate,
                                   c.ld_in, c.ld_out);
    const StridedGemm input{false, false, c.rows, c.in_dim, c.out_dim, c.ld_out, c.in_dim, c.ld_in};
    EXPECT_GT(expect_within(din, exact_gemm(input, dout16, weight16, din0, c.accumulate),
                            exact_gemm(input, dout, weight, din0, c.accumulate), din0, c.rows,
                            c.in_dim, c.ld_in),
              0);
    const StridedGemm weights{true,   false,    c.out_dim, c.in_dim,
                              c.rows, c.ld_out, c.ld_in,   c.in_dim};
    EXPECT_GT(expect_within(dweight, exact_gemm(weights, dout16, in16, dweight0, true),
                            exact_gemm(weights, dout, in, dweight0, true), dweight0, c.out_dim,
                            c.in_dim, c.in_dim),
              0);
    // Either gradient alone: the same numbers.
    std::vector<float> din_alone = din0, dweight_alone = dweight0;
    ops::cpu::linear_backward_bf16(path, din_alone.data(), nullptr, dout.data(), in.data(),
                                   weight.data(), c.rows, c.in_dim, c.out_dim, c.accumulate,
                                   c.ld_in, c.ld_out);
    ops::cpu::linear_backward_bf16(path, nullptr, dweight_alone.data(), dout.data(), in.data(),
                                   weight.data(), c.rows, c.in_dim, c.out_dim, c.accumulate,
                                   c.ld_in, c.ld_out);
    EXPECT_EQ(din_alone, din);
    EXPECT_EQ(dweight_alone, dweight);
  }
}

// Empty dimensions follow the fp32 contract: an empty product overwrites with zeros.
TEST_P(LinearBf16, EmptyDimensionsFollowTheFp32Contract) {
  std::vector<float> out(6, 5.0f), din(6, 5.0f);
  ops::cpu::linear_forward_bf16(GetParam(), out.data(), nullptr, nullptr, 2, 0, 3, false);
  EXPECT_EQ(out, std::vector<float>(6, 0.0f));
  std::vector<float> in(4, 1.0f), weight(2, 1.0f);
  ops::cpu::linear_backward_bf16(GetParam(), din.data(), nullptr, nullptr, in.data(), weight.data(),
                                 2, 3, 0, false);
  EXPECT_EQ(din, std::vector<float>(6, 0.0f));
}

// A registered weight buffer: each matrix converted by the first GEMM after a change and
// reused by the later ones (the forward's copy serves the input gradient on the rounded path);
// after changed() the next GEMM sees the new weights; and the numbers are those of a weight
// the call rounds itself.
TEST_P(LinearBf16, WeightCopiesAreMadeOncePerChangeAndNeverStale) {
  const Bf16Path path = GetParam();
  const int64_t rows = 20, d = 32, out_dim = 48;
  std::vector<float> weights = floats(2 * out_dim * d, 1);  // two matrices, back to back
  const std::vector<float> in = floats(rows * d, 2), dout = floats(rows * out_dim, 3);
  std::vector<float> unregistered = weights;
  auto copies = ops::cpu::bf16_weight_copies(weights.data(), int64_t(weights.size()));
  EXPECT_EQ(copies->conversions(), 0);

  const auto forward = [&](const std::vector<float>& w, int matrix) {
    std::vector<float> out(rows * out_dim);
    ops::cpu::linear_forward_bf16(path, out.data(), in.data(), w.data() + matrix * out_dim * d,
                                  rows, d, out_dim, false);
    return out;
  };
  const auto input_gradient = [&](const std::vector<float>& w, int matrix) {
    std::vector<float> din(rows * d);
    ops::cpu::linear_backward_bf16(path, din.data(), nullptr, dout.data(), in.data(),
                                   w.data() + matrix * out_dim * d, rows, d, out_dim, false);
    return din;
  };
  EXPECT_EQ(forward(weights, 1), forward(unregistered, 1));
  const int64_t after_one = copies->conversions();
  EXPECT_EQ(after_one, 1);
  EXPECT_EQ(forward(weights, 1), forward(unregistered, 1));  // reused, not remade
  EXPECT_EQ(input_gradient(weights, 1), input_gradient(unregistered, 1));
  const int64_t per_matrix = copies->conversions();  // 1 rounded, or 2 oneDNN layouts
  EXPECT_EQ(forward(weights, 0), forward(unregistered, 0));
  EXPECT_EQ(input_gradient(weights, 0), input_gradient(unregistered, 0));
  EXPECT_EQ(copies->conversions(), 2 * per_matrix);
  EXPECT_EQ(input_gradient(weights, 0), input_gradient(unregistered, 0));
  EXPECT_EQ(copies->conversions(), 2 * per_matrix);

  // A change, announced: the next GEMMs read the new weights.
  for (size_t k = 0; k < weights.size(); k += 3) weights[k] = unregistered[k] = 2 * weights[k] + 1;
  copies->changed();
  EXPECT_EQ(forward(weights, 1), forward(unregistered, 1));
  EXPECT_EQ(input_gradient(weights, 0), input_gradient(unregistered, 0));
  EXPECT_EQ(copies->conversions(), 2 * per_matrix + 2);
  EXPECT_NE(forward(weights, 1), forward(floats(2 * out_dim * d, 1), 1));

  // Dropped: the buffer is no longer registered, every call rounds again.
  copies.reset();
  EXPECT_EQ(forward(weights, 0), forward(unregistered, 0));
}

TEST_P(LinearBf16, APlannedCallAllocatesNothing) {
  if (allocation_count() < 0) GTEST_SKIP() << "allocation counting is off in this build";
  const Bf16Path path = GetParam();
  const int64_t rows = 64, d = 48, out_dim = 80;
  const std::vector<float> weight = floats(out_dim * d, 1), in = floats(rows * d, 2),
                           dout = floats(rows * out_dim, 3);
  std::vector<float> out(rows * out_dim), din(rows * d), dweight(out_dim * d);
  const auto copies = ops::cpu::bf16_weight_copies(weight.data(), out_dim * d);
  const auto step = [&] {
    ops::cpu::linear_forward_bf16(path, out.data(), in.data(), weight.data(), rows, d, out_dim,
                                  false);
    ops::cpu::linear_backward_bf16(path, din.data(), dweight.data(), dout.data(), in.data(),
                                   weight.data(), rows, d, out_dim, false);
  };
  step();
  copies->changed();
  step();  // the copies exist: remade in place
  copies->changed();
  const int64_t before = allocation_count();
  step();
  EXPECT_EQ(allocation_count() - before, 0);
}

INSTANTIATE_TEST_SUITE_P(Paths, LinearBf16,
                         ::testing::Values(Bf16Path::rounded_sgemm, Bf16Path::onednn),
                         [](const auto& info) {
                           return info.param == Bf16Path::onednn ? std::string("onednn")
                                                                 : std::string("rounded_sgemm");
                         });

// The CPU backend of bf16 precision runs these linears on the path this process chose, and
// says which; the fp32 backend is the sgemm of ops.h, bit for bit.
TEST(LinearBf16Backend, TheBackendRunsTheChosenPath) {
  const ops::Backend<float>& bf16 = ops::cpu_backend(ops::Precision::bf16);
  EXPECT_EQ(bf16.describe_gemms(), ops::cpu::bf16_gemm_choice().description);
  EXPECT_EQ(bf16.describe_gemms().rfind("bf16 GEMMs: ", 0), 0u) << bf16.describe_gemms();
  EXPECT_EQ(ops::cpu_backend(ops::Precision::fp32).describe_gemms(), "");
  EXPECT_EQ(&ops::cpu_backend(ops::Precision::fp32), &ops::cpu_backend<float>());
  EXPECT_TRUE(ops::cpu_backend<float>().gemm_weight_copies(nullptr, 0) == nullptr);
  const int64_t rows = 9, d = 24, out_dim = 16;
  const std::vector<float> in = floats(rows * d, 1), weight = floats(out_dim * d, 2);
  std::vector<float> ours(rows * out_dim), direct(rows * out_dim), fp32(rows * out_dim),
      sgemm(rows * out_dim);
  bf16.linear_forward(ours.data(), in.data(), weight.data(), rows, d, out_dim, false);
  ops::cpu::linear_forward_bf16(ops::cpu::bf16_gemm_choice().path, direct.data(), in.data(),
                                weight.data(), rows, d, out_dim, false);
  EXPECT_EQ(ours, direct);
  ops::cpu_backend(ops::Precision::fp32)
      .linear_forward(fp32.data(), in.data(), weight.data(), rows, d, out_dim, false);
  ops::linear_forward(sgemm.data(), in.data(), weight.data(), rows, d, out_dim, false);
  EXPECT_EQ(fp32, sgemm);
  EXPECT_NE(ours, fp32);
}

}  // namespace
}  // namespace sps::testing
