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
///                         atomically at the end.
/// Thread-safety: one run per thread; HDF5 calls are serialised by the caller.

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <utility>
#include <vector>

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
};

/// Statistics of one reported quantity over the post-burn-in verbose chain.
struct QuantitySummary {
  std::string name;
  DiagnosticSummary stats;
};

/// The outcome of a run.
struct SampleRunSummary {
  std::vector<std::string> paths;  ///< files written
  DramResult kernel;               ///< the kernel's counters
  std::int64_t compact_size = 0;   ///< unique states
  std::int64_t verbose_size = 0;   ///< steps (sum of weights)
  std::int64_t burnin = 0;         ///< compact index where the posterior starts
  std::int64_t posterior_draws = 0;
  std::int64_t sample_size = 0;    ///< rows of the refined sample
  std::vector<QuantitySummary> summary;  ///< variables, then derived quantities
  double seconds = 0.0;
};

/// The output files a run with these specifications writes (for overwrite checks).
std::vector<std::string> output_paths(const SamplerSpecs& specs);

/// Checks that no output file exists unless `specs.overwrite`, and creates missing folders.
/// @throws herd::InputError naming an existing file; herd::IoError when a folder cannot be made.
void prepare_outputs(const SamplerSpecs& specs);

/// Runs the sampler and writes every output. Call `prepare_outputs` first.
/// @throws herd::InputError (bad specifications for this target), herd::NumericalError
/// (+inf log density), herd::IoError; what was sampled before an error is flushed to the
/// chain file.
SampleRunSummary run_paradram(const SamplerSpecs& specs, const SampleTarget& target,
                              const SampleRunOptions& options);

/// The summary table printed at the end of a run: one row per quantity with mean, sd, q5,
/// q50, q95, MCSE of the mean and sd, bulk and tail ESS, R-hat.
std::string format_summary_table(const std::vector<QuantitySummary>& rows);

}  // namespace herd::mcmc
