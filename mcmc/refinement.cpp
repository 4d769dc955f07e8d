// ParaDRAM's sample refinement (see refinement.hpp).
#include "herd/mcmc/refinement.hpp"

#include <algorithm>
#include <cmath>

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

/// The rounds of refine_sample over `n` states with `weights` (checked here). `iacs(index,
/// weights)` gives the batch-means IACs of the states `index` (increasing) with those weights
/// (empty: the compact stage's unit weights); `thinned(kept, index)` tells the states' source
/// that of the states in play (the last `iacs` call's) the positions `kept` (increasing)
/// remain, which are the states `index`.
template <class Iacs, class Thinned>
RefinedSample refine_rounds(std::size_t n, std::span<const std::int64_t> weights, const RefinementOptions& options,
                            Iacs&& iacs, Thinned&& thinned) {
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
  std::vector<std::size_t> kept;
  for (;;) {
    RefinementRound round;
    round.verbose_stage = verbose;
    round.compact_size = r.index.size();
    round.verbose_size = 0;
    for (std::int64_t w : r.weight) round.verbose_size += w;
    round.iac = iacs(std::span<const std::size_t>(r.index),
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
    // The states that keep a weight, moved down in place.
    std::vector<std::int64_t> nw = refined_weights(r.weight, skip);
    kept.clear();
    std::size_t to = 0;
    for (std::size_t k = 0; k < nw.size(); ++k)
      if (nw[k] > 0) {
        kept.push_back(k);
        r.index[to] = r.index[k];
        r.weight[to++] = nw[k];
      }
    nw = {};
    r.index.resize(to);
    r.weight.resize(to);
    r.index.shrink_to_fit();
    r.weight.shrink_to_fit();
    thinned(std::span<const std::size_t>(kept), std::span<const std::size_t>(r.index));
    ++thinnings;
    if (r.index.size() <= 1) break;
  }
  return r;
}

}  // namespace

RefinedSample refine_sample(std::span<const double> states, std::span<const std::int64_t> weights, std::size_t num_vars,
                            const RefinementOptions& options) {
  HERD_REQUIRE(num_vars > 0, "refine_sample: num_vars is 0, but must be positive");
  HERD_REQUIRE(states.size() % num_vars == 0 && !states.empty(),
               "refine_sample: states has {} elements, but must be a positive multiple of "
               "num_vars = {}",
               states.size(), num_vars);
  return refine_rounds(
      states.size() / num_vars, weights, options,
      [&](std::span<const std::size_t> index, std::span<const std::int64_t> w) {
        return batch_means_iacs(states, num_vars, index, w);
      },
      [](std::span<const std::size_t>, std::span<const std::size_t>) {});
}

RefinedSample refine_sample(std::size_t n, std::size_t num_vars, const RowSource& row,
                            std::span<const std::int64_t> weights, const RefinementOptions& options) {
  HERD_REQUIRE(num_vars > 0, "refine_sample: num_vars is 0, but must be positive");
  HERD_REQUIRE(n > 0, "refine_sample: there are no states");
  // The kept states' rows once the first thinning has left fewer in play (row k of `held`
  // is the k-th state in play); empty: read through `row`.
  std::vector<double> held;
  bool holding = false;
  return refine_rounds(
      n, weights, options,
      [&](std::span<const std::size_t> index, std::span<const std::int64_t> w) {
        if (holding) return batch_means_iacs(held, num_vars, {}, w);
        return batch_means_iacs_by_row(
            index.size(), num_vars, [&](std::size_t k) { return row(index[k]); }, w);
      },
      [&](std::span<const std::size_t> kept, std::span<const std::size_t> index) {
        if (!holding) {
          held.resize(index.size() * num_vars);
          for (std::size_t k = 0; k < index.size(); ++k) {
            const double* x = row(index[k]);
            std::copy(x, x + num_vars, held.begin() + static_cast<std::ptrdiff_t>(k * num_vars));
          }
          holding = true;
          return;
        }
        // The kept rows moved down in place (kept[k] >= k).
        for (std::size_t k = 0; k < kept.size(); ++k)
          std::copy_n(held.begin() + static_cast<std::ptrdiff_t>(kept[k] * num_vars), num_vars,
                      held.begin() + static_cast<std::ptrdiff_t>(k * num_vars));
        held.resize(kept.size() * num_vars);
      });
}

}  // namespace herd::mcmc
