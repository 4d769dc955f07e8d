#pragma once
#include "herd/core/cxx20.hpp"  // C++20 or one clear error
/// @file diagnostics.hpp
/// Convergence diagnostics of one scalar quantity: rank-normalized split R-hat (bulk, tail,
/// their max), the legacy split R-hat, bulk-/tail-ESS, ESS of the mean and of the sd, MCSE of
/// the mean, sd and quantiles, type-7 quantiles, and nested R-hat for many short chains.
///
/// Definitions follow Vehtari, Gelman, Simpson, Carpenter & Buerkner (2021), "Rank-
/// normalization, folding, and localization: an improved R-hat", Bayesian Analysis 16(2),
/// exactly as R `posterior` 1.4 computes them (ArviZ >= 0.21 agrees): ranks pooled over the
/// split chains with average ties and Blom's offset (r - 3/8)/(S + 1/4); Geyer's (1992)
/// initial positive and monotone sequences on the chain-averaged autocovariance, with the
/// lower bound tau >= 1/log10(S); MCSE(sd) by the Kenney & Keeping delta method. Splitting a
/// chain of odd length drops its middle draw. Nested R-hat follows Margossian, Hoffman,
/// Sountsov, Riou-Durand, Vehtari & Gelman (2024), "Nested R-hat: assessing the convergence
/// of Markov chain Monte Carlo when running many short chains", Bayesian Analysis.
///
/// Layout: one quantity's draws are `[chains, draws]` row-major (chain c's draw t at
/// `values[c * draws + t]`). A compact chain (ParaDRAM style) adds one integer weight per
/// entry (>= 0). A weighted view gives exactly (bit for bit) the results of the expanded
/// ("verbose") chain: the ranks, quantiles and their MCSE are computed from the sorted
/// compact entries (each standing for its weight in draws, an odd chain's dropped middle
/// draw taken out of its entry's ranks), the rest over the expansion, one quantity at a time.
/// All chains must have the same verbose length.
///
/// NaN/Inf: any non-finite draw makes every estimate of that quantity NaN (no exception).
/// Constant draws (max - min below machine epsilon) give NaN R-hat and ESS (as `posterior`),
/// while mean, sd (0) and quantiles stay finite; MCSEs are then NaN.
/// Too few draws: ESS needs at least 3 draws per split chain (6 per chain), R-hat at least 2
/// per split chain; below that the result is NaN.
///
/// Thread-safety: every function is reentrant; scratch buffers and FFT plans live in a
/// thread-local workspace, so concurrent calls from different threads are safe and repeated
/// calls on one thread do not allocate once the buffers have grown.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace herd::mcmc {

/// Reads a streamed view's values (DrawsView's reader constructor): writes entries
/// [first, first + out.size()) of the `[chains, draws]` row-major layout to `out` (a padding
/// entry, of weight 0, may get any finite value). Called from the thread that summarizes the
/// view only, in blocks of a few thousand entries, each part of the layout read several times
/// (once per pass), not necessarily in order. What it throws propagates.
using DrawsReader = std::function<void(std::size_t first, std::span<double> out)>;

/// Reads a streamed view's weights (DrawsView's constructor of two readers): writes the
/// weights of entries [first, first + out.size()) of the `[chains, draws]` row-major layout
/// to `out`. Called as a DrawsReader is (the view's constructor reads every weight once more,
/// to check them), and must give the same weights every time. What it throws propagates.
using WeightsReader = std::function<void(std::size_t first, std::span<std::uint32_t> out)>;

/// Non-owning view of one scalar quantity's draws, `[chains, draws]` row-major, with
/// optional integer weights of the same shape (a compact chain).
///
/// The caller keeps the arrays alive while the view is used. Cheap to copy.
class DrawsView {
 public:
  /// Unweighted draws.
  /// @throws herd::InputError when `values.size() != chains * draws` or chains or draws is 0.
  DrawsView(std::span<const double> values, std::size_t chains, std::size_t draws);

