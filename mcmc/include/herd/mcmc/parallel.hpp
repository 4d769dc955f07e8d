#pragma once
/// @file parallel.hpp
/// Parallel DRAM chains over a `Communicator` (MPI ranks) and threads, exact restart from
/// checkpoints, and fault handling (DESIGN.md §4; ParaDRAM's parallelism models,
/// Shahmoradi & Bagheri 2020).
///
/// - `run_multi_chain`: ParaDRAM's `multiChain` model. `chains_per_rank` independent
///   chains per rank, on the rank's threads; chain `rank * chains_per_rank + i` is the
///   global id (its RNG stream), so every rank/thread layout of the same total gives
///   bit-identical chains. Rank 0 gathers the compact chains.
/// - `run_fork_join`: ParaDRAM's `singleChain` model. In each round every rank evaluates
///   the log density of the next stage-1 proposal (numbers k + rank) from the same state;
///   every rank then replays the serial kernel on these values, so the first acceptance in
///   rank order wins, the proposals after it are discarded (their numbers are used again by
///   the next round, as the serial chain uses them), and a round never crosses an
///   adaptation boundary. The chain is bit-identical to the serial chain with the same
///   seed (ParaDRAM only promises the same law).
/// - `run_resumable`: one chain with an append-only compact chain file and an atomic
///   checkpoint (`io::CheckpointWriter`) every `period_steps` proposals or
///   `period_seconds`; running it again resumes from the checkpoint, truncating the chain
///   file back to the checkpointed length, and the outputs are byte-identical to an
///   uninterrupted run's. Resume cost is O(state), not O(chain length).
/// - Faults: `check_launch` (a foreign MPI launcher), `check_same_input` (different
///   inputs on different ranks), `abort_all_on_error` (an exception on one rank ends all).

#include <cstdint>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "herd/core/communicator.hpp"
#include "herd/core/faults.hpp"
#include "herd/io/checkpoint.hpp"
#include "herd/mcmc/chain_sink.hpp"
#include "herd/mcmc/diagnostics.hpp"
#include "herd/mcmc/dram.hpp"
#include "herd/mcmc/ks_test.hpp"
#include "herd/mcmc/refinement.hpp"

