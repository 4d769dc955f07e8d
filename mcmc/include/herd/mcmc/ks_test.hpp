#pragma once
/// @file ks_test.hpp
/// Two-sample Kolmogorov-Smirnov tests between chains (ParaDRAM's pairwise table).
///
/// The statistic is D = sup |F_x - F_y| of the two empirical CDFs (weighted entries count
/// `weight` times). The p-value follows R 4.2's `ks.test` rule: exact (the Smirnov
/// distribution by counting lattice paths) when n_x * n_y < 10000 and the pooled sample has
/// no ties, otherwise asymptotic, p = Q(sqrt(n_x n_y / (n_x + n_y)) D) with Kolmogorov's
/// Q(l) = 2 sum_{k>=1} (-1)^(k-1) exp(-2 k^2 l^2). The exact p-value is accumulated as the
/// probability of the paths that reach the boundary, so it keeps full relative precision
/// for small p (R forms 1 - P(D < d), which loses it).
///
/// References: Smirnov (1939); Kolmogorov (1933); R's `ks.test` (psmirnov2x, pkolmogorov1x);
/// Shahmoradi & Bagheri (2020) for the pairwise table in ParaDRAM's report.
/// NaN/Inf: a NaN anywhere gives NaN statistic and p-value; +-Inf are ordinary values.
/// Thread-safety: reentrant.

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "herd/mcmc/diagnostics.hpp"

namespace herd::mcmc {

/// How the p-value is computed.
enum class KsMethod {
  kAuto,        ///< R's rule: exact when n_x n_y < 10000 and there are no ties
  kExact,       ///< the exact Smirnov distribution (ties are ignored; O(n_x n_y))
  kAsymptotic,  ///< Kolmogorov's limit distribution
};

/// Result of a two-sample test.
struct KsResult {
  double statistic = 0;  ///< D in [0, 1]
  double p_value = 1;    ///< P(D >= observed) under the null of equal distributions
  bool exact = false;    ///< whether the exact distribution was used
};

/// Kolmogorov's survival function Q(l) = P(K > l) = 2 sum_{k>=1} (-1)^(k-1) exp(-2 k^2 l^2)
/// (for l < 1 through the theta-function form 1 - sqrt(2 pi)/l sum_{k odd} exp(-k^2 pi^2 /
/// (8 l^2)), which converges fast there). Q(l) = 1 for l <= 0; NaN for NaN.
double kolmogorov_q(double lambda);

/// Exact P(D >= d) for samples of sizes nx and ny without ties, with d = d_num / (nx ny)
/// given by its integer numerator max |i ny - j nx|.
/// @throws herd::InputError when nx or ny is 0 or nx * ny exceeds 10^8.
double smirnov_p_exact(std::size_t nx, std::size_t ny, std::int64_t d_num);

/// Two-sample KS test of unweighted samples.
/// @throws herd::InputError when a sample is empty, or kExact is asked for n_x n_y > 10^8.
KsResult ks_two_sample(std::span<const double> x, std::span<const double> y, KsMethod method = KsMethod::kAuto);

/// Two-sample KS test of weighted (compact) samples: entry i of x counts wx[i] times.
/// Equal to the test of the expanded samples (whose repeated entries are ties).
/// @throws herd::InputError on a size mismatch, a negative weight or a zero total weight.
KsResult ks_two_sample(std::span<const double> x, std::span<const std::int64_t> wx, std::span<const double> y,
                       std::span<const std::int64_t> wy, KsMethod method = KsMethod::kAuto);

/// The table of tests between every pair of chains, `[chains, chains]` row-major,
/// symmetric, with D = 0 and p = 1 on the diagonal. Weighted views use their weights.
std::vector<KsResult> ks_pairwise(const DrawsView& chains, KsMethod method = KsMethod::kAuto);

/// The same table for samples of different sizes (e.g. each chain's refined sample:
/// `samples[c]` holds chain c's draws, unweighted). The KS test assumes independent draws:
/// test thinned (refined) samples, not autocorrelated chains, whose p-values come out far
/// too small.
/// @throws herd::InputError when a sample is empty (as `ks_two_sample`).
std::vector<KsResult> ks_pairwise(std::span<const std::vector<double>> samples, KsMethod method = KsMethod::kAuto);

}  // namespace herd::mcmc
