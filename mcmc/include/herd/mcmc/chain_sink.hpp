#pragma once
/// @file chain_sink.hpp
/// Streaming of compact MCMC chains (DESIGN.md §4 "chains are stored compactly"): the
/// sampler hands each unique state, with its integer weight, to a `ChainSink` when the
/// chain leaves it (and the current state when a run ends or stops on an error), so a
/// chain is never held whole in memory unless the sink chooses to.
///
/// Sinks provided: `MemoryChainSink` (vectors, or columns in a scratch file; read back through
/// `ChainReader`) and
/// `BinaryChainSink` (an append-only little-endian binary file: a 24-byte header, then
/// the records of chain_record.hpp). `read_binary_chain` reads such a file back.

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "herd/mcmc/chain_record.hpp"  // ChainRecord and its byte encoding

namespace herd::mcmc {

/// Receives the compact chain of one MCMC chain, in chain order.
/// Thread-safety: a sink is written by one chain, from one thread at a time; use one sink
/// per chain when chains run in parallel.
class ChainSink {
 public:
  virtual ~ChainSink() = default;
  /// Called once before the first record. @throws herd::IoError (file sinks)
  virtual void begin(std::uint32_t chain_id, int ndim) {
    (void)chain_id;
    (void)ndim;
  }
  /// Appends one record. @throws herd::IoError (file sinks)
  virtual void write(const ChainRecord& r) = 0;
  /// Makes everything written so far durable/visible (called at the end of a run and
  /// before an error propagates). @throws herd::IoError (file sinks)
  virtual void flush() {}
  /// Called by `DramSampler::step` every `kTickProposals` proposals of the chain, accepted or
  /// not: `proposals` made so far and `records` written so far. Lets a progress display
  /// move while a chain accepts nothing (no record is written then). Default: nothing.
  virtual void tick(std::uint64_t proposals, std::int64_t records) {
    (void)proposals;
    (void)records;
  }
  /// Called once, before `begin`, when the chain continues from a checkpoint instead of
  /// starting (`run_resumable`, `run_fork_join`, the resumable chains of
  /// `run_multi_chain`): the earlier invocations made `proposals` proposals and wrote
  /// `records` records, and the sink gets only the records after them. Lets a progress
  /// display count from there (this invocation's rate). Default: nothing.
  virtual void resume_at(std::uint64_t proposals, std::int64_t records) {
    (void)proposals;
    (void)records;
  }
  /// Proposals between two `tick` calls.
  static constexpr std::uint64_t kTickProposals = 4096;
};

/// A sink that discards records (benchmarks of the kernel alone).
class NullChainSink final : public ChainSink {
 public:
  /// Discards `r`.
  void write(const ChainRecord&) override {}
};

/// Hands every call to two sinks, `a` first (e.g. memory and progress output). Holds
/// references; thread-safety as the two sinks'.
class FanSink final : public ChainSink {
 public:
  /// Both sinks must outlive this one.
  FanSink(ChainSink& a, ChainSink& b) : a_(a), b_(b) {}
  /// Calls `begin` on both.
  void begin(std::uint32_t chain_id, int ndim) override {
    a_.begin(chain_id, ndim);
    b_.begin(chain_id, ndim);
  }
  /// Writes `r` to both.
  void write(const ChainRecord& r) override {
    a_.write(r);
    b_.write(r);
  }
  /// Flushes both.
  void flush() override {
    a_.flush();
    b_.flush();
  }
  /// Ticks both.
  void tick(std::uint64_t proposals, std::int64_t records) override {
    a_.tick(proposals, records);
    b_.tick(proposals, records);
  }
  /// Calls `resume_at` on both.
  void resume_at(std::uint64_t proposals, std::int64_t records) override {
    a_.resume_at(proposals, records);
    b_.resume_at(proposals, records);
  }

