#pragma once
// Internal helpers of the HTML report (posterior_report.cpp; not installed), declared here
// so that the tests can check them.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace herd::mcmc::detail {

/// Samples smaller than this go straight to herd::mcmc::quantiles (a selection over a few
/// thousand draws costs less than the histogram's passes).
inline constexpr std::size_t kBinnedQuantilesMin = 4096;

/// The smallest and largest value of a sample, and whether every value is finite (no NaN
/// or infinity); min > max for an empty sample. One branch-free pass. Pure; thread-safe.
struct SampleRange {
  double min = 0;       ///< the smallest value (NaNs skipped)
  double max = 0;       ///< the largest value (NaNs skipped)
  bool finite = false;  ///< no NaN and no infinity (and not empty)
};
SampleRange sample_range(std::span<const double> sample);

/// Type-7 quantiles of `sample` at `probs`: the same numbers, bit for bit, as
/// herd::mcmc::quantiles(sample, probs) (but for the sign of a zero where the sample holds
/// both -0 and +0: a tie, of which either may be selected), found without copying or
/// permuting the whole sample. Over the sample's range (`range`, as sample_range gives it;
/// the overload without it takes one more pass), one pass counts the draws into equal bins
/// (the bin is a monotone function of the value, so the draws of lower bins are smaller), a
/// second copies out only the draws of the bins that hold a wanted order statistic, and a
/// selection within those bins finds it. Samples below kBinnedQuantilesMin draws, with a
/// non-finite draw, constant, or whose range the bins cannot resolve, and probs outside
/// [0, 1] go to herd::mcmc::quantiles (which throws for those probs and an empty sample).
/// Cost: O(S) in two streaming passes plus the selection within the wanted bins (a few
/// hundred draws each unless the draws bunch up in a small part of their range); 32 KiB of
/// counts plus the wanted bins' draws.
/// Thread-safe (no shared state). @throws herd::InputError as herd::mcmc::quantiles.
std::vector<double> binned_quantiles(std::span<const double> sample, std::span<const double> probs,
                                     const SampleRange& range);
/// binned_quantiles over sample_range(sample).
std::vector<double> binned_quantiles(std::span<const double> sample, std::span<const double> probs);

/// sample_range of weighted states: the draws are `values[i]` repeated `weights[i]` times
/// (same length; states of weight <= 0 are skipped), so the range is that of the expanded
/// draws. Pure; thread-safe.
SampleRange sample_range(std::span<const double> values, std::span<const std::uint32_t> weights);

/// binned_quantiles of weighted states (`values[i]` repeated `weights[i]` times, in that
/// order; weights >= 0): the same numbers, bit for bit, as binned_quantiles (and so as
/// herd::mcmc::quantiles) of the expanded draws, from one pass over the states that adds
/// each state's weight to its bin, a second that copies out the (value, weight) pairs of
/// the wanted bins, and per wanted bin a sort of those pairs and a walk over their
/// cumulative weights. Where binned_quantiles would go to herd::mcmc::quantiles (fewer
/// than kBinnedQuantilesMin draws, a non-finite draw, a constant sample, ...), the draws
/// are expanded and handed to it. `range` is sample_range(values, weights).
/// Thread-safe. @throws herd::InputError as herd::mcmc::quantiles.
std::vector<double> binned_quantiles(std::span<const double> values, std::span<const std::uint32_t> weights,
                                     std::span<const double> probs, const SampleRange& range);

/// binned_quantiles of weighted states in steps, for states that come block by block (the
/// HTML report's `open_states`): count() every state into the bins, select(), collect()
/// every state again in the same order, result(): the numbers binned_quantiles(values,
/// weights, probs, range) gives for all the states at once, bit for bit (it is built on
/// this). `n` is the states' total weight and `range` their sample_range. Where
/// binned_quantiles goes to herd::mcmc::quantiles of the expanded draws, binned() is false
/// and nothing else may be called. Memory: the bins' counts (32 KiB) until select(), then
/// the wanted bins' (value, weight) pairs. Not thread-safe (one per quantity).
class StateQuantiles {
 public:
  StateQuantiles(std::span<const double> probs, const SampleRange& range, std::size_t n);
  /// Whether the bins are used (else herd::mcmc::quantiles of the expanded draws applies).
  bool binned() const { return binned_; }
  /// Adds states (values, weights: same length) to the bins' counts; any order.
  void count(std::span<const double> values, std::span<const std::uint32_t> weights);
  /// After every state is counted: the bins that hold a wanted order statistic.
  void select();
  /// Keeps the states of the wanted bins (after select(); every state, in the states' order).
  void collect(std::span<const double> values, std::span<const std::uint32_t> weights);
  /// The quantiles at `probs` (after collect()).
  std::vector<double> result();
  /// The (value, weight) pairs collect() keeps so far.
  std::size_t held() const;

 private:
  static constexpr std::size_t kCopies = 4;
  std::size_t bin(double v) const { return static_cast<std::size_t>(std::min((v - mn_) * scale_, top_)); }
  std::vector<double> probs_;
  std::size_t n_, nb_ = 0;
  double mn_, scale_ = 0, top_ = 0;
  bool binned_ = false;
  std::vector<std::uint32_t> copies_;
  std::vector<std::size_t> ranks_, rank_bin_, rank_within_;
  std::vector<std::int32_t> slot_;
  std::vector<std::vector<std::pair<double, std::int64_t>>> held_;
};

/// The sums of products of deviations of draws that come as weighted states (a compact
/// chain: a state of weight w stands for w equal draws), for their covariance matrix.
/// add(x, w) adds the products (x_i - mean_i)(x_j - mean_j) w times, one repetition after
/// the other, so each element is the same sum, in the same order, as the expanded draws'
/// (bit for bit the loop over every draw and every (i, j)). Only the lower triangle is
/// summed: (x_i - m_i)(x_j - m_j) and (x_j - m_j)(x_i - m_i) are the same double, and
/// matrix() mirrors it. Cost per state: d(d+1)/2 products and w d(d+1)/2 additions (half
/// those of the full matrix); memory d(d+1) doubles. Not thread-safe (one per thread).
class RepeatedCovariance {
 public:
  /// Sums about `mean` (d values, copied), all zero.
  explicit RepeatedCovariance(std::span<const double> mean);
  /// Adds the draw `x` (d values) `weight` times (nothing for weight <= 0).
  void add(const double* x, std::int64_t weight);
  /// The sums divided by `divisor`, as a [d, d] row-major symmetric matrix.
  std::vector<double> matrix(double divisor) const;

 private:
  std::vector<double> mean_, dev_, prod_, tri_;
};

}  // namespace herd::mcmc::detail
