// RoPE (adjacent pairs): tables, a hand-computed rotation, heads and row strides, backward
// as the inverse rotation and against finite differences, float against double.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "gradcheck.h"
#include "ops/ops.h"

namespace sps::ops {
namespace {

using testing::cast_vector;
using testing::max_relative_error;
using testing::numeric_gradient;
using testing::random_vector;

constexpr double kTheta = 10000.0;

struct Tables {
  std::vector<double> cos, sin;
  Tables(int64_t max_pos, int64_t head_dim)
      : cos(max_pos * head_dim / 2), sin(max_pos * head_dim / 2) {
    rope_tables(cos.data(), sin.data(), max_pos, head_dim, kTheta);
  }
};

TEST(RoPE, TablesHoldPositionTimesFrequency) {
  const int64_t max_pos = 4096, D = 64;
  const Tables t(max_pos, D);
  for (int64_t p : {0, 1, 7, 4095}) {
    for (int64_t j : {0, 1, 13, 31}) {
      const double angle = p * std::pow(kTheta, -2.0 * j / D);
      EXPECT_NEAR(t.cos[p * D / 2 + j], std::cos(angle), 1e-13) << p << " " << j;
      EXPECT_NEAR(t.sin[p * D / 2 + j], std::sin(angle), 1e-13) << p << " " << j;
    }
  }
  // Large positions keep double-precision angles in the float tables too.
  std::vector<float> cos_f(max_pos * D / 2), sin_f(max_pos * D / 2);
  rope_tables(cos_f.data(), sin_f.data(), max_pos, D, kTheta);
  EXPECT_LT(max_relative_error(cos_f.data(), t.cos.data(), t.cos.size()), 1e-7);
  EXPECT_LT(max_relative_error(sin_f.data(), t.sin.data(), t.sin.size()), 1e-7);
}

// Position 1, D = 4: frequencies 1 and 10000^(-1/2) = 0.01, x = (1, 2, 3, 4).
// (1, 2) by 1 rad: (cos1 − 2 sin1, sin1 + 2 cos1); (3, 4) by 0.01 rad likewise.
TEST(RoPE, HandComputedTinyCase) {
  const Tables t(2, 4);
  std::vector<double> x = {1, 2, 3, 4};
  const int32_t pos = 1;
  rope_forward(x.data(), &pos, 1, 1, 4, 4, t.cos.data(), t.sin.data());
  EXPECT_NEAR(x[0], -1.1426396637476532, 1e-12);
  EXPECT_NEAR(x[1], 1.922075596544176, 1e-12);
  EXPECT_NEAR(x[2], 2.9598506679133294, 1e-12);
  EXPECT_NEAR(x[3], 4.029799501669161, 1e-12);

  std::vector<double> at_zero = {1, 2, 3, 4};
  const int32_t zero = 0;
  rope_forward(at_zero.data(), &zero, 1, 1, 4, 4, t.cos.data(), t.sin.data());
  EXPECT_EQ(at_zero, (std::vector<double>{1, 2, 3, 4}));
}

// n rows of `heads` heads inside rows row_stride wide (as q inside a qkv row).
struct Layout {
  int64_t n = 5, heads = 3, D = 8, row_stride = 3 * 3 * 8 + 2;
};

std::vector<int32_t> positions(int64_t n) {
  std::vector<int32_t> pos(n);
  for (int64_t r = 0; r < n; ++r) pos[r] = int32_t((r * 37 + 11) % 50);
  return pos;
}

TEST(RoPE, ForwardMatchesLoopAndKeepsOtherColumns) {
  const Layout L;
  const Tables t(50, L.D);
  const auto pos = positions(L.n);
  const auto original = random_vector(L.n * L.row_stride, 1);
  auto x = original;
  rope_forward(x.data(), pos.data(), L.n, L.heads, L.D, L.row_stride, t.cos.data(),
               t.sin.data());
  for (int64_t r = 0; r < L.n; ++r) {
    for (int64_t c = 0; c < L.row_stride; ++c) {
      const int64_t k = r * L.row_stride + c;
      if (c >= L.heads * L.D) {
        EXPECT_EQ(x[k], original[k]);
        continue;
      }
      const int64_t j = (c % L.D) / 2;
      const double angle = pos[r] * std::pow(kTheta, -2.0 * j / L.D);
      const double even = original[k - c % 2], odd = original[k - c % 2 + 1];
      const double expected = c % 2 == 0 ? even * std::cos(angle) - odd * std::sin(angle)
                                         : even * std::sin(angle) + odd * std::cos(angle);
      EXPECT_NEAR(x[k], expected, 1e-12) << r << " " << c;
    }
  }
}

TEST(RoPE, BackwardIsTheInverseRotation) {
  const Layout L;
  const Tables t(50, L.D);
  const auto pos = positions(L.n);
  const auto original = random_vector(L.n * L.row_stride, 2);
  auto x = original;
  rope_forward(x.data(), pos.data(), L.n, L.heads, L.D, L.row_stride, t.cos.data(),
               t.sin.data());
  EXPECT_GT(max_relative_error(x.data(), original.data(), x.size()), 0.1);  // it did rotate
  rope_backward(x.data(), pos.data(), L.n, L.heads, L.D, L.row_stride, t.cos.data(),
                t.sin.data());
  EXPECT_LT(max_relative_error(x.data(), original.data(), x.size()), 1e-14);
}

TEST(RoPE, BackwardMatchesFiniteDifferences) {
  const Layout L;
  const Tables t(50, L.D);
  const auto pos = positions(L.n);
  auto x = random_vector(L.n * L.row_stride, 3);
  const auto R = random_vector(x.size(), 4);  // loss = Σ rope(x) · R
  auto loss = [&] {
    auto y = x;
    rope_forward(y.data(), pos.data(), L.n, L.heads, L.D, L.row_stride, t.cos.data(),
                 t.sin.data());
    double total = 0;
    for (size_t k = 0; k < y.size(); ++k) total += y[k] * R[k];
    return total;
  };
  const auto numeric = numeric_gradient(loss, x.data(), x.size());
  auto dx = R;
  rope_backward(dx.data(), pos.data(), L.n, L.heads, L.D, L.row_stride, t.cos.data(),
                t.sin.data());
  EXPECT_LT(max_relative_error(dx.data(), numeric.data(), dx.size()), 1e-8);
}

TEST(RoPE, FloatAgreesWithDouble) {
  const int64_t n = 300, heads = 4, D = 64, max_pos = 4096;
  const Tables t(max_pos, D);
  std::vector<float> cos_f(t.cos.size()), sin_f(t.sin.size());
  rope_tables(cos_f.data(), sin_f.data(), max_pos, D, kTheta);
  std::vector<int32_t> pos(n);
  for (int64_t r = 0; r < n; ++r) pos[r] = int32_t((r * 977) % max_pos);
  auto x = random_vector(n * heads * D, 5);
  auto x_f = cast_vector<float>(x);
  rope_forward(x.data(), pos.data(), n, heads, D, heads * D, t.cos.data(), t.sin.data());
  rope_forward(x_f.data(), pos.data(), n, heads, D, heads * D, cos_f.data(), sin_f.data());
  EXPECT_LT(max_relative_error(x_f.data(), x.data(), x.size()), 1e-6);
  rope_backward(x.data(), pos.data(), n, heads, D, heads * D, t.cos.data(), t.sin.data());
  rope_backward(x_f.data(), pos.data(), n, heads, D, heads * D, cos_f.data(), sin_f.data());
  EXPECT_LT(max_relative_error(x_f.data(), x.data(), x.size()), 1e-6);
}

}  // namespace
}  // namespace sps::ops
