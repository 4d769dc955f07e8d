#pragma once
/// @file posterior_report.hpp
/// The HTML report of MCMC draws (`<prefix>_report.html` of herd-sample, `herd-diagnose
/// --html`): a summary table with MCSE, bulk/tail ESS and R-hat (Vehtari et al. 2021, as in
/// diagnostics.hpp), convergence verdicts in words, and plots as ArviZ users know them:
/// traces per chain, marginal densities, a corner plot, autocorrelation, rank plots
/// (Vehtari et al. 2021, section 4), the acceptance rate and adaptation measure over the
/// run, and proposal-covariance ellipses in 2-D slices. Written through
/// herd::io::HtmlReport (one self-contained file, Vega plots).
///
/// Large runs are thinned for plotting (evenly spaced draws; the table and verdicts use
/// every draw): at most `kTracePoints` points per chain in a trace, `kCornerPoints` per
/// scatter panel, and densities from at most `kDensityDraws` draws per series.
///
/// Memory: the report expands at most two quantities' draws at a time (one pass per
/// quantity computes everything its plots need, two for the covariance of a coordinate
/// pair), so a caller that hands the draws through `PosteriorReportData::fill_values`
/// instead of `values` keeps 16 bytes per draw for the report, however many quantities;
/// through `PosteriorReportData::open_states` (weighted states read block by block) the
/// report's memory does not grow with the chains' length.
///
/// Thread-safety: reentrant (diagnostics use thread-local workspaces).

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "herd/mcmc/chain_sink.hpp"
#include "herd/mcmc/diagnostics.hpp"

