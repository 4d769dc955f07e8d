#pragma once
/// @file diagnose_input.hpp
/// Input readers of `herd-diagnose`: text files of draws in one of four formats, recognised by
/// their header and never guessed (anything else is refused), and HDF5 datasets of shape
/// [chains, draws] or [chains, draws, ...] (flattened: params) (or every such dataset of a `posterior` group,
/// as ArviZ writes it). The HDF5 part uses the HDF5 C API directly (and its H5DS API for the
/// names of dimensions), not the io layer's readers (herd/io/hdf5.hpp).
///
/// Text formats (one file is one chain, except the first):
/// - draws CSV: one column per chain, one row per draw; no header, or a header of chain
///   names (`chain1,chain2,...`, `chain_1,...`); one file only;
/// - ParaDRAM chain file (`<prefix>_chain.txt` of herd or ParaMonte, compact or verbose): a
///   header with `SampleWeight` and `SampleLogFunc` (any case); the columns before
///   `SampleLogFunc` (ProcessID, DelayedRejectionStage, MeanAcceptanceRate,
///   AdaptationMeasure, BurninLocation, SampleWeight) are metadata and excluded; each row is
///   repeated `SampleWeight` times (the compact chain expanded to the Markov chain);
///   `SampleLogFunc` and the variables are diagnosed, burn-in included (a note names the
///   burn-in when the last row's BurninLocation is above 1);
/// - ParaDRAM sample file (`<prefix>_sample.txt`): a header whose first name is
///   `SampleLogFunc`, then the variables; each row is one draw;
/// - CmdStan CSV: `#` comment lines anywhere, a header with `lp__`; `lp__` is diagnosed (as
///   CmdStan's stansummary and R posterior do) and the other `name__` sampler columns
///   (accept_stat__, stepsize__, treedepth__, n_leapfrog__, divergent__, energy__) excluded;
///   the warm-up rows (`save_warmup = 1` or `true` in the configuration comments) are left
///   out as stansummary and ArviZ leave them out: the rows before the `# Adaptation
///   terminated` comment, else (an unadapted run) the first ceil(num_warmup / thin).
/// The delimiter of ParaDRAM files is the text between the header's first two names (ParaMonte's
/// outputDelimiter: a comma by default, or blanks); fields are trimmed.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace herd::apps {

/// One quantity's draws, `[chains, draws]` row-major: an owning block of doubles that is not
/// zeroed when allocated (every reader writes each element) and, from 2 MiB on, is 2 MiB
/// aligned and advised for transparent huge pages (Linux), so that its first touch takes
/// 512x fewer page faults. A released block of one size is kept for the next allocation of
/// that size (a few at most, process-wide), so reading the datasets of a file one after the
/// other reuses memory already touched instead of faulting in fresh pages. Move-only; a
/// buffer is used by one thread at a time; allocation and release are thread-safe.
class DrawsBuffer {
 public:
  DrawsBuffer() = default;
  /// `n` uninitialised doubles. @throws std::bad_alloc
  explicit DrawsBuffer(std::size_t n);
  ~DrawsBuffer() { reset(); }
  DrawsBuffer(const DrawsBuffer&) = delete;
  DrawsBuffer& operator=(const DrawsBuffer&) = delete;
  DrawsBuffer(DrawsBuffer&& o) noexcept : data_(o.data_), size_(o.size_) {
    o.data_ = nullptr;
    o.size_ = 0;
  }
  DrawsBuffer& operator=(DrawsBuffer&& o) noexcept;
  double* data() { return data_; }
  const double* data() const { return data_; }
  std::size_t size() const { return size_; }
  double& operator[](std::size_t i) { return data_[i]; }
  double operator[](std::size_t i) const { return data_[i]; }
  std::span<const double> span() const { return {data_, size_}; }
  /// Releases the block (size() becomes 0).
  void reset() noexcept;

 private:
  double* data_ = nullptr;
  std::size_t size_ = 0;
};

