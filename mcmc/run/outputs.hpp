#pragma once
// What every engine's outputs share (private to herd::mcmc; the public part is declared in
// paradram_run.hpp): limits and file names, the root attributes and the `diagnostics` group
// of the `.h5`, the common part of the HTML report, and each chain's contribution to the
// outputs (columns, burn-in, refined sample).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "herd/io/hdf5.hpp"
#include "herd/mcmc/chain_sink.hpp"
#include "herd/mcmc/dram.hpp"
#include "herd/mcmc/ks_test.hpp"
#include "herd/mcmc/paradram_run.hpp"
#include "herd/mcmc/posterior_report.hpp"
#include "herd/mcmc/refinement.hpp"
#include "herd/mcmc/sampler_specs.hpp"

namespace herd::mcmc {
class BatchedDrawStore;
}  // namespace herd::mcmc

namespace herd::mcmc::detail {

/// Per-chain text files up to this many chains (DESIGN.md §4); beyond, the `.h5` only.
inline constexpr int kMaxTextChains = 64;
/// ParaDRAM's pairwise KS table up to this many chains.
inline constexpr int kMaxKsChains = 16;
/// Bytes per post-burn-in state that the in-memory refinement holds at its peak, about (the
/// weights, 8, then the first thinning's kept states or the held rows): past
/// diagnostics_rank_budget() / this many states a file-backed chain is refined out of core
/// (refine_sample_out_of_core), whose memory does not grow with the chain.
inline constexpr std::size_t kRefinementBytesPerState = 16;
/// Below this mean acceptance rate the chain barely moved: the report and the terminal say so
/// (the terminal also during the run, once kHintSteps proposals are made).
inline constexpr double kLowAcceptance = 1e-3;
/// Proposals after which the terminal warns of a low acceptance rate during the run.
inline constexpr std::uint64_t kHintSteps = 20000;

/// The serial kernel's number of chains on `ranks` ranks: ranks x chains_per_rank for
/// multi_chain, else 1. Pure.
int chain_count(const SamplerSpecs& s, int ranks);
/// The chain file of chain `k` (1-based) of `chains`: `<prefix>_chain.txt|.bin`, or
/// `<prefix>_process_<k>_chain.txt|.bin` with several chains. Pure.
std::string chain_file_path(const SamplerSpecs& s, int chains, int k);
/// The sample file of chain `k` (1-based) of `chains`, named as `chain_file_path`. Pure.
std::string sample_file_path(const SamplerSpecs& s, int chains, int k);
/// The restart folder `<prefix>_restart`. Pure.
std::string restart_folder(const SamplerSpecs& s);

/// The list of a run's output files that every engine prints on the terminal after its
/// summary: the line "outputs:", then "  <path>" per path, each line ending in a newline.
/// Pure; thread-safe.
std::string outputs_list(const std::vector<std::string>& paths);

/// Writes the root attributes of a run's `.h5` that every engine writes, in this order:
/// herd_version, `sampler`, device (batched devices only), target, input_source,
/// random_seed, description, parallelization_model (the serial kernel only), then the group
/// `input` with the resolved input (`options.input_attributes`) as attributes.
/// Not thread-safe (HDF5). @throws herd::IoError
void write_h5_root_attributes(io::H5File& h5, const std::string& sampler, const SamplerSpecs& specs,
                              const SampleTarget& target, const SampleRunOptions& options);

/// Sets the attributes that ArviZ's InferenceData schema gives every group, on a group of
/// the `.h5` that ArviZ reads as one (`posterior`, `sample_stats`): `inference_library` =
/// "herd" and `inference_library_version` = herd's version. The schema's `created_at` is left
/// out on purpose: equal runs (and a resumed run and an uninterrupted one) give byte-identical
/// files. Not thread-safe (HDF5). @throws herd::IoError
void write_arviz_group_attributes(io::H5Group& g);

/// Sets the attribute `long_name` (the netCDF/CF description, shown by xarray) on each of the
/// datasets `lp`, `accepted`, `dr_stage` and `acceptance_probability` that `stats` (a
/// `sample_stats` group) holds: what each value means, and that `acceptance_probability` is
/// not ArviZ's `acceptance_rate`. Call it after the datasets are written. Not thread-safe
/// (HDF5). @throws herd::IoError
void describe_sample_stats(io::H5Group& stats);

/// What the `.h5`'s `diagnostics` group of every engine holds: a view of the caller's
/// figures, which must outlive the `write_h5_diagnostics` call.
struct H5DiagnosticsData {
  /// One row per quantity (variables, then derived quantities): the `variable` scale and
  /// the datasets mean, sd, q5, q50, q95, mcse_mean, mcse_sd, ess_bulk, ess_tail, rhat.
  std::span<const QuantitySummary> summary;
  /// Nested R-hat per quantity (same length as `summary`); empty: no `nested_rhat`.
  std::span<const double> nested_rhat;
  std::size_t superchains = 0;  ///< the attribute `superchains` of `nested_rhat`
  /// ParaDRAM's pairwise KS tests, `[variable][chain a * chains + chain b]`; empty: no
  /// `ks_statistic` / `ks_p_value`.
  std::span<const std::vector<KsResult>> ks;
  std::size_t chains = 0;      ///< chains of the KS table
  std::string_view ks_tested;  ///< the attribute `tested` of the KS datasets: which draws were tested
};

/// Writes the group `diagnostics` of `h5` (the same for the serial, multi-chain, fork-join
/// and batched engines): the string scale `variable` [quantity] and the summary datasets
/// `[variable]` (f64); `nested_rhat` [variable] with the int64 attribute `superchains` when
/// given; and when given the bare dimensions `ks_variable`, `chain_a`, `chain_b` and
/// `ks_statistic`, `ks_p_value` `[ks_variable, chain_a, chain_b]` (f64) with the string
/// attribute `tested`. Not thread-safe (HDF5). @throws herd::IoError, herd::InputError when
/// `nested_rhat` or a KS row has the wrong length.
void write_h5_diagnostics(io::H5File& h5, const H5DiagnosticsData& data);

/// The parts of `<prefix>_report.html` (posterior_report.hpp) that every engine fills alike:
/// the title (from the description), the subtitle ("herd <version>, <sampler>; target: ...;
/// input: ..."), the quantities' names and summary, the draws' shape (`chains` x `draws`),
/// the sampled coordinates (`target.ndim`), the mean acceptance rate, the `start_covariance`
/// `[d, d]` and the resolved input. The caller adds the draws (`values` or `fill_values`),
/// the engine's facts, history, final covariances and notes, then writes the report
/// (`write_posterior_report`). Pure.
PosteriorReportData html_report_data(const SamplerSpecs& specs, const SampleTarget& target,
                                     const SampleRunOptions& options, std::string_view sampler,
                                     const std::vector<QuantitySummary>& summary, std::size_t chains, std::size_t draws,
                                     double acceptance_rate, std::vector<double> start_covariance);

/// Writes a report file `path` holding `text` (never through a symbolic link): the
/// `_report.txt` of every engine. Not thread-safe for one path.
/// @throws herd::IoError "cannot write|close "<path>": <the system's reason>"
void write_report_file(const std::string& path, const std::string& text);

/// One reported quantity: a sampled coordinate (its values are the chain's points) or a
/// derived quantity (its values are in ChainOutputs::derived).
struct Column {
  std::string name;
};

/// The derived quantities' values on the compact states of one chain, `[quantity][state]`,
/// computed once after sampling. Beside a file-backed chain they go to an unlinked scratch
/// file in the chain's scratch folder (quantity after quantity, 8 bytes per state and
/// quantity), so that the resident memory does not grow with the chain; beside an in-memory
/// chain they are held in memory. Read through `DerivedReader`. Movable, not copyable. Once
/// made, any number of threads may read it, each through its own DerivedReader.
class DerivedColumns {
 public:
  /// No derived quantities.
  DerivedColumns() = default;
  /// Quantities `keep` (indices into `target.quantity_names`) of every state of `memory`,
  /// from `target.quantities` called on this thread, state by state in order. Memory: about
  /// 1 MiB of buffer while computing (file-backed), else 8 bytes per state and quantity.
  /// @throws herd::IoError naming the scratch file (cannot create or write it)
  DerivedColumns(const SampleTarget& target, const std::vector<std::size_t>& keep, const MemoryChainSink& memory);
  ~DerivedColumns();
  DerivedColumns(const DerivedColumns&) = delete;
  DerivedColumns& operator=(const DerivedColumns&) = delete;
  /// Moves (the scratch file too).
  DerivedColumns(DerivedColumns&& o) noexcept;
  /// Moves (the scratch file too).
  DerivedColumns& operator=(DerivedColumns&& o) noexcept;