 private:
  ChainSink& a_;
  ChainSink& b_;
};

namespace detail {
class ChainStore;  // chain_sink.cpp: the file-backed columns of a MemoryChainSink

/// std::allocator whose value-initialisation (`resize`, `vector(n)`) leaves trivial elements
/// uninitialised: a buffer that is always written before it is read then costs neither a
/// memset nor the page faults of the pages never used. Same thread-safety as std::allocator.
template <class T>
struct UninitAllocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = UninitAllocator<U>;
  };
  UninitAllocator() = default;
  template <class U>
  UninitAllocator(const UninitAllocator<U>& /*other*/) noexcept {}  // NOLINT(google-explicit-constructor)
  /// Default-initialises (no zeroing for trivial types).
  template <class U>
  void construct(U* p) noexcept(std::is_nothrow_default_constructible_v<U>) {
    ::new (static_cast<void*>(p)) U;
  }
  /// Any other construction as std::allocator's.
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};
}  // namespace detail

/// Keeps the compact chain for the post-processing, in one of two modes:
///
/// - in memory (default constructor): the public column vectors below, states row-major
///   `[size, ndim]` (tests, small runs, chains built by hand or gathered over MPI);
/// - file-backed (`MemoryChainSink(scratch_dir)`): the columns go to an unlinked scratch file
///   in `scratch_dir` in blocks of `block_states()` states (each block column by column:
///   step, weight, log density, acceptance probability, adaptation measure, the ndim
///   coordinates, then the 32-bit DR stages: 44 + 8 ndim bytes per state); only the block
///   being filled (about 1 MiB) stays in memory, so the sink's resident memory does not grow
///   with the chain. The public vectors stay empty; read it through `ChainReader`.
///
/// `ChainReader` reads either mode (the post-processing uses it for both). Not thread-safe
/// while written; once written, any number of threads may read it, each through its own
/// `ChainReader`. Movable, not copyable in file-backed mode (copying one throws).
class MemoryChainSink final : public ChainSink {
 public:
  /// An in-memory sink.
  MemoryChainSink();
  /// A file-backed sink: its scratch file is created by `begin` (and unlinked at once: a
  /// kill frees it) in `scratch_dir` ("" = the current directory). `block_states` = states
  /// per block (0: about 1 MiB per block; tests use small blocks).
  explicit MemoryChainSink(const std::string& scratch_dir, std::size_t block_states = 0);
  ~MemoryChainSink() override;
  /// Copies an in-memory sink. @throws herd::Error for a file-backed one
  MemoryChainSink(const MemoryChainSink& o);
  /// As the copy constructor.
  MemoryChainSink& operator=(const MemoryChainSink& o);
  /// Moves (the scratch file too).
  MemoryChainSink(MemoryChainSink&& o) noexcept;
  /// Moves (the scratch file too).
  MemoryChainSink& operator=(MemoryChainSink&& o) noexcept;

  /// Records the chain id and dimension (keeps earlier records); file-backed, the first call
  /// creates the scratch file. @throws herd::IoError naming the file when it cannot be created
  void begin(std::uint32_t chain_id, int ndim) override;
  /// Appends `r` to the columns (file-backed: to the block in memory, which is written to the
  /// scratch file when full). @throws herd::IoError naming the scratch file when a write fails
  /// (a full disk)
  void write(const ChainRecord& r) override;

  /// Number of unique states.
  std::size_t size() const;
  /// Whether the columns go to a scratch file (else to the public vectors).
  bool file_backed() const { return pending_; }
  /// File-backed: the folder of its scratch file ("" = the current directory); in memory: "".
  const std::string& scratch_dir() const { return store_dir_; }
  /// File-backed: states per block of the scratch file; in memory: 0.
  std::size_t block_states() const;
  /// Bytes this sink holds in memory: the vectors' capacities, plus (file-backed) the block
  /// being filled. Flat in the chain's length when file-backed.
  std::size_t resident_bytes() const;
  /// Pointer to state `i` (`ndim` values). In-memory mode only (file-backed: use ChainReader).
  const double* point(std::size_t i) const { return points.data() + i * static_cast<std::size_t>(ndim); }
  /// Sum of weights (= number of steps represented). Either mode. @throws herd::IoError
  std::int64_t total_weight() const;
  /// Expands the compact chain into the verbose one, `[total_weight, ndim]` row-major,
  /// skipping the first `burnin_steps` verbose steps. Either mode. @throws herd::IoError
  std::vector<double> verbose(std::int64_t burnin_steps = 0) const;