/// One named quantity group: `params` quantities of `chains` x `draws` draws, each in its own
/// buffer `columns[p]` ([chains, draws] row-major: the layout the diagnostics take, so none
/// is copied again), with one name per parameter (params = 1 for a 2-D dataset or a CSV
/// file); a compact chain (herd-sample's `chain_compact`) also has integer weights
/// `[chains, draws]`: entry (c, t) stands for `weights[c * draws + t]` repeated draws (0:
/// padding), every chain's weights summing to the same verbose length (mcmc::DrawsView's
/// weighted form). `columns` is empty while an Hdf5Draws array is not read yet.
struct DrawsArray {
  std::vector<std::string> names;     ///< params names ("theta" or "theta[0]", "theta[1]", ...)
  std::vector<DrawsBuffer> columns;   ///< params buffers of [chains, draws] row-major
  std::vector<std::int64_t> weights;  ///< [chains, draws] row-major; empty: every entry is one draw
  std::size_t chains = 0, draws = 0, params = 0;
};

/// One kind of flag of the sampler's post-warm-up transitions (a divergence, a tree at the
/// maximum depth) as herd-diagnose judges it: the numbers behind its `WARNING:` line.
struct TransitionFlags {
  std::string source;  ///< where the flags come from: "divergent__", "sample_stats/diverging", ...
  /// Flagged transitions of each chain (the draws' chain order) among those judged; -1: the
  /// chain is not judged (a CmdStan file without max_depth, for the tree depth).
  std::vector<std::int64_t> per_chain;
  /// Tree depth only: each chain's max_depth from its CmdStan configuration block (0: not
  /// given); empty where the input does not say (an ArviZ file).
  std::vector<std::uint64_t> max_depth;
  std::size_t count = 0;        ///< flagged transitions judged, all chains
  std::size_t transitions = 0;  ///< transitions judged, all chains (the per cent's denominator)
  /// Flagged transitions in the rows after the draws kept (CmdStan chains cut to the
  /// shortest), not in `count`.
  std::size_t cut_off = 0;
  std::string message;  ///< the warning (no prefix), empty when none is given
};

/// E-BFMI per chain (Betancourt 2016) of the sampler's post-warm-up energies.
struct EbfmiValues {
  std::string source;             ///< "energy__" or "sample_stats/energy"
  std::vector<double> per_chain;  ///< E-BFMI per chain (NaN: undefined, not judged)
  std::vector<std::string> low;   ///< labels (SamplerDiagnostics::chains) of the chains below `threshold`
  double threshold = 0.3;         ///< below it a chain is warned of
  std::string message;            ///< the warning (no prefix), empty when none is given
};

/// What reading the input found besides the draws, as numbers (the notes say it in words).
struct InputFacts {
  /// "cmdstan", "paradram_chain", "paradram_sample", "draws_csv" or "hdf5".
  std::string format;
  std::string method;  ///< CmdStan's method (`sample` where the file does not say); empty for other formats
  /// The rows are independent draws of an approximation (variational, laplace, pathfinder).
  bool approximation = false;
  std::vector<std::size_t> warmup_left_out;  ///< CmdStan: warm-up rows left out per chain; empty for other formats
  /// Draws per chain as read (after the warm-up), before the chains are cut to the shortest;
  /// text files that are one chain each (empty for the others).
  std::vector<std::size_t> draws_read;
  std::size_t cut_to = 0;  ///< the draws per chain kept where the chains were cut to the shortest; 0: not cut
};

/// The sampler diagnostics of the input, as numbers (herd-diagnose's `--json-diagnostics`):
/// each kind is empty (std::nullopt) when the input has no such column or dataset, or (tree
/// depth of CmdStan files without max_depth) does not let it be judged.
struct SamplerDiagnostics {
  /// The chains' labels in the draws' order: a CmdStan or ParaDRAM chain's file; an ArviZ
  /// file's `chain` coordinate values (PyMC writes 0, 1, ...; others 1, 2, ...), else the
  /// 0-based index; a draws CSV's 0-based column index.
  std::vector<std::string> chains;
  std::optional<TransitionFlags> divergent, max_treedepth;
  std::optional<EbfmiValues> ebfmi;
  InputFacts input;  ///< what reading the input found (read_text fills it; hdf5_sampler_warnings leaves it)
};

