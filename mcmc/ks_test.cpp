// Two-sample Kolmogorov-Smirnov tests (see ks_test.hpp).
#include "herd/mcmc/ks_test.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <numeric>

#include "herd/core/error.hpp"

namespace herd::mcmc {

namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

struct Weighted {
  std::vector<std::pair<double, std::int64_t>> v;  // sorted (value, weight > 0)
  std::int64_t total = 0;
  bool has_nan = false;
};

Weighted prepare(std::span<const double> x, std::span<const std::int64_t> w, const char* name) {
  HERD_REQUIRE(w.empty() || w.size() == x.size(), "ks_two_sample: weights of {} has {} elements, but the sample has {}",
               name, w.size(), x.size());
  Weighted r;
  r.v.reserve(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const std::int64_t wi = w.empty() ? 1 : w[i];
    HERD_REQUIRE(wi >= 0, "ks_two_sample: weight {} of {} is {}, but must be >= 0", i, name, wi);
    if (wi == 0) continue;
    if (std::isnan(x[i])) r.has_nan = true;
    r.v.emplace_back(x[i], wi);
    r.total += wi;
  }
  HERD_REQUIRE(r.total > 0, "ks_two_sample: sample {} is empty (total weight 0)", name);
  if (!r.has_nan) std::sort(r.v.begin(), r.v.end());
  return r;
}

KsResult test(const Weighted& a, const Weighted& b, KsMethod method) {
  KsResult r;
  if (a.has_nan || b.has_nan) return {kNaN, kNaN, false};
  const std::int64_t nx = a.total, ny = b.total;
  // D numerator max |cx ny - cy nx| over distinct values; ties: any repeated pooled value.
  __int128 best = 0;
  std::int64_t cx = 0, cy = 0;
  std::size_t i = 0, j = 0;
  bool ties = false;
  while (i < a.v.size() || j < b.v.size()) {
    double v;
    if (j >= b.v.size() || (i < a.v.size() && a.v[i].first <= b.v[j].first)) v = a.v[i].first;
    else v = b.v[j].first;
    std::int64_t count = 0;
    while (i < a.v.size() && a.v[i].first == v) count += a.v[i].second, cx += a.v[i++].second;
    while (j < b.v.size() && b.v[j].first == v) count += b.v[j].second, cy += b.v[j++].second;
    if (count > 1) ties = true;
    const __int128 d = static_cast<__int128>(cx) * ny - static_cast<__int128>(cy) * nx;
    best = std::max(best, d < 0 ? -d : d);
  }
  const long double prod = static_cast<long double>(nx) * static_cast<long double>(ny);
  r.statistic = static_cast<double>(static_cast<long double>(best) / prod);
  bool exact = method == KsMethod::kExact || (method == KsMethod::kAuto && prod < 10000.0L && !ties);
  if (exact) {
    r.exact = true;
    r.p_value =
        smirnov_p_exact(static_cast<std::size_t>(nx), static_cast<std::size_t>(ny), static_cast<std::int64_t>(best));
  } else {
    const double lambda = std::sqrt(static_cast<double>(nx) * static_cast<double>(ny) /
                                    (static_cast<double>(nx) + static_cast<double>(ny))) *
                          r.statistic;
    r.p_value = kolmogorov_q(lambda);
  }
  return r;
}
}  // namespace

double kolmogorov_q(double lambda) {
  if (std::isnan(lambda)) return kNaN;
  if (lambda <= 0) return 1.0;
  if (lambda < 1.0) {
    const double z = -(std::numbers::pi * std::numbers::pi / 8.0) / (lambda * lambda);
    double s = 0;
    for (int k = 1; k < 200; k += 2) {
      const double term = std::exp(static_cast<double>(k * k) * z);
      s += term;
      if (term < 1e-18 * s) break;
    }
    return 1.0 - std::sqrt(2.0 * std::numbers::pi) / lambda * s;
  }
  double s = 0;
  for (int k = 1; k < 200; ++k) {
    const double term = std::exp(-2.0 * k * k * lambda * lambda);
    s += (k % 2 == 1) ? term : -term;
    if (term < 1e-20 * std::fabs(s) || term == 0.0) break;
  }
  return std::min(1.0, 2.0 * s);
}

