#pragma once
/// @file sampler_specs.hpp
/// ParaDRAM's simulation specifications (ParaMonte 1.x, Shahmoradi & Bagheri 2020) under
/// snake_case names, with ParaMonte's v1 names and v2 names as aliases, so one schema reads
/// herd TOML files and ParaMonte `&ParaDRAM ... /` namelists alike.
///
/// Thread-safety: plain functions and values.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "herd/io/schema.hpp"
#include "herd/mcmc/dram.hpp"
#include "herd/mcmc/refinement.hpp"

namespace herd::mcmc {

/// Declares every sampler specification in `schema` (top-level keys, with aliases such as
/// `chainSize` / `outputChainSize` for `chain_size`). @throws herd::InputError if a key is
/// already declared.
void declare_sampler_specs(io::Schema& schema);

/// The resolved specifications of a run; see `declare_sampler_specs` for each key's doc.
struct SamplerSpecs {
  std::int64_t chain_size = 100000;
  std::int64_t sample_size = -1;
  std::vector<double> start_point;
  bool random_start_point = false;
  /// With random_start_point: "chain" (each chain its own start) or "superchain" (each of
  /// the `superchains` groups of contiguous global chain ids one start, shared by its chains).
  std::string random_start_point_scope = "chain";
  /// Superchains of nested R-hat (Margossian et al. 2024); 0: automatic (batched) or none.
  std::int64_t superchains = 0;
  std::vector<double> random_start_point_domain_lower, random_start_point_domain_upper;
  std::vector<double> domain_lower, domain_upper;
  std::string proposal_model = "normal";
  std::vector<double> proposal_cov, proposal_cor, proposal_std;
  std::int64_t adaptive_update_period = 0;  ///< 0: 4 d
  std::int64_t adaptive_update_count = 0;
  std::int64_t greedy_adaptation_count = 0;
  double burnin_adaptation_measure = 1.0;
  std::int64_t delayed_rejection_count = 0;
  std::vector<double> delayed_rejection_scale_factors;
  std::string scale_factor = "gelman";
  std::vector<double> target_acceptance_rate;
  std::uint64_t random_seed = 0;
  std::string output_prefix;
  /// Where output_prefix was set and how, for messages about the output folder:
  /// `run.nml:4: outputFileName = "./out/"`, `--set output_prefix=...` or `output_prefix =
  /// "out/herd_sample" (its default)` (empty: a program's own specifications).
  std::string output_prefix_origin;
  /// How the input names the keys `overwrite` and `output_prefix`, for the advice of messages
  /// about existing outputs: a namelist's `overwriteRequested` and `outputFileName` (as it
  /// spelled them, or ParaDRAM's names when it does not set them), else the schema names.
  std::string overwrite_name = "overwrite", output_prefix_name = "output_prefix";
  /// Where checkpoints were turned off, for the refusal to leave an interrupted run's restart
  /// record unused: e.g. `--set checkpoint_period_seconds=0` or `run.toml:5:
  /// checkpoint_period_seconds = 0` (empty while either period is positive).
  std::string checkpoints_off_origin;
  std::string chain_file_format = "compact";
  /// What the `.h5` holds of the draws: "verbose" (the `posterior` and per-draw `sample_stats`
  /// groups [chain, draw] beside `chain_compact`) or "compact" (`chain_compact` only: every
  /// state once with its weight; readers expand it, e.g. herd-diagnose).
  std::string h5_posterior = "verbose";
  bool overwrite = false;
  std::int64_t progress_report_period = 1000;
  std::int64_t sample_refinement_count = 20;
  /// The refinement's estimator and ParaMonte's qualifiers (parse_refinement_method), in the
  /// canonical spelling of refinement_method_name once resolved, e.g. "batch_means-max".
  std::string sample_refinement_method = "batch_means";
  std::vector<std::string> variable_names;
  std::string description;
  std::string output_delimiter = ",";
  int output_real_precision = 17;
  int output_column_width = 0;
  bool silent_mode = false;
  std::string parallelization_model = "single_chain";
  std::int64_t chains_per_rank = 1;  ///< multi_chain: chains per process (threads); batched: chains per process
  /// "cpu" (serial DRAM kernel), "cpu_batched" or "cuda" (batched DRAM, docs/batched.md).
  std::string device = "cpu";
  std::int64_t warmup = 1000;                 ///< batched: adapting proposals per chain, discarded
  std::int64_t thin = 1;                      ///< batched: keep every thin-th post-warm-up state
  std::string batched_adaptation = "pooled";  ///< batched: "pooled", "per_chain" or "none"
  std::int64_t checkpoint_period = 0;         ///< proposals between checkpoints (0: by time only)
  double checkpoint_period_seconds = 5.0;     ///< seconds between checkpoints (both 0: no checkpoints)
  /// Watchdog (herd-sample, device "cpu"): seconds after which a log-density call that has
  /// not returned, or a rank with no sign of life, ends the job naming the rank (0: off).
  double stall_timeout_seconds = 0.0;
  bool mpi_finalize_requested = true;  ///< C API: finalise MPI at the end if herd initialised it
  std::uint64_t max_memory = 0;        ///< bytes a run may hold (0: what the machine has available)
  /// ParaDRAM's maxNumDomainCheckToWarn / ToStop (serial kernel): trials in a row outside the
  /// domain or with a NaN log density before a warning / before the run stops (DramOptions).
  std::int64_t max_num_domain_check_to_warn = 1000;
  std::int64_t max_num_domain_check_to_stop = 100000;
  /// ParaMonte 2's `outputStatus`: "" (not given: herd's behaviour), "retry"/"repeat"
  /// (start afresh, as overwrite = true) or "extend" (resume an interrupted run; continue a
  /// complete one in `<prefix>_run<k>`).
  std::string output_status;
  /// "cube" (the box domain_lower/upper) or "ball" (also the ellipsoid
  /// (x - c)^T C^-1 (x - c) <= 1 of ParaMonte 2's domainBall*; "sphere" and "ellipsoid" read as "ball").
  std::string domain = "cube";
  std::vector<double> domain_ball_center;  ///< c [ndim] (default 0)
  std::vector<double> domain_ball_cov;     ///< C [ndim, ndim] row-major, from domainBallCov or Cor and Std
  /// Lines "file:line: key ... is accepted, but ..." for ParaMonte specifications that herd reads
  /// but does not act on (restartFileFormat, systemInfoFilePath, ...): printed as notes.
  std::vector<std::string> notes;
  /// Keys this run does not read in its configuration, each with why (e.g. `warmup`: "not
  /// read by device = \"cpu\" ..."): a set one also gets a note, and the resolved input
  /// comments them out.
  std::vector<std::pair<std::string, std::string>> unread;
  /// The partial lists of a namelist (`Settings::partial`: `startPointVec = 2*0.5` with ndim 3,
  /// `proposalStartCovMat(1,2) = 0.5`) as the run lays them out, at their full length with NaN
  /// at the elements left unset (before their defaults are filled in): the resolved input
  /// shows these.
  std::vector<std::pair<std::string, std::vector<double>>> partial_layouts;
  /// Where the keys checked after the specifications are read (against the number of
  /// processes: `superchains`, `chains_per_rank`) were set, as a one-line message about them
  /// begins: `run.toml:7: key "superchains"` or `--set superchains=3: key "superchains"` (the
  /// key as the input spelled it). Keys left at their default, and specifications made in
  /// code, have none (`key_reference`).
  std::map<std::string, std::string, std::less<>> key_references;
};

/// How a message names the key `key` of `st`: as the input spelled it when the input sets
/// it; else, when the input is a namelist, by ParaDRAM's name `paradram` (a namelist's user
/// knows `delayedRejectionCount`, not `delayed_rejection_count`); else `key`. Thread-safe.
std::string spec_name(const io::Settings& st, std::string_view key, std::string_view paradram);

/// The start of a one-line message about `key`'s value: `specs.key_references`' entry, else
/// `key "<key>"`. Thread-safe.
std::string key_reference(const SamplerSpecs& specs, std::string_view key);

/// Sorts one-line messages that begin with their origin into input order, as Schema::apply
/// orders its problems: an input file's lines ("run.toml:7: ...") by line, then the --set
/// overrides ("--set k=v: ..."), then the rest, each group in its given order (stable).
/// Thread-safe on distinct vectors.
void sort_in_input_order(std::vector<std::string>& messages);

/// Checks the covariance (or, with `correlation`, correlation) matrix `v` `[d, d]` row-major
/// of the input key `key` of `settings`: finite, symmetric (to 1e-12 of its largest element),
/// positive definite, and for a correlation a unit diagonal, after its length (d x d values).
/// Nothing when `v` is empty.
/// Thread-safe. @throws herd::InputError in one line naming the key's origin and the element.
void check_matrix_key(const io::Settings& settings, const char* key, const std::vector<double>& v, std::size_t d,
                      bool correlation);

/// Reads the specifications from resolved settings and checks what depends on the
/// dimension `ndim` (vector lengths, box order, positive-definite inputs are checked by the
/// kernel). `variable_names` defaults to `default_names` (or "x1", "x2", ...); a shorter list is
/// padded with ParaMonte's default names SampleVariable<i> (i the 1-based dimension). An
/// `output_prefix` ending in '/' is a folder: the files are `<folder>/ParaDRAM_run_*`.
/// @throws herd::InputError with every problem found, one per line, each naming the key,
/// its value, and what was expected.
SamplerSpecs resolve_sampler_specs(const io::Settings& settings, int ndim,
                                   const std::vector<std::string>& default_names = {});

/// Bytes that one thread of `summarize_all` holds per draw of the quantity it summarizes in
/// memory (the gathered draws 8, the split buffer 8, the sort records 12; docs/batched.md,
/// "Where the post-processing's memory goes").
inline constexpr std::size_t kDiagnosticsScratchBytes = 28;
/// Bytes per draw of a quantity summarized in memory that the threads of `summarize_all`
/// share (the normal-quantile table).
inline constexpr std::size_t kDiagnosticsSharedBytes = 8;
/// Bytes per draw of a quantity summarized out of core (past diagnostics_rank_budget(): the
/// shared z table, 1.25, each thread's packed indicators and the spill files' bookkeeping;
/// measured 3.4 with 2 threads).
inline constexpr std::size_t kDiagnosticsStreamedBytes = 4;
/// Bytes of a batched herd-sample process before any chain: its code, libraries and HDF5's
/// caches (peak RSS 25.5 MB measured for 200 chains x 100 draws of a 3-D normal).
inline constexpr std::size_t kBatchedProgramBytes = std::size_t{24} << 20;

/// The threads `summarize_all` runs on for `threads` asked (0: one per core) and
/// `quantities` quantities: min(threads, quantities), at least 1. Thread-safe.
std::size_t diagnostics_threads_used(std::size_t threads, std::size_t quantities);

/// Bytes of memory a run of `specs` holds at its peak on rank 0 (an estimate, as a double so
/// that no input overflows it). The serial kernel: the chains in memory (compact chains),
/// the copies made for the outputs and diagnostics, and the proposal covariances. A batched
/// device (`device` "cpu_batched" or "cuda"; its draws wait in a scratch file on disk):
/// the program itself (kBatchedProgramBytes), each chain's kernel state and bookkeeping,
/// and the larger of the sampling's blocks of draws (256 draws per chain) and the
/// post-processing's summaries, one quantity per thread on the
/// `diagnostics_threads_used(diagnostics_threads, ndim)` threads (as
/// `SampleRunOptions::diagnostics_threads`, 0: one per core), in memory or, past
/// diagnostics_rank_budget(), out of core; docs/batched.md "What max_memory counts" gives
/// the terms and the measurements they follow. `ranks` is the number of processes.
/// Thread-safe (reads diagnostics_rank_budget()).
double sampler_memory_need(const SamplerSpecs& specs, int ndim, int ranks, std::size_t diagnostics_threads = 0);

/// Refuses a run whose `sampler_memory_need` exceeds `specs.max_memory` (when > 0) or the
/// memory available on this machine. @throws herd::InputError naming chain_size,
/// chains_per_rank and ndim and what to change.
void check_sampler_memory(const SamplerSpecs& specs, int ndim, int ranks, std::size_t diagnostics_threads = 0);

/// The refinement's options of a run: `specs.sample_refinement_method` read by
/// parse_refinement_method (estimator, chain and summary qualifiers) and
/// `specs.sample_refinement_count` as max_rounds. Thread-safety: reentrant.
/// @throws herd::InputError naming the method and what is wrong, or a negative count.
RefinementOptions to_refinement_options(const SamplerSpecs& specs);

/// The kernel options for the specifications (start point drawn when
/// `random_start_point`, from the seed's start-point stream of `chain_id`). The start
/// proposal covariance follows ParaDRAM (ParaMonte 1.x `proposalStartCovMat`): `proposal_cov`,
/// or `proposal_cor` scaled by `proposal_std`, or diag(`proposal_std`^2), or the identity,
/// always multiplied by scale_factor^2 (gelman: 2.38^2/ndim); the kernel uses the result
/// as is (`DramOptions::proposal_start_cov`/`proposal_start_std`).
/// @throws herd::InputError on inconsistent values.
DramOptions to_dram_options(const SamplerSpecs& specs, int ndim, std::uint32_t chain_id = 0);

/// Refuses `superchains` (when >= 2) that do not split the run's chains (`ranks` x
/// `chains_per_rank`) into equal groups of at least 2 contiguous global chain ids.
/// @throws herd::InputError naming the key, its value and the chain count.
void check_superchains(const SamplerSpecs& specs, int ranks);

/// The chain whose start-point stream chain `chain_id` (a global id among `chains`) starts
/// from: itself, or with `random_start_point_scope = "superchain"` the first chain of its
/// superchain (chains / superchains contiguous ids each), so that the M chains of a
/// superchain share one random start and the K superchains start apart, as nested R-hat
/// (Margossian et al. 2024) assumes. Pass the result to `to_dram_options`. Pure.
std::uint32_t start_point_chain(const SamplerSpecs& specs, std::uint32_t chain_id, std::int64_t chains);

}  // namespace herd::mcmc
