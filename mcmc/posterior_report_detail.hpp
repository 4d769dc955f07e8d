#pragma once
// Internal helpers of the HTML report (posterior_report.cpp; not installed), declared here
// so that the tests can check them.

#include <cstddef>
#include <span>
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

}  // namespace herd::mcmc::detail
