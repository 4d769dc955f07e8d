#pragma once
// ParaDRAM's text files of a serial, multi-chain or fork-join run (private to herd::mcmc):
// the number format, a buffered output file, the running likelihood burn-in, the chain
// file's header and rows, the chain file streamed while a single chain samples, and the
// chain and sample files written from a chain's records at the end.

#include <algorithm>
#include <atomic>
#include <charconv>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "herd/io/checkpoint.hpp"
#include "herd/mcmc/chain_sink.hpp"
#include "herd/mcmc/sampler_specs.hpp"

namespace herd::mcmc::detail {

class SampleRows;  // outputs.hpp

/// Formats reals with `precision` significant digits (scientific) and integers, both padded
/// with blanks on the left to `width`; `delim` separates columns. Thread-safe (const).
struct TextFormat {
  std::string delim = ",";
  int precision = 17;
  int width = 0;
  /// `v` as `append_real` writes it.
  std::string real(double v) const;
  /// Appends `real(v)` to `out`. Finite values: the bytes of std::to_chars (scientific,
  /// the same digits and layout as printf's and fmt's "%.{p-1}e"), by `format_scientific`
  /// (real_format.hpp, about 4x faster than to_chars at precision 8) or, where it cannot
  /// vouch for the rounding, by to_chars itself; no string per value.
  void append_real(std::string& out, double v) const;
  /// Appends `integer(v)` to `out` (std::to_chars: no string per value).
  template <class T>
  void append_integer(std::string& out, T v) const {
    char buf[24];
    out.append(buf, write_integer(buf, v));
  }
  /// Bytes that `write_real` or `write_integer` may write for one field (at least 32).
  std::size_t field_bytes() const { return static_cast<std::size_t>(std::max({width, precision + 16, 32})); }
  /// Writes `real(v)` at `p` (room for `field_bytes()`) and returns the end (not terminated).
  char* write_real(char* p, double v) const;
  /// Writes `integer(v)` at `p` (room for `field_bytes()`) and returns the end.
  template <class T>
  char* write_integer(char* p, T v) const {
    return pad(p, std::to_chars(p, p + 24, v).ptr);
  }
  /// Pads the field [p, end) to `width` with blanks on the left (room for `field_bytes()`);
  /// returns its new end.
  char* pad(char* p, char* end) const {
    const auto n = static_cast<int>(end - p);
    if (n >= width) return end;
    const auto fill = static_cast<std::size_t>(width - n);
    std::memmove(p + fill, p, static_cast<std::size_t>(n));
    std::memset(p, ' ', fill);
    return end + fill;
  }
  /// `v` in decimal, padded to `width`.
  template <class T>
  std::string integer(T v) const {
    std::string s = fmt::format("{}", v);
    if (static_cast<int>(s.size()) < width) s.insert(0, static_cast<std::size_t>(width) - s.size(), ' ');
    return s;
  }
};

/// A buffered output file (never written through a symbolic link, `io::open_output_file`).
/// Every failure throws herd::IoError "<what> "<path>": <the system's reason>". Not
/// thread-safe.
class TextFile {
 public:
  /// Creates `path`, or with `append` opens it for appending. @throws IoError
  explicit TextFile(std::string path, bool append = false);
  ~TextFile();
  TextFile(const TextFile&) = delete;
  TextFile& operator=(const TextFile&) = delete;
  /// Flushes and fsyncs; returns the file's length in bytes. @throws IoError
  std::uint64_t sync();
  /// Flushes and starts the disk writes of what was written since the last call, without
  /// waiting (Linux sync_file_range; a hint: errors are left for `sync`).
  void start_writeback();
  /// Throws IoError "<what> "<path>": <the system's reason>" (no space left on device, ...).
  [[noreturn]] void fail(const char* what) const;
  /// Appends `s`. @throws IoError
  void write(std::string_view s);
  /// Flushes the buffer. @throws IoError
  void flush();
  /// Closes the file (idempotent). @throws IoError
  void close();