  std::size_t count() const { return nq_; }  ///< quantities
  std::size_t size() const { return n_; }    ///< states
  bool file_backed() const { return fd_ >= 0; }
  /// Bytes held in memory (0 when file-backed).
  std::size_t resident_bytes() const { return values_.capacity() * sizeof(double); }

 private:
  friend class DerivedReader;
  [[noreturn]] void fail(const char* what) const;
  std::size_t nq_ = 0, n_ = 0;
  int fd_ = -1;
  std::string path_;
  std::vector<double> values_;  ///< in memory: [quantity][state]
};

/// Reads a DerivedColumns: file-backed, each quantity asked for through a buffer of a block of
/// states (64 KiB for one quantity, down to 4 KiB each for many), loaded when a state outside
/// it is asked for (reading in increasing order reads the file once). One reader per thread;
/// the columns must outlive it.
class DerivedReader {
 public:
  explicit DerivedReader(const DerivedColumns& columns);
  /// Quantity `q`'s value on state `i`. @throws herd::IoError naming the scratch file
  double value(std::size_t q, std::size_t i) {
    const DerivedColumns& c = *cols_;
    if (c.fd_ < 0) return c.values_[q * c.n_ + i];
    if (i / per_ != block_[q]) load(q, i / per_);
    return buf_[q][i % per_];
  }

