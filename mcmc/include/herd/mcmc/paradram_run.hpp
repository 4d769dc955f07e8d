#pragma once
/// @file paradram_run.hpp
/// A whole ParaDRAM-style run: the DRAM kernel on a target, then ParaDRAM's outputs
/// (Shahmoradi & Bagheri 2020, ParaMonte 1.x) and ArviZ-compatible HDF5:
///   <prefix>_chain.txt    compact (or verbose) chain: ProcessID, DelayedRejectionStage,
///                         MeanAcceptanceRate, AdaptationMeasure, BurninLocation, SampleWeight,
///                         SampleLogFunc, then the variables (binary: <prefix>_chain.bin)
///   <prefix>_sample.txt   refined sample: SampleLogFunc, then the variables
///   <prefix>_progress.txt progress rows (times excluded from reproducibility)
///   <prefix>_report.txt   resolved specifications, timings, statistics, diagnostics
///   <prefix>.h5           posterior (chain, draw), sample_stats, chain_compact, sample,
///                         diagnostics, and the resolved input as attributes; written
///                         atomically at the end. With `h5_posterior = "compact"` no
///                         posterior and no sample_stats: the draws once, in chain_compact
///                         (docs/dram.md, "The .h5: verbose or compact").
///
/// Parallel runs (docs/parallel.md): with `parallelization_model = "multi_chain"`
/// the run has ranks x `chains_per_rank` chains; its text files are per chain,
/// `<prefix>_process_<k>_chain.txt` (`.bin`) and `<prefix>_process_<k>_sample.txt` with k
/// the 1-based global chain id (ParaDRAM's per-process names; up to 64 chains, beyond that
/// HDF5 only), and `<prefix>.h5` has a real `chain` dimension. `single_chain` over several
/// ranks is the fork-join model and writes the files of a serial run, byte-identical to
/// them. With checkpoints (`checkpoint_period`, `checkpoint_period_seconds`) the record of
/// the run is kept in `<prefix>_restart/` (append-only binary chains + atomic checkpoints,
/// `run_resumable`); a single chain's text chain file is streamed while sampling and
/// truncated back to its checkpointed length on resume, the other outputs are written from
/// the record at the end.
/// Thread-safety: one run per thread; HDF5 calls are serialised by the caller.

#include <cstdint>
#include <cstdio>
#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "herd/core/communicator.hpp"
#include "herd/io/output_files.hpp"
#include "herd/mcmc/diagnostics.hpp"
#include "herd/mcmc/dram.hpp"
#include "herd/mcmc/sampler_specs.hpp"