namespace herd::mcmc {

/// The sampler's course over one chain: acceptance rate and adaptation measure in windows
/// of proposals. Built by `chain_history` from a compact chain.
struct ChainHistory {
  std::uint32_t chain_id = 0;      ///< global chain id (shown 1-based)
  std::vector<double> proposals;   ///< proposal number at the end of each window
  std::vector<double> acceptance;  ///< accepted / proposals within the window
  std::vector<double> adaptation;  ///< largest adaptation measure of the states accepted in the window (NaN: none)
};

/// The acceptance rate and adaptation measure of a compact chain in `windows` equal windows
/// of its proposals (fewer when it made fewer proposals). A state accepted at proposal
/// `step` counts in the window holding `step`; the start state (step 0) does not count.
ChainHistory chain_history(const MemoryChainSink& chain, std::size_t windows = 200);

/// Fills `out` with quantity `quantity`'s draws `[chains, draws]` row-major (resizing it;
/// what `out` held before is another quantity's draws, to be overwritten, so its capacity
/// can be reused). See `PosteriorReportData::fill_values`.
using PosteriorDrawsFiller = std::function<void(std::size_t quantity, std::vector<double>& out)>;

/// One quantity's weighted states of one chain, read in order block by block: what
/// `PosteriorReportData::open_states` hands the report. One source is read by one thread.
class PosteriorStateSource {
 public:
  virtual ~PosteriorStateSource() = default;
  /// The chain's next `values.size()` states (the first call: from state 0 on): their values,
  /// and when `weights` is not empty (then of the same size) their weights, 0 past the
  /// chain's own states (up to `PosteriorReportData::states`; the value there is never read).
  /// What it throws propagates out of the report.
  virtual void read(std::span<double> values, std::span<std::uint32_t> weights) = 0;
};

/// Opens quantity `quantity`'s states of chain `chain` at its first state; `weights`: whether
/// its read() will be asked for the weights. See `PosteriorReportData::open_states`.
using PosteriorStatesOpener =
    std::function<std::unique_ptr<PosteriorStateSource>(std::size_t quantity, std::size_t chain, bool weights)>;

/// What the panels of one quantity need to know of all its draws before they read them: its
/// range and the quantiles its density (quartiles) and rank plot (cuts) use. Given through
/// `PosteriorReportData::order_stats` by a caller that holds each quantity's states whole at
/// some time anyway (herd-sample's diagnostics), so that the report reads them once.
struct ReportOrderStats {
  double min = 0, max = 0;                ///< the smallest and largest draw (NaN skipped)
  bool finite = false;                    ///< every draw finite (no NaN, no infinity)
  double finite_min = 0, finite_max = 0;  ///< the smallest and largest finite draw (+inf, -inf: none)
  std::vector<double> quantiles;          ///< at the report's probabilities (see report_order_stats)
};

/// The ReportOrderStats of one quantity's weighted states: `values` and `weights` of the same
/// length, `[chains, states]` as `PosteriorReportData::fill_states` and `state_weights` give
/// them (a state of weight w stands for w draws; weight 0: padding), of a report of `chains`
/// chains: exactly the numbers the report finds from the same states (the quantiles at 0.25,
/// 0.75 and, with 2 or more chains, b / 20 for b = 1..19, type 7, as herd::mcmc::quantiles of
/// the expanded draws gives them). Cost: O(states) in a few passes, 32 KiB of bins and the
/// wanted bins' states. Thread-safe. @throws herd::InputError for lengths that differ.
ReportOrderStats report_order_stats(std::span<const double> values, std::span<const std::uint32_t> weights,
                                    std::size_t chains);

/// States per block that the report reads through `PosteriorReportData::open_states` (by
/// default): 8192 states are 64 KiB of values per quantity, 32 KiB of weights.
inline constexpr std::size_t kReportBlockStates = 8192;

/// A table of the report beyond its fixed sections: a heading, the column names, rows of
/// cells (already formatted; each row as long as `header`) and a caption under it.
struct ReportTable {
  std::string title;
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::string caption;
};

/// Everything the report shows; only `names`, `chains`, `draws` and the draws (`values`,
/// `fill_values`, `fill_states` or `open_states`) are required.
struct PosteriorReportData {
  std::string title;     ///< e.g. "herd-sample report: <description>"
  std::string subtitle;  ///< a line under the title (program, time)
  /// Facts about the run (label, value), shown as a table first.
  std::vector<std::pair<std::string, std::string>> facts;
  std::vector<std::string> names;        ///< quantity names, one per entry of `values`
  std::size_t chains = 0;                ///< chains of each quantity's draws
  std::size_t draws = 0;                 ///< draws per chain
  std::vector<std::uint32_t> chain_ids;  ///< labels of the chains (empty: 0, 1, ...; shown 1-based)
  /// Per quantity, its draws `[chains, draws]` row-major (the caller keeps them alive).
  /// Empty: `fill_values` gives them.
  std::vector<std::span<const double>> values;
  /// The draws one quantity at a time, used when `values` is empty (and required then when
  /// there are `names`): called on the thread that writes the report, in increasing
  /// quantity order, at most once per quantity (every quantity when `summary` is empty,
  /// else the first `kPlotQuantities`), with one of two buffers the report reuses, so at
  /// most two quantities' draws are held at once. What it throws propagates (no file is
  /// written); a filled size other than `chains * draws` is a herd::InputError. With
  /// `threads` > 1 see there.
  PosteriorDrawsFiller fill_values;
  /// The draws as weighted (compact) states instead of draws, used when `fill_states` is
  /// set (then `values` and `fill_values` must be empty and `summary` given): entry (c, i)
  /// of `state_weights` `[chains, states]` row-major says how many consecutive draws of
  /// chain c state i stands for (0: padding after a shorter chain's states); each chain's
  /// weights sum to `draws`. `fill_states` fills one quantity's values of the states
  /// `[chains, states]` (the value under a weight of 0 is never read), called as
  /// `fill_values` is (same order, buffers and threads). The report is the same, byte for
  /// byte, as from the expanded draws (but for the sign of a zero quantile where a
  /// quantity's draws hold both -0 and +0), and reads each state once per pass instead of
  /// each draw: 8 bytes per state per held quantity instead of 8 per draw, and 4 per state
  /// for the weights (32 bits: the draws per chain, `draws`, are below 2^32 where a weight
  /// is). The caller keeps `state_weights` alive.
  std::span<const std::uint32_t> state_weights;
  std::size_t states = 0;  ///< states per chain of `state_weights`, `fill_states` and `open_states`
  PosteriorDrawsFiller fill_states;
  /// The weighted states block by block instead of whole quantities, used when set (then
  /// `values`, `fill_values`, `fill_states` and `state_weights` must be empty and `summary`
  /// given): each chain's `states` states, their weights read with the values (each chain's
  /// summing to `draws`, else herd::InputError). The report is the same, byte for byte, as
  /// `fill_states` gives with the same states, from a few passes per plotted quantity (the
  /// quantities in pairs as there, each pass reading both, the weights once) over blocks of
  /// `block_states` states: the range, traces, thinned draws, the autocorrelation's first
  /// draws and the pair's covariance sums; the quantile bins' counts; the wanted bins'
  /// states; the densities and rank histograms. Memory per thread: the blocks, the first
  /// kAcfDraws draws of one chain per quantity, the histograms and the wanted bins' states
  /// (a few hundred per wanted quantile unless the draws bunch up), whatever the chains'
  /// length; but a quantity with an infinite draw, or whose draws are all zeros, or fewer
  /// than detail::kBinnedQuantilesMin draws, is read whole for its quantiles (8 bytes per
  /// state and its weights, as `fill_states` holds it). `open_states` is called from the
  /// report's threads at once (with `threads` > 1): it must be thread-safe; each source is
  /// read on one thread.
  PosteriorStatesOpener open_states;
  /// States per block read through `open_states` (0: kReportBlockStates); any number gives
  /// the same report (tests make it small).
  std::size_t block_states = 0;
  /// With `open_states`: per quantity (at least the plotted ones, the first
  /// min(names, kPlotQuantities)), report_order_stats of its states, so that the report
  /// reads each quantity's states once (its traces, scatter draws, autocorrelation,
  /// densities, rank histograms and the pair's covariance sums in one pass) instead of up to
  /// four times; the same report. Empty: found by the report.
  std::vector<ReportOrderStats> order_stats;
  /// Threads that make the quantities' panels at once (0 or 1: the calling thread only).
  /// The quantities go in pairs (0, 1), (2, 3), ... to the threads in turn; each thread
  /// holds up to two quantities' draws, so up to 2 x threads are held at once, and
  /// `fill_values` is then called from these threads at once (each call with its own
  /// buffer; in increasing quantity order within a thread): it must be thread-safe. The
  /// report is the same, byte for byte, for any number; the error of the lowest quantity
  /// that failed propagates.
  std::size_t threads = 1;
  /// Buffers for the quantities' draws that the caller keeps (nullptr: the report's own,
  /// freed on return): thread t of `threads` fills `(*buffers)[2 t]` and `(*buffers)[2 t +
  /// 1]` (the vector is grown to 2 x threads, never shrunk), passed to `fill_values` /
  /// `fill_states` as the caller or the previous quantity left them (size and contents), so
  /// that blocks the caller has filled before (for another pass over the same quantities)
  /// are written again instead of freshly mapped and faulted in. The report is the same.
  /// Not thread-safe for one `buffers` (one report at a time).
  std::vector<std::vector<double>>* buffers = nullptr;
  /// Per quantity, its diagnostics; empty: computed here with `summarize`.
  std::vector<DiagnosticSummary> summary;
  /// Number of leading quantities that are sampled coordinates (the corner plot and the
  /// covariance ellipses use these); 0: all of them.
  std::size_t sampled = 0;
  /// Mean acceptance rate of the run (NaN: unknown, no verdict).
  double acceptance_rate = std::numeric_limits<double>::quiet_NaN();
  /// The sampler's course per chain; empty: `history_note` says why.
  std::vector<ChainHistory> history;
  std::string history_note;
  /// Proposal covariances over the sampled coordinates, `[d, d]` row-major each (d =
  /// `sampled` or all): the start one, and the final one per chain (labelled). Empty:
  /// `covariance_note` says why.
  std::vector<double> start_covariance;
  std::vector<std::pair<std::string, std::vector<double>>> final_covariances;
  std::string covariance_note;
  /// Further warnings (level warning) shown under the verdicts: the sampler's own diagnostics,
  /// e.g. CmdStan's divergent transitions read by herd-diagnose.
  std::vector<std::string> warnings;
  /// Further notes (level info) shown under the verdicts.
  std::vector<std::string> notes;
  /// Further tables, each under its own heading after the summary table: e.g. herd-sample's
  /// sample refinement rounds. Empty: none.
  std::vector<ReportTable> tables;
  /// The resolved input, shown preformatted at the end (empty: left out).
  std::string resolved_input;
  /// How the verdicts say to run longer (e.g. "raise warmup and chain_size" for batched runs).
  std::string run_longer = "raise chain_size";
  /// Nested R-hat per quantity over `superchains` superchains (empty: not computed); the
  /// verdicts judge convergence on it where it is finite (`convergence_verdicts`).
  std::vector<double> nested_rhat;
  std::size_t superchains = 0;  ///< superchains of `nested_rhat`
  /// Every chain started from the same point (no random start point): the superchains were
  /// not started from dispersed points as nested R-hat assumes, and a note under the
  /// verdicts says what it then cannot show and how to start them apart.
  bool superchains_share_start = false;
};

/// Convergence verdict thresholds (Vehtari et al. 2021): R-hat above this is a problem.
inline constexpr double kRhatLimit = 1.01;
/// Bulk- and tail-ESS below this many per chain (for up to `kEssChains` chains) is a problem.
inline constexpr double kEssPerChain = 100.0;
/// Chains counted in the ESS threshold: 100 per chain up to 4 chains (400 with 4 or more).
inline constexpr std::size_t kEssChains = 4;
/// A mean acceptance rate outside [kAcceptanceLow, kAcceptanceHigh] gets a warning.
inline constexpr double kAcceptanceLow = 0.05;
inline constexpr double kAcceptanceHigh = 0.8;
/// Plotting limits (see the file comment).
inline constexpr std::size_t kTracePoints = 1000;
inline constexpr std::size_t kCornerPoints = 1000;
inline constexpr std::size_t kDensityDraws = 5000;
inline constexpr std::size_t kPlotChains = 8;       ///< chains drawn in traces, ranks, histories
inline constexpr std::size_t kPlotQuantities = 16;  ///< quantities in traces, densities, ranks, autocorrelation
inline constexpr std::size_t kCornerQuantities = 10;

/// One verdict of the report: its level (0 ok, 1 info, 2 warning, 3 problem) and text.
struct ReportVerdict {
  int level = 0;
  std::string text;
};

/// The convergence verdicts, in words, with what to try: R-hat > kRhatLimit (nested R-hat
/// where given, see below), bulk or tail ESS below kEssPerChain x min(chains, kEssChains),
/// and a mean acceptance rate outside [kAcceptanceLow, kAcceptanceHigh]; one "ok" verdict
/// when none applies.
std::vector<ReportVerdict> convergence_verdicts(const PosteriorReportData& data,
                                                const std::vector<DiagnosticSummary>& summary);

/// The same verdicts from the quantities' `names` and `summary` (same length), the number of
/// `chains` the summary pools, the run's mean `acceptance_rate` (NaN: unknown, no verdict,
/// and the advice names no herd-sample setting: draws of another sampler, herd-diagnose)
/// and how to run longer (`run_longer`, e.g. "raise chain_size"). With `nested_rhat` (per
/// quantity, over `superchains` superchains of chains / superchains chains; empty: none)
/// the convergence of a quantity whose nested R-hat is finite is judged on it, the statistic
/// that applies to many short chains (Margossian et al. 2024), with the same limit
/// kRhatLimit: a problem when it is above, and only a note (level 1) when R-hat alone is.
/// Every engine's terminal and text report use these through `convergence_warnings`
/// (paradram_run.hpp), the HTML report directly. Pure; thread-safe.
std::vector<ReportVerdict> convergence_verdicts(const std::vector<std::string>& names,
                                                const std::vector<DiagnosticSummary>& summary, std::size_t chains,
                                                double acceptance_rate,
                                                std::string_view run_longer = "raise chain_size",
                                                std::span<const double> nested_rhat = {}, std::size_t superchains = 0);

/// Writes the report to `path` (atomically). The draws come from `data.values`, or when
/// that is empty from `data.fill_values`; either way the same file.
/// @throws herd::InputError when the data are inconsistent (sizes; `values` and
///         `fill_values` both set, or neither with quantities named); herd::IoError when the
///         file cannot be written (an earlier file is then unchanged); whatever
///         `fill_values` throws.
void write_posterior_report(const std::string& path, const PosteriorReportData& data);

/// The document `write_posterior_report` writes, as a string (the same bytes), without
/// writing it: a caller can build it while other work runs and store it later
/// (io::write_file_atomic). Thread-safe for distinct `data` (reads `data`; `fill_values` is
/// called on the calling thread).
/// @throws herd::InputError as `write_posterior_report`; whatever `fill_values` throws.
std::string posterior_report_html(const PosteriorReportData& data);

}  // namespace herd::mcmc