 private:
  void load(std::size_t q, std::size_t b);
  const DerivedColumns* cols_;
  std::size_t per_ = 1;                   ///< states per block
  std::vector<std::size_t> block_;        ///< [quantity] the block in its buffer (SIZE_MAX: none)
  std::vector<std::vector<double>> buf_;  ///< [quantity] its buffer (allocated at the first read)
};

/// The compact rows of a chain's sample, in increasing order, each repeated by its weight in
/// the sample: either held (`rows`: the refined sample, `sample_size` draws), or every
/// post-burn-in draw (`sample_refinement_count = 0`): states [first, end) of the chain, each
/// as often as its recorded weight, read back from the chain instead of held (8 bytes per draw
/// less), or a refined sample in a scratch file (`of_records`: refine_sample_out_of_core's
/// states, read back block by block). Copies share the records. Not thread-safe to modify;
/// `for_each` may run on several threads at once.
class SampleRows {
 public:
  /// An empty sample.
  SampleRows() = default;
  /// The rows `rows` (increasing).
  explicit SampleRows(std::vector<std::size_t> rows) : rows_(std::move(rows)), size_(rows_.size()) {}
  /// Every draw of states [first, end) of a chain whose weights there sum to `draws`.
  static SampleRows every_draw(std::size_t first, std::size_t end, std::size_t draws) {
    SampleRows s;
    s.all_ = true;
    s.first_ = first;
    s.end_ = end;
    s.size_ = draws;
    return s;
  }
  /// The states `records` (indices increasing, relative to state `first` of the chain), each
  /// repeated by its weight there.
  static SampleRows of_records(std::size_t first, StateRecords records) {
    SampleRows s;
    s.first_ = first;
    s.size_ = static_cast<std::size_t>(records.total_weight());
    s.records_ = std::make_shared<const StateRecords>(std::move(records));
    return s;
  }
  std::size_t size() const { return size_; }  ///< rows of the sample (draws)
  bool empty() const { return size_ == 0; }
  /// Bytes held in memory.
  std::size_t resident_bytes() const { return rows_.capacity() * sizeof(std::size_t); }
  /// Calls `f(row)` for each row in order, `chain` being the chain the rows are of (its
  /// weights are read for every_draw). @throws herd::IoError (the chain's scratch file)
  template <class F>
  void for_each(const MemoryChainSink& chain, F&& f) const {
    if (records_) {
      StateRecords::Reader rd(*records_, false);  // the indices and weights only
      for (std::size_t k = 0; k < records_->size(); ++k) {
        const std::size_t row = first_ + rd.index(k);
        for (std::int64_t c = rd.weight(k); c > 0; --c) f(row);
      }
      return;
    }
    if (!all_) {
      for (std::size_t r : rows_) f(r);
      return;
    }
    ChainReader weight(chain, kWeightColumn);
    for (std::size_t i = first_; i < end_; ++i)
      for (std::int64_t k = weight.weight(i); k > 0; --k) f(i);
  }

