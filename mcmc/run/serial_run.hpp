#pragma once
// The serial kernel's run (`run_paradram`; private to herd::mcmc): one context that its
// phases share, and the phases that live in other files (the `.h5`, the reports).
//
// Phases, in order (serial_run.cpp): set-up (restart folder, progress, the streamed text
// chain), sampling by engine (serial, resumable, fork-join, multi-chain), then on rank 0
// post-processing (each chain's outputs, the posterior's common length), the chain and
// sample text files and the `.h5`'s draws (serial_h5.cpp) on a writer thread while the
// diagnostics are computed, the totals and warnings, the HTML report built while the writer
// finishes, the `.h5`'s diagnostics, and the reports and terminal summary
// (serial_report.cpp).

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "herd/core/communicator.hpp"
#include "herd/core/timer.hpp"
#include "herd/io/hdf5.hpp"
#include "herd/mcmc/chain_sink.hpp"
#include "herd/mcmc/dram.hpp"
#include "herd/mcmc/ks_test.hpp"
#include "herd/mcmc/paradram_run.hpp"
#include "herd/mcmc/posterior_report.hpp"
#include "herd/mcmc/run_progress.hpp"
#include "outputs.hpp"
#include "progress_sink.hpp"
#include "text_chain.hpp"

namespace herd::mcmc::detail {

/// The compact states of chain `c` that hold its posterior draws: states [first, end) of
/// `r.chains[c]` (from its burn-in on), their weights as recorded but the last one's cut to
/// `last_weight`, so that they stand for exactly `r.ndraw` verbose draws.
struct PosteriorStates {
  std::size_t first = 0, end = 0;
  std::int64_t last_weight = 0;
  /// Weight within the posterior of state i in [first, end), whose recorded weight is `w`.
  std::int64_t weight(std::size_t i, std::int64_t w) const { return i + 1 == end ? last_weight : w; }
};

/// The posterior as compact chains: the post-burn-in verbose chains cut to a common length
/// (posterior_states), without expanding them.
/// `weights` is [chains, states] row-major: chain c's posterior_states weights (each
/// chain's sum to r.ndraw), then zeros padding it to `states`, the most states of a chain.
/// The same for every quantity; pair it with compact_values() in a weighted DrawsView, whose
/// diagnostics are bit for bit those of the verbose column's (diagnostics.hpp).
/// The weights are 32-bit (4 bytes per state, the diagnostics' and the HTML report's
/// layout): a posterior of more than 2^32 - 1 draws in all, the only one with a weight that
/// does not fit, is refused (check_posterior_draws), as the diagnostics' DrawsView refuses it.
struct CompactPosterior {
  std::size_t states = 0;
  std::vector<std::uint32_t> weights;
  std::vector<PosteriorStates> chains;  ///< each chain's posterior_states (found once, not per quantity)
};

/// The state of one `run_paradram` call, filled phase by phase (the post-processing part on
/// rank 0 only). Holds references to the caller's specifications, target, options and
/// communicator, which must outlive it. Not thread-safe: the writer thread only reads the
/// chains and their outputs while the main thread computes the diagnostics.
struct SerialRun {
  /// The set-up's figures of a run of `specs` on `target` over `comm` (starts the run's clock).
  SerialRun(const SamplerSpecs& specs, const SampleTarget& target, const SampleRunOptions& options, Communicator& comm);
  SerialRun(const SerialRun&) = delete;
  SerialRun& operator=(const SerialRun&) = delete;

  // --- Set-up --------------------------------------------------------------------------
  const SamplerSpecs& specs;
  const SampleTarget& target;
  const SampleRunOptions& options;
  Communicator& comm;
  const Timer total;  ///< the whole run
  int d, rank, ranks;
  bool root, quiet, multi;
  int nchains;      ///< chain_count
  bool text_files;  ///< per-chain text files (up to kMaxTextChains chains)
  std::string progress_path, report_path, h5_path;
  /// Where the compact chains' scratch files go (MemoryChainSink): the outputs' folder.
  std::string scratch_dir;
  std::vector<std::string> paths;  ///< output_paths
  TextFormat tf;
  bool checkpointing;
  std::string rdir;  ///< the restart folder
  DramOptions dopt;  ///< the kernel's options of chain 0 (set when sampling starts)

