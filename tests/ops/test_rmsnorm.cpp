// rmsnorm_forward / rmsnorm_backward: a plain-loop reference, finite differences in double
// (small, and sampled entries of a size that takes the parallel path), accumulation, float
// against double.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <vector>

#include "gradcheck.h"
#include "ops/ops.h"
#include "util/alloc_counter.h"

namespace sps::ops {
namespace {

using testing::cast_vector;
using testing::max_relative_error;
using testing::numeric_gradient;
using testing::random_vector;

constexpr double kEps = 1e-6;

TEST(RMSNorm, ForwardMatchesLoop) {
  const int64_t rows = 4, d = 37;
  const auto in = random_vector(rows * d, 1, 3.0);
  const auto gain = random_vector(d, 2);
  std::vector<double> out(rows * d), rstd(rows);
  rmsnorm_forward(out.data(), rstd.data(), in.data(), gain.data(), rows, d, kEps);
  for (int64_t r = 0; r < rows; ++r) {
    double mean_sq = 0;
    for (int64_t c = 0; c < d; ++c) mean_sq += in[r * d + c] * in[r * d + c] / d;
    const double s = 1.0 / std::sqrt(mean_sq + kEps);
    EXPECT_NEAR(rstd[r], s, 1e-12 * s);
    for (int64_t c = 0; c < d; ++c)
      EXPECT_NEAR(out[r * d + c], in[r * d + c] * s * gain[c], 1e-12);
  }
}

TEST(RMSNorm, EpsilonKeepsZeroRowsFinite) {
  const int64_t d = 8;
  const std::vector<double> in(d, 0.0), gain(d, 1.0);
  std::vector<double> out(d, 7.0), rstd(1);
  rmsnorm_forward(out.data(), rstd.data(), in.data(), gain.data(), 1, d, kEps);
  EXPECT_NEAR(rstd[0], 1e3, 1e-9);
  for (double v : out) EXPECT_EQ(v, 0.0);
}

// Analytic gradients of loss = Σ out · R (din and dgain start from the given values).
void run_backward(std::vector<double>& din, std::vector<double>& dgain,
                  const std::vector<double>& in, const std::vector<double>& gain,
                  const std::vector<double>& R, int64_t rows, int64_t d) {
  std::vector<double> out(rows * d), rstd(rows);
  rmsnorm_forward(out.data(), rstd.data(), in.data(), gain.data(), rows, d, kEps);
  rmsnorm_backward(din.data(), dgain.data(), R.data(), in.data(), gain.data(), rstd.data(),
                   rows, d);
}

double loss(const std::vector<double>& in, const std::vector<double>& gain,
            const std::vector<double>& R, int64_t rows, int64_t d) {
  std::vector<double> out(rows * d), rstd(rows);
  rmsnorm_forward(out.data(), rstd.data(), in.data(), gain.data(), rows, d, kEps);
  double total = 0;
  for (int64_t k = 0; k < rows * d; ++k) total += out[k] * R[k];
  return total;
}

TEST(RMSNorm, BackwardMatchesFiniteDifferencesAndAccumulates) {
  const int64_t rows = 3, d = 19;
  auto in = random_vector(rows * d, 3);
  auto gain = random_vector(d, 4);
  const auto R = random_vector(rows * d, 5);
  auto f = [&] { return loss(in, gain, R, rows, d); };
  const auto numeric_din = numeric_gradient(f, in.data(), in.size());
  const auto numeric_dgain = numeric_gradient(f, gain.data(), gain.size());

  const auto din_initial = random_vector(rows * d, 6);
  const auto dgain_initial = random_vector(d, 7);
  auto din = din_initial;
  auto dgain = dgain_initial;
  run_backward(din, dgain, in, gain, R, rows, d);
  for (size_t k = 0; k < din.size(); ++k) din[k] -= din_initial[k];
  for (size_t k = 0; k < dgain.size(); ++k) dgain[k] -= dgain_initial[k];
  EXPECT_LT(max_relative_error(din.data(), numeric_din.data(), din.size()), 1e-7);
  EXPECT_LT(max_relative_error(dgain.data(), numeric_dgain.data(), dgain.size()), 1e-7);
}

// Rows spread over threads and dgain reduced from per-thread partial sums: check sampled
// entries against finite differences, with several thread counts.
TEST(RMSNorm, ParallelBackwardMatchesFiniteDifferences) {
  const int64_t rows = 70, d = 520;
  auto in = random_vector(rows * d, 8);
  auto gain = random_vector(d, 9);
  const auto R = random_vector(rows * d, 10);
  auto f = [&] { return loss(in, gain, R, rows, d); };
  const int64_t in_at = 61 * d + 100, gain_at = 250;  // sampled windows of 12 entries
  const auto numeric_din = numeric_gradient(f, in.data() + in_at, 12);
  const auto numeric_dgain = numeric_gradient(f, gain.data() + gain_at, 12);

  const int saved_threads = omp_get_max_threads();
  std::vector<double> first_dgain;
  for (int threads : {1, 3, 4}) {
    omp_set_num_threads(threads);
    std::vector<double> din(rows * d, 0.0), dgain(d, 0.0);
    run_backward(din, dgain, in, gain, R, rows, d);
    EXPECT_LT(max_relative_error(din.data() + in_at, numeric_din.data(), 12), 1e-7) << threads;
    EXPECT_LT(max_relative_error(dgain.data() + gain_at, numeric_dgain.data(), 12), 1e-7)
        << threads;
    if (first_dgain.empty()) first_dgain = dgain;
    EXPECT_LT(max_relative_error(dgain.data(), first_dgain.data(), d), 1e-12);
  }
  omp_set_num_threads(saved_threads);
}

// The per-thread dgain partials live in kept scratch: after the first call (the planned
// step's warm-up) backward allocates nothing.
TEST(RMSNorm, BackwardAllocatesNothingOnceWarm) {
  const int64_t rows = 70, d = 520;
  const auto in = random_vector(rows * d, 14);
  const auto gain = random_vector(d, 15);
  const auto dout = random_vector(rows * d, 16);
  std::vector<double> out(rows * d), rstd(rows), din(rows * d, 0.0), dgain(d, 0.0);
  rmsnorm_forward(out.data(), rstd.data(), in.data(), gain.data(), rows, d, kEps);
  auto step = [&](int64_t n) {
    rmsnorm_backward(din.data(), dgain.data(), dout.data(), in.data(), gain.data(), rstd.data(),
                     n, d);
  };
  step(rows);
  const int64_t before = allocation_count();
  step(rows);
  step(2);  // the serial path reuses the same scratch
  EXPECT_EQ(allocation_count() - before, 0);
}

TEST(RMSNorm, FloatAgreesWithDouble) {
  const int64_t rows = 80, d = 512;
  const auto in = random_vector(rows * d, 11);
  const auto gain = random_vector(d, 12, 0.5);
  const auto dout = random_vector(rows * d, 13);
  std::vector<double> out(rows * d), rstd(rows), din(rows * d, 0.0), dgain(d, 0.0);
  rmsnorm_forward(out.data(), rstd.data(), in.data(), gain.data(), rows, d, kEps);
  rmsnorm_backward(din.data(), dgain.data(), dout.data(), in.data(), gain.data(), rstd.data(),
                   rows, d);
  const auto in_f = cast_vector<float>(in), gain_f = cast_vector<float>(gain),
             dout_f = cast_vector<float>(dout);
  std::vector<float> out_f(rows * d), rstd_f(rows), din_f(rows * d, 0.0f), dgain_f(d, 0.0f);
  rmsnorm_forward(out_f.data(), rstd_f.data(), in_f.data(), gain_f.data(), rows, d, kEps);
  rmsnorm_backward(din_f.data(), dgain_f.data(), dout_f.data(), in_f.data(), gain_f.data(),
                   rstd_f.data(), rows, d);
  EXPECT_LT(max_relative_error(out_f.data(), out.data(), out.size()), 1e-5);
  EXPECT_LT(max_relative_error(rstd_f.data(), rstd.data(), rows), 1e-5);
  EXPECT_LT(max_relative_error(din_f.data(), din.data(), din.size()), 1e-5);
  EXPECT_LT(max_relative_error(dgain_f.data(), dgain.data(), d), 1e-5);
}

}  // namespace
}  // namespace sps::ops
