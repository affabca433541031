#pragma once
// Helpers shared by the tests: seeded random fills, central finite differences in double,
// and relative-error measures.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <vector>

namespace sps::testing {

inline std::vector<double> random_vector(int64_t n, uint64_t seed, double scale = 1.0) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, scale);
  std::vector<double> v(n);
  for (auto& x : v) x = normal(rng);
  return v;
}

template <typename T>
std::vector<T> cast_vector(const std::vector<double>& v) {
  return std::vector<T>(v.begin(), v.end());
}

// ∂f/∂x[i] by central differences, perturbing x in place (restored afterwards).
inline std::vector<double> numeric_gradient(const std::function<double()>& f, double* x,
                                            int64_t n, double eps = 1e-6) {
  std::vector<double> g(n);
  for (int64_t i = 0; i < n; ++i) {
    const double saved = x[i];
    x[i] = saved + eps;
    const double up = f();
    x[i] = saved - eps;
    const double down = f();
    x[i] = saved;
    g[i] = (up - down) / (2 * eps);
  }
  return g;
}

// max_i |a_i − b_i| / max(floor, max_i |b_i|): error relative to the reference's scale;
// infinite where either side holds a NaN (std::max would skip it).
template <typename A, typename B>
double max_relative_error(const A* a, const B* b, int64_t n, double floor = 1e-12) {
  double diff = 0, scale = floor;
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(double(a[i])) || std::isnan(double(b[i])))
      return std::numeric_limits<double>::infinity();
    diff = std::max(diff, std::abs(double(a[i]) - double(b[i])));
    scale = std::max(scale, std::abs(double(b[i])));
  }
  return diff / scale;
}

// The same over whole vectors; vectors of different sizes are infinitely far apart.
template <typename A, typename B>
double max_relative_error(const std::vector<A>& a, const std::vector<B>& b) {
  if (a.size() != b.size()) return std::numeric_limits<double>::infinity();
  return max_relative_error(a.data(), b.data(), int64_t(b.size()));
}

}  // namespace sps::testing
