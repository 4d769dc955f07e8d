#pragma once
// Nested R-hat computed by hand in the tests (independently of herd::mcmc::nested_rhat), from
// its definition in Margossian et al. (2024), "Nested R-hat: assessing the convergence of
// Markov chain Monte Carlo when running many short chains", eq. (2.3)-(2.6) with
// within-chain variances of divisor N - 1: superchain k holds the contiguous chains
// k M .. k M + M - 1 of `x` ([chains, draws] row-major).
#include <cmath>
#include <cstddef>
#include <vector>

namespace herd::testing {

inline double nested_rhat_by_hand(const std::vector<double>& x, std::size_t chains, std::size_t draws,
                                  std::size_t superchains) {
  const std::size_t m = chains / superchains;
  std::vector<double> chain_mean(chains, 0.0), chain_var(chains, 0.0);
  for (std::size_t c = 0; c < chains; ++c) {
    for (std::size_t t = 0; t < draws; ++t) chain_mean[c] += x[c * draws + t];
    chain_mean[c] /= static_cast<double>(draws);
    for (std::size_t t = 0; t < draws; ++t) chain_var[c] += std::pow(x[c * draws + t] - chain_mean[c], 2);
    chain_var[c] /= static_cast<double>(draws - 1);
  }
  std::vector<double> super_mean(superchains, 0.0);
  double w = 0.0;
  for (std::size_t k = 0; k < superchains; ++k) {
    double within = 0.0, between = 0.0;
    for (std::size_t c = k * m; c < (k + 1) * m; ++c) {
      super_mean[k] += chain_mean[c] / static_cast<double>(m);
      within += chain_var[c] / static_cast<double>(m);
    }
    for (std::size_t c = k * m; c < (k + 1) * m; ++c)
      between += m > 1 ? std::pow(chain_mean[c] - super_mean[k], 2) / static_cast<double>(m - 1) : 0.0;
    w += (between + within) / static_cast<double>(superchains);
  }
  double grand = 0.0, b = 0.0;
  for (double v : super_mean) grand += v / static_cast<double>(superchains);
  for (double v : super_mean) b += std::pow(v - grand, 2) / static_cast<double>(superchains - 1);
  return std::sqrt(1.0 + b / w);
}

}  // namespace herd::testing
