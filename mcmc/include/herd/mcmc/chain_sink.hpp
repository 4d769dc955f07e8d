#pragma once
/// @file chain_sink.hpp
/// Streaming of compact MCMC chains (DESIGN.md §4 "chains are stored compactly"): the
/// sampler hands each unique state, with its integer weight, to a `ChainSink` when the
/// chain leaves it (and the current state when a run ends or stops on an error), so a
/// chain is never held whole in memory unless the sink chooses to.
///
/// Sinks provided: `MemoryChainSink` (vectors; tests and small runs) and
/// `BinaryChainSink` (an append-only little-endian binary file: a 24-byte header, then
/// the records of chain_record.hpp). `read_binary_chain` reads such a file back.

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
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

/// Keeps the compact chain in memory: column vectors, states row-major `[size, ndim]`.
/// Not thread-safe.
class MemoryChainSink final : public ChainSink {
 public:
  /// Records the chain id and dimension (keeps earlier records).
  void begin(std::uint32_t chain_id, int ndim) override;
  /// Appends `r` to the columns.
  void write(const ChainRecord& r) override;

  /// Number of unique states.
  std::size_t size() const { return weight.size(); }
  /// Pointer to state `i` (`ndim` values).
  const double* point(std::size_t i) const { return points.data() + i * static_cast<std::size_t>(ndim); }
  /// Sum of weights (= number of steps represented).
  std::int64_t total_weight() const;
  /// Expands the compact chain into the verbose one, `[total_weight, ndim]` row-major,
  /// skipping the first `burnin_steps` verbose steps.
  std::vector<double> verbose(std::int64_t burnin_steps = 0) const;

  std::uint32_t chain_id = 0;          ///< from `begin`
  int ndim = 0;                        ///< from `begin`
  std::vector<std::uint64_t> step;     ///< `ChainRecord::step` of each state
  std::vector<std::int64_t> weight;    ///< `ChainRecord::weight` of each state
  std::vector<double> log_density;     ///< `ChainRecord::log_density` of each state
  std::vector<std::int32_t> dr_stage;  ///< `ChainRecord::dr_stage` of each state
  std::vector<double> accept_prob;     ///< `ChainRecord::accept_prob` of each state
  std::vector<double> adapt_measure;   ///< `ChainRecord::adapt_measure` of each state
  std::vector<double> points;          ///< `[size, ndim]` row-major
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

/// Reads a file written by `BinaryChainSink` (its layout: header and records little-endian,
/// on any host). @throws herd::IoError on a bad or truncated file, naming it.
MemoryChainSink read_binary_chain(const std::string& path);

}  // namespace herd::mcmc