  std::uint32_t chain_id = 0;          ///< from `begin`
  int ndim = 0;                        ///< from `begin`
  std::vector<std::uint64_t> step;     ///< `ChainRecord::step` of each state (in-memory mode)
  std::vector<std::int64_t> weight;    ///< `ChainRecord::weight` of each state (in-memory mode)
  std::vector<double> log_density;     ///< `ChainRecord::log_density` of each state (in-memory mode)
  std::vector<std::int32_t> dr_stage;  ///< `ChainRecord::dr_stage` of each state (in-memory mode)
  std::vector<double> accept_prob;     ///< `ChainRecord::accept_prob` of each state (in-memory mode)
  std::vector<double> adapt_measure;   ///< `ChainRecord::adapt_measure` of each state (in-memory mode)
  std::vector<double> points;          ///< `[size, ndim]` row-major (in-memory mode)

 private:
  friend class ChainReader;
  std::unique_ptr<detail::ChainStore> store_;  ///< file-backed: made by `begin`
  bool pending_ = false;                       ///< file-backed (store_ made at `begin`)
  std::string store_dir_;
  std::size_t store_block_ = 0;
};

/// Columns a `ChainReader` loads (bit mask).
enum ChainColumns : unsigned {
  kStepColumn = 1U,
  kWeightColumn = 2U,
  kLogDensityColumn = 4U,
  kDrStageColumn = 8U,
  kAcceptProbColumn = 16U,
  kAdaptMeasureColumn = 32U,
  kPointColumns = 64U,  ///< the coordinates (all, or the one given to the reader)
  kAllColumns = 127U,
};

/// Consecutive states [first, first + count) of a chain: pointers to the loaded columns
/// (null for those not loaded) and the coordinates' layout: coordinate k of state first + i at
/// `points[i * state_stride + (k - coord_first) * coord_stride]`.
struct ChainBlock {
  std::size_t first = 0, count = 0;
  const std::uint64_t* step = nullptr;
  const std::int64_t* weight = nullptr;
  const double* log_density = nullptr;
  const std::int32_t* dr_stage = nullptr;
  const double* accept_prob = nullptr;
  const double* adapt_measure = nullptr;
  const double* points = nullptr;
  std::size_t state_stride = 0, coord_stride = 0, coord_first = 0;
};

/// Reads a `MemoryChainSink` (either mode) state by state: `reader.weight(i)` and so on, for
/// the columns asked for. In-memory: pointers into the vectors, no copy. File-backed: the
/// block holding state i is read (pread, only the columns asked for) into the reader's buffer
/// (at most one block, about 1 MiB) when i leaves the block loaded, so reads in increasing
/// order (or sorted rows) touch each block once. The chain must not be written while read.
/// Thread-safety: one reader per thread; several readers of one chain may run at once.
/// Accessors @throw herd::IoError when the scratch file cannot be read.
class ChainReader {
 public:
  /// Reads `columns` (ChainColumns bits) of `chain`; with `coordinate` >= 0 only that
  /// coordinate of the points (x(i, k) only for k = coordinate). `chain` must outlive this.
  ChainReader(const MemoryChainSink& chain, unsigned columns, int coordinate = -1);

  /// The block holding state `i` (< chain.size()), loaded if needed.
  const ChainBlock& at(std::size_t i) {
    if (i - b_.first >= b_.count) load(i);
    return b_;
  }
  /// Step of state `i`.
  std::uint64_t step(std::size_t i) { return at(i).step[i - b_.first]; }
  /// Weight of state `i`.
  std::int64_t weight(std::size_t i) { return at(i).weight[i - b_.first]; }
  /// Log density of state `i`.
  double log_density(std::size_t i) { return at(i).log_density[i - b_.first]; }
  /// DR stage of state `i`.
  std::int32_t dr_stage(std::size_t i) { return at(i).dr_stage[i - b_.first]; }
  /// Acceptance probability of state `i`.
  double accept_prob(std::size_t i) { return at(i).accept_prob[i - b_.first]; }
  /// Adaptation measure of state `i`.
  double adapt_measure(std::size_t i) { return at(i).adapt_measure[i - b_.first]; }
  /// Coordinate `k` of state `i`.
  double x(std::size_t i, std::size_t k) {
    const ChainBlock& b = at(i);
    return b.points[(i - b.first) * b.state_stride + (k - b.coord_first) * b.coord_stride];
  }
  /// State `i`'s `ndim` coordinates, contiguous (needs all coordinates loaded): a pointer into
  /// the chain (in memory) or into this reader's buffer, valid until the next call.
  const double* point(std::size_t i);
  /// State `i` as a record (needs every column; `point` as point(i)).
  ChainRecord record(std::size_t i);

