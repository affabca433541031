// The CUDA backend's linear (cuBLASLt) against the CPU backend, on a real GPU, with strided
// rows and accumulation on and off: fp32 operands, and bf16 operands against the CPU on the
// same operands rounded to bf16 here. Skipped where no GPU is usable.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "cuda/cuda_fixtures.h"
#include "gradcheck.h"
#include "ops/cuda/linear.h"
#include "ops/ops.h"

namespace sps {
namespace {

using testing::cast_vector;
using testing::DeviceFloats;
using testing::max_relative_error;
using testing::random_vector;
using testing::round_to_bf16;

struct Shape {
  int64_t rows, in_dim, out_dim, ld_in, ld_out;
};

// Forward and backward on the GPU with `operands`, against the CPU backend on the same
// operands (rounded to bf16 here for bf16): only the summation order may differ, since
// products of bf16 values are exact in fp32. For bf16 the result must also be visibly off
// the fp32 product, so an unrounded GEMM fails.
void check_against_cpu(ops::Precision operands) {
  const bool bf16 = operands == ops::Precision::bf16;
  const auto as_read = [&](std::vector<float> v) {
    if (bf16)
      for (float& x : v) x = round_to_bf16(x);
    return v;
  };
  for (const Shape s : {Shape{5, 3, 4, 3, 4}, Shape{7, 6, 2, 9, 5}, Shape{300, 128, 384, 130, 390},
                        Shape{1, 8, 8, 8, 11}, Shape{64, 0, 5, 3, 5}})
    for (bool accumulate : {false, true}) {
      const auto in = cast_vector<float>(random_vector(s.rows * s.ld_in, 1));
      const auto weight = cast_vector<float>(random_vector(s.out_dim * s.in_dim, 2));
      const auto dout = cast_vector<float>(random_vector(s.rows * s.ld_out, 3));
      auto out = cast_vector<float>(random_vector(s.rows * s.ld_out, 4));
      auto din = cast_vector<float>(random_vector(s.rows * s.ld_in, 5));
      auto dweight = cast_vector<float>(random_vector(s.out_dim * s.in_dim, 6));
      DeviceFloats d_in(in), d_weight(weight), d_dout(dout), d_out(out), d_din(din),
          d_dweight(dweight);
      auto out_fp32 = out;

      ops::linear_forward(out.data(), as_read(in).data(), as_read(weight).data(), s.rows,
                          s.in_dim, s.out_dim, accumulate, s.ld_in, s.ld_out);
      ops::linear_backward(din.data(), dweight.data(), as_read(dout).data(), as_read(in).data(),
                           as_read(weight).data(), s.rows, s.in_dim, s.out_dim, accumulate,
                           s.ld_in, s.ld_out);
      ops::linear_forward(out_fp32.data(), in.data(), weight.data(), s.rows, s.in_dim,
                          s.out_dim, accumulate, s.ld_in, s.ld_out);
      ops::cuda::linear_forward(d_out.data, d_in.data, d_weight.data, s.rows, s.in_dim,
                                s.out_dim, accumulate, s.ld_in, s.ld_out, operands);
      ops::cuda::linear_backward(d_din.data, d_dweight.data, d_dout.data, d_in.data,
                                 d_weight.data, s.rows, s.in_dim, s.out_dim, accumulate,
                                 s.ld_in, s.ld_out, operands);
      EXPECT_LT(max_relative_error(d_out.read(), out), 1e-5) << s.rows << " " << accumulate;
      EXPECT_LT(max_relative_error(d_din.read(), din), 1e-5) << s.rows << " " << accumulate;
      EXPECT_LT(max_relative_error(d_dweight.read(), dweight), 1e-5) << s.rows << " " << accumulate;
      if (bf16 && s.in_dim > 0) {
        EXPECT_GT(max_relative_error(d_out.read(), out_fp32), 1e-5) << s.rows << " " << accumulate;
      }
    }
}

TEST(CudaLinear, MatchesTheCpuBackend) {
  SPS_REQUIRE_GPU();
  check_against_cpu(ops::Precision::fp32);
}

TEST(CudaLinear, Bf16OperandsMatchTheCpuOnRoundedOperands) {
  SPS_REQUIRE_GPU();
  check_against_cpu(ops::Precision::bf16);
}

// The GEMM `sps bench gemm` and the benchmarks' rates time is linear_forward's product on the
// same operands, bit for bit, with bf16 operands rounded once before the timed runs.
TEST(CudaLinear, TimedGemmIsLinearForwardsProduct) {
  SPS_REQUIRE_GPU();
  const int64_t n = 200;
  DeviceFloats a(cast_vector<float>(random_vector(n * n, 1))),
      b(cast_vector<float>(random_vector(n * n, 2))), timed(n * n), plain(n * n);
  for (const ops::Precision operands : {ops::Precision::fp32, ops::Precision::bf16}) {
    const std::vector<double> seconds =
        ops::cuda::time_gemm(timed.data, a.data, b.data, n, 3, operands);
    ASSERT_EQ(seconds.size(), 3u);
    for (const double s : seconds) EXPECT_GT(s, 0);
    ops::cuda::linear_forward(plain.data, a.data, b.data, n, n, n, false, 0, 0, operands);
    EXPECT_EQ(timed.read(), plain.read());
  }
}

}  // namespace
}  // namespace sps