 private:
  std::string path_;
  std::FILE* f_ = nullptr;
  std::uint64_t written_back_ = 0;
};

/// Running likelihood burn-in of ParaDRAM's chain file: at row i (0-based) the first row j
/// with lp_j >= max_{k<=i} lp_k - log(i + 1). Such a j is always a prefix-maximum row, so a
/// binary search over the prefix maxima gives it in O(log n). Not thread-safe.
class RunningBurnin {
 public:
  /// Adds row `i` with log density `lp`; returns the burn-in row (0-based).
  std::int64_t add(std::int64_t i, double lp);
  /// The prefix maxima's rows, for checkpoints.
  const std::vector<std::int64_t>& rows() const { return max_idx_; }
  /// The prefix maxima's log densities, for checkpoints.
  const std::vector<double>& values() const { return max_lp_; }
  /// Restores the prefix maxima of a checkpoint.
  void restore(std::vector<std::int64_t> rows, std::vector<double> values);

 private:
  std::vector<std::int64_t> max_idx_;
  std::vector<double> max_lp_;
};

/// ParaDRAM's chain-file header line (ProcessID, ..., SampleLogFunc, the variables).
std::string chain_header(const SamplerSpecs& specs, const TextFormat& tf);

/// Row(s) of ParaDRAM's chain file for record number `i` (0-based) of a chain (verbose:
/// the row repeated `weight` times with weight 1); `burnin` gets the row's log density.
std::string chain_rows(const SamplerSpecs& specs, const TextFormat& tf, RunningBurnin& burnin, std::int64_t i,
                       const ChainRecord& r, int process_id);

/// As `chain_rows`, appending the rows to `out` (the streamed chain reuses one buffer).
void append_chain_rows(std::string& out, const SamplerSpecs& specs, const TextFormat& tf, RunningBurnin& burnin,
                       std::int64_t i, const ChainRecord& r, int process_id);

/// Bytes that `write_chain_row` may write for a record of `ndim` coordinates.
std::size_t chain_row_bytes(const TextFormat& tf, int ndim);

/// Writes one row of ParaDRAM's chain file for record number `i` (0-based) at `p` (room for
/// `chain_row_bytes(tf, r.ndim)`) with sample weight `weight` (compact: r.weight; verbose:
/// 1) and returns its end; `burnin` gets the row's log density. The bytes of `chain_rows`'
/// first row: formatted in place, no string per field or row.
char* write_chain_row(char* p, const TextFormat& tf, RunningBurnin& burnin, std::int64_t i, const ChainRecord& r,
                      std::int64_t weight, int process_id);

/// The chain file of a single-chain run, written while it samples (users watch it grow), in
/// the run's `chain_file_format`: ParaDRAM's text rows (compact or verbose) or the binary
/// chain (BinaryChainSink's header and records, the same bytes as write_chain_file writes at
/// the end). With checkpoints its length, row count and burn-in state go into each
/// checkpoint (after an fsync), and a resumed run truncates it back to that length.
///
/// The rows are formatted (binary: copied) and written on a writer thread of its own, so
/// that the sampler does not wait on the number formatting or the file, and the file is
/// written while the sampler runs rather than after it: `write` copies the record into a
/// block (no allocation per record); a full block goes to the writer, which owns the
/// burn-in, the row counter and the file while it runs. At most `kBlocks` blocks of
/// `kBlockBytes` exist (the sampler waits for a free one when the writer falls behind). A
/// block that waits half a second for more records goes to the writer as it is (the file
/// grows under a slow log density too). `flush`, `checkpoint`, `close` and the destructor
/// first wait until the writer has written every record handed over; a write error of the
/// writer (disk full, ...) is thrown again, the same herd::IoError, by the next `write`,
/// `flush`, `checkpoint` or `close`. The same bytes as formatting on the sampler thread.
/// Not thread-safe: one (sampler) thread calls the members; the writer is internal.
class ChainFileStream final : public ChainSink {
 public:
  /// Bytes of one block of records (a record takes chain_record_bytes(ndim) = 48 + 8 ndim).
  static constexpr std::size_t kBlockBytes = std::size_t{256} << 10;
  /// Blocks at most (the memory of the hand-over: kBlocks x kBlockBytes).
  static constexpr int kBlocks = 4;

  /// The file `path` of a chain of `specs` (kept by reference) in the format `tf`.
  ChainFileStream(std::string path, const SamplerSpecs& specs, const TextFormat& tf);
  /// Writes what was handed over and stops the writer; errors are dropped (call `close`).
  ~ChainFileStream() override;
  ChainFileStream(const ChainFileStream&) = delete;
  ChainFileStream& operator=(const ChainFileStream&) = delete;

