#pragma once
/// @file batched_record.hpp
/// The restart record of a batched run (`device = "cpu_batched" | "cuda"`), in
/// `<prefix>_restart/` (docs/batched.md "Restart"):
///  - `draws.bin` (`BatchedDrawRecord`, rank 0): the gathered blocks of thinned draws, appended
///    as they come, each block `x [chains, n, d]` then `lp [chains, n]` (doubles), then the
///    block's per-draw statistics (`BatchedDrawStats`): `acceptance_probability`,
///    `adaptation_measure` `[chains, n]` (doubles), `accepted`, `dr_stage` `[chains, n]` (bytes);
///  - `batched.ckpt` (`BatchedRestartRecord`, written atomically by rank 0): every rank's
///    chains gathered in global chain order, the adaptation state, the proposal index, the
///    draws already recorded, the length of `draws.bin` that holds them and the CRC-32 of
///    every MiB of it. A resumed run reads its rows back and continues bit for bit.
/// The program's run record (`run.ckpt`: input hash, complete flag) is managed around it by
/// `run_sampler_program` (paradram_run.hpp).

#include <cstdint>
#include <memory>
#include <string>

#include "herd/core/communicator.hpp"
#include "herd/core/timer.hpp"
#include "herd/io/atomic_file.hpp"
#include "herd/mcmc/batched_dram.hpp"
#include "herd/mcmc/sampler_specs.hpp"

namespace herd::io {
class CheckpointReader;
}  // namespace herd::io

namespace herd::mcmc {

/// `<prefix>_restart/draws.bin`: an append-only file of doubles and bytes whose durable length and
/// per-MiB CRC-32s a checkpoint records. Opening it checks the recorded part against the
/// recorded checksums and cuts the file back to the recorded length, so what a killed run
/// appended after its last checkpoint is dropped. Host only; not thread-safe; move-less.
class BatchedDrawRecord {
 public:
  /// Opens (creates) `path` (never through a symbolic link), checks its first `sums.bytes`
  /// bytes against `sums` and truncates it to that length (`sums` empty: a new record).
  /// @throws herd::IoError when the file is shorter than `sums.bytes` or a block differs
  /// (naming the file and the block, and `overwrite = true` as the way out), or a system call fails.
  BatchedDrawRecord(std::string path, io::BlockChecksums sums);
  ~BatchedDrawRecord();
  BatchedDrawRecord(const BatchedDrawRecord&) = delete;
  BatchedDrawRecord& operator=(const BatchedDrawRecord&) = delete;

  /// Appends `n` doubles (`data[0..n)`) and extends the checksums. @throws herd::IoError
  void append(const double* data, std::size_t n) { append_bytes(data, n * sizeof(double)); }
  /// Appends `bytes` bytes from `data` and extends the checksums. @throws herd::IoError
  void append_bytes(const void* data, std::size_t bytes);
  /// Reads `n` doubles at byte `offset` into `data`. @throws herd::IoError (also past the end)
  void read(std::uint64_t offset, double* data, std::size_t n) const { read_bytes(offset, data, n * sizeof(double)); }
  /// Reads `bytes` bytes at byte `offset` into `data`. @throws herd::IoError (also past the end)
  void read_bytes(std::uint64_t offset, void* data, std::size_t bytes) const;
  /// Makes the appended blocks durable (`fsync`; before a checkpoint counts them).
  /// @throws herd::IoError
  void sync();
  /// Bytes in the file (recorded part plus what was appended since).
  std::uint64_t size() const { return size_; }
  /// CRC-32s of the bytes in the file (for the checkpoint).
  const io::BlockChecksums& checksums() const { return sums_; }