  /// Compact draws: entry (c, t) stands for `weights[c * draws + t]` repeated draws.
  /// Weights may be 0 (padding of shorter compact chains). The view keeps its weights in 32
  /// bits: it copies these into a buffer of its own (4 bytes per entry, shared by the view's
  /// copies); give them as 32-bit weights (the constructor below) to avoid the copy. A weight
  /// above 2^32 - 1 cannot occur in a view it accepts (the draws in all are at most that).
  /// @throws herd::InputError on a size mismatch, a negative weight, or chains whose
  ///         weights do not sum to the same (positive) verbose length, or more than 2^32 - 1
  ///         verbose draws in all.
  DrawsView(std::span<const double> values, std::span<const std::int64_t> weights, std::size_t chains,
            std::size_t draws);

  /// Compact draws with 32-bit weights (4 bytes per entry; not copied): as the constructor
  /// above, without its copy. The caller keeps `weights` alive while the view is used.
  /// @throws herd::InputError on a size mismatch, chains whose weights do not sum to the
  ///         same (positive) verbose length, or more than 2^32 - 1 verbose draws in all.
  DrawsView(std::span<const double> values, std::span<const std::uint32_t> weights, std::size_t chains,
            std::size_t draws);

  /// Compact draws whose values are read in blocks through `values` (never held whole:
  /// "streamed"), with 32-bit weights as above (not copied; the caller keeps them alive).
  /// Only summarize(), summarize_all() and nested_rhat() take a streamed view (the other
  /// functions of this file throw herd::InputError for one); the first two summarize it out
  /// of core whatever diagnostics_rank_budget() (see there), with the results of the view of
  /// the same values in memory, bit for bit. values() is empty.
  /// @throws herd::InputError as the constructor above, or when `values` is empty.
  DrawsView(DrawsReader values, std::span<const std::uint32_t> weights, std::size_t chains, std::size_t draws);

  /// Compact draws whose values and weights are both read in blocks (never held whole): as
  /// the constructor above, with the weights read through `weights` too, beside the values
  /// (weights() is empty). Nothing per entry is held by the view or by summarize() of it;
  /// the results are those of the view of the same values and weights in memory, bit for bit.
  /// The constructor reads the weights once, in blocks, to check them.
  /// @throws herd::InputError as the constructors above, or when a reader is empty; what
  ///         `weights` throws.
  DrawsView(DrawsReader values, WeightsReader weights, std::size_t chains, std::size_t draws);

  /// Unweighted draws whose values are read in blocks through `values` (streamed, as the
  /// constructor above, without weights: nothing is held per draw). Only summarize(),
  /// summarize_all() and nested_rhat() take it; summarize() gives the results of the
  /// unweighted view of the same values in memory, bit for bit, summarizing it as a compact
  /// view of unit weights (which are not stored) out of core whatever
  /// diagnostics_rank_budget(). values() and weights() are empty, weighted() is false.
  /// @throws herd::InputError when chains or draws is 0, there are more than 2^32 - 1 draws
  ///         in all, or `values` is empty.
  DrawsView(DrawsReader values, std::size_t chains, std::size_t draws);

  /// Number of chains.
  std::size_t chains() const { return chains_; }
  /// Stored entries per chain (compact length when weighted).
  std::size_t draws() const { return draws_; }
  /// Draws per chain after expanding the weights (== draws() when unweighted).
  std::size_t verbose_draws() const { return verbose_draws_; }
  /// Whether the view carries weights (in memory, or read through a WeightsReader).
  bool weighted() const { return !weights_.empty() || weights_reader_ != nullptr; }
  /// The values, `[chains, draws]` row-major.
  std::span<const double> values() const { return values_; }
  /// The weights, `[chains, draws]` row-major; empty when unweighted or read through a
  /// WeightsReader.
  std::span<const std::uint32_t> weights() const { return weights_; }
  /// A view's WeightsReader (DrawsView's constructor of two readers; nullptr otherwise).
  const WeightsReader* weights_reader() const { return weights_reader_.get(); }
  /// Whether the view's values are read through a DrawsReader (then values() is empty).
  bool streamed() const { return reader_ != nullptr; }
  /// A streamed view's reader (nullptr otherwise).
  const DrawsReader* reader() const { return reader_.get(); }