namespace herd::mcmc {

// --- Checkpoints of the kernel state ---------------------------------------------------

/// Adds every field of `s` to `w` as sections named `<prefix><field>`.
/// Thread-safety: as the writer's (one thread per writer).
void save_dram_state(io::CheckpointWriter& w, const DramState& s, std::string_view prefix = "dram.");

/// Reads a state written by `save_dram_state`.
/// @throws herd::IoError when a section is missing or has the wrong size.
DramState load_dram_state(const io::CheckpointReader& r, std::string_view prefix = "dram.");

/// A 64-bit FNV-1a hash of every option that changes a chain (all of `DramOptions`),
/// for the start-up comparison across ranks and for matching a checkpoint to its input.
std::uint64_t dram_options_hash(const DramOptions& o);

// --- Faults -----------------------------------------------------------------------------

// `launcher_process_count`, `check_launch`, `check_same_input` and `abort_all_on_error`
// live in the core layer (herd/core/faults.hpp); these names keep older callers compiling.
using herd::abort_all_on_error;
using herd::check_launch;
using herd::check_same_input;
using herd::launcher_process_count;

struct ResumableOptions;

// --- Multi-chain --------------------------------------------------------------------------

/// Outcome of `run_multi_chain`.
struct MultiChainRun {
  /// Rank 0: every chain, in global id order; other ranks: their own chains.
  std::vector<MemoryChainSink> chains;
  /// Summaries, same order as `chains`. For chains of other ranks only the scalar counters
  /// travel (proposals, chain_size, acceptance_rate, evaluations, nan_count,
  /// out_of_domain, adaptive updates, burn-in, seconds); covariances stay empty.
  std::vector<DramResult> results;
  int ranks = 1;            ///< ranks of the communicator
  int chains_per_rank = 1;  ///< chains run by each rank
  double seconds = 0.0;     ///< wall time of the run on this rank, gathering included
  /// Resumed chains (checkpointed runs): proposals the earlier invocations made, summed over
  /// all chains of all ranks, and their sampling seconds (the longest chain's, as of its
  /// checkpoint); 0 for a fresh start. Same on every rank.
  std::uint64_t proposals_before = 0;
  double seconds_before = 0.0;
};

/// Runs `comm.size() * chains_per_rank` independent chains; this rank runs global ids
/// `options.chain_id + rank * chains_per_rank + i`, on up to `threads` threads (0: one per
/// chain) when `thread_safe`, else one after the other. When `checkpoint_prefix` is
/// non-empty every chain runs through `run_resumable` with files
/// `<checkpoint_prefix>_<id>.chain` / `.ckpt` (so a rerun resumes), a checkpoint every
/// `checkpoint_period_steps` proposals (0: `ResumableOptions`'s default period of time);
/// each rank writes its own chains' files (a shared file system is assumed, as ParaDRAM's
/// multi-chain output does). `checkpoint_period_seconds` is the period of time (0: by
/// proposals only) and `overwrite` starts every chain afresh. `first_chain_tee`, when
/// given, also receives the records of this rank's first chain as they are made (progress
/// output; it is written from that chain's thread only). `start_points`, when not empty,
/// holds every chain's start point, `[comm.size() * chains_per_rank, d]` row-major in global
/// id order (offset by `options.chain_id`); empty: every chain starts at
/// `options.start_point`. With `scratch_dir` the chains are file-backed MemoryChainSinks
/// with their scratch files in that folder (while sampled, read back and gathered); else in
/// memory. Collective.
/// @throws as `DramSampler::run` (the first error of this rank's chains); a failure on
///   another rank is not reported here (wrap the call in `abort_all_on_error`).
MultiChainRun run_multi_chain(const DramOptions& options, const PointLogDensity& log_density, bool thread_safe,
                              Communicator& comm, int chains_per_rank, int threads = 0,
                              const std::string& checkpoint_prefix = "", std::int64_t checkpoint_period_steps = 0,
                              double checkpoint_period_seconds = 5.0, bool overwrite = false,
                              ChainSink* first_chain_tee = nullptr, std::span<const double> start_points = {},
                              const std::optional<std::string>& scratch_dir = std::nullopt);

/// Diagnostics across the chains of a multi-chain run (what a report adds for them).
struct MultiChainDiagnostics {
  std::size_t draws = 0;  ///< common verbose length per chain after burn-in (the cut)
  /// Per variable: mean, sd, quantiles, MCSE, bulk/tail ESS and R-hat over `[chains, draws]`.
  std::vector<DiagnosticSummary> summary;
  /// Per variable (only for 2..16 chains; else empty): ParaDRAM's pairwise two-sample KS
  /// table, `[chains, chains]` row-major (`ks_pairwise`), of the chains' refined samples
  /// (`refine_sample` with the given options on each post-burn-in compact chain, as herd-sample
  /// refines with the run's sample_refinement_method): nearly independent draws, as the test
  /// assumes.
  std::vector<std::vector<KsResult>> ks;
};

/// Cuts each chain's verbose chain after its burn-in (`burnin[c]`, a compact index) to the
/// common length of the shortest, then computes the diagnostics across chains
/// (`summarize`; `ks_pairwise` of the samples `refine_sample` makes with `refinement`, by
/// default ParaDRAM's BatchMeans-avg over the compact, then the verbose chain). Pure;
/// thread-safe.
/// @throws herd::InputError when the chains differ in dimension, `burnin` has the wrong size,
///   or a chain has no draw after its burn-in.
MultiChainDiagnostics multi_chain_diagnostics(const std::vector<MemoryChainSink>& chains,
                                              const std::vector<std::int64_t>& burnin,
                                              const RefinementOptions& refinement = {});

// --- Fork-join (single chain) -------------------------------------------------------------

/// Outcome of `run_fork_join`.
struct ForkJoinRun {
  DramResult result;                         ///< the chain's summary (same on every rank)
  std::int64_t rounds = 0;                   ///< fork-join rounds
  std::vector<std::int64_t> rank_accepted;   ///< stage-1 acceptances won by each rank's proposal `[size]`
  std::vector<std::int64_t> rank_proposals;  ///< proposals each rank's value decided `[size]`
  std::int64_t fallback_evaluations = 0;     ///< evaluations done by every rank (DR stages, start point)
  double eval_seconds = 0.0;                 ///< this rank's time in stage-1 log densities
  double comm_seconds = 0.0;                 ///< this rank's time in the per-round allgather
  double seconds = 0.0;                      ///< wall time
  /// Shahmoradi & Bagheri (2020)'s cyclic-geometric prediction of the speedup for the
  /// measured acceptance rate, the mean stage-1 evaluation time over ranks and the
  /// communication time per round (the smallest allgather time over ranks, since the others
  /// include waiting for slower evaluations) (`fork_join_predicted_speedup`).
  double predicted_speedup = 1.0;
  double mean_eval_seconds = 0.0;       ///< mean stage-1 log-density time over ranks
  double comm_seconds_per_round = 0.0;  ///< communication time per round used by the prediction
  bool resumed = false;                 ///< started from a checkpoint (`files` given)
  bool already_complete = false;        ///< the checkpoint says the run had finished: nothing done
  std::int64_t checkpoints = 0;         ///< checkpoints written by this call (rank 0)
  double checkpoint_seconds = 0.0;      ///< time spent in them (rank 0)
  /// Resumed: the proposals made and the sampling seconds spent by the earlier calls (as of
  /// the checkpoint resumed from); 0 for a fresh start. `seconds` is this call's.
  std::uint64_t proposals_before = 0;
  double seconds_before = 0.0;
};

/// Runs chain `options.chain_id` in the fork-join model on all ranks of `comm`; every rank
/// keeps the whole chain state and streams the compact chain to `sink` (pass a
/// `NullChainSink` on ranks that write nothing). The log density is called from this
/// thread only. Collective (every rank with the same options).
///
/// With `files` (resumable fork-join): rank 0 appends the compact chain to
/// `files->chain_path` and writes checkpoints at round boundaries, in the format of
/// `run_resumable` (so a serial run and a fork-join run over any number of ranks resume
/// each other's checkpoints); every rank reads the checkpoint at start and resumes from
/// the same state (a shared file system is assumed); `files->tee` is ignored (`sink`
/// receives the records). A completed checkpoint returns at once with `already_complete`
/// and `result` from the checkpoint (the log density is not called).
/// @throws as `DramSampler::run`; herd::Error naming the rank when the log density threw
///   there for a proposal the chain reached; as `run_resumable` for the files.
ForkJoinRun run_fork_join(const DramOptions& options, const PointLogDensity& log_density, Communicator& comm,
                          ChainSink& sink, const ResumableOptions* files = nullptr);

/// ParaDRAM's fork-join speedup model (Shahmoradi & Bagheri 2020): with acceptance rate
/// `p` the number of proposals a round decides is a geometric variable cut at `ranks`
/// (cyclic geometric), whose mean is (1 - (1 - p)^N) / p; a round costs one evaluation
/// (`eval_seconds`) plus the communication (`comm_seconds`), a serial step one
/// evaluation. Returns mean * eval / (eval + comm). Pure.
double fork_join_predicted_speedup(double p, int ranks, double eval_seconds, double comm_seconds);

// --- Restart ------------------------------------------------------------------------------

/// Files and period of a resumable run.
struct ResumableOptions {
  std::string chain_path;       ///< append-only compact chain (fixed-size binary records)
  std::string checkpoint_path;  ///< atomic checkpoint (state + chain file length)
  /// Proposals between checkpoints (0: by time only).
  std::int64_t period_steps = 0;
  /// Seconds of wall time between checkpoints (0: by steps only; both 0: only at the end).
  /// The default, 5 s, keeps the checkpoint cost (tens of ms for the fsyncs) under 1%.
  double period_seconds = 5.0;
  bool overwrite = false;  ///< start fresh even when a checkpoint exists
  /// When given, also receives every record as it is made (`begin`, `write`, `flush`),
  /// e.g. for progress output; after a resume only the new records. Not owned.
  ChainSink* tee = nullptr;
  /// Hooks for a file kept beside the chain file (herd-sample's streamed text chain):
  /// `on_checkpoint` adds its sections to every checkpoint (after the chain file is synced,
  /// before the commit); `on_resume` gets the checkpoint a run resumes from (not called for
  /// a fresh start or a complete checkpoint). Both optional; called on this thread.
  std::function<void(io::CheckpointWriter&)> on_checkpoint;
  std::function<void(const io::CheckpointReader&)> on_resume;
};

/// Outcome of `run_resumable`.
struct ResumableRun {
  DramResult result;
  bool resumed = false;  ///< started from a checkpoint
  /// The checkpoint says the run had finished: nothing done, `result` is the finished
  /// run's (from the checkpoint, `seconds` 0).
  bool already_complete = false;
  std::int64_t checkpoints = 0;     ///< checkpoints written by this call
  double checkpoint_seconds = 0.0;  ///< time spent in them (fsync of the chain file, state)
  /// Resumed: the proposals made and the sampling seconds spent by the earlier calls (as of
  /// the checkpoint resumed from; every checkpoint stores the total so far as
  /// `elapsed_seconds`); 0 for a fresh start. `result.seconds` is this call's wall time.
  std::uint64_t proposals_before = 0;
  double seconds_before = 0.0;
};

/// Runs one chain with checkpoints (see the file comment). Each checkpoint holds the CRC-32
/// of every MiB of the chain file it covers; a resumed run checks them before it appends
/// (herd::IoError naming the file and block on a mismatch). The chain file holds records of
/// 48 + 8 d bytes: u64 step, i64 weight, f64 log density, i32 DR stage, u32 chain id, f64
/// acceptance probability, f64 adaptation measure, f64 point[d] (little-endian; the layout of
/// `encode_chain_record`, chain_record.hpp, as in the binary chain file); read it with
/// `read_resumable_chain`. When a checkpoint for different options exists the run
/// refuses to resume. Thread-safety: one call per chain and file pair.
/// @throws herd::InputError (checkpoint of other options), herd::IoError, and as
///   `DramSampler::run`.
ResumableRun run_resumable(const DramOptions& options, const PointLogDensity& log_density,
                           const ResumableOptions& files);

/// Reads a chain file of `run_resumable` (`ndim` variables). @throws herd::IoError
MemoryChainSink read_resumable_chain(const std::string& path, int ndim);

/// As above, after checking the chain file's recorded part against the CRC-32s (one per
/// MiB of the file) that its checkpoint `checkpoint_path` holds; with `scratch_dir` the
/// chain is read into a file-backed MemoryChainSink whose scratch file is in that folder.
/// @throws herd::IoError naming the file and the first block that differs, or a
/// checkpoint without checksums (written by an earlier version of herd).
MemoryChainSink read_resumable_chain(const std::string& path, int ndim, const std::string& checkpoint_path,
                                     const std::optional<std::string>& scratch_dir = std::nullopt);

/// Reads the chain file of a `run_resumable` call that has just returned in this process
/// having sampled (not `already_complete`), without checking it against its checkpoint's
/// CRC-32s: this process wrote every byte of it, or checked the recorded part before it
/// appended (a resume), so a second check reads the file once more for nothing. A chain
/// file that comes from an earlier process (a complete record) goes through the checking
/// overload. With `scratch_dir` as there. @throws herd::IoError (unreadable, or not whole
/// records).
MemoryChainSink read_sampled_chain(const std::string& path, int ndim,
                                   const std::optional<std::string>& scratch_dir = std::nullopt);

}  // namespace herd::mcmc
