#pragma once
// Internal to the run layer's chain files (not installed): the buffer of a resumable
// chain file's records (their bytes: herd/mcmc/chain_record.hpp), the sections of a chain
// checkpoint ("herd-dram-chain" version 1), and the durable record of one chain
// (append-only chain file + atomic checkpoint) that `run_resumable` and the resumable
// `run_fork_join` share. Public API: herd/mcmc/parallel.hpp.

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "herd/io/atomic_file.hpp"
#include "herd/io/checkpoint.hpp"
#include "herd/mcmc/chain_sink.hpp"
#include "herd/mcmc/dram.hpp"
#include "herd/mcmc/parallel.hpp"

namespace herd::mcmc::detail {

/// Positive infinity: "no checkpoint by time".
constexpr double kInf = std::numeric_limits<double>::infinity();

/// Records are appended to the chain file in chunks of this many bytes; the file is synced
/// (and its length recorded) only at checkpoints, and truncated back to it on resume.
constexpr std::size_t kAppendChunk = std::size_t{1} << 20;

// --- compact records as bytes (the resumable chain file) ---------------------------------

/// Buffers records as bytes (`encode_chain_record`, chain_record.hpp) until the driver
/// appends them to the chain file; also hands every call to `tee` when one is given (not
/// owned). One thread.
class ByteSink final : public ChainSink {
 public:
  /// `tee_sink`, when given, also receives every call.
  explicit ByteSink(ChainSink* tee_sink = nullptr) : tee(tee_sink) {}
  /// Passes the call to the tee.
  void begin(std::uint32_t chain_id, int ndim) override;
  /// Passes the call to the tee (the bytes are written by `append_chain`).
  void flush() override;
  /// Passes the call to the tee.
  void tick(std::uint64_t proposals, std::int64_t records) override;
  /// Passes the call to the tee.
  void resume_at(std::uint64_t proposals, std::int64_t records) override;
  /// Passes `r` to the tee, then appends its `chain_record_bytes(r.ndim)` bytes to `buf`.
  void write(const ChainRecord& r) override;

  std::vector<std::byte> buf;  ///< records not yet appended to the chain file
  ChainSink* tee = nullptr;    ///< receives every call too (may be null)
};

// --- sections of a chain checkpoint ------------------------------------------------------

/// The chain checksums of a checkpoint (`chain_crc32`, `chain_bytes`).
/// @throws herd::IoError when it has none (a record of an earlier herd), naming
///   `checkpoint_path`.
io::BlockChecksums load_chain_checksums(const io::CheckpointReader& r, const std::string& checkpoint_path);

/// Adds the parts of a finished run's result that the state does not determine (burn-in,
/// covariances, seconds, Cholesky failures) as sections `result.*`.
void save_result(io::CheckpointWriter& w, const DramResult& r);

/// The result of a finished run from its checkpoint: the counters from its state
/// (`detail::dram_result_counters`), the rest from the `result.*` sections when present.
/// @throws herd::IoError when a section is missing or has the wrong size.
DramResult load_result(const io::CheckpointReader& r);

// --- the durable record of one chain: append-only chain file + atomic checkpoint ---------

/// What `open_record` found: a chain to resume (state to restore, chain file truncated to
/// the checkpointed length), a finished run, or nothing (a fresh start).
struct ChainFileState {
  bool resumed = false;                ///< a checkpoint of these options was found
  bool complete = false;               ///< the checkpoint says the run had finished
  DramResult result;                   ///< when complete
  std::unique_ptr<DramState> state;    ///< when resumed and not complete
  std::uint64_t chain_bytes = 0;       ///< recorded length of the chain file
  io::BlockChecksums checksums;        ///< of the chain file's recorded part
  double seconds_before = 0.0;         ///< sampling seconds of the earlier invocations
  std::uint64_t proposals_before = 0;  ///< proposals made by them
};

/// Opens the record of a chain: reads `files.checkpoint_path` unless `files.overwrite` or
/// it does not exist, and calls `files.on_resume` for a resumable (not complete) one. Does
/// not touch the chain file. One thread per record.
/// @throws herd::InputError when the checkpoint belongs to other options (`hash` differs);
///   herd::IoError for a checkpoint that cannot be read or lacks a section.
ChainFileState open_record(const ResumableOptions& files, std::uint64_t hash);

/// Appends `buf` to the chain file, updating its checksums, and empties `buf`.
/// @throws herd::IoError when the write fails.
void append_chain(io::AppendFile& file, io::BlockChecksums& sums, std::vector<std::byte>& buf);

/// Appends the buffered records of `sink`, syncs the chain file, and commits the checkpoint
/// (`hash`, chain length and checksums, `state`, `final_result` when the run has finished,
/// `elapsed_seconds` of sampling over all invocations, and `files.on_checkpoint`'s sections)
/// atomically to `files.checkpoint_path`. @throws herd::IoError
void commit_record(const ResumableOptions& files, std::uint64_t hash, io::AppendFile& file, io::BlockChecksums& sums,
                   ByteSink& sink, const DramState& state, const DramResult* final_result, double elapsed_seconds);

}  // namespace herd::mcmc::detail