 private:
  /// Checks `weights` (chains' equal positive sums, at most 2^32 - 1 draws in all) and sets
  /// weights_ and verbose_draws_. @throws herd::InputError
  void set_weights(std::span<const std::uint32_t> weights);
  /// set_weights() of the weights read through weights_reader_, in blocks.
  void check_read_weights();
  /// Checks the chains' weight sums `sums` [chains] and sets verbose_draws_.
  void set_verbose_draws(std::span<const std::uint64_t> sums);

  std::span<const double> values_;
  std::span<const std::uint32_t> weights_;
  std::shared_ptr<const std::vector<std::uint32_t>> owned_weights_;  // the int64 constructor's copy
  std::shared_ptr<const DrawsReader> reader_;                        // a streamed view's values
  std::shared_ptr<const WeightsReader> weights_reader_;              // its weights, when read too
  std::size_t chains_ = 0;
  std::size_t draws_ = 0;
  std::size_t verbose_draws_ = 0;
};

/// Every diagnostic of one quantity, as `posterior::summarise_draws` / `az.summary` report
/// them plus the ingredients. Fields are NaN where the estimate is undefined (see the file
/// comment).
struct DiagnosticSummary {
  double mean = 0;        ///< mean of all draws
  double sd = 0;          ///< standard deviation of all draws (divisor S - 1)
  double q5 = 0;          ///< 5% quantile (type 7)
  double q50 = 0;         ///< median (type 7)
  double q95 = 0;         ///< 95% quantile (type 7)
  double mcse_mean = 0;   ///< sd / sqrt(ess_mean)
  double mcse_sd = 0;     ///< Kenney & Keeping delta method
  double mcse_q5 = 0;     ///< MCSE of the 5% quantile
  double mcse_q95 = 0;    ///< MCSE of the 95% quantile
  double ess_bulk = 0;    ///< ESS of the rank-normalized split draws
  double ess_tail = 0;    ///< min of the ESS of the 5% and 95% quantile indicators
  double ess_mean = 0;    ///< ESS of the split draws
  double ess_sd = 0;      ///< ESS of (x - mean)^2
  double rhat = 0;        ///< max(rhat_bulk, rhat_tail)
  double rhat_bulk = 0;   ///< rank-normalized split R-hat
  double rhat_tail = 0;   ///< rank-normalized split R-hat of |x - median|
  double rhat_basic = 0;  ///< legacy split R-hat (Gelman et al. BDA3)
};

/// All diagnostics of one quantity in one pass (one sort, shared buffers); what the
/// sampler's report, `herd-diagnose` and the benchmark use.
///
/// Cost: one LSD radix sort of the S draws (of a weighted view: of its K entries of positive
/// weight, plus one per odd chain) plus O(S) passes, and O(S L) for the L autocovariance lags
/// Geyer's sequences need (by FFT when L is large). The calling thread's workspace grows to
/// about 21.25 bytes per draw unweighted (one split buffer serves the z-scores, the split
/// draws and the FFT's summed power spectrum in turn; the z table of normal quantiles 1.25,
/// the sort records 12), and for a weighted view to 1.25 per draw (the z table) plus 21 per
/// entry (sort records 12, draws per entry 1, z-scores per entry 8; past diagnostics_rank_budget() the sort records
/// and draws per entry go to scratch files instead, and the rank side holds about the budget; a streamed view holds
/// none of these per entry, its values and z-scores too are on disk or read in blocks, and its z table is on disk):
/// the view is never expanded and its split chains
/// are generated window by window from one value per entry (stored only up to 2^18 split draws, 2 MiB, where that is
/// cheaper: detail::stored_split_limit); the ESS keeps only the L lags it sums directly. Once the FFT is used, about 32
/// bytes per draw of a split chain more (its input and spectrum; weighted, 40 with the summed power spectrum). The
/// workspace is kept for the next call (release it with release_diagnostics_workspace(); diagnostics_workspace_bytes()
/// gives its size).
/// @param draws `[chains, draws]` row-major, optionally weighted (zero weights allowed); the
///        result is that of the expanded view, bit for bit.
/// Thread-safe (the calling thread's workspace); never throws for non-finite or constant
/// draws (NaN fields, see the file comment); @throws std::bad_alloc; IoError when a weighted view ranked out of core
/// (diagnostics_rank_budget()) cannot create, write or read its scratch files.
DiagnosticSummary summarize(const DrawsView& draws);

