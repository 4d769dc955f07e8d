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
/// Also here: `BatchedDrawStore`, rank 0's copy of the draws for the post-processing (an
/// unlinked scratch file read one quantity or one group of chains at a time; not part of the
/// restart record).

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

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

/// Rank 0's recorded draws of a batched run for the post-processing, which reads them one
/// quantity (or one group of chains) at a time, so that no process holds every draw: an
/// anonymous scratch file (created in a folder and unlinked at once, so that even a killed
/// run leaves nothing behind; the kernel's page cache keeps it, not the process's memory).
/// It has one column per quantity, `[chains, draws]` each: the coordinates `0..ndim-1`, the
/// log density (`lp_column()`), the acceptance probability and adaptation measure
/// (`alpha_column()`, `measure_column()`), then the bytes `accepted` and `dr_stage`, then
/// the columns `add_columns` appends (derived quantities). A column is stored block by
/// block as the draws came: block [first, first + n) of column q is `[chains, n]` at
/// element `chains x first` of the column, so a block is one write per column and a column
/// one scattered read per block (preadv). Size on disk: chains x draws x (8 (ndim + 3) + 2)
/// bytes plus 8 per appended column and draw.
/// Writing (`write_block`, `write_stats`, `add_columns`, `write_chains`): one thread. Reading
/// (`column`, `read_chains`, `read_bytes_column`): thread-safe, also concurrently with each
/// other (pread). Not copyable.
class BatchedDrawStore {
 public:
  /// An empty store of `chains` x `draws` draws of `ndim` coordinates, its scratch file in
  /// folder `dir` ("" or "." the working directory). @throws herd::IoError when the file
  /// cannot be created, or when its file system has fewer bytes free than the draws need
  /// (checked here, before any draw is written: the file is sparse until then).
  BatchedDrawStore(const std::string& dir, std::int64_t chains, int ndim, std::int64_t draws);
  ~BatchedDrawStore();
  BatchedDrawStore(const BatchedDrawStore&) = delete;
  BatchedDrawStore& operator=(const BatchedDrawStore&) = delete;

  std::int64_t num_chains() const { return m_; }                                   ///< M
  int ndim() const { return d_; }                                                  ///< d
  std::int64_t draws() const { return n_; }                                        ///< draws per chain
  std::size_t lp_column() const { return static_cast<std::size_t>(d_); }           ///< the log density
  std::size_t alpha_column() const { return static_cast<std::size_t>(d_) + 1; }    ///< acceptance probability
  std::size_t measure_column() const { return static_cast<std::size_t>(d_) + 2; }  ///< adaptation measure

  /// Draws [first, first + n) of every chain in the engine's layout, `x [chains, n, ndim]`
  /// and `lp [chains, n]`. Blocks come in order: `first` is the end of the previous block
  /// (or that block again, with the same `n`). @throws herd::IoError (also for a block out of order)
  void write_block(std::int64_t first, std::int64_t n, const double* x, const double* lp);
  /// The per-draw statistics of block [first, first + n) (`[chains, n]` each); the same
  /// order rule as `write_block`. @throws herd::IoError
  void write_stats(std::int64_t first, std::int64_t n, const BatchedDrawStats& stats);
  /// Appends `count` columns of doubles (zeros until written); returns the first one's index.
  std::size_t add_columns(std::size_t count);
  /// Writes chains [c0, c0 + count) of column `col`: `values [count, draws]`. @throws herd::IoError
  void write_chains(std::size_t col, std::int64_t c0, std::int64_t count, const double* values);