 private:
  void load(std::size_t i);

  const MemoryChainSink* chain_;
  unsigned columns_;
  int coord_;
  ChainBlock b_;
  // One block (about 1 MiB, whatever the chain's length), filled by ChainStore::read before
  // any byte is read: not zeroed, so a short chain touches only the pages it uses.
  std::vector<std::byte, detail::UninitAllocator<std::byte>> buf_;
  std::vector<double> row_;
};

/// Appends records to a binary file, every field little-endian whatever the host.
///
/// Layout: a 24-byte header, no padding (integers little-endian, two's complement):
///
/// | offset | bytes | type    | field                                   |
/// |-------:|------:|---------|-----------------------------------------|
/// |      0 |     8 | char[8] | magic `"HERDCHN1"` (no terminating NUL) |
/// |      8 |     4 | u32     | format version (1)                      |
/// |     12 |     4 | i32     | ndim (>= 1)                             |
/// |     16 |     4 | u32     | chain id                                |
/// |     20 |     4 | u32     | record size in bytes, 48 + 8 ndim       |
///
/// then fixed-size records as `encode_chain_record` writes them (chain_record.hpp: u64 step,
/// i64 weight, f64 log density, i32 DR stage, u32 chain id, f64 acceptance probability, f64
/// adaptation measure, f64 point[ndim]; 48 + 8 ndim bytes). Writes go through a 1 MiB buffer.
/// Not thread-safe. The destructor flushes and closes, swallowing errors.
class BinaryChainSink final : public ChainSink {
 public:
  /// Opens `path` for writing (truncates). @throws herd::IoError
  explicit BinaryChainSink(std::string path);
  ~BinaryChainSink() override;
  BinaryChainSink(const BinaryChainSink&) = delete;
  BinaryChainSink& operator=(const BinaryChainSink&) = delete;

  /// Writes the header. @throws herd::IoError
  void begin(std::uint32_t chain_id, int ndim) override;
  /// Appends one fixed-size record (buffered). @throws herd::IoError
  void write(const ChainRecord& r) override;
  /// Writes the buffer and `fflush`es the file. @throws herd::IoError
  void flush() override;
  /// Records written so far.
  std::uint64_t records() const { return records_; }
  /// The file's path.
  const std::string& path() const { return path_; }

 private:
  void put(const void* p, std::size_t n);
  void drain();

  std::string path_;
  std::FILE* file_ = nullptr;
  std::vector<std::byte> buf_;
  std::size_t used_ = 0;
  std::uint64_t records_ = 0;
};

/// Bytes of the binary chain file's header (BinaryChainSink's layout).
inline constexpr std::size_t kBinaryChainHeaderBytes = 24;

/// The 24-byte header that starts a binary chain file of chain `chain_id` with `ndim`
/// coordinates (BinaryChainSink's layout: magic, version, ndim, chain id, record size; all
/// little-endian). Shared by `BinaryChainSink` and the chain file streamed while a chain
/// samples, so that both write the same bytes. Thread-safe (pure).
std::array<std::byte, kBinaryChainHeaderBytes> binary_chain_header(std::uint32_t chain_id, int ndim);

/// Reads a file written by `BinaryChainSink` (its layout: header and records little-endian,
/// on any host). @throws herd::IoError on a bad or truncated file, naming it.
MemoryChainSink read_binary_chain(const std::string& path);

}  // namespace herd::mcmc
