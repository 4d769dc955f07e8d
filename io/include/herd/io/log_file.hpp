#pragma once
#include "herd/core/cxx20.hpp"  // C++20 or one clear error
/// @file log_file.hpp
/// `LogFile`: an output file that grows by whole records (a CSV row, a TFRecord), written
/// while a run goes so that it can be watched (`tail -f`, pandas, TensorBoard) and stays
/// valid after the process is killed at any moment: each record goes to the kernel in one
/// `write()` of the whole record (O_APPEND), so a SIGKILL leaves whole records only (the
/// page cache keeps them; a power loss may lose the unsynced tail, not mix records).
///
/// Every file of this kind is opened by `open_log_file`, the one place that decides how
/// outputs are opened (flags, permissions).

#include <cstdint>
#include <string>
#include <string_view>

namespace herd::io {

/// How `open_log_file` opens a file.
enum class LogOpen {
  kTruncate,   ///< create or empty it
  kAppend,     ///< create it or keep what it holds, writing after it
  kCreateNew,  ///< create it; fail when it exists (O_EXCL)
};

/// Opens `path` write-only with O_APPEND and O_CLOEXEC (mode 0644 when created) as `how`
/// says and returns the descriptor. @throws herd::IoError naming the path and the system's
/// reason (for kCreateNew also when it exists).
int open_log_file(const std::string& path, LogOpen how);

/// An append-only file of whole records; move-only; not thread-safe.
class LogFile {
 public:
  /// A closed file.
  LogFile() = default;
  /// Opens `path` (`open_log_file`). @throws herd::IoError
  LogFile(const std::string& path, LogOpen how);
  LogFile(LogFile&& o) noexcept;
  LogFile& operator=(LogFile&& o) noexcept;
  LogFile(const LogFile&) = delete;
  LogFile& operator=(const LogFile&) = delete;
  /// Closes the descriptor (no fsync).
  ~LogFile();

  /// Appends `record` with one `write()` of all its bytes (continued only after a short
  /// write, e.g. a full disk, which then fails on the next call). @throws herd::IoError
  void write(std::string_view record);
  /// Cuts the file to `length` bytes (records past a checkpoint). @throws herd::IoError
  void truncate(std::uint64_t length);
  /// fsyncs the file. @throws herd::IoError
  void sync();
  /// True while open.
  bool is_open() const noexcept { return fd_ >= 0; }
  /// The path it was opened with.
  const std::string& path() const noexcept { return path_; }

 private:
  int fd_ = -1;
  std::string path_;
};

}  // namespace herd::io