/// Reads text files of draws (formats above): several files are several chains of one
/// ParaDRAM or CmdStan run (same format and column names), cut to the shortest chain (a
/// note in `notes`). Blank lines are ignored. A last data row without a newline at its end
/// (a file still being written, or left by a killed run, can end inside a number that still
/// parses) is left out, with a note. A draws CSV's quantity is named after the file's stem;
/// the other formats' quantities after their columns. `notes`: one line each, "note: ...".
/// `warnings`: one line each (no prefix), CmdStan's sampler diagnostics of the post-warm-up
/// transitions (divergent__ nonzero; treedepth__ at the max_depth its configuration gives;
/// E-BFMI of energy__ below 0.3): with chains of different lengths, those of the draws kept
/// (each chain's first rows, as many as the shortest's), the flags in the rows cut off told
/// apart. `sampler`: the same diagnostics as numbers, and what reading found (nothing when
/// null).
/// @throws herd::InputError on a missing/unreadable or binary file, a header of no known
///         format, files of different formats or columns, no data rows, a ragged row, a
///         field that is not a number, a weight that is not a positive integer or is above
///         10^9, files whose draws (a chain file's rows repeated SampleWeight times) and
///         diagnostics need more memory than allowed (set_max_memory; checked before the rows
///         are expanded), or CmdStan output of a method without draws (optimize, log_prob)
///         (each message names the file, and the line and column where there is one). NaN
///         and infinite draws are read as they are.
std::vector<DrawsArray> read_text(const std::vector<std::string>& paths, std::vector<std::string>* notes = nullptr,
                                  std::vector<std::string>* warnings = nullptr, SamplerDiagnostics* sampler = nullptr);

/// Whether `path` is an HDF5 file (by its signature).
bool is_hdf5(const std::string& path);

/// The sampler's own diagnostics that an ArviZ InferenceData file (netCDF-4 / HDF5) keeps in
/// its `sample_stats` group, which holds the post-warm-up transitions (ArviZ puts the
/// warm-up's in `warmup_sample_stats`): `diverging` (PyMC, NumPyro, ArviZ's from_cmdstan)
/// and `reached_max_treedepth` (PyMC), flags [chain, draw] (booleans, integers or floats),
/// as warning lines in the words read_text gives CmdStan's divergent__ and treedepth__
/// (no prefix; one per kind, only when some are set), and E-BFMI below 0.3 per chain of
/// `energy` (Betancourt 2016), its chains named by the labels of the file's `chain` coordinate
/// (the dimension scale on the dataset's chain axis, as xarray writes it) where it has one,
/// else counted from 0. Each must have the posterior's shape [`chains`, `draws`] (or
/// [`draws`, `chains`] where its dimension names are (draw, chain)):
/// another shape, and an E-BFMI that cannot be computed, get a note in `notes` ("note: ...")
/// and are not judged. Empty when the file has none, or cannot be opened (Hdf5Draws says
/// why). `sampler`: the same diagnostics as numbers, and the chains' labels (nothing when
/// null). Thread-safety: HDF5 calls; not concurrently with other HDF5 use.
/// @throws herd::InputError when such a dataset is not numbers or flags, or unreadable.
std::vector<std::string> hdf5_sampler_warnings(const std::string& path, std::size_t chains, std::size_t draws,
                                               std::vector<std::string>& notes, SamplerDiagnostics* sampler = nullptr);

