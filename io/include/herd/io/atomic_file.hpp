#pragma once
#include "herd/core/cxx20.hpp"  // C++20 or one clear error
/// @file atomic_file.hpp
/// Crash-safe file replacement: write to a temporary file in the same folder, fsync it,
/// rename it over the destination, fsync the folder (DESIGN.md §4 "Everything
/// restartable"). After a crash at any moment the destination is either the old complete
/// file or the new complete file, never a mixture.
///
/// Thread-safety: the functions are reentrant; two writers of the same destination race
/// (the last rename wins, both files complete).

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace herd::io {

/// A fresh temporary name next to `path`: "<path>.tmp.<pid>.<counter>".
std::string temp_path_for(const std::string& path);

/// Creates an anonymous scratch file in folder `dir` ("" means the working directory): the
/// file `<dir>/<stem>XXXXXX` (mkostemp, read-write, close-on-exec), unlinked at once so that
/// closing it, or any exit or kill, frees it. Returns the descriptor, or -1 with `errno` set
/// when the file cannot be created; `path` receives the name it had (the template on
/// failure), for the caller's messages. Reentrant.
int create_unlinked_scratch(const std::string& dir, std::string_view stem, std::string& path);

/// Writes all `n` bytes at `p` to `fd` from byte `offset` on (pwrite), retrying short
/// writes and EINTR. Returns false with `errno` set on any other failure (some bytes may be
/// written). Reentrant; concurrent calls on one descriptor are safe (no file position).
bool pwrite_all(int fd, const void* p, std::size_t n, std::uint64_t offset) noexcept;

/// Reads exactly `n` bytes of `fd` from byte `offset` on into `p` (pread), retrying short
/// reads and EINTR. Returns false with `errno` set on failure, or with `errno` 0 when the
/// file ends first. Reentrant; concurrent calls on one descriptor are safe.
bool pread_all(int fd, void* p, std::size_t n, std::uint64_t offset) noexcept;

/// fsyncs the file at `path`. @throws IoError
void fsync_path(const std::string& path);

/// Starts the disk writes of the file `path`'s dirty pages without waiting for them (Linux
/// `sync_file_range(SYNC_FILE_RANGE_WRITE)` over the whole file; elsewhere nothing), so that
/// a later fsync has less left to write. A hint, not a durability point: errors are left for
/// that fsync (none is thrown). Thread-safe.
void start_writeback(const std::string& path) noexcept;

/// fsyncs the folder that holds `path` (so a rename in it is durable). @throws IoError
void fsync_parent_folder(const std::string& path);

/// fsyncs `temp_path`, renames it to `final_path` (same folder), fsyncs the folder.
/// @throws IoError (the temporary file is then left for the caller to remove)
void publish_file(const std::string& temp_path, const std::string& final_path);

/// Writes `bytes` to `path` atomically (temporary file, fsync, rename, fsync folder).
/// @throws IoError; on failure `path` is unchanged and the temporary file removed.
void write_file_atomic(const std::string& path, std::span<const std::byte> bytes);

/// Reads a whole file. @throws IoError when it cannot be opened or read.
std::vector<std::byte> read_file_bytes(const std::string& path);

/// CRC-32s (`crc32` of checkpoint.hpp) of an append-only file in blocks of `kBlockBytes`
/// (the last block may be partial), kept up to date as bytes are appended, for a
/// checkpoint to store beside the file's length: a changed byte in the recorded part is
/// then found, by block, when the record is read back, while the file's bytes stay those
/// of the data (the same for every pattern of appends). Not thread-safe.
struct BlockChecksums {
  static constexpr std::uint64_t kBlockBytes = std::uint64_t{1} << 20;  ///< 1 MiB
  std::vector<std::uint32_t> crcs;                                      ///< one per block, the last possibly partial
  std::uint64_t bytes = 0;                                              ///< bytes covered

  /// Extends the checksums over appended bytes.
  void add(std::span<const std::byte> data);
  /// Checks the first `bytes` bytes of the file at `path` against `crcs`. `what` names
  /// the record in messages (e.g. "the chain file").
  /// @throws IoError naming the file and the first block that differs (or a file shorter
  /// than `bytes`), ending "set overwrite = true to start afresh".
  void verify(const std::string& path, std::string_view what) const;
};

/// An append-only file (a chain file, a log) whose durable length a checkpoint records
/// (DESIGN.md §4): after `sync()` the checkpoint stores `size()`; a resumed run calls
/// `resume(path, stored_size)`, which drops whatever was appended after that checkpoint,
/// so the file and the checkpoint agree again and the resumed output is byte-identical.
/// Move-only; not shared between threads without locking.
class AppendFile {
 public:
  /// A closed file; move-only.
  AppendFile() = default;
  AppendFile(AppendFile&& o) noexcept;
  AppendFile& operator=(AppendFile&& o) noexcept;
  AppendFile(const AppendFile&) = delete;
  AppendFile& operator=(const AppendFile&) = delete;
  /// Closes the file (without fsync; call `sync()` for durability).
  ~AppendFile();

  /// Creates (or truncates) `path`; a symbolic link there is refused (`O_NOFOLLOW`), never
  /// written through. @throws IoError
  static AppendFile create(const std::string& path);
  /// Opens `path` (not a symbolic link: `O_NOFOLLOW`) for appending after truncating it to
  /// `length` bytes.
  /// @throws IoError when it is missing or shorter than `length` (then the checkpoint and
  /// the file do not belong together).
  static AppendFile resume(const std::string& path, std::uint64_t length);

  /// Appends bytes. @throws IoError (for example, disk full)
  void append(std::span<const std::byte> bytes);
  /// Appends text. @throws IoError
  void append(std::string_view text) { append(std::as_bytes(std::span<const char>(text.data(), text.size()))); }
  /// fsyncs: everything appended so far survives a crash. @throws IoError
  void sync();
  /// Starts writing to the disk what was appended since the last call, without waiting
  /// for it (Linux `sync_file_range(SYNC_FILE_RANGE_WRITE)`; elsewhere nothing), so that
  /// the next `sync()` has little left to wait for: call it after each large append (the
  /// sampler's chain file: every 1 MiB) to move the writeback off the checkpoint. A hint,
  /// not a durability guarantee; errors are left for `sync()` to report. Never throws.
  void start_writeback() noexcept;
  /// Bytes in the file (what was there at open plus what was appended).
  std::uint64_t size() const noexcept { return size_; }
  const std::string& path() const noexcept { return path_; }

 private:
  int fd_ = -1;
  std::uint64_t size_ = 0;
  std::uint64_t writeback_ = 0;  // bytes handed to start_writeback so far
  std::string path_;
};

}  // namespace herd::io
