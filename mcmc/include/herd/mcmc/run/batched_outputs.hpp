#pragma once
/// @file batched_outputs.hpp
/// The outputs of a batched run (`device = "cpu_batched" | "cuda"`; docs/batched.md
/// "Using it from herd-sample"), written by rank 0:
///  - `<prefix>.h5`: `posterior/<variable>` `[chain, draw]` (a vector `beta[1..K]` as one
///    variable `beta[chain, draw, beta_dim_0]`), `sample_stats/lp` `[chain, draw]`, netCDF
///    scales `chain` (global ids) and `draw`, derived quantities beside the variables, the
///    run's facts as root attributes and the resolved input as attributes of `input`
///    (`BatchedGatherSink` streams the draws; the rest is written at the end);
///  - `<prefix>_report.txt` (`batched_text_report`) and `<prefix>_report.html`
///    (`write_batched_html_report`), and the summary table on the terminal
///    (`print_batched_summary`).
/// Host only. Not thread-safe (HDF5 is the serial build).

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "herd/core/communicator.hpp"
#include "herd/io/hdf5.hpp"
#include "herd/mcmc/batched_dram.hpp"
#include "herd/mcmc/paradram_run.hpp"
#include "herd/mcmc/run/batched_record.hpp"
#include "herd/mcmc/sampler_specs.hpp"

namespace herd::mcmc {

/// What the convergence warnings of a batched run say to run longer.
inline constexpr const char* kBatchedRunLonger = "raise warmup, so that the proposal adapts, and chain_size";

/// Gathers each block of draws from the ranks of `comm` to rank 0 (global chain order:
/// rank-major; every rank runs the same number of chains), which streams it into chunked
/// datasets `posterior/<variable>` and `sample_stats/lp` `[chain, draw]` of `file` and keeps
/// it, with the block's per-draw statistics (`write_stats`), in a `BatchedDrawStore` (a
/// scratch file in `scratch_dir`, for the diagnostics and `write_batched_serial_groups`,
/// which read it a quantity or a group of chains at a time). With one process the engine's
/// block is used as it is (no gathered copy). Collective: `write_block` and
/// `write_stats` on every rank in the same order. Rank 0 passes the open file, the other ranks null. With a draws
/// record (rank 0) every gathered block is appended to it, and a resumed run's first `replay` draws per chain are read
/// back from it at `begin` (in blocks of `block_draws`, as the engine wrote them). With
/// `write_posterior` false (`h5_posterior = "compact"`) rank 0 writes no `posterior` and no
/// `sample_stats` group and only keeps the draws in the store (and the record).
/// @throws herd::IoError when HDF5 or the record fails.
class BatchedGatherSink final : public BatchedDrawSink {
 public:
  /// `names`: the `ndim` variable names (column order of the draws).
  BatchedGatherSink(Communicator& comm, io::H5File* file, std::vector<std::string> names,
                    BatchedDrawRecord* record = nullptr, std::int64_t replay = 0, std::int64_t block_draws = 256,
                    bool write_posterior = true, std::string scratch_dir = {});
  ~BatchedGatherSink() override;
  BatchedGatherSink(const BatchedGatherSink&) = delete;
  BatchedGatherSink& operator=(const BatchedGatherSink&) = delete;

  void begin(std::int64_t m, std::uint32_t first, int d, std::int64_t draws) override;
  void write_block(std::int64_t first, std::int64_t n, const double* x, const double* lp) override;
  /// Gathers the block's statistics to rank 0, which records and keeps them.
  void write_stats(std::int64_t first, std::int64_t n, const BatchedDrawStats& stats) override;
  /// Rank 0: closes the datasets and attaches the `chain`, `draw` (and `<name>_dim_0`) scales.
  void finish() override;

  /// Rank 0, after `begin`: every chain's draws and statistics (the other ranks: none, a
  /// herd::InputError).
  BatchedDrawStore& draws();

 private:
  void replay_record(std::int64_t draws);
  void store(std::int64_t first, std::int64_t n, const double* x, const double* lp);
  hid_t create(const io::H5Group& g, const std::string& name, std::int64_t draws, std::size_t k = 0);
  void write(hid_t id, std::int64_t first, std::int64_t n, const double* data, std::size_t k = 0) const;
  void close_sets();

