#pragma once
/// @file refinement.hpp
/// ParaDRAM's sample refinement: thin a weighted (compact) Markov chain until its integrated
/// autocorrelation time is below 2, first treating the compact chain as unweighted, then the
/// verbose (weighted) chain (Shahmoradi & Bagheri 2020; ParaMonte's `getRefinedChain`, its
/// default "BatchMeans" method and ParaMonte 2's other estimators and qualifiers).
///
/// Each round computes an IAC of every variable (batch_means_iac by default, or autocorr_iac:
/// RefinementOptions::estimator), summarizes them (average by default, as ParaMonte's Fortran
/// kernel), and, while the summary is >= 2, thins with skip = summary: the k-th kept verbose
/// draw is the one at verbose position ceil(k skip) (k = 1, 2, ...), and a state's new weight
/// counts how many kept positions fall in its verbose range (ParaMonte's getRefinedWeight).
/// The compact stage ends when its IAC is below 2 or after `max_rounds` thinnings; the
/// verbose stage then runs with up to twice that many rounds in all (ParaMonte doubles its
/// limit at the switch). A NaN summary (a constant or non-finite column) counts as "below 2":
/// the stage stops. With one stage only (RefinementStages, ParaMonte's "-compact"/"-verbose")
/// that stage runs up to `max_rounds` thinnings and the refinement ends with it.
/// Thread-safety: reentrant.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "herd/mcmc/autocorrelation.hpp"

namespace herd::mcmc {

/// How the per-variable IACs of a round are summarized into one skip.
enum class IacSummary { kAverage, kMedian, kMax, kMin };

/// Which chains the refinement's rounds compute IACs of (ParaMonte's "-compact" and
/// "-verbose" qualifiers of sampleRefinementMethod).
enum class RefinementStages {
  kCompactThenVerbose,  ///< the compact chain (unweighted), then the verbose one (ParaMonte's default)
  kCompactOnly,         ///< the compact chain only, up to max_rounds thinnings
  kVerboseOnly,         ///< the verbose (weighted) chain from the first round, up to max_rounds thinnings
};

/// The IAC estimator of the refinement's rounds (ParaMonte 2's sampleRefinementMethod).
enum class IacEstimator {
  kBatchMeans,         ///< "BatchMeans" (batch_means_iac; ParaDRAM's default): memory of the batch sums only
  kCutoffAutoCorr,     ///< "CutOffAutoCorr" (autocorr_iac, AutocorrIac::kCutoff)
  kMaxCumSumAutoCorr,  ///< "MaxCumSumAutoCorr" (autocorr_iac, AutocorrIac::kMaxCumSum)
};

/// Options of refine_sample.
struct RefinementOptions {
  /// With the autocorrelation estimators each round gathers each variable's series of the
  /// states in play (one pass over them per variable, the verbose series in the verbose stage)
  /// and transforms it: about 40 bytes per (verbose) draw while it runs, the bounded paths too.
  IacEstimator estimator = IacEstimator::kBatchMeans;
  IacSummary summary = IacSummary::kAverage;  ///< ParaMonte's default ("-avg")
  RefinementStages stages = RefinementStages::kCompactThenVerbose;
  /// Thinnings of the first stage (ParaMonte: 20); with both stages the verbose stage runs
  /// until 2 max_rounds thinnings in all.
  std::size_t max_rounds = 20;
};

/// Reads ParaDRAM's `sampleRefinementMethod` (ParaMonte 2): the estimator (IacEstimator:
/// "BatchMeans" or "batch_means", "CutOffAutoCorr" or "cutoff_autocorr", "MaxCumSumAutoCorr"
/// or "max_cumsum_autocorr"), optionally followed by qualifiers separated by '-' or spaces: a
/// chain, "compact" or "verbose" (RefinementStages; neither: both stages), and a summary of
/// the variables' IACs, "avg"/"average", "med"/"median", "min"/"minimum" or "max"/"maximum"
/// (default average), each at most once; case is ignored, e.g. "BatchMeans-max",
/// "batchmeans compact", "MaxCumSumAutoCorr-median". Returns the options with max_rounds at
/// its default, or nothing with `why` set to what is wrong (e.g. `"maxx" is not a qualifier:
/// expected compact or verbose ...`). Thread-safety: reentrant.
std::optional<RefinementOptions> parse_refinement_method(std::string_view method, std::string& why);

/// The canonical spelling of `options`' estimator and qualifiers ("batch_means",
/// "cutoff_autocorr" or "max_cumsum_autocorr", then
/// "-compact"/"-verbose" and "-median"/"-min"/"-max" where they differ from the default),
/// which parse_refinement_method reads back to the same options. Thread-safety: reentrant.
std::string refinement_method_name(const RefinementOptions& options);

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

/// States of a chain as records in an unlinked scratch file (`.herd-refine-XXXXXX`): record k
/// holds a state's index, its weight and, when `num_vars` > 0, its num_vars values. Appended
/// in order (`append`, then `finish`), then read by `StateRecords::Reader`. The file is laid
/// out in blocks of block_records() records, each block column by column (indices, weights,
/// values): about 256 KiB per block; writing and each reader hold one block. Movable, not
/// copyable; once finished, any number of threads may read it, each through its own Reader.
class StateRecords {
 public:
  /// No records, no file.
  StateRecords() = default;
  /// Creates the scratch file in `dir` ("" = the current directory) for records of
  /// `num_vars` values each (0: index and weight only); unlinked at once (a kill frees it).
  /// @throws herd::IoError naming the file when it cannot be created
  StateRecords(const std::string& dir, std::size_t num_vars);
  ~StateRecords();
  StateRecords(const StateRecords&) = delete;
  StateRecords& operator=(const StateRecords&) = delete;
  /// Moves (the scratch file too).
  StateRecords(StateRecords&& o) noexcept;
  /// Moves (the scratch file too).
  StateRecords& operator=(StateRecords&& o) noexcept;