/// The draws of an HDF5 file, read on demand, array by array, by the threads that need them.
///
/// Which datasets: the dataset `dataset` when not empty (rank 2 or more), else every dataset
/// of rank 2 or more in the group `posterior` (rank-1 coordinate datasets are skipped), else
/// (a herd-sample file written with `h5_posterior = "compact"`) the group `chain_compact`:
/// `state` [n, d] with `weight` [n], `variable` [d], `derived_quantities` [n, q] with
/// `derived_quantity` [q] when present, `chain` [n] and `burnin` [chains] (or
/// the group's attribute `burnin`), each chain's post-burn-in rows cut to the shortest
/// chain's verbose length as herd-sample cuts its `posterior`, the variables grouped and
/// ordered as that group's datasets (weighted arrays: the same diagnostics as the verbose
/// file of the same run), else the only dataset of the root group. The datasets of
/// `posterior` come in the group's link creation order when it tracks it (netCDF-4 and herd's
/// files do), else in name order; in a file herd-sample wrote, those of its recorded name list
/// (below) first, in that list's order (its summary table's: x1, x2, ..., x10, not HDF5's
/// name order x1, x10, x2). Parameters are named as ArviZ names them: a dataset `theta`
/// [chains, draws] is `theta`, the elements of `theta` [chains, draws, K] are
/// `theta[0]`..`theta[K-1]` (its 0-based coordinate). In a file herd-sample wrote (the root
/// attribute `herd_version`), the datasets that its recorded name list
/// (`diagnostics/variable`, else `chain_compact/variable`) names take herd-sample's names, as
/// its summary table has them: the elements of `beta` [chains, draws, 4] are `beta[1]`..`beta[4]`.
///
/// Dimension names: a dataset with HDF5 dimension scales attached (netCDF-4, h5netcdf, so
/// xarray's and ArviZ's files, and herd's) is read by their names: (chain, draw, ...) as it
/// is, (draw, chain, ...) transposed; one whose first two dimensions have other names, e.g.
/// herd-sample's `chain_compact/state` (compact_draw, variable), is refused naming them. A
/// dataset without names on its first two dimensions is [chains, draws, ...].
///
/// How: the constructor lists the arrays and checks every dataset's type, rank, shape and
/// memory need, reading no draws (except `chain_compact`'s, read whole there). read(a) reads
/// dataset a in blocks of whole rows [chains, draws, all params] (whole chunks of a chunked
/// dataset) of about half a megabyte, each into a small staging buffer that stays in cache and
/// from there straight into the parameters' buffers; the threads that call read(a) meanwhile
/// share its blocks (HDF5 calls one at a time, the copies into the buffers in parallel), so a
/// thread reads a dataset while others compute on the previous one.
///
/// Errors come as if the datasets were read whole, in order: the first failing dataset's
/// error. NaN and infinite draws are read as they are (herd-diagnose gives such a parameter
/// NA statistics and a note).
/// Thread-safety: read() and check_in_order() may be called from any thread; arrays() is
/// safe to read while no read() writes the array read.
class Hdf5Draws {
 public:
  /// Opens `path` and lists its arrays (above). @throws herd::InputError on a missing file,
  /// dataset or group, a wrong rank, dimensions named other than (chain, draw, ...) or
  /// (draw, chain, ...), a non-numeric type, an empty dataset, a dataset larger
  /// than the memory allowed (set_max_memory), or (`chain_compact`) a weight below 1, a chain
  /// whose rows are not contiguous, a burn-in outside its chain or a NaN/Inf draw; when
  /// dataset k > 0 is refused, the datasets before it are read first and their errors
  /// (read() below) come first.
  Hdf5Draws(const std::string& path, const std::string& dataset);
  ~Hdf5Draws();
  Hdf5Draws(const Hdf5Draws&) = delete;
  Hdf5Draws& operator=(const Hdf5Draws&) = delete;

  /// The arrays in order, with names and shapes; an array's `columns` are filled by read().
  std::vector<DrawsArray>& arrays();

  /// Reads array `a` unless done, sharing its blocks with the other threads that read it,
  /// and returns when all of it is in. Blocking; thread-safe.
  /// @throws herd::InputError (to every caller, now and later) when a block cannot be read
  ///         or a draw is NaN/Inf (the first in storage order: "[chain c, draw t, param p]").
  void read(std::size_t a);

  /// read() of every array in order: throws the first array's error, if any.
  void check_in_order();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// The memory that one dataset's values may use (bytes; 0, the default: the memory
/// available on the machine). A dataset whose values (and the scratch the diagnostics use)
/// need more is refused with herd::InputError naming it and its shape, before anything is
/// read (an HDF5 file can declare a dataset of terabytes that holds no data); so are text
/// files whose draws and the diagnostics' workspace (set_diagnostics_threads) need more,
/// with a ParaDRAM chain file's rows repeated SampleWeight times, before they are (a few rows
/// of large weights expand to gigabytes). Not thread-safe (set it once, before reading).
void set_max_memory(std::uint64_t bytes);

/// The threads that will compute the diagnostics of read_text's draws (at least 1; the
/// default 1): each holds a workspace of up to about 96 bytes per draw of the quantity it
/// summarizes, counted in read_text's memory estimate. Not thread-safe (set it once, before
/// reading).
void set_diagnostics_threads(std::size_t threads);

}  // namespace herd::apps