/// summarize() of `count` quantities on up to `threads` threads (the calling thread works
/// too; 0: one per core), each quantity whole on one thread, so the results are the same,
/// bit for bit, for any thread count; what `herd-diagnose` and herd-sample's post-processing
/// use. `draws(q, buffer)` returns quantity q's view; it is called once per quantity, on the
/// thread that summarizes it (concurrently with other calls when threads > 1), and may fill
/// `buffer`, an empty vector of that thread's (its capacity kept from the thread's previous
/// quantity; freed on return) that the view may point into and that stays alive until
/// summarize() has returned. A weighted view whose values are `buffer`'s (they start at
/// buffer.data()) lends them: once they are read no more, summarize() overwrites them with
/// its z-scores per entry, instead of holding a buffer of its own for them (8 bytes per
/// entry); the results are the same. A streamed view (DrawsView's reader constructor) needs
/// no buffer: `buffer` is left as given.
/// Memory: each thread holds its buffer and a workspace (see summarize()); with several
/// threads they share one table of normal quantiles (1.25 bytes per draw) and one set of rank
/// buffers (sort records and counts: 13 bytes per entry of a weighted view, 12 per draw
/// unweighted), which one thread at a time holds, from its quantity's sort to its last
/// z-scaling, while the others are on their values' passes (so a lent buffer leaves a thread's
/// own workspace a few buffers of the ESS's lags and the packed indicators); the workers'
/// workspaces are freed on return, the calling thread's is kept (as by summarize).
/// @returns the summaries in quantity order.
/// @throws whatever `draws` or summarize() threw (the first observed).
std::vector<DiagnosticSummary> summarize_all(
    std::size_t count, const std::function<DrawsView(std::size_t q, std::vector<double>& buffer)>& draws,
    std::size_t threads = 0);

/// summarize_all() over buffers that the caller keeps, so that one set of large blocks serves
/// every quantity without a zero fill, and may serve several calls and the caller's other
/// passes instead of each mapping and faulting in fresh ones: thread t
/// of the call (in the order the threads first claim a quantity; the calling thread need not
/// be 0) fills `buffers[t]` (`buffers` is grown to the threads used, never shrunk), which is
/// passed to `draws` as the thread's previous quantity, or the caller, left it: size and
/// contents kept, not emptied, so a `draws` that resizes it to the same size and overwrites
/// every entry (no clear, no value-initialisation) writes each page once per call instead of
/// twice. A lent buffer (see above) holds the z-scores on return. The results are those of
/// summarize_all(), bit for bit. Not thread-safe for one `buffers` (one call at a time).
/// @throws as summarize_all().
std::vector<DiagnosticSummary> summarize_all(
    std::size_t count, const std::function<DrawsView(std::size_t q, std::vector<double>& buffer)>& draws,
    std::size_t threads, std::vector<std::vector<double>>& buffers);

/// Frees the calling thread's scratch buffers and FFT plans (they are rebuilt on demand).
void release_diagnostics_workspace();