  /// Appends the state `index` of weight `weight` with its num_vars `values` (ignored, may be
  /// null, when num_vars is 0). Not after finish(). @throws herd::IoError naming the file
  void append(std::size_t index, std::int64_t weight, const double* values);
  /// Writes the block being filled and frees the write buffer. @throws herd::IoError
  void finish();

  std::size_t size() const { return n_; }                  ///< records
  std::size_t num_vars() const { return nv_; }             ///< values per record
  std::int64_t total_weight() const { return total_; }     ///< sum of the weights appended
  std::size_t block_records() const { return per_; }       ///< records per block of the file
  const std::string& scratch_dir() const { return dir_; }  ///< the folder of its file
  /// Bytes held in memory (the write buffer until finish()).
  std::size_t resident_bytes() const;

  /// Reads records of a finished StateRecords: record k's block is read (pread) into the
  /// reader's buffer when k leaves the block loaded, so reads in increasing order read the
  /// file once. One reader per thread; the records must outlive it.
  class Reader {
   public:
    /// Reads `records`; with `values` false only the indices and weights are read (values()
    /// must not be called).
    explicit Reader(const StateRecords& records, bool values = true);
    /// Record k's state index. @throws herd::IoError naming the file
    std::size_t index(std::size_t k) {
      if (k - first_ >= count_) load(k);
      return static_cast<std::size_t>(index_[k - first_]);
    }
    /// Record k's weight. @throws herd::IoError naming the file
    std::int64_t weight(std::size_t k) {
      if (k - first_ >= count_) load(k);
      return weight_[k - first_];
    }
    /// Record k's num_vars values (valid until the next load). @throws herd::IoError
    const double* values(std::size_t k) {
      if (k - first_ >= count_) load(k);
      return values_.data() + (k - first_) * rec_->nv_;
    }

   private:
    void load(std::size_t k);
    const StateRecords* rec_;
    bool with_values_ = true;
    std::size_t first_ = 0, count_ = 0;
    std::vector<std::uint64_t> index_;
    std::vector<std::int64_t> weight_;
    std::vector<double> values_;
  };

 private:
  void flush();
  [[noreturn]] void fail(const char* what) const;
  std::uint64_t block_offset(std::size_t b) const { return static_cast<std::uint64_t>(b) * per_ * (2 + nv_) * 8; }
  int fd_ = -1;
  std::string path_, dir_;
  std::size_t nv_ = 0, per_ = 0, n_ = 0;
  std::int64_t total_ = 0;
  std::vector<std::uint64_t> windex_;  ///< the block being filled
  std::vector<std::int64_t> wweight_;
  std::vector<double> wvalues_;
};

/// A refinement whose refined sample is in a scratch file (refine_sample_out_of_core).
struct RefinedStates {
  StateRecords states;                  ///< the refined sample's states (indices increasing) and weights
  std::vector<RefinementRound> rounds;  ///< as RefinedSample::rounds
};

/// refine_sample of `n` states with memory that does not grow with n: `row(i, w)` gives state
/// i's `num_vars` values and sets w to its weight, `weight(i)` its weight alone (both
/// called in increasing i within each pass: `row` for the rounds' IACs and once to hold the
/// rows, `weight` for the checks and the thinnings), e.g. read block by block from a chain on
/// disk. The weights are read as they are needed instead of held; the states in play after a
/// thinning go to a scratch file in `scratch_dir` (StateRecords: index and weight, 16 bytes per
/// state; with their rows, 8 (2 + num_vars), once the rows would take at most 16 bytes per
/// state of the chain, as refine_sample's row-source overload holds them in memory), and so
/// does the refined sample. The same rounds, states and weights as refine_sample, bit for bit,
/// with the same passes over the states; at most two scratch files at once (the states in
/// play and the next thinning's). Memory: a few blocks of records (about 256 KiB each) and
/// the batch sums. Host, reentrant.
/// @throws herd::InputError on num_vars == 0, n == 0, a negative weight or weights summing
///         to 0; herd::IoError naming a scratch file; what `row` and `weight` throw.
RefinedStates refine_sample_out_of_core(std::size_t n, std::size_t num_vars, const WeightedRowSource& row,
                                        const std::function<std::int64_t(std::size_t)>& weight,
                                        const std::string& scratch_dir, const RefinementOptions& options = {});

}  // namespace herd::mcmc
