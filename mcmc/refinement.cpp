// ParaDRAM's sample refinement (see refinement.hpp).
#include "herd/mcmc/refinement.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "herd/core/error.hpp"
#include "herd/mcmc/autocorrelation.hpp"

namespace herd::mcmc {

std::vector<std::int64_t> refined_weights(std::span<const std::int64_t> weights, double skip) {
  HERD_REQUIRE(std::isfinite(skip) && skip >= 1.0, "refined_weights: skip is {}, but must be finite and >= 1", skip);
  std::vector<std::int64_t> out(weights.size(), 0);
  double next = skip;  // verbose position (1-based, real) of the next kept draw
  double cum = 0;
  for (std::size_t i = 0; i < weights.size(); ++i) {
    HERD_REQUIRE(weights[i] >= 0, "refined_weights: weights[{}] is {}, but must be >= 0", i, weights[i]);
    cum += static_cast<double>(weights[i]);
    while (next <= cum) {
      ++out[i];
      next += skip;
    }
  }
  return out;
}

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

/// batch_means_iac of every variable of the rows `index` of `states` [n, nv] (weights
/// `weights`, empty: all 1), bit for bit: each variable's sums take the same terms in the
/// same order as batch_means_iac over its gathered column, but the rows are read once (each
/// row's nv values together) instead of once per variable, nv strided passes over the chain.
std::vector<double> batch_means_iacs(std::span<const double> states, std::size_t nv, std::span<const std::size_t> index,
                                     std::span<const std::int64_t> weights) {
  const std::size_t np = index.size();
  std::int64_t total = 0;
  for (std::int64_t w : weights) total += w;
  if (weights.empty()) total = static_cast<std::int64_t>(np);
  const auto b = static_cast<std::int64_t>(std::floor(std::pow(static_cast<double>(total), 0.666666666666666)));
  const std::int64_t nb = b >= 1 ? total / b : 0;
  const std::int64_t neff = nb * b;
  const auto row = [&](std::size_t i) { return states.data() + index[i] * nv; };
  // One pass over every row: finiteness (of the whole column, as all_finite), and the batch
  // sums [batch, variable] over the first neff verbose draws.
  std::vector<char> finite(nv, 1);
  std::vector<double> batch(static_cast<std::size_t>(std::max<std::int64_t>(nb, 0)) * nv, 0.0);
  {
    std::int64_t pos = 0, batch_end = b;
    std::size_t k = 0;
    for (std::size_t i = 0; i < np; ++i) {
      const double* x = row(i);
      for (std::size_t v = 0; v < nv; ++v) finite[v] = static_cast<char>(finite[v] && std::isfinite(x[v]));
      if (nb < 2 || pos >= neff) continue;
      const std::int64_t w = weights.empty() ? 1 : weights[i];
      std::int64_t take = std::min(w, neff - pos);
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
  std::vector<double> out(nv, 1.0);
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
      const std::int64_t w = weights.empty() ? 1 : weights[i];
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

double summarize_iac(std::vector<double> v, IacSummary how) {
  switch (how) {
    case IacSummary::kAverage: {
      double s = 0;
      for (double x : v) s += x;
      return s / static_cast<double>(v.size());
    }
    case IacSummary::kMax:
      return *std::max_element(v.begin(), v.end());
    case IacSummary::kMin:
      return *std::min_element(v.begin(), v.end());
    case IacSummary::kMedian: {
      std::sort(v.begin(), v.end());
      const std::size_t n = v.size();
      return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    }
  }
  return v.front();
}
}  // namespace

RefinedSample refine_sample(std::span<const double> states, std::span<const std::int64_t> weights, std::size_t num_vars,
                            const RefinementOptions& options) {
  HERD_REQUIRE(num_vars > 0, "refine_sample: num_vars is 0, but must be positive");
  HERD_REQUIRE(states.size() % num_vars == 0 && !states.empty(),
               "refine_sample: states has {} elements, but must be a positive multiple of "
               "num_vars = {}",
               states.size(), num_vars);
  const std::size_t n = states.size() / num_vars;
  HERD_REQUIRE(weights.empty() || weights.size() == n,
               "refine_sample: weights has {} elements, but there are {} states", weights.size(), n);
  RefinedSample r;
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t w = weights.empty() ? 1 : weights[i];
    HERD_REQUIRE(w >= 0, "refine_sample: weights[{}] is {}, but must be >= 0", i, w);
    if (w > 0) {
      r.index.push_back(i);
      r.weight.push_back(w);
    }
  }
  HERD_REQUIRE(!r.index.empty(), "refine_sample: the weights sum to 0");
  if (r.index.size() == 1) return r;  // nothing to refine (ParaMonte: IAC 0)

  bool verbose = false;
  std::size_t limit = options.max_rounds;
  std::size_t thinnings = 0;
  for (;;) {
    RefinementRound round;
    round.verbose_stage = verbose;
    round.compact_size = r.index.size();
    round.verbose_size = 0;
    for (std::int64_t w : r.weight) round.verbose_size += w;
    round.iac = batch_means_iacs(states, num_vars, r.index,
                                 verbose ? std::span<const std::int64_t>(r.weight) : std::span<const std::int64_t>());
    round.iac_summary = summarize_iac(round.iac, options.summary);
    const double skip = round.iac_summary;
    r.rounds.push_back(std::move(round));
    // NaN (constant columns) compares false: treated as "no refinement needed".
    const bool done = !(skip >= 2.0) || thinnings >= limit;
    if (done) {
      if (!verbose) {
        verbose = true;
        limit *= 2;
        continue;
      }
      break;
    }
    const std::vector<std::int64_t> nw = refined_weights(r.weight, skip);
    std::vector<std::size_t> index;
    std::vector<std::int64_t> weight;
    for (std::size_t k = 0; k < nw.size(); ++k)
      if (nw[k] > 0) {
        index.push_back(r.index[k]);
        weight.push_back(nw[k]);
      }
    r.index = std::move(index);
    r.weight = std::move(weight);
    ++thinnings;
    if (r.index.size() <= 1) break;
  }
  return r;
}

}  // namespace herd::mcmc