/// The diagnostics' memory budget per weighted view, in bytes (process-wide; default
/// kDiagnosticsRankBudget, or the environment variable HERD_DIAGNOSTICS_RANK_BUDGET, in bytes,
/// when set at the first call): what the buffers that grow with the view's K entries (M
/// chains) may take, counted as its in-memory rank buffers, 13 (K + M) bytes (sort records,
/// draws per entry and their index; diagnostics_out_of_core()). Up to it a view is summarized
/// in memory, unchanged. Past it a weighted view is ranked out of core: its records are
/// sorted in runs of budget / 32 records (16 bytes each), spilled to an unlinked scratch file
/// in the folder of set_diagnostics_scratch_dir(), k-way merged into a second one and read
/// back through a cache of a few blocks (the order statistics, the tail's fold, the bulk's
/// ranks), so the rank side holds about the budget (the run and the radix sort's scratch)
/// plus about 1 MiB, whatever K (and 8 bytes per 4,096 entries of index); under
/// summarize_all its threads share the budget (each one's runs and buckets sized from budget /
/// threads), so that together they hold about the budget. A streamed view
/// (DrawsView's reader constructor, which herd-sample's runs give past the budget) is
/// summarized out of core whatever the budget, and holds nothing per entry but the caller's
/// weights (none when they too are read through a WeightsReader) and the packed indicators
/// (1/8 byte per draw): its values (and weights) are read in blocks for every pass, its
/// z-scores per entry, which the z-scaling makes in rank order, are written to buckets of
/// consecutive entries on disk and scattered back in entry order one bucket at a time (at
/// most budget / 2 bytes), then read in blocks, and its table of normal quantiles is made
/// once per draw count on disk (detail::ZQuantileFile, 1.3 bytes per draw, shared by
/// summarize_all's threads) and read through a window. The same ranks, quantiles and
/// z-scores, so every result is the same bits either way; out of core costs the scratch
/// files' writes and reads (32 bytes per entry each way for the records, 20 per z-scaling
/// for the z-scores, 8 per pass read back, 2.6 bytes per draw per z-scaling for the z
/// table). Unweighted views in memory are always ranked in memory; a streamed unweighted
/// view (herd-sample's batched runs past the budget) is summarized out of core as a compact
/// view of unit weights.
/// Thread-safe (relaxed atomic).
std::size_t diagnostics_rank_budget();
/// Sets diagnostics_rank_budget() (0: every weighted view out of core). Thread-safe; a call
/// already ranking keeps the budget it read.
void set_diagnostics_rank_budget(std::size_t bytes);
/// Whether a weighted view of `chains` chains of `draws` entries each is past
/// diagnostics_rank_budget(): its in-memory rank buffers, 13 (chains * draws + chains) bytes,
/// above the budget. Such a view is ranked out of core; a caller that can read its values in
/// blocks (herd-sample's runs: from the chain) gives it streamed (DrawsView's reader
/// constructor) from this size on, so that no buffer per entry is held at all but the
/// packed indicators: values, weights, sort records, z-scores per entry and the z table are
/// all on disk or read in blocks. Thread-safe.
bool diagnostics_out_of_core(std::size_t chains, std::size_t draws);
/// The default of diagnostics_rank_budget(): 48 MiB (a view of up to about 3.87e6 entries is
/// summarized in memory). herd-sample's runs up to about 3.8e6 states (the ParaDRAM benchmark's
/// 1e5 to 1e7 proposals) stay in memory, as fast as before; longer runs are streamed, so their
/// diagnostics' memory is bounded but for the packed indicators (0.4 bytes per state) where
/// it would grow by 41, for 25-50% more CPU in the diagnostics (the scratch files' copies
/// through the page cache; docs/dram.md, "fifth pass" and "sixth pass").
inline constexpr std::size_t kDiagnosticsRankBudget = std::size_t{48} << 20;
/// The folder of the out-of-core rank side's scratch files (process-wide; "" = the system's
/// temporary folder, std::filesystem::temp_directory_path). herd-sample's runs set it to
/// their outputs' folder, beside the chain's scratch file. Thread-safe.
void set_diagnostics_scratch_dir(std::string dir);
/// set_diagnostics_scratch_dir()'s folder. Thread-safe.
std::string diagnostics_scratch_dir();

/// Bytes the calling thread's diagnostics workspace holds now: its buffers' capacities and
/// the FFT's buffers (not counting the 2 MiB rounding of large blocks, nor FFTW's twiddle
/// tables). After summarize() of a weighted view of S draws in K entries whose
/// autocorrelations die out within 160 lags (no FFT): about 8 S + 28 K bytes (the z table,
/// z-scores per entry, sort records and their cumulative counts; windows of the split
/// chains and the ESS's autocovariance at the lags it summed, a few hundred kilobytes); of an
/// unweighted view, about 28 S. 0 after release_diagnostics_workspace().
/// Thread-safe (the calling thread's workspace).
std::size_t diagnostics_workspace_bytes();