namespace herd::mcmc {

/// What the sampler samples: a log density on `ndim` variables, and optionally derived
/// quantities reported beside them (e.g. sigma for a sampled log sigma).
struct SampleTarget {
  int ndim = 0;
  PointLogDensity log_density;
  /// The log density may be called from several threads at once.
  bool thread_safe = false;
  /// Default variable names (used when the input gives none).
  std::vector<std::string> names;
  /// Names of derived quantities; a name equal to a variable's is not repeated.
  std::vector<std::string> quantity_names;
  /// Writes `quantity_names.size()` values for the state `x` (`[ndim]`); may be empty.
  std::function<void(const double* x, double* q)> quantities;
  /// One line for the report, e.g. "posteriordb model kidscore_interaction".
  std::string description;
};

/// One ArviZ variable of flat column names: "beta[1]", ..., "beta[K]" (adjacent, indices 1..K
/// in order, as Stan and posteriordb name a vector's elements) are the variable "beta" with
/// K elements along the dimension "beta_dim_0" (coordinates 0..K-1, as ArviZ's from_dict
/// names it); any other column, or elements whose base name is also a column, are scalars.
struct ArvizVariable {
  std::string name;
  std::vector<std::size_t> columns;  ///< indices of its columns, in element order
  bool is_vector = false;
};

/// The ArviZ variables of `names`, in column order. Thread-safe (pure).
std::vector<ArvizVariable> arviz_variables(const std::vector<std::string>& names);

/// Settings of a run that are not sampler specifications.
struct SampleRunOptions {
  /// Print nothing on the terminal (also implied by the `silent_mode` specification).
  bool quiet = false;
  /// Where the summary table and progress go.
  std::FILE* terminal = stdout;
  /// The resolved input, one `key = value  # origin; doc` per line (`Settings::describe`).
  std::string resolved_input;
  /// The resolved input as (key, TOML value) pairs: attributes of the HDF5 root group.
  std::vector<std::pair<std::string, std::string>> input_attributes;
  /// Name of the input file ("(embedded default)" when none).
  std::string input_source;
  /// `sampler_input_hash` of the input (set by `run_sampler_program`): matches a restart
  /// record to its input.
  std::uint64_t input_hash = 0;
  /// Batched devices (set by `run_sampler_program`; 0 otherwise): the hash the same input had
  /// before batched records became independent of the process layout (`chains_per_rank`
  /// included), so that a record written then is still resumed.
  std::uint64_t legacy_input_hash = 0;
  /// Threads that compute the quantities' diagnostics after sampling (0: one per core), beside
  /// the thread that writes the draws; the numbers do not depend on it.
  std::size_t diagnostics_threads = 0;
};

/// Statistics of one reported quantity over the post-burn-in verbose chain.
struct QuantitySummary {
  std::string name;
  DiagnosticSummary stats;
};

/// The outcome of a run.
struct SampleRunSummary {
  std::vector<std::string> paths;    ///< files written
  DramResult kernel;                 ///< the kernel's counters (the first chain's)
  std::vector<DramResult> chains;    ///< every chain's counters, in global id order (rank 0)
  std::int64_t compact_size = 0;     ///< unique states (all chains)
  std::int64_t verbose_size = 0;     ///< steps (sum of weights, all chains)
  std::int64_t burnin = 0;           ///< compact index where the posterior starts (first chain)
  std::int64_t posterior_draws = 0;  ///< chains x common post-burn-in length
  std::int64_t sample_size = 0;      ///< rows of the refined samples (all chains)
  /// Variables, then derived quantities; across chains (R-hat, bulk/tail ESS over
  /// `[chains, draws]`) when there are several.
  std::vector<QuantitySummary> summary;
  double seconds = 0.0;
};

/// The output files a run with these specifications writes on `ranks` ranks (for
/// overwrite checks): the chain and sample text files (one pair, or one per chain for
/// multi_chain: `<prefix>_process_<k>_chain.txt|.bin`, `<prefix>_process_<k>_sample.txt`,
/// k = 1..chains, for up to 64 chains), `_progress.txt`, `_report.txt`, `_report.html`,
/// `.h5`; with `device` "cpu_batched" or "cuda" only `_report.txt`, `_report.html` and `.h5`.
/// The restart folder `<prefix>_restart/` is not listed (it is the run's record, see the file
/// comment). In this order, the terminal lists them at the end of a run.
std::vector<std::string> output_paths(const SamplerSpecs& specs, int ranks = 1);

/// Refuses a symbolic link at any output name or at `<prefix>_restart` (with or without
/// overwrite: outputs are never written through links), checks that no output file exists
/// unless `specs.overwrite` or `resuming` (the files of the interrupted run are rewritten),
/// creates missing folders, and removes the temporaries (`<output file>.tmp.<pid>.<n>`, and
/// those in `<prefix>_restart/`) that a killed run of this prefix left behind (of processes
/// that no longer exist) and the heartbeat files of an earlier run's stall watchdog.
/// Call it holding the prefix's `OutputPrefixLock`.
/// @throws herd::InputError naming an existing file or a link; herd::IoError when a folder
///   cannot be made.
void prepare_outputs(const SamplerSpecs& specs, int ranks = 1, bool resuming = false);

/// Runs the sampler and writes every output, on one process. Call `prepare_outputs` first.
/// @throws herd::InputError (bad specifications for this target), herd::NumericalError
/// (+inf log density), herd::IoError.
SampleRunSummary run_paradram(const SamplerSpecs& specs, const SampleTarget& target, const SampleRunOptions& options);

/// The run over the ranks of `comm` (collective): `multi_chain` (`run_multi_chain`), or
/// `single_chain` as fork-join (`run_fork_join`) on more than one rank, else serial; with
/// checkpoints when `checkpoint_period` or `checkpoint_period_seconds` is > 0, resuming
/// from `<prefix>_restart/` when it holds a record of this run. Only rank 0 writes outputs
/// and prints; the summary is filled on rank 0 only.
/// @throws as above; an error on another rank is not seen here (`abort_all_on_error`).
SampleRunSummary run_paradram(const SamplerSpecs& specs, const SampleTarget& target, const SampleRunOptions& options,
                              Communicator& comm);

/// What a program (herd-sample, the C API) resolved from its input on one rank.
struct SamplerProgramInput {
  SamplerSpecs specs;
  SampleTarget target;
  SampleRunOptions options;
  bool seed_given = false;  ///< the input gave random_seed (else a resumed run keeps its recorded seed)
  /// Makes the one line rank 0 prints before the run (may be unset), called once the
  /// restart record has settled the input (a resumed run keeps its recorded seed).
  std::function<std::string(const SamplerProgramInput& input)> banner;
  /// When set, runs instead of `run_paradram` (collective, on every rank; herd-sample's
  /// batched devices): `run_sampler_program` then neither reads nor writes a restart record,
  /// unless `run_restartable`.
  std::function<void(SamplerProgramInput& input, Communicator& comm)> run;
  /// `run` keeps its own state in `<prefix>_restart/` and honours the checkpoint settings:
  /// `run_sampler_program` manages the run record (`run.ckpt`: resume, complete, another
  /// input) for it as for `run_paradram`, and sets `resuming`.
  bool run_restartable = false;
  /// Loads code that the target needs (a plugin library, whose constructors run when it is
  /// loaded), on every rank; may be empty. `run_sampler_program` calls it only after rank 0
  /// holds the output prefix's lock and has checked the outputs and the restart record, and
  /// before anything is deleted or written, so an input that would be refused never runs
  /// the library's code. @throws herd::InputError (exit code 2).
  std::function<void()> load_target;
  /// Set by `run_sampler_program` before `run`: the restart record is of this input and the
  /// run is resumed (else the restart folder is new and empty, or absent without checkpoints).
  bool resuming = false;
};

/// A 64-bit FNV-1a hash of the resolved input (`options.input_attributes` minus the keys
/// that do not change the outputs: overwrite, silent_mode, progress_report_period,
/// checkpoint_period[_seconds], mpi_finalize_requested) and the target's description and
/// dimension. With a batched device (`device` not "cpu") `chains_per_rank` is left out too:
/// the restart records hold the total of chains (processes x chains_per_rank) and check it
/// apart, so a batched run resumes in any layout of the same total (2 x 64 as 1 x 128). Pure.
std::uint64_t sampler_input_hash(const SampleRunOptions& options, const SampleTarget& target);

/// The whole program around a run, on every rank of `comm` (collective):
/// `check_launch`; `resolve` on every rank (any exception there: every rank returns 2, the
/// failing ranks print "<program>: error: [rank R: ]<message>"); `check_same_input` on
/// `sampler_input_hash`; rank 0 reads the restart record (`<prefix>_restart/run.ckpt`):
/// none or `overwrite`: fresh start (the folder is deleted, and with `overwrite` the earlier
/// run's outputs of the prefix too, once the target is loaded); of this input: resume (or, when
/// complete, print that and return 0); of another input: an error saying how to start
/// afresh (2); rank 0's seed is used on every rank. Then `run_paradram` inside
/// `abort_all_on_error` (a failure on one rank ends all with "herd: rank R of N failed").
/// Returns the exit code: 0 done, 1 the run failed (one rank), 2 bad input.
int run_sampler_program(Communicator& comm, const std::function<SamplerProgramInput()>& resolve,
                        const std::string& program);

/// Removes from `<output_prefix>_restart/` everything but the run record `run.ckpt`: the
/// binary chain records (`chain_<id>.chain`), the checkpoints (`chain_<id>.ckpt`,
/// `batched.ckpt`), the batched draws record (`draws.bin`) and heartbeat files. Called by
/// `run_sampler_program` (rank 0) once the record says the run is complete: a complete run
/// is never resumed, a rerun only reads `run.ckpt` (to report it complete) and
/// outputStatus = "extend" reads the `.h5`. Does nothing when the folder holds no
/// `run.ckpt` (not herd's record). Not thread-safe with a run of the same prefix.
/// @throws herd::IoError naming the file that could not be removed.
void trim_restart_folder(const std::string& output_prefix);

/// The summary table printed at the end of a run: one row per quantity with mean, sd, q5,
/// q50, q95, MCSE of the mean and sd, bulk and tail ESS, R-hat; herd-diagnose's header
/// ("parameter", ...) and precisions (6 significant digits, MCSE 3, ESS whole, R-hat 4
/// decimals).
std::string format_summary_table(const std::vector<QuantitySummary>& rows);

/// The warning printed (terminal and report) when a run's mean acceptance rate `rate` (in
/// [0, 1]) is below 1e-3, so that its draws are not a usable sample: one paragraph saying
/// what to change (proposal_std/proposal_cov, scale_factor, start_point). Empty when `rate`
/// is at least 1e-3 (NaN counts as below). Pure function, thread-safe, throws nothing
/// beyond std::bad_alloc.
std::string low_acceptance_warning(double rate);

/// The convergence warnings of a finished run, for the terminal and `_report.txt` of every
/// engine (serial, multi-chain, fork-join, batched): one line "WARNING: ..." per problem,
/// each saying what to try, from `convergence_verdicts` (posterior_report.hpp; the HTML
/// report shows the same verdicts): R-hat above 1.01 (nested R-hat, where `nested_rhat`
/// gives it per row over `superchains` superchains: the statistic that applies to many
/// short chains), bulk- or tail-ESS below 100 per chain (100 x min(chains, 4)), a mean
/// acceptance rate outside [0.05, 0.8]; below 1e-3 the acceptance line is
/// `low_acceptance_warning`'s. `rows` are the summary rows over `chains` chains,
/// `run_longer` how to run longer (e.g. "raise chain_size"). Empty when the run passes
/// every check. Pure; thread-safe.
std::string convergence_warnings(const std::vector<QuantitySummary>& rows, std::size_t chains, double acceptance_rate,
                                 const std::string& run_longer = "raise chain_size",
                                 std::span<const double> nested_rhat = {}, std::size_t superchains = 0);

/// The output-file rules shared with herd-rl (herd/io/output_files.hpp): liveness of the
/// process that left a temporary or lock file, and the exclusive lock on `<prefix>.lock`
/// that rank 0 holds for a whole run.
using io::OutputPrefixLock;
using io::process_alive;

}  // namespace herd::mcmc
