#pragma once
// Statistical helpers of the mcmc tests: Geyer ESS, KS p-values, batch-means t statistics
// on the verbose chain expanded from a compact `MemoryChainSink`.
#include <algorithm>
#include <cmath>
#include <complex>
#include <functional>
#include <limits>
#include <vector>

#include <boost/math/distributions/students_t.hpp>
#include <unsupported/Eigen/FFT>

#include "herd/mcmc/chain_sink.hpp"
#include "ks.hpp"

namespace herd::mcmc::testing {

using herd::testing::kolmogorov_sf;
using herd::testing::ks_pvalue;

/// Coordinate `j` of the verbose chain from verbose step `skip` on.
inline std::vector<double> verbose_coord(const MemoryChainSink& c, int j, std::int64_t skip = 0) {
  std::vector<double> out;
  std::int64_t t = 0;
  for (std::size_t i = 0; i < c.size(); ++i)
    for (std::int64_t k = 0; k < c.weight[i]; ++k, ++t)
      if (t >= skip) out.push_back(c.point(i)[j]);
  return out;
}

/// Verbose values of g(x) from step `skip` on.
inline std::vector<double> verbose_map(const MemoryChainSink& c, const std::function<double(const double*)>& g,
                                       std::int64_t skip = 0) {
  std::vector<double> out;
  std::int64_t t = 0;
  for (std::size_t i = 0; i < c.size(); ++i) {
    const double v = g(c.point(i));
    for (std::int64_t k = 0; k < c.weight[i]; ++k, ++t)
      if (t >= skip) out.push_back(v);
  }
  return out;
}

/// Integrated autocorrelation time by Geyer's initial monotone sequence (FFT autocovariance).
inline double geyer_tau(const std::vector<double>& x) {
  const std::size_t n = x.size();
  double mean = 0.0;
  for (double v : x) mean += v;
  mean /= static_cast<double>(n);
  std::size_t m = 1;
  while (m < 2 * n) m <<= 1;
  std::vector<double> buf(m, 0.0);
  for (std::size_t i = 0; i < n; ++i) buf[i] = x[i] - mean;
  Eigen::FFT<double> fft;
  std::vector<std::complex<double>> spec;
  fft.fwd(spec, buf);
  for (auto& c : spec) c = std::complex<double>(std::norm(c), 0.0);
  std::vector<double> acov;
  fft.inv(acov, spec);
  const double c0 = acov[0];
  if (!(c0 > 0)) return 1.0;
  double sum = 0.0, prev = std::numeric_limits<double>::infinity();
  for (std::size_t k = 0; 2 * k + 1 < n; ++k) {
    double g = (acov[2 * k] + acov[2 * k + 1]) / c0;
    if (g <= 0) break;
    g = std::min(g, prev);
    prev = g;
    sum += g;
  }
  return std::max(1.0, -1.0 + 2.0 * sum);
}

/// Every `thin`-th value.
inline std::vector<double> thin(const std::vector<double>& x, std::size_t k) {
  std::vector<double> out;
  for (std::size_t i = 0; i < x.size(); i += std::max<std::size_t>(1, k)) out.push_back(x[i]);
  return out;
}

/// Batch-means t statistic of mean(x) - mu with `b` batches (t with b - 1 df when the
/// batches are much longer than the autocorrelation time).
inline double batch_t(const std::vector<double>& x, double mu, int b = 50) {
  const std::size_t len = x.size() / b;
  std::vector<double> m(b, 0.0);
  for (int k = 0; k < b; ++k) {
    for (std::size_t i = 0; i < len; ++i) m[k] += x[k * len + i];
    m[k] /= static_cast<double>(len);
  }
  double mean = 0.0;
  for (double v : m) mean += v;
  mean /= b;
  double var = 0.0;
  for (double v : m) var += (v - mean) * (v - mean);
  var /= (b - 1);
  return (mean - mu) / std::sqrt(var / b);
}

/// Two-sided threshold of a t statistic with `df` degrees of freedom at false-failure rate `p`.
inline double t_threshold(double p, double df) {
  return boost::math::quantile(boost::math::complement(boost::math::students_t(df), p / 2));
}

inline double normal_cdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

}  // namespace herd::mcmc::testing