double smirnov_p_exact(std::size_t nx, std::size_t ny, std::int64_t d_num) {
  HERD_REQUIRE(nx > 0 && ny > 0, "smirnov_p_exact: nx is {} and ny is {}, but both must be positive", nx, ny);
  HERD_REQUIRE(static_cast<double>(nx) * static_cast<double>(ny) <= 1e8,
               "smirnov_p_exact: nx * ny is {}, but must be <= 1e8", static_cast<double>(nx) * static_cast<double>(ny));
  if (d_num <= 0) return 1.0;
  const auto m = static_cast<std::int64_t>(nx), n = static_cast<std::int64_t>(ny);
  auto exceeds = [&](std::int64_t i, std::int64_t j) {
    const std::int64_t d = i * n - j * m;
    return (d < 0 ? -d : d) >= d_num;
  };
  // Probability mass of a uniformly random lattice path from (0,0) to (m,n) that has not
  // touched the boundary yet; the mass flowing onto the boundary is the p-value.
  std::vector<double> row(static_cast<std::size_t>(n + 1), 0.0), next(row.size(), 0.0);
  row[0] = 1.0;
  double p = 0;
  for (std::int64_t i = 0; i <= m; ++i) {
    std::fill(next.begin(), next.end(), 0.0);
    for (std::int64_t j = 0; j <= n; ++j) {
      const double mass = row[static_cast<std::size_t>(j)];
      if (mass == 0.0) continue;
      const double rem = static_cast<double>(m + n - i - j);
      if (rem == 0.0) continue;
      if (i < m) {
        const double w = mass * static_cast<double>(m - i) / rem;
        if (exceeds(i + 1, j)) p += w;
        else next[static_cast<std::size_t>(j)] += w;
      }
      if (j < n) {
        const double w = mass * static_cast<double>(n - j) / rem;
        if (exceeds(i, j + 1)) p += w;
        else row[static_cast<std::size_t>(j + 1)] += w;
      }
    }
    std::swap(row, next);
  }
  return std::min(p, 1.0);
}

KsResult ks_two_sample(std::span<const double> x, std::span<const double> y, KsMethod method) {
  return ks_two_sample(x, {}, y, {}, method);
}

KsResult ks_two_sample(std::span<const double> x, std::span<const std::int64_t> wx, std::span<const double> y,
                       std::span<const std::int64_t> wy, KsMethod method) {
  const Weighted a = prepare(x, wx, "x");
  const Weighted b = prepare(y, wy, "y");
  if (method == KsMethod::kExact)
    HERD_REQUIRE(static_cast<double>(a.total) * static_cast<double>(b.total) <= 1e8,
                 "ks_two_sample: exact p-value asked for n_x * n_y = {}, but must be <= 1e8",
                 static_cast<double>(a.total) * static_cast<double>(b.total));
  return test(a, b, method);
}

std::vector<KsResult> ks_pairwise(const DrawsView& chains, KsMethod method) {
  const std::size_t m = chains.chains(), d = chains.draws();
  std::vector<Weighted> prepared;
  prepared.reserve(m);
  std::vector<std::int64_t> w;  // a chain's weights, widened for prepare
  for (std::size_t c = 0; c < m; ++c) {
    w.clear();
    if (chains.weighted()) {
      const auto wc = chains.weights().subspan(c * d, d);
      w.assign(wc.begin(), wc.end());
    }
    prepared.push_back(prepare(chains.values().subspan(c * d, d), w, "chain"));
  }
  std::vector<KsResult> out(m * m);
  for (std::size_t a = 0; a < m; ++a) {
    out[a * m + a] = {0.0, 1.0, false};
    for (std::size_t b = a + 1; b < m; ++b) {
      out[a * m + b] = test(prepared[a], prepared[b], method);
      out[b * m + a] = out[a * m + b];
    }
  }
  return out;
}

std::vector<KsResult> ks_pairwise(std::span<const std::vector<double>> samples, KsMethod method) {
  const std::size_t m = samples.size();
  std::vector<Weighted> prepared;
  prepared.reserve(m);
  for (std::size_t c = 0; c < m; ++c) prepared.push_back(prepare(samples[c], {}, "sample"));
  std::vector<KsResult> out(m * m);
  for (std::size_t a = 0; a < m; ++a) {
    out[a * m + a] = {0.0, 1.0, false};
    for (std::size_t b = a + 1; b < m; ++b) {
      out[a * m + b] = test(prepared[a], prepared[b], method);
      out[b * m + a] = out[a * m + b];
    }
  }
  return out;
}

}  // namespace herd::mcmc