  /// Opens the file afresh (the text header, or the binary header of `chain_id` and `ndim`)
  /// unless `resume` opened it. @throws IoError
  void begin(std::uint32_t chain_id, int ndim) override;
  /// Hands the record's row(s) to the writer. @throws IoError (an earlier write's error)
  void write(const ChainRecord& r) override;
  /// Checkpoints will fsync the file: start its writeback every 1 MiB.
  void set_durable() { durable_ = true; }
  /// Seconds spent starting writebacks (by the writer; read it after `close`).
  double writeback_seconds = 0.0;
  /// Waits until every record is written, then flushes the buffer. @throws IoError
  void flush() override;
  /// Adds the file's state to a checkpoint (every record written, the file fsynced first).
  /// @throws IoError
  void checkpoint(io::CheckpointWriter& w);
  /// Truncates the file to the checkpoint's length and continues it. A binary chain's
  /// checkpoint from a herd that wrote the binary file only at the end has no length of it:
  /// then `begin` writes the file afresh, its header and the first `chain_bytes` bytes of the
  /// restart record's chain file `record_chain` (the same records).
  /// @throws IoError when the file is shorter than the checkpoint says.
  void resume(const io::CheckpointReader& r, const std::string& record_chain);
  /// Writes every record, stops the writer and closes the file (idempotent; after a write
  /// error each call throws it again). @throws IoError
  void close();

 private:
  /// Records of one dimension `ndim`, encoded as in the binary chain (encode_chain_record).
  struct Block {
    std::unique_ptr<std::byte[]> bytes;
    std::size_t capacity = 0;
    std::size_t used = 0;
    int ndim = 0;
  };
  Block* take_block(std::size_t bytes);
  void submit();
  void drain();
  void stop_writer() noexcept;
  void rethrow_error() const;
  void writer_loop();
  void write_block(const Block& b);
  void write_text();
  void emit(std::string_view bytes);
  void copy_record_chain(int ndim);

  std::string path_;
  const SamplerSpecs& specs_;
  TextFormat tf_;
  std::unique_ptr<TextFile> file_;
  RunningBurnin burnin_;          // the writer's while it runs
  std::int64_t rows_ = 0;         // the writer's while it runs
  std::unique_ptr<char[]> text_;  // the writer's rows not yet in the file
  std::size_t text_capacity_ = 0;
  std::size_t text_used_ = 0;
  std::string repeat_;         // the writer's verbose row being repeated
  std::vector<double> point_;  // the writer's decoded point
  std::size_t pending_ = 0;
  bool durable_ = false;
  bool binary_ = false;             // chain_file_format "binary": records copied, no rows formatted
  std::string record_chain_;        // resume of a binary chain from a record without its length:
  std::uint64_t record_bytes_ = 0;  // begin copies these bytes of this restart chain file

  std::vector<std::unique_ptr<Block>> blocks_;  // every block made
  Block* cur_ = nullptr;                        // the block the sampler fills
  std::mutex m_;
  std::condition_variable to_writer_, to_sampler_;
  std::vector<Block*> free_;  // guarded by m_
  std::deque<Block*> full_;   // guarded by m_, in order
  bool busy_ = false;         // guarded by m_: the writer holds a block
  bool stop_ = false;         // guarded by m_
  std::atomic<bool> want_partial_{false};
  std::atomic<bool> failed_{false};
  std::exception_ptr error_;  // set by the writer before failed_
  std::thread writer_;
};

/// Writes ParaDRAM's chain file `path` of one chain (compact, verbose or binary, by
/// `specs.chain_file_format`) from its compact records: the same bytes as writing them
/// while sampling. @throws IoError
void write_chain_file(const std::string& path, const SamplerSpecs& specs, const TextFormat& tf,
                      const MemoryChainSink& c, int process_id);

/// Writes ParaDRAM's sample file `path`: a header (SampleLogFunc, the variables), then the
/// log density and the `ndim` coordinates of the compact rows `rows` of `c`, in order (read
/// back from `c`, with every_draw rows).
/// @throws IoError
void write_sample_file(const std::string& path, const SamplerSpecs& specs, const TextFormat& tf,
                       const MemoryChainSink& c, int ndim, const SampleRows& rows);

}  // namespace herd::mcmc::detail
