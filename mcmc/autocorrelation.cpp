// Autocorrelation by FFT, emcee's integrated time, ParaDRAM's batch-means IAC.
#include "herd/mcmc/autocorrelation.hpp"

#include <algorithm>
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

namespace {

/// The weights' total (the verbose length; `np` when `weights` is empty), after checking them
/// against a series of `np` compact states. @throws herd::InputError naming `fn`.
std::int64_t checked_total(const char* fn, std::size_t np, std::span<const std::int64_t> weights) {
  HERD_REQUIRE(np > 0, "{}: the series is empty", fn);
  HERD_REQUIRE(weights.empty() || weights.size() == np, "{}: weights has {} elements, but the series has {}", fn,
               weights.size(), np);
  std::int64_t total = 0;
  for (std::size_t i = 0; i < weights.size(); ++i) {
    HERD_REQUIRE(weights[i] >= 0, "{}: weights[{}] is {}, but must be >= 0", fn, i, weights[i]);
    total += weights[i];
  }
  if (weights.empty()) total = static_cast<std::int64_t>(np);
  HERD_REQUIRE(total > 0, "{}: the weights sum to 0, but must be positive", fn);
  return total;
}

/// batch_means_iac of the nv variables of rows `row(0..np-1)` (each nv values) at once, row
/// i's weight `weight(i)` (checked, total `total`). Each variable's sums take the same terms in
/// the same order as a single series would, while each row is read once for all its
/// variables. Both are called in increasing i within each of the two passes; in the second,
/// weight(i) before row(i).
template <class Row, class Weight>
std::vector<double> iacs_of_weighted_rows(std::size_t np, std::size_t nv, Row&& row, Weight&& weight,
                                          std::int64_t total, std::size_t batch_size) {
  const auto b =
      static_cast<std::int64_t>(batch_size > 0 ? static_cast<double>(batch_size)
                                               : std::floor(std::pow(static_cast<double>(total), 0.666666666666666)));
  const std::int64_t nb = b >= 1 ? total / b : 0;
  const std::int64_t neff = nb * b;
  // One pass over every row: finiteness (of the whole series), and the batch sums
  // [batch, variable] over the first neff verbose draws. The runs come in verbose order,
  // each starting where the one before ended: the batch k of position pos and its end
  // (k + 1) b are followed along, not divided out per run.
  std::vector<char> finite(nv, 1);
  std::vector<double> batch(static_cast<std::size_t>(std::max<std::int64_t>(nb, 0)) * nv, 0.0);
  {
    std::int64_t pos = 0, batch_end = b;
    std::size_t k = 0;
    for (std::size_t i = 0; i < np; ++i) {
      const double* x = row(i);
      for (std::size_t v = 0; v < nv; ++v) finite[v] = static_cast<char>(finite[v] && std::isfinite(x[v]));
      if (nb < 2 || pos >= neff) continue;
      const std::int64_t w = weight(i);
      std::int64_t take = std::min(w, neff - pos);
      // A run of `take` copies starting at verbose position pos may span batches.
      while (take > 0) {
        const std::int64_t put = std::min(batch_end - pos, take);
        double* sums = batch.data() + k * nv;
        for (std::size_t v = 0; v < nv; ++v) sums[v] += x[v] * static_cast<double>(put);
        pos += put;
        take -= put;
        if (pos == batch_end) {
          ++k;
          batch_end += b;
        }
      }
    }
  }
  std::vector<double> out(nv, 1.0);  // ParaMonte's convention for fewer than 2 batches
  if (nb < 2) {
    for (std::size_t v = 0; v < nv; ++v)
      if (!finite[v]) out[v] = kNaN;
    return out;
  }
  const auto nbu = static_cast<std::size_t>(nb);
  std::vector<double> avg(nv), var_batch(nv), var_point(nv, 0.0);
  for (std::size_t v = 0; v < nv; ++v) {
    double total_sum = 0;
    for (std::size_t k = 0; k < nbu; ++k) {
      double& s = batch[k * nv + v];
      total_sum += s;
      s /= static_cast<double>(b);
    }
    avg[v] = total_sum / static_cast<double>(neff);
    double avg_batch = 0;
    for (std::size_t k = 0; k < nbu; ++k) avg_batch += batch[k * nv + v];
    avg_batch /= static_cast<double>(nb);
    double vb = 0;
    for (std::size_t k = 0; k < nbu; ++k) vb += (batch[k * nv + v] - avg_batch) * (batch[k * nv + v] - avg_batch);
    var_batch[v] = vb / static_cast<double>(nb - 1);
  }
  {
    std::int64_t pos = 0;
    for (std::size_t i = 0; i < np && pos < neff; ++i) {
      const std::int64_t w = weight(i);
      const std::int64_t take = std::min(w, neff - pos);
      if (take > 0) {
        const double* x = row(i);
        for (std::size_t v = 0; v < nv; ++v)
          var_point[v] += (x[v] - avg[v]) * (x[v] - avg[v]) * static_cast<double>(take);
      }
      pos += take;
    }
  }
  for (std::size_t v = 0; v < nv; ++v) {
    const double vp = var_point[v] / static_cast<double>(neff - 1);
    out[v] = !finite[v] || !(vp > 0) ? kNaN : static_cast<double>(b) * var_batch[v] / vp;
  }
  return out;
}

/// iacs_of_weighted_rows with the weights `weights` (empty: all 1).
template <class Row>
std::vector<double> iacs_of_rows(std::size_t np, std::size_t nv, Row&& row, std::span<const std::int64_t> weights,
                                 std::int64_t total, std::size_t batch_size) {
  return iacs_of_weighted_rows(
      np, nv, row, [weights](std::size_t i) { return weights.empty() ? std::int64_t{1} : weights[i]; }, total,
      batch_size);
}

}  // namespace

