#pragma once
/// @file autocorrelation.hpp
/// Autocorrelation by FFT and integrated autocorrelation times: emcee's estimator with
/// Sokal's automatic window, and ParaDRAM's batch-means estimator on weighted chains.
///
/// References: A. D. Sokal (1997), "Monte Carlo methods in statistical mechanics:
/// foundations and new algorithms"; Foreman-Mackey et al., emcee 3 `autocorr.integrated_time`;
/// Shahmoradi & Bagheri (2020), "ParaDRAM: a cross-language toolbox for parallel
/// high-performance delayed-rejection adaptive Metropolis Markov chain Monte Carlo
/// simulations" (the batch-means IAC of ParaMonte's `getBatchMeansIAC`).
///
/// FFTs use Eigen's FFT module in double precision, zero-padded to a 2-3-5-smooth length
/// >= 2n, so the result is the exact (non-circular) autocorrelation.
/// Thread-safety: reentrant (thread-local scratch buffers and FFT plans).

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "herd/mcmc/diagnostics.hpp"

namespace herd::mcmc {

/// Biased autocovariance (divisor n) of `x` about its mean at lags 0..n-1, by FFT.
/// NaN everywhere when `x` holds a NaN or Inf.
/// @throws herd::InputError when `x` is empty.
std::vector<double> autocovariance(std::span<const double> x);

/// Normalized autocorrelation (lag 0 is 1) at lags 0..n-1, by FFT. A constant series has
/// zero variance: its result is NaN everywhere (as emcee's 0/0).
/// @throws herd::InputError when `x` is empty.
std::vector<double> autocorrelation(std::span<const double> x);

/// emcee's integrated autocorrelation time with its flag.
struct IntegratedTime {
  double tau = 0;          ///< the estimate
  std::size_t window = 0;  ///< Sokal's window M: smallest M with M >= c * tau(M)
  bool too_short = false;  ///< true when tol * tau > draws (the estimate is unreliable)
};

/// Integrated autocorrelation time as emcee 3 computes it: the per-walker FFT
/// autocorrelation functions are averaged, tau(M) = 2 sum_{k<=M} rho_k - 1, and the
/// window is the first M with M >= c tau(M). When no lag qualifies emcee (numpy's argmin)
/// returns window 0 and tau = 1; so does this function, but it sets `too_short`.
/// @param walkers `[walkers, draws]` row-major (a DrawsView's chains are the walkers);
///        weighted views are expanded.
/// @param c Sokal's window constant (emcee's default 5).
/// @param tol the chain should be longer than tol * tau (emcee's default 50); shorter sets
///        `too_short` instead of throwing.
/// NaN tau (window 0) when a draw is not finite or a walker is constant.
/// @throws herd::InputError when c <= 0 or tol < 0.
IntegratedTime integrated_time(const DrawsView& walkers, double c = 5.0, double tol = 50.0);

/// ParaDRAM's batch-means integrated autocorrelation time of one (possibly weighted) series.
///
/// With W the total weight (the verbose length), batches of b = floor(W^0.666666666666666)
/// verbose draws (ParaMonte's constant) or `batch_size` when non-zero, K = floor(W / b)
/// batches over the first K b verbose draws: IAC = b var(batch means) / var(draws), both
/// variances with divisor (count - 1). Returns 1 when K < 2 (ParaMonte's convention) and
/// NaN when the draws have zero variance or a non-finite value.
/// @param x the compact series; @param weights its weights (empty: all 1), >= 0.
/// @throws herd::InputError on a size mismatch, a negative weight or an empty series.
double batch_means_iac(std::span<const double> x, std::span<const std::int64_t> weights = {},
                       std::size_t batch_size = 0);

/// batch_means_iac of every variable of the row-major states `states` [n, nv] at once (the
/// same bits as batch_means_iac of each gathered column), each row read once for all its
/// variables: of the rows `rows` in that order (empty: all n in order) with their `weights`
/// (empty: all 1; else one per row used). Host, reentrant. Follows ParaMonte's ParaDRAM
/// (batch means as in batch_means_iac). Returns nv IACs.
/// @throws herd::InputError when states is not rows of nv, a row index is out of range, or
///   as batch_means_iac for the weights.
std::vector<double> batch_means_iacs(std::span<const double> states, std::size_t nv,
                                     std::span<const std::size_t> rows = {}, std::span<const std::int64_t> weights = {},
                                     std::size_t batch_size = 0);

/// A row source for batch_means_iacs_by_row: `row(k)` gives the nv values of the k-th row
/// (k = 0, 1, ... in increasing order within a pass), valid until the next call.
using RowSource = std::function<const double*(std::size_t)>;

/// batch_means_iacs of `np` rows that are not held in one array: `row(k)` gives row k
/// (`RowSource`; called in increasing k, twice over), e.g. read block by block from a chain
/// on disk. The same bits as batch_means_iacs of the rows gathered in that order with the
/// same `weights` (empty: all 1; else np). Host, reentrant. Memory: the batch sums only
/// (nv values per batch, about np^(2/3) batches). Returns nv IACs.
/// @throws herd::InputError when np is 0, nv is 0, or as batch_means_iac for the weights;
///   what `row` throws.
std::vector<double> batch_means_iacs_by_row(std::size_t np, std::size_t nv, const RowSource& row,
                                            std::span<const std::int64_t> weights = {}, std::size_t batch_size = 0);

/// A weighted row source for batch_means_iacs_weighted: `row(k, w)` gives the nv values of the
/// k-th row and sets `w` to its weight (k = 0, 1, ... in increasing order within a pass; the
/// same k may be asked for twice in a row), the values valid until the next call.
using WeightedRowSource = std::function<const double*(std::size_t, std::int64_t&)>;

/// batch_means_iacs_by_row of `np` rows that carry their weights (`row`), whose weights sum to
/// `total` (each >= 0, checked by the caller); with `unit_weights` the rows' weights are not
/// read and each counts 1 (total np). The same bits as batch_means_iacs_by_row with the
/// weights gathered into a span (empty for unit_weights). No weights array: memory is the
/// batch sums only. Host, reentrant. Returns nv IACs.
/// @throws herd::InputError when np or nv is 0 or total <= 0; what `row` throws.
std::vector<double> batch_means_iacs_weighted(std::size_t np, std::size_t nv, std::int64_t total,
                                              const WeightedRowSource& row, bool unit_weights,
                                              std::size_t batch_size = 0);

/// The autocorrelation-sum IAC estimators of ParaMonte 2's refinement (sampleRefinementMethod
/// "CutOffAutoCorr" and "MaxCumSumAutoCorr"), beside ParaDRAM's default batch means.
enum class AutocorrIac {
  /// 2 sum_{k=0}^{K} rho_k - 1, K the first lag whose autocorrelation is below
  /// 2 / sqrt(W) (the standard error of an autocorrelation of W independent draws),
  /// that lag included (ParaMonte's getCumSumIAC).
  kCutoff,
  /// 2 max_K sum_{k=0}^{K} rho_k - 1 over every lag K (ParaMonte's getMaxCumSumIAC).
  kMaxCumSum,
};

/// An autocorrelation-sum IAC of one (possibly weighted) series: rho_k is the normalized
/// biased autocorrelation (`autocorrelation`, by FFT) of the verbose series, each value of `x`
/// repeated its weight's times (W values in all). Returns NaN when the series has zero
/// variance or a non-finite value (no refinement then), 1 for a single verbose draw.
/// Memory: the verbose series and the FFT's workspace, about 40 bytes per verbose draw.
/// Host, reentrant.
/// @param x the compact series; @param weights its weights (empty: all 1), >= 0.
/// @throws herd::InputError on a size mismatch, a negative weight, an empty series or
///   weights summing to 0.
double autocorr_iac(AutocorrIac estimator, std::span<const double> x, std::span<const std::int64_t> weights = {});

/// autocorr_iac of each of the nv variables of `np` rows that carry their weights (`row`, as
/// for batch_means_iacs_weighted; with `unit_weights` each row counts 1): each variable's
/// verbose series is gathered in one pass over the rows (nv passes), then its IAC computed.
/// The same bits as autocorr_iac of each gathered column. Host, reentrant. Returns nv IACs.
/// @throws herd::InputError when np or nv is 0, or as autocorr_iac; what `row` throws.
std::vector<double> autocorr_iacs_weighted(AutocorrIac estimator, std::size_t np, std::size_t nv,
                                           const WeightedRowSource& row, bool unit_weights);

}  // namespace herd::mcmc
