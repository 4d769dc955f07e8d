// Autocorrelation by FFT, emcee's integrated time, ParaDRAM's batch-means IAC.
#include "herd/mcmc/autocorrelation.hpp"

#include <cmath>
#include <limits>

#include "diagnostics_detail.hpp"
#include "herd/core/error.hpp"

namespace herd::mcmc {

namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

/// Centred copy of x into ws.centered (first n entries).
void center(const double* x, std::size_t n, detail::Workspace& ws) {
  double s = 0;
  for (std::size_t i = 0; i < n; ++i) s += x[i];
  const double mu = s / static_cast<double>(n);
  ws.centered.resize(n);
  for (std::size_t i = 0; i < n; ++i) ws.centered[i] = x[i] - mu;
}
}  // namespace

std::vector<double> autocovariance(std::span<const double> x) {
  HERD_REQUIRE(!x.empty(), "autocovariance: the series is empty");
  const std::size_t n = x.size();
  if (!detail::all_finite(x.data(), n)) return std::vector<double>(n, kNaN);
  detail::Workspace& ws = detail::workspace();
  center(x.data(), n, ws);
  std::vector<double> out(n);
  detail::autocovariance_fft(ws.centered.data(), n, out.data(), ws);
  return out;
}

std::vector<double> autocorrelation(std::span<const double> x) {
  std::vector<double> a = autocovariance(x);
  const double a0 = a[0];
  for (double& v : a) v /= a0;
  return a;
}

IntegratedTime integrated_time(const DrawsView& walkers, double c, double tol) {
  HERD_REQUIRE(c > 0, "integrated_time: c is {}, but must be positive", c);
  HERD_REQUIRE(tol >= 0, "integrated_time: tol is {}, but must be >= 0", tol);
  detail::Workspace& ws = detail::workspace();
  const double* x = detail::verbose_values(walkers, ws);
  const std::size_t m = walkers.chains(), n = walkers.verbose_draws();
  IntegratedTime r;
  if (!detail::all_finite(x, m * n)) {
    r.tau = kNaN;
    return r;
  }
  std::vector<double> f(n, 0.0), acov(n);
  for (std::size_t k = 0; k < m; ++k) {
    center(x + k * n, n, ws);
    detail::autocovariance_fft(ws.centered.data(), n, acov.data(), ws);
    const double a0 = acov[0];
    for (std::size_t t = 0; t < n; ++t) f[t] += acov[t] / a0;
  }
  const double inv_m = 1.0 / static_cast<double>(m);
  // emcee's auto_window: argmin of (lag < c tau(lag)); when every lag satisfies it numpy's
  // argmin returns 0 (tau = 1): kept for compatibility, but flagged as too short.
  double cum = 0;
  bool found = false;
  r.window = 0;
  r.tau = 1.0;
  for (std::size_t t = 0; t < n; ++t) {
    cum += f[t] * inv_m;
    const double tau = 2.0 * cum - 1.0;
    if (std::isnan(tau)) {
      r.window = 0;
      r.tau = kNaN;
      return r;
    }
    if (!(static_cast<double>(t) < c * tau)) {
      r.window = t;
      r.tau = tau;
      found = true;
      break;
    }
  }
  if (!found) {
    r.too_short = true;
    return r;
  }
  r.too_short = tol * r.tau > static_cast<double>(n);
  return r;
}

double batch_means_iac(std::span<const double> x, std::span<const std::int64_t> weights, std::size_t batch_size) {
  const std::size_t np = x.size();
  HERD_REQUIRE(np > 0, "batch_means_iac: the series is empty");
  HERD_REQUIRE(weights.empty() || weights.size() == np,
               "batch_means_iac: weights has {} elements, but the series has {}", weights.size(), np);
  std::int64_t total = 0;
  for (std::size_t i = 0; i < weights.size(); ++i) {
    HERD_REQUIRE(weights[i] >= 0, "batch_means_iac: weights[{}] is {}, but must be >= 0", i, weights[i]);
    total += weights[i];
  }
  if (weights.empty()) total = static_cast<std::int64_t>(np);
  HERD_REQUIRE(total > 0, "batch_means_iac: the weights sum to 0, but must be positive");
  if (!detail::all_finite(x.data(), np)) return kNaN;
  const auto b =
      static_cast<std::int64_t>(batch_size > 0 ? static_cast<double>(batch_size)
                                               : std::floor(std::pow(static_cast<double>(total), 0.666666666666666)));
  if (b < 1) return 1.0;
  const std::int64_t nb = total / b;
  if (nb < 2) return 1.0;
  const std::int64_t neff = nb * b;
  // Walk the verbose sequence once: batch sums, then the variance about the mean.
  std::vector<double> batch(static_cast<std::size_t>(nb), 0.0);
  auto for_each_verbose = [&](auto&& fn) {
    std::int64_t pos = 0;
    for (std::size_t i = 0; i < np && pos < neff; ++i) {
      const std::int64_t w = weights.empty() ? 1 : weights[i];
      const std::int64_t take = std::min(w, neff - pos);
      if (take > 0) fn(x[i], pos, take);
      pos += take;
    }
  };
  double total_sum = 0;
  // The runs come in verbose order, each starting where the one before ended: the batch k
  // of position pos and its end (k + 1) b are followed along, not divided out per run.
  std::size_t k = 0;
  std::int64_t batch_end = b;
  for_each_verbose([&](double v, std::int64_t pos, std::int64_t take) {
    // A run of `take` copies of v starting at verbose position pos may span batches.
    while (take > 0) {
      const std::int64_t put = std::min(batch_end - pos, take);
      batch[k] += v * static_cast<double>(put);
      pos += put;
      take -= put;
      if (pos == batch_end) {
        ++k;
        batch_end += b;
      }
    }
  });
  for (double& s : batch) {
    total_sum += s;
    s /= static_cast<double>(b);
  }
  const double avg = total_sum / static_cast<double>(neff);
  double avg_batch = 0;
  for (double s : batch) avg_batch += s;
  avg_batch /= static_cast<double>(nb);
  double var_batch = 0;
  for (double s : batch) var_batch += (s - avg_batch) * (s - avg_batch);
  var_batch /= static_cast<double>(nb - 1);
  double var_point = 0;
  for_each_verbose([&](double v, std::int64_t, std::int64_t take) {
    var_point += (v - avg) * (v - avg) * static_cast<double>(take);
  });
  var_point /= static_cast<double>(neff - 1);
  if (!(var_point > 0)) return kNaN;
  return static_cast<double>(b) * var_batch / var_point;
}

}  // namespace herd::mcmc