double batch_means_iac(std::span<const double> x, std::span<const std::int64_t> weights, std::size_t batch_size) {
  const std::int64_t total = checked_total("batch_means_iac", x.size(), weights);
  return iacs_of_rows(
      x.size(), 1, [&x](std::size_t i) { return x.data() + i; }, weights, total, batch_size)[0];
}

std::vector<double> batch_means_iacs(std::span<const double> states, std::size_t nv, std::span<const std::size_t> rows,
                                     std::span<const std::int64_t> weights, std::size_t batch_size) {
  HERD_REQUIRE(nv > 0 && states.size() % nv == 0, "batch_means_iacs: {} values are not rows of {} variables",
               states.size(), nv);
  const std::size_t n = states.size() / nv;
  for (std::size_t i = 0; i < rows.size(); ++i)
    HERD_REQUIRE(rows[i] < n, "batch_means_iacs: rows[{}] is {}, but the states have {} rows", i, rows[i], n);
  const std::size_t np = rows.empty() ? n : rows.size();
  const std::int64_t total = checked_total("batch_means_iacs", np, weights);
  if (rows.empty())
    return iacs_of_rows(
        np, nv, [&](std::size_t i) { return states.data() + i * nv; }, weights, total, batch_size);
  return iacs_of_rows(
      np, nv, [&](std::size_t i) { return states.data() + rows[i] * nv; }, weights, total, batch_size);
}

std::vector<double> batch_means_iacs_by_row(std::size_t np, std::size_t nv, const RowSource& row,
                                            std::span<const std::int64_t> weights, std::size_t batch_size) {
  HERD_REQUIRE(nv > 0, "batch_means_iacs_by_row: rows of 0 variables");
  const std::int64_t total = checked_total("batch_means_iacs_by_row", np, weights);
  return iacs_of_rows(np, nv, row, weights, total, batch_size);
}

std::vector<double> batch_means_iacs_weighted(std::size_t np, std::size_t nv, std::int64_t total,
                                              const WeightedRowSource& row, bool unit_weights, std::size_t batch_size) {
  HERD_REQUIRE(nv > 0, "batch_means_iacs_weighted: rows of 0 variables");
  HERD_REQUIRE(np > 0, "batch_means_iacs_weighted: the series is empty");
  if (unit_weights) total = static_cast<std::int64_t>(np);
  HERD_REQUIRE(total > 0, "batch_means_iacs_weighted: the weights sum to {}, but must be positive", total);
  // Each pass asks for a row's weight and then its values (or the reverse): one call of `row`.
  std::size_t last = static_cast<std::size_t>(-1);
  const double* x = nullptr;
  std::int64_t w = 0;
  const auto get = [&](std::size_t i) {
    if (i != last) {
      x = row(i, w);
      last = i;
    }
  };
  return iacs_of_weighted_rows(
      np, nv,
      [&](std::size_t i) {
        get(i);
        return x;
      },
      [&](std::size_t i) {
        if (unit_weights) return std::int64_t{1};
        get(i);
        return w;
      },
      total, batch_size);
}

namespace {

/// autocorr_iac of a verbose series (each value once): the estimator's sum over the
/// normalized autocorrelation.
double autocorr_iac_verbose(AutocorrIac estimator, std::span<const double> v) {
  if (v.size() == 1) return 1.0;
  const std::vector<double> rho = autocorrelation(v);  // NaN for zero variance or non-finite values
  if (!std::isfinite(rho[0])) return kNaN;
  if (estimator == AutocorrIac::kCutoff) {
    const double cutoff = 2.0 / std::sqrt(static_cast<double>(v.size()));
    double sum = 0;
    for (const double r : rho) {
      sum += r;
      if (r < cutoff) break;  // the first lag below the cutoff is summed too
    }
    return 2.0 * sum - 1.0;
  }
  double sum = 0, best = -std::numeric_limits<double>::infinity();
  for (const double r : rho) {
    sum += r;
    best = std::max(best, sum);
  }
  return 2.0 * best - 1.0;
}

}  // namespace

double autocorr_iac(AutocorrIac estimator, std::span<const double> x, std::span<const std::int64_t> weights) {
  HERD_REQUIRE(!x.empty(), "autocorr_iac: the series is empty");
  if (weights.empty()) return autocorr_iac_verbose(estimator, x);
  checked_total("autocorr_iac", x.size(), weights);
  std::vector<double> v;
  for (std::size_t i = 0; i < x.size(); ++i) v.insert(v.end(), static_cast<std::size_t>(weights[i]), x[i]);
  return autocorr_iac_verbose(estimator, v);
}

std::vector<double> autocorr_iacs_weighted(AutocorrIac estimator, std::size_t np, std::size_t nv,
                                           const WeightedRowSource& row, bool unit_weights) {
  HERD_REQUIRE(nv > 0, "autocorr_iacs_weighted: rows of 0 variables");
  HERD_REQUIRE(np > 0, "autocorr_iacs_weighted: the series is empty");
  std::vector<double> out(nv), v;
  for (std::size_t j = 0; j < nv; ++j) {
    v.clear();
    for (std::size_t k = 0; k < np; ++k) {
      std::int64_t w = 0;
      const double x = row(k, w)[j];
      if (unit_weights) w = 1;
      HERD_REQUIRE(w >= 0, "autocorr_iacs_weighted: row {} has weight {}, but must be >= 0", k, w);
      v.insert(v.end(), static_cast<std::size_t>(w), x);
    }
    HERD_REQUIRE(!v.empty(), "autocorr_iacs_weighted: the weights sum to 0");
    out[j] = autocorr_iac_verbose(estimator, v);
  }
  return out;
}

}  // namespace herd::mcmc
