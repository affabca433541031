#include "experiment/stats.h"

#include <boost/math/distributions/students_t.hpp>
#include <cmath>
#include <limits>

namespace sps::stats {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double sample_variance(const std::vector<double>& values) {
  if (values.size() < 2) return kNaN;
  const double m = mean(values);
  double squares = 0;
  for (double x : values) squares += (x - m) * (x - m);
  return squares / double(values.size() - 1);
}

}  // namespace

double mean(const std::vector<double>& values) {
  if (values.empty()) return kNaN;
  double sum = 0;
  for (double x : values) sum += x;
  return sum / double(values.size());
}

double sample_sd(const std::vector<double>& values) { return std::sqrt(sample_variance(values)); }

double t_cdf(double t, double dof) {
  if (std::isnan(t) || !(dof > 0)) return kNaN;
  if (std::isinf(t)) return t > 0 ? 1.0 : 0.0;
  return boost::math::cdf(boost::math::students_t(dof), t);
}

ConfidenceInterval t_confidence_interval(const std::vector<double>& values, double alpha) {
  ConfidenceInterval ci{mean(values), kNaN};
  if (values.size() < 2) return ci;
  const double n = double(values.size());
  ci.half_width = t_quantile(1.0 - alpha / 2.0, n - 1) * sample_sd(values) / std::sqrt(n);
  return ci;
}

double t_quantile(double q, double dof) {
  return boost::math::quantile(boost::math::students_t(dof), q);
}

WelchT welch_t(const std::vector<double>& a, const std::vector<double>& b) {
  WelchT w;
  w.difference = mean(a) - mean(b);
  const double ua = sample_variance(a) / double(a.size());
  const double ub = sample_variance(b) / double(b.size());
  w.standard_error = std::sqrt(ua + ub);
  // Zero spread in both groups leaves neither t nor the degrees of freedom defined.
  if (!(w.standard_error > 0)) {
    w.t = w.dof = kNaN;
    return w;
  }
  w.t = w.difference / w.standard_error;
  w.dof = (ua + ub) * (ua + ub) / (ua * ua / double(a.size() - 1) + ub * ub / double(b.size() - 1));
  return w;
}

double welch_p_less(const std::vector<double>& a, const std::vector<double>& b) {
  const WelchT w = welch_t(a, b);
  return t_cdf(w.t, w.dof);
}

Tost tost(const std::vector<double>& a, const std::vector<double>& b, double margin, double alpha) {
  const WelchT w = welch_t(a, b);
  Tost result;
  if (std::isnan(w.t)) {
    result.p_above_lower = result.p_below_upper = kNaN;
    return result;
  }
  // P(T ≥ x) as P(T ≤ −x): no cancellation for small p.
  result.p_above_lower = t_cdf(-(w.difference + margin) / w.standard_error, w.dof);
  result.p_below_upper = t_cdf((w.difference - margin) / w.standard_error, w.dof);
  result.equivalent = result.p_above_lower < alpha && result.p_below_upper < alpha;
  return result;
}

}  // namespace sps::stats