  Communicator& comm_;
  io::H5File* file_;
  std::vector<std::string> names_;
  std::vector<ArvizVariable> vars_;
  BatchedDrawRecord* record_;
  std::int64_t replay_, block_draws_;
  bool write_posterior_;
  std::string scratch_dir_;
  std::unique_ptr<BatchedDrawStore> store_;
  io::H5Group post_, stats_;
  std::vector<hid_t> ids_;
  std::int64_t m_ = 0, total_ = 0;
  int d_ = 0;
  std::vector<double> gx_, glp_, galpha_, gmeasure_;
  std::vector<std::uint8_t> gaccepted_, gstage_;
};

/// The run's counters over every rank of `comm` (collective): acceptance rate averaged,
/// NaN/out-of-domain and per-stage acceptances summed, adaptive updates and factor failures
/// summed for per-chain adaptation (pooled updates are shared: rank 0's), the wall time the
/// slowest rank's, chain-steps/s over all chains. `o` is this rank's options. The result is
/// meaningful on rank 0 only (`num_chains` = all chains).
BatchedDramResult reduce_batched_result(const BatchedDramResult& r, const BatchedDramOptions& o, Communicator& comm);

/// Superchains for nested R-hat when the input does not set them: the largest K in
/// {16, 8, 4, 2} dividing `chains` with at least two chains each (0: none). Pure.
std::size_t default_superchains(std::int64_t chains);

/// The posterior of a batched run as the reports show it: per quantity its summary row
/// (variables first, then derived quantities), the column of the `BatchedDrawStore` that
/// holds its draws `[chain, draw]`, its nested R-hat, and per variable the batched
/// diagnostics (nested R-hat over `superchains` contiguous superchains). No draws: the
/// outputs read them from the store a quantity at a time.
struct BatchedPosterior {
  std::vector<QuantitySummary> rows;
  std::vector<std::size_t> columns;             ///< [quantity] its column of the store
  std::vector<double> nested_rhat;              ///< [quantity] (NaN without superchains)
  std::vector<BatchedDiagnostics> diagnostics;  ///< [variable]
};

/// Summary rows and diagnostics of every variable of `draws` (`names`: `draws.ndim()`
/// names), with nested R-hat over `superchains` (0: none). The variables are spread over
/// `threads` threads (summarize_all, diagnostics.hpp; 0: one per core), each reading one
/// variable's draws from the store at a time (8 bytes per draw, and the diagnostics'
/// workspace, about 50 more); the numbers do not depend on `threads`. Thread-safe for
/// concurrent readers of `draws`. @throws herd::IoError (reading the store)
BatchedPosterior summarize_batched_draws(const BatchedDrawStore& draws, const std::vector<std::string>& names,
                                         std::size_t superchains, std::size_t threads = 0);

/// Derived quantities of `target` (those not named among `variable_names`) computed on every
/// draw, a group of chains at a time (`BatchedDrawStore::chain_group`), into new columns of
/// `draws`: written to `posterior/<name>` of `h5` (vectors with a `<name>_dim_0` scale, one
/// vector's elements at a time; not when `to_file` is false, `h5_posterior = "compact"`;
/// past diagnostics_rank_budget() computed and written 2^16 draws' worth of chains at a
/// time, so that nothing per draw is held)
/// and appended to `post` (a summary row, its column and nested R-hat over `superchains`
/// each). Nothing when the target has none. The summaries are spread over `threads` threads
/// as in `summarize_batched_draws` (the same numbers for any `threads`).
/// @throws herd::IoError
void add_batched_quantities(io::H5File& h5, const SampleTarget& target, const std::vector<std::string>& variable_names,
                            BatchedDrawStore& draws, BatchedPosterior& post, std::size_t superchains,
                            std::size_t threads = 0, bool to_file = true);

/// The facts of a finished batched run that its outputs state (rank 0).
struct BatchedRunFacts {
  const SamplerSpecs* specs = nullptr;
  const SampleTarget* target = nullptr;
  const SampleRunOptions* options = nullptr;
  BatchedDramOptions all_options;  ///< the run's options over all chains (num_chains = all, first id 0)
  BatchedDramResult totals;        ///< `reduce_batched_result`
  int processes = 1;
  std::size_t superchains = 0;                   ///< of nested R-hat (0: not computed)
  std::int64_t draws = 0;                        ///< thinned draws per chain
  const BatchedRestartRecord* record = nullptr;  ///< null without checkpoints
  double session_seconds = 0.0;                  ///< this invocation's wall time so far
};

/// Root attributes of the batched `.h5` (herd_version, sampler, device, target,
/// input_source, random_seed, description; `h5_posterior` = "compact" when the input says
/// so) and the group `input` with the resolved input as attributes. @throws herd::IoError
void write_batched_h5_attributes(io::H5File& h5, const BatchedRunFacts& facts);

/// The groups of the serial run's `.h5` (paradram_run.hpp) that a batched run fills from its
/// recorded draws, with the serial run's dataset names and dimensions:
///  - `chain_compact`: every chain's recorded (thinned) draws in compact form, runs of equal
///    consecutive draws merged: `step` (the proposal after which the draw was recorded,
///    warm-up included), `weight`, `log_density`, `state [compact_draw, variable]`, and with
///    several chains `chain` and `burnin [chains]` (0: the warm-up is not recorded);
///  - `sample`: each chain's sample of its recorded draws (`sample_size` evenly spaced draws,
///    every draw with sample_refinement_count = 0, else ParaDRAM's refinement, refinement.hpp),
///    in chain order: `lp`, the variables, `chain_id` with several chains;
///  - `diagnostics`: mean, sd, q5, q50, q95, mcse_mean, mcse_sd, ess_bulk, ess_tail, rhat of
///    every summary row of `post` (`variable` scale), `nested_rhat` (attribute `superchains`)
///    when `facts.superchains` >= 2, and for 2..16 chains ParaDRAM's pairwise KS table of the
///    samples (`ks_statistic`, `ks_p_value` `[ks_variable, chain_a, chain_b]`).
/// Also, from the per-draw statistics (`BatchedDrawStats`), with the serial run's dtypes:
/// `sample_stats`' accepted (u8), dr_stage (i32) and acceptance_probability (f64)
/// `[chain, draw]` (dr_stage and acceptance_probability 0 where accepted is 0; none with
/// `h5_posterior = "compact"`), and
/// `chain_compact`'s dr_stage, acceptance_probability and adaptation_measure (the row's
/// state's). @throws herd::IoError
/// Memory: the draws are read from `draws` a group of chains (`chain_group`) or one
/// variable at a time; what is kept over all chains is per chain a few counts and, with
/// ParaDRAM's refinement, the sample's rows (8 bytes each).
void write_batched_serial_groups(io::H5File& h5, const BatchedRunFacts& facts, const BatchedDrawStore& draws,
                                 const BatchedPosterior& post);

/// `<prefix>_report.txt` up to (not including) the phase times: the target and layout, the
/// resolved input, the run (`batched_report`), superchains, checkpoints, the summary
/// `table` and the convergence `warnings`, the outputs. Pure.
std::string batched_text_report(const BatchedRunFacts& facts, const BatchedPosterior& post, const std::string& table,
                                const std::string& warnings);

/// Writes `<prefix>_report.html` (posterior_report.hpp) when there is at least one draw,
/// reading the quantities' draws from `draws` one at a time (`fill_values`).
/// @throws herd::IoError
void write_batched_html_report(const BatchedRunFacts& facts, const BatchedPosterior& post,
                               const BatchedDrawStore& draws);

/// Writes `text` to `path` (never through a symbolic link). @throws herd::IoError
void write_text_output(const std::string& path, const std::string& text);

/// Prints the summary table, the one-line run summary, the warnings and the output files (as
/// the serial run lists them: `output_paths`) to the run's terminal (`options.terminal`, else
/// stdout) unless quiet or silent.
void print_batched_summary(const BatchedRunFacts& facts, const std::string& table, const std::string& warnings);

}  // namespace herd::mcmc
