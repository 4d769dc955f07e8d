#pragma once
/// @file refinement.hpp
/// ParaDRAM's sample refinement: thin a weighted (compact) Markov chain until its integrated
/// autocorrelation time is below 2, first treating the compact chain as unweighted, then the
/// verbose (weighted) chain (Shahmoradi & Bagheri 2020; ParaMonte's `getRefinedChain` with
/// the default "BatchMeans" method).
///
/// Each round computes the batch-means IAC (batch_means_iac) of every variable, summarizes
/// them (average by default, as ParaMonte's Fortran kernel), and, while the summary is >= 2,
/// thins with skip = summary: the k-th kept verbose draw is the one at verbose position
/// ceil(k skip) (k = 1, 2, ...), and a state's new weight counts how many kept positions fall
/// in its verbose range (ParaMonte's getRefinedWeight). The compact stage ends when its IAC
/// is below 2 or after `max_rounds` thinnings; the verbose stage then runs with up to twice
/// that many rounds in all (ParaMonte doubles its limit at the switch). A NaN summary (a
/// constant or non-finite column) counts as "below 2": the stage stops.
/// Thread-safety: reentrant.

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "herd/mcmc/autocorrelation.hpp"

namespace herd::mcmc {

/// How the per-variable IACs of a round are summarized into one skip.
enum class IacSummary { kAverage, kMedian, kMax, kMin };

/// Options of refine_sample.
struct RefinementOptions {
  IacSummary summary = IacSummary::kAverage;  ///< ParaMonte's default ("-avg")
  std::size_t max_rounds = 20;                ///< thinnings of the compact stage (ParaMonte: 20)
};

/// One IAC evaluation of the refinement.
struct RefinementRound {
  bool verbose_stage = false;     ///< false: IACs of the compact chain; true: of the verbose
  std::size_t compact_size = 0;   ///< states with a positive weight before this round's thinning
  std::int64_t verbose_size = 0;  ///< their total weight
  std::vector<double> iac;        ///< batch-means IAC of each variable
  double iac_summary = 0;         ///< their summary (the skip when >= 2)
};

/// The refined sample: which states of the input survive, with which weights, and the table
/// of rounds (the last row's summary is below 2 unless the round limit stopped it).
struct RefinedSample {
  std::vector<std::size_t> index;    ///< rows of the input states, increasing
  std::vector<std::int64_t> weight;  ///< their refined weights (> 0)
  std::vector<RefinementRound> rounds;
};

/// Refined weights of a weighted chain thinned with a (real) skip >= 1: the k-th kept
/// verbose draw is the one at verbose position ceil(k skip) (k = 1, 2, ...).
/// Example: weights 5 0 1 3 1 with skip 2 give 2 0 1 1 1; with skip 3, 1 0 1 1 0 (this is
/// what ParaMonte's code computes; the example in its doc comment starts at position 1).
/// @throws herd::InputError when skip < 1 or is not finite, or a weight is negative.
std::vector<std::int64_t> refined_weights(std::span<const std::int64_t> weights, double skip);

/// ParaDRAM's refinement of a compact chain.
/// @param states `[n, num_vars]` row-major (ParaDRAM passes SampleLogFunc as column 0 and
///        the state's coordinates after it).
/// @param weights n integer weights >= 0 (empty: all 1).
/// @throws herd::InputError on a shape mismatch, num_vars == 0, an empty chain, or a
///         negative weight.
RefinedSample refine_sample(std::span<const double> states, std::span<const std::int64_t> weights, std::size_t num_vars,
                            const RefinementOptions& options = {});

/// refine_sample of `n` states that are not held in one array: `row(i)` gives state i's
/// `num_vars` values (`RowSource`: valid until the next call; called in increasing i within
/// each pass over the states), e.g. read block by block from a chain on disk. The same
/// result as refine_sample of the states gathered, bit for bit. `weights` (n, or empty: all
/// 1) is taken over as the weights in play and thinned in place (move a vector in to keep
/// one copy). Each round reads the states in play in two passes through `row`, until a
/// thinning leaves so few that their rows take at most 16 bytes per state of the chain
/// (2 n / num_vars states): those are then read once more and held, and the later rounds
/// read them. No index of every state is made (before the first thinning the states in play
/// are all states with a positive weight, in order) and a thinning computes the new weights
/// in place. Memory beside `weights` (8 bytes per state): the first thinning's kept indices
/// and their weights (16 bytes per kept state), later at most 16 bytes per state of held
/// rows, instead of the 8 num_vars per state of the states array. Host, reentrant.
/// @throws herd::InputError on num_vars == 0, n == 0, a weights size other than 0 or n, or a
///         negative weight; what `row` throws.
RefinedSample refine_sample(std::size_t n, std::size_t num_vars, const RowSource& row,
                            std::vector<std::int64_t> weights, const RefinementOptions& options = {});

}  // namespace herd::mcmc
