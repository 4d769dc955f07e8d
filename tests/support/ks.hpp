#pragma once
// One-sample Kolmogorov-Smirnov test for the statistical tests: the asymptotic Kolmogorov
// survival function and a p-value against a given CDF. (The library's two-sample tests, exact
// and asymptotic, are in herd/mcmc/ks_test.hpp.)
#include <algorithm>
#include <cmath>
#include <vector>

namespace herd::testing {

/// Asymptotic Kolmogorov survival function P(sqrt(n) D > x) = 2 sum_k (-1)^(k-1) exp(-2 k^2 x^2).
inline double kolmogorov_sf(double x) {
  if (x < 0.2) return 1.0;
  double s = 0.0;
  for (int k = 1; k <= 100; ++k) s += (k % 2 ? 2.0 : -2.0) * std::exp(-2.0 * k * k * x * x);
  return std::clamp(s, 0.0, 1.0);
}

/// One-sample KS p-value (asymptotic) of the sample `v` against `cdf`.
template <class Cdf>
double ks_pvalue(std::vector<double> v, Cdf cdf) {
  std::sort(v.begin(), v.end());
  const double n = static_cast<double>(v.size());
  double d = 0.0;
  for (std::size_t i = 0; i < v.size(); ++i) {
    const double f = cdf(v[i]);
    d = std::max({d, f - static_cast<double>(i) / n, static_cast<double>(i + 1) / n - f});
  }
  return kolmogorov_sf(std::sqrt(n) * d);
}

}  // namespace herd::testing