 private:
  std::vector<std::size_t> rows_;
  std::shared_ptr<const StateRecords> records_;  ///< of_records
  bool all_ = false;
  std::size_t first_ = 0, end_ = 0, size_ = 0;
};

/// Everything a chain contributes to the outputs, computed on rank 0.
struct ChainOutputs {
  std::vector<Column> columns;  ///< variables, then derived quantities (names)
  DerivedColumns derived;       ///< the derived quantities' values (columns [d, ...))
  std::size_t post_draws = 0;   ///< draws of the verbose chain after burn-in
  std::int64_t burnin = 0;      ///< compact index where the posterior starts
  SampleRows sample_rows;       ///< compact rows of the refined sample (repeated by weight)
  RefinedSample refined;        ///< the refinement's rounds (empty unless refined; index and weight
                                ///< cleared once sample_rows holds them)
};

/// The columns, burn-in (the kernel's, clamped to the chain), post-burn-in verbose length and
/// refined sample of one chain `memory` with the kernel's result `kr`. Calls the target's
/// quantities (from this thread). Memory: the refined sample's rows, and for an in-memory
/// chain 8 bytes per compact state and derived quantity (beside a file-backed chain they go
/// to a scratch file: DerivedColumns). @throws what `refine_sample` throws, herd::IoError
ChainOutputs chain_outputs(const SamplerSpecs& specs, const SampleTarget& target, const MemoryChainSink& memory,
                           const DramResult& kr);

/// Quantity `k`'s value on compact state `i` of a chain: coordinate k of the state read by
/// `chain` (a reader of its points, all or coordinate k) for k < `d`, else derived quantity
/// k - d read by `derived` (a reader of the chain's ChainOutputs::derived).
/// @throws herd::IoError (the scratch files)
inline double compact_value(ChainReader& chain, DerivedReader& derived, std::size_t d, std::size_t k, std::size_t i) {
  return k < d ? chain.x(i, k) : derived.value(k - d, i);
}

/// Whether a batched run's post-processing reads the draw store in blocks (streamed views,
/// groups of chains) instead of whole columns: past diagnostics_rank_budget(), as the serial
/// runs' diagnostics (diagnostics_out_of_core of its chains x draws). Pure.
bool batched_streamed(const BatchedDrawStore& draws);

/// Chains per group that the streamed batched post-processing reads or writes at a time, for
/// `entries_per_chain` entries per chain (draws, or draws x a vector's elements): 2^16
/// entries' worth (512 KiB of doubles), at least one chain. Pure.
std::size_t streamed_chain_group(std::size_t entries_per_chain);

}  // namespace herd::mcmc::detail