 private:
  [[noreturn]] void fail(const char* what) const;
  std::string path_;
  io::BlockChecksums sums_;
  int fd_ = -1;
  std::uint64_t size_ = 0;
};

/// The batched run's checkpoints (`BatchedCheckpointer`) in `<specs.output_prefix>_restart/`:
/// `batched.ckpt` plus the `draws.bin` record (rank 0). Collective: every rank constructs
/// it, and `due` and `save` are called on every rank at the same schedule boundaries; rank 0
/// decides `due` (`checkpoint_period` proposals or `checkpoint_period_seconds` since the last
/// one) and broadcasts it. Layout of `batched.ckpt` (`io::CheckpointWriter`, kind
/// `kKind`, version `kVersion`): per-chain arrays `x [N, d]`, `lp [N]`, `accepted [N, stages]`,
/// `out_of_domain [N]`, `nan_count [N]`, `accepted_warmup` (after the warm-up), the states'
/// records `state_step`, `state_stage`, `state_alpha` `[N]` and (adapting) `adapt_measure [N]`, the factor(s)
/// `chol` and the adaptation state `run_n`, `run_mean`, `run_m2`, `ad_ref` (shared, or
/// `[N, ...]` per chain), scalars `input_hash`, `chains`, `chains_per_rank`, `ndim`,
/// `stages`, `next_proposal`, `draws_done`, `draw_bytes`, `seconds`, `adaptive_updates`,
/// `chol_failures`, and `draw_crc32`. The communicator and `specs` must outlive the record.
class BatchedRestartRecord final : public BatchedCheckpointer {
 public:
  /// The checkpoint kind written to and expected in `batched.ckpt`.
  static constexpr const char* kKind = "herd-sample-batched";
  /// Its layout version: 2 added the states' records and the per-draw statistics of
  /// `draws.bin`; a record of version 1 is refused (naming `overwrite = true`).
  static constexpr std::uint32_t kVersion = 2;

  /// The record of a run with options `o` (this rank's chains) and resolved input hash
  /// `input_hash`. `resuming` (the program's run record is of this input): every rank reads
  /// its rows of `batched.ckpt` when it exists, and rank 0 checks and cuts `draws.bin`.
  /// Not collective (every rank reads the file itself); the restart folder must exist.
  /// @throws herd::InputError (a record of another run or layout: chains, ndim, stages or
  /// input hash differ), herd::IoError (a record without checksums or of layout version 1,
  /// a corrupt `draws.bin`).
  BatchedRestartRecord(Communicator& comm, const SamplerSpecs& specs, const BatchedDramOptions& o,
                       std::uint64_t input_hash, bool resuming);

  const BatchedSnapshot* resume_state() override { return have_ ? &snap_ : nullptr; }
  /// Collective: rank 0's decision, broadcast.
  bool due(std::uint64_t proposals) override;
  /// Collective: gathers every rank's chains to rank 0, which syncs `draws.bin` and commits
  /// `batched.ckpt` atomically. @throws herd::IoError
  void save(const BatchedSnapshot& s) override;

  /// Rank 0, once the outputs are written: removes `batched.ckpt` first, then `draws.bin`
  /// (the `.h5` holds the draws; `run.ckpt` says the run is complete). A kill in between
  /// leaves a record that restarts from the beginning. Errors are ignored.
  void discard();

  /// Rank 0: the draws record (null on other ranks).
  BatchedDrawRecord* draws() { return draws_.get(); }
  /// Whether the run resumed from a checkpoint (`batched.ckpt` was read).
  bool resumed() const { return have_; }
  /// Draws per chain recorded by the checkpoint resumed from (0: a fresh start).
  std::int64_t draws_done() const { return have_ ? snap_.draws_done : 0; }
  /// Proposal index the run resumed at (0: a fresh start).
  std::uint64_t resumed_at() const { return have_ ? snap_.next_proposal : 0; }
  std::int64_t checkpoints = 0;     ///< written by this session (rank 0)
  double checkpoint_seconds = 0.0;  ///< their wall time (rank 0)

 private:
  void read(const std::string& path);
  void read_arrays(io::CheckpointReader& r);

  Communicator& comm_;
  const SamplerSpecs& specs_;
  std::uint64_t hash_;
  std::int64_t m_;
  int d_, stages_;
  bool per_chain_, adapt_;
  std::string path_;
  std::unique_ptr<BatchedDrawRecord> draws_;
  BatchedSnapshot snap_;
  bool have_ = false;
  io::BlockChecksums draw_sums_;  // of draws.bin's recorded part (resumed runs)
  std::uint64_t last_k_ = 0;
  Timer since_;
};

}  // namespace herd::mcmc