  // --- Sampling ------------------------------------------------------------------------
  ProgressSink progress;
  NullChainSink null_sink;
  /// The terminal, phase by phase (RunProgress); the phases' times go into the report.
  RunProgress phases;
  std::unique_ptr<ChainFileStream> text;  ///< rank 0's streamed chain file, text or binary (single chain)
  std::unique_ptr<FanSink> progress_text;
  ChainSink* tee = nullptr;       ///< what rank 0's first chain's records go to while sampling
  bool text_done = false;         ///< the streamed text chain is complete
  bool already_complete = false;  ///< the restart record held a finished chain: nothing sampled now
  std::vector<MemoryChainSink> chains;
  std::vector<DramResult> results;
  std::string parallel_report;  ///< the report's "parallelism" section
  double checkpoint_seconds = 0.0;
  std::int64_t checkpoints = 0;
  bool resumed = false;  ///< resumed from a checkpoint: what the earlier invocations did
  std::uint64_t proposals_before = 0;
  double seconds_before = 0.0;
  double sampling_seconds = 0.0;

  // --- Post-processing (rank 0) --------------------------------------------------------
  std::size_t m = 0;      ///< chains
  std::size_t ndraw = 0;  ///< the posterior's common post-burn-in verbose length per chain
  std::size_t ncol = 0;   ///< reported quantities (variables, then derived quantities)
  std::vector<ChainOutputs> co;
  std::vector<double> nested;  ///< nested R-hat per quantity (empty: not computed)
  std::size_t nsuper = 0;
  std::vector<std::vector<KsResult>> ks;  ///< [variable][chain a * m + chain b]
  std::string ks_tested;                  ///< which draws the KS table tested
  std::vector<double> covariance;         ///< the variables' posterior covariance [d, d] (posterior_covariance)
  /// The compact posterior (compact_posterior), found once by the diagnostics; its states
  /// per chain (`chains`, `states`) are read again by the HTML report, its `weights` are
  /// freed once the diagnostics are done.
  CompactPosterior posterior;
  /// The diagnostics threads' values buffers (summarize_all's caller-kept form;
  /// compact_values: 8 bytes per state each), handed from quantity to quantity without a
  /// zero fill; freed when the diagnostics are done.
  std::vector<std::vector<double>> value_buffers;
  /// The HTML report's order statistics of the plotted quantities (report_order_stats of the
  /// compact posterior's states), found by the diagnostics from the values they hold.
  std::vector<ReportOrderStats> report_stats;
  std::int64_t proposals = 0, evaluations = 0, nan_count = 0, ood = 0;
  double acceptance = 0.0;
  std::string warnings;
  SampleRunSummary out;
};

/// Chain `c`'s PosteriorStates (needs r.co and r.ndraw >= 1 set). Thread-safe (reads `r`).
PosteriorStates posterior_states(const SerialRun& r, std::size_t c);

/// Refuses a posterior of `chains` x `draws` verbose draws above 2^32 - 1 in all (the
/// diagnostics' limit, DrawsView): within it every compact state's weight, at most `draws`,
/// fits the CompactPosterior's 32 bits.
/// @throws herd::InputError naming the draws and the limit.
void check_posterior_draws(std::size_t chains, std::size_t draws);

/// The run's CompactPosterior (needs r.co and r.ndraw >= 1 set); with `weights` = false its
/// `weights` left empty (a streamed run reads them in blocks: compact_weights_reader).
/// Thread-safe (reads `r`).
/// @throws herd::InputError from check_posterior_draws(r.m, r.ndraw).
CompactPosterior compact_posterior(const SerialRun& r, bool weights = true);

/// Fills `cp.weights` (empty) of compact_posterior(r, false)'s `cp`, as compact_posterior(r)
/// does. Thread-safe (reads `r`, writes `cp`).
void fill_compact_weights(const SerialRun& r, CompactPosterior& cp);

/// Quantity `k`'s values of the compact posterior `cp` of `r`, [chains, cp.states] row-major
/// (0 where the weight pads), into `out` (resized; its memory is reused). Thread-safe (reads
/// `r` and `cp`, writes `out`).
void compact_values(const SerialRun& r, const CompactPosterior& cp, std::size_t k, std::vector<double>& out);

/// compact_values() of quantity `k` read in blocks instead: a reader of a streamed DrawsView
/// that writes entries [first, first + out.size()) of the [chains, cp.states] layout (the same
/// values, 0 where the weight pads), each call reading them from the chains' files (a
/// ChainReader or DerivedReader per chain it touches). `r` and `cp` must outlive it. One
/// thread at a time per reader. @throws herd::IoError from the chains' scratch files
DrawsReader compact_values_reader(const SerialRun& r, const CompactPosterior& cp, std::size_t k);

/// The weights of compact_posterior() read in blocks instead of held: a reader of a streamed
/// DrawsView that writes the weights of entries [first, first + out.size()) of the [chains,
/// cp.states] layout (the same as cp.weights would hold: each chain's posterior_states
/// weights, 0 where they pad), each call reading them from the chains' weight columns (a
/// ChainReader per chain it touches). `r` and `cp` must outlive it; cp.weights is not read.
/// One thread at a time per reader. @throws herd::IoError from the chains' scratch files
WeightsReader compact_weights_reader(const SerialRun& r, const CompactPosterior& cp);

/// Creates `<prefix>.h5` (atomically: committed by the caller) and writes every group but
/// `diagnostics`: root attributes and `input`, `posterior`, `sample_stats`, `chain_compact`,
/// `sample`; with `h5_posterior = "compact"` no `posterior` and no `sample_stats`, and the
/// root attribute `h5_posterior = "compact"`. Rank 0. @throws herd::IoError
void write_h5_draws(const SerialRun& r, std::optional<io::H5File>& h5);

/// The mean acceptance rate the convergence verdicts judge: `r.acceptance`, or NaN (no
/// verdict) when the run made no proposal (chain_size = 1: "the mean acceptance rate is 0
/// ... the chain barely moved" and advice to shrink the proposal). Needs the totals. Pure.
double judged_acceptance(const SerialRun& r);

/// Starts the phase `writing <prefix>_report.html` and builds that report's document
/// (nothing without posterior draws): it needs the summary rows and the totals
/// (`r.acceptance`), and calls no HDF5, so it may run while the writer thread writes the
/// `.h5`. Reads `r` (the chains, as the writer does).
std::optional<std::string> html_report(SerialRun& r);

/// Stores the document of html_report() as `<prefix>_report.html` (atomically).
/// @throws herd::IoError
void write_html_file(const SerialRun& r, const std::string& html);

/// The variables' posterior covariance `[d, d]` row-major, over the verbose draws in order
/// about the summary's means (needs r.out.summary): from the compact states, a state of
/// weight w adding its products w times, so bit for bit the expanded draws' sums. Reads `r`
/// only (thread-safe beside other readers).
std::vector<double> posterior_covariance(const SerialRun& r);

/// Writes `<prefix>_report.txt` (sets `r.out.seconds` first; needs `r.covariance`).
/// @throws herd::IoError
void write_text_report(SerialRun& r);

/// Prints the summary table, the totals, the warnings and the outputs on the terminal
/// (unless quiet).
void print_terminal_summary(const SerialRun& r);

}  // namespace herd::mcmc::detail