/// Rank-normalized split R-hat: max of bulk and tail (folded) R-hat. Needs >= 2 draws per chain.
double rhat(const DrawsView& draws);
/// Bulk R-hat: split R-hat of the rank-normalized (z-scaled) split draws (a weighted view's
/// ranks from its sorted entries, as in summarize(), with the expansion's result).
double rhat_bulk(const DrawsView& draws);
/// Tail R-hat: bulk R-hat of |x - median(x)|, the median taken over all draws (weighted
/// views as for rhat_bulk).
double rhat_tail(const DrawsView& draws);
/// The legacy R-hat (BDA3) of the split chains (`split = true`) or of the chains as given
/// (`split = false`, needs >= 2 chains).
double rhat_basic(const DrawsView& draws, bool split = true);

/// Bulk effective sample size: ESS of the rank-normalized split draws (weighted views as for
/// rhat_bulk).
double ess_bulk(const DrawsView& draws);
/// Tail effective sample size: min(ess_quantile(0.05), ess_quantile(0.95)).
double ess_tail(const DrawsView& draws);
/// ESS of the quantile indicator I(x <= q_p) (q_p: type-7 quantile of all draws).
/// @throws herd::InputError when `prob` is not in [0, 1].
double ess_quantile(const DrawsView& draws, double prob);
/// ESS of the mean: Geyer's initial monotone sequence estimate on the split draws.
double ess_mean(const DrawsView& draws);
/// ESS of the sd: ESS of the split (x - mean(x))^2.
double ess_sd(const DrawsView& draws);

/// MCSE of the mean: sd(x) / sqrt(ess_mean(x)).
double mcse_mean(const DrawsView& draws);
/// MCSE of the sd by the delta method (Kenney & Keeping 1951), as `posterior` >= 1.4:
/// sqrt((mean(d^4) - mean(d^2)^2) / ess_sd / mean(d^2) / 4), d = x - mean(x).
double mcse_sd(const DrawsView& draws);
/// MCSE of the `prob` quantile: half the distance between the order statistics at
/// floor(a S) and ceil(b S) (1-based, clamped to [1, S]), a, b the 0.1586553 and 0.8413447
/// quantiles of Beta(ess p + 1, ess (1 - p) + 1), ess = ess_quantile(prob).
/// @throws herd::InputError when `prob` is not in [0, 1].
double mcse_quantile(const DrawsView& draws, double prob);

/// Type-7 quantile (R's default, numpy's "linear") of all draws.
/// @throws herd::InputError when `prob` is not in [0, 1].
double quantile(const DrawsView& draws, double prob);

/// Type-7 quantiles of a sample; `probs` in [0, 1]. NaN results when the sample holds a NaN.
/// @throws herd::InputError when a prob is outside [0, 1] or the sample is empty.
std::vector<double> quantiles(std::span<const double> sample, std::span<const double> probs);

/// Nested R-hat (Margossian et al. 2024) for `chains` = K superchains x M chains, the chains
/// of superchain k being the contiguous rows k*M .. k*M + M - 1:
/// sqrt(1 + B / W) with B the variance (divisor K - 1) of the superchain means and W the mean
/// over superchains of (between-chain variance of the chain means within the superchain,
/// divisor M - 1, 0 when M = 1) + (mean within-chain variance, divisor N - 1, 0 when N = 1).
/// With M = 1 it is sqrt(1 + var(chain means) / mean(chain variances)); superchains with
/// equal means give exactly 1. Chains are not split. NaN when a draw is not finite or W = 0.
/// A streamed weighted view is read in blocks, twice (its chains' means, then their squared
/// deviations), never expanded: the same bits as the view in memory, which is expanded (8
/// bytes per draw). A streamed unweighted view (DrawsView's reader constructor without
/// weights) is read a group of whole chains at a time (about 64Ki draws, at least one
/// chain): the same result, bit for bit, as the view of the same values in memory, holding
/// one group.
/// @throws herd::InputError when `num_superchains < 2` or does not divide `chains`; what a
///         streamed view's readers throw.
double nested_rhat(const DrawsView& draws, std::size_t num_superchains);

}  // namespace herd::mcmc
