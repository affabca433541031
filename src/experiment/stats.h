#pragma once
// Small-sample statistics for seed studies (docs/model.md §9): t-based confidence intervals, one-sided
// Welch t-tests and TOST equivalence. The t distribution comes from Boost.Math. Values that
// cannot be computed (too few samples, zero spread) are NaN.
#include <vector>

namespace sps::stats {

double mean(const std::vector<double>& values);
double sample_sd(const std::vector<double>& values);  // n − 1 in the denominator

struct ConfidenceInterval {
  double mean = 0, half_width = 0;  // mean ± half_width
  double low() const { return mean - half_width; }
  double high() const { return mean + half_width; }
};
// Two-sided (1 − alpha) interval: mean ± t_{1−alpha/2, n−1} · sd / √n.
ConfidenceInterval t_confidence_interval(const std::vector<double>& values, double alpha);

// Welch's t for mean(a) − mean(b) and its Welch–Satterthwaite degrees of freedom.
struct WelchT {
  double difference = 0, standard_error = 0, t = 0, dof = 0;
};
WelchT welch_t(const std::vector<double>& a, const std::vector<double>& b);

// The q-quantile of Student's t with `dof` degrees of freedom.
double t_quantile(double q, double dof);

// P(T ≤ t) for Student's t with `dof` degrees of freedom (dof may be fractional).
double t_cdf(double t, double dof);

// One-sided p of H1: mean(a) < mean(b).
double welch_p_less(const std::vector<double>& a, const std::vector<double>& b);

// Two one-sided Welch tests of H0: |mean(a) − mean(b)| ≥ margin.
struct Tost {
  double p_above_lower = 0;  // H1: difference > −margin
  double p_below_upper = 0;  // H1: difference < +margin
  bool equivalent = false;   // both p < alpha
};
Tost tost(const std::vector<double>& a, const std::vector<double>& b, double margin, double alpha);

}  // namespace sps::stats