  /// Column `col` (a double column), `[chains, draws]` row-major, into `out` (resized).
  /// @throws herd::IoError
  void column(std::size_t col, std::vector<double>& out) const;
  /// Entries [first, first + out.size()) of column `col` (a double column) in its
  /// `[chains, draws]` row-major layout (entry c * draws + t: chain c's draw t), read straight
  /// from the file (one read per run of entries contiguous there: per chain and block of
  /// draws, or across chains within one block). What a streamed DrawsView's reader does
  /// (the post-processing's diagnostics past diagnostics_rank_budget()). Thread-safe (const,
  /// positioned reads). @throws herd::IoError (also for a range past the draws written)
  void read_range(std::size_t col, std::size_t first, std::span<double> out) const;
  /// read_range of `accepted` (`dr_stage` false) or `dr_stage` (true). @throws herd::IoError
  void read_bytes_range(bool dr_stage, std::size_t first, std::span<std::uint8_t> out) const;
  /// `accepted` (`dr_stage` false) or `dr_stage` (true), `[chains, draws]`, into `out`. @throws herd::IoError
  void read_bytes_column(bool dr_stage, std::vector<std::uint8_t>& out) const;
  /// Chains [c0, c0 + count) into `out` (`begin(count, c0, ndim, draws)`, then every draw:
  /// `x`, `lp` and, with `stats`, the per-draw statistics). @throws herd::IoError
  void read_chains(std::int64_t c0, std::int64_t count, MemoryBatchedSink& out, bool stats = true) const;
  /// Chains per `read_chains` call that keep a group's draws (and `extra` more bytes per
  /// draw) to at most 16 MiB and at most one quantity's draws (chains x draws x 8 bytes),
  /// but at least one chain. Pure.
  std::int64_t chain_group(std::size_t extra = 0) const;
  /// Bytes in the scratch file (all columns).
  std::uint64_t bytes() const { return end_; }
  /// Per chain, its runs of equal consecutive draws (x and lp compared with ==): the rows of
  /// its compact chain, counted as the blocks came (`[chains]`; empty before the first block).
  const std::vector<std::int64_t>& compact_rows() const { return runs_; }

 private:
  struct Block {
    std::int64_t first, n;
  };
  struct Column {
    std::uint64_t offset;  // of element 0
    std::size_t size;      // bytes per element
  };
  std::size_t block_of(std::int64_t first, std::int64_t n);
  void count_runs(const Block& b, const double* x, const double* lp);
  void put(const Column& c, const Block& b, std::int64_t c0, std::int64_t count, const void* data);
  void get(const Column& c, const Block& b, std::int64_t c0, std::int64_t count, void* data) const;
  /// Entries [first, first + count) of column `c`'s `[chains, draws]` layout into `out`.
  void get_range(const Column& c, std::size_t first, std::size_t count, void* out) const;
  /// Every block of column `c` into `out` (`[chains, draws]` of `c.size`-byte elements).
  void gather(const Column& c, void* out) const;
  [[noreturn]] void fail(const char* what) const;

  std::string path_;
  int fd_ = -1;
  std::int64_t m_, n_;
  int d_;
  std::vector<Block> blocks_;
  std::vector<Column> cols_;
  std::uint64_t end_ = 0;
  std::vector<double> tmp_;         // one column of a block while writing
  std::vector<std::int64_t> runs_;  // compact_rows()
  std::vector<double> last_;        // each chain's last draw [chains, ndim + 1] (x, lp)
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
  /// `input_hash` (`sampler_input_hash`: independent of the process layout). `resuming` (the
  /// program's run record is of this input): every rank reads its rows of `batched.ckpt`
  /// when it exists, and rank 0 checks and cuts `draws.bin`. The record's chains are in
  /// global chain order, so it resumes in any layout of the same total of chains (written by
  /// 2 processes x 64, read by 1 x 128). `legacy_input_hash` (0: none): the same input's hash
  /// as a record of an earlier herd holds it (`SampleRunOptions::legacy_input_hash`).
  /// Not collective (every rank reads the file itself); the restart folder must exist.
  /// @throws herd::InputError (a record of another run: the total of chains, ndim, stages
  /// or input hash differ), herd::IoError (a record without checksums or of layout version
  /// 1, a corrupt `draws.bin`).
  BatchedRestartRecord(Communicator& comm, const SamplerSpecs& specs, const BatchedDramOptions& o,
                       std::uint64_t input_hash, bool resuming, std::uint64_t legacy_input_hash = 0);

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
  std::uint64_t legacy_hash_;
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
