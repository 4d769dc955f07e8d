#pragma once
#include "herd/core/cxx20.hpp"  // C++20 or one clear error
/// @file output_files.hpp
/// The rules every herd program follows for the files it writes (docs/io.md "Guarantees"):
/// an exclusive lock per output prefix (`OutputPrefixLock`), no writing through symbolic
/// links (`refuse_symlink`, `open_output_file`), an output folder checked for writing before
/// any work is done (`check_folder_writable`), and the temporaries of killed runs cleaned up
/// (`remove_stale_temporaries`). Shared by herd-sample, herd-rl and the C API.
///
/// Thread-safety: the free functions are reentrant; an `OutputPrefixLock` has one owner.
/// None is collective (the caller decides which rank writes).

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

namespace herd::io {

/// True when process `pid` exists and is not a zombie (state Z in /proc/<pid>/stat, Linux
/// proc(5)): a killed process whose parent has not reaped it yet counts as gone. Where
/// /proc is unavailable, existence alone (kill(pid, 0)) decides. Thread-safe, throws nothing.
bool process_alive(long pid);

/// Refuses a symbolic link at `path`: a program writes its outputs itself and never through
/// a link it did not create (a link could point at any file of the user's). Nothing is done
/// when `path` does not exist or is not a link.
/// @throws herd::InputError "\"PATH\" is a symbolic link (to \"TARGET\"); herd does not write
///   through links: remove it or choose another output_prefix".
void refuse_symlink(const std::string& path);

/// Opens `path` for writing as `std::fopen` with mode "wb" (`append` false: created or
/// truncated) or "ab" (`append` true: created or appended to), but with `O_NOFOLLOW`, so a
/// symbolic link at `path` is refused instead of written through, and `O_CLOEXEC`. The
/// caller owns the stream (`std::fclose`).
/// @throws herd::InputError for a link (as `refuse_symlink`); herd::IoError naming the path
///   and the system's reason for any other failure.
std::FILE* open_output_file(const std::string& path, bool append = false);

/// Checks, by creating and removing a temporary file in it (`<dir>/.herd-write-test.<pid>`),
/// that the folder `dir` ("" means ".") exists and accepts new files — so that a run on a
/// read-only folder fails at start-up instead of at its first output, after the work. `what`
/// names the setting in the message (e.g. "output_prefix \"runs/a\"").
/// @throws herd::InputError "WHAT: the output folder \"DIR\" is not writable: REASON".
void check_folder_writable(const std::string& dir, const std::string& what);

/// Removes the temporaries `<file>.tmp.<pid>.<n>` (`temp_path_for`) in folder `dir` of the
/// files named in `names` (every file when `names` is empty) whose process is gone: what a
/// killed run left behind. Temporaries of live processes and of this process are kept;
/// links and folders are never followed. Errors are ignored (cleanup is best effort).
void remove_stale_temporaries(const std::string& dir, const std::vector<std::string>& names);

/// An advisory lock (flock(2)) on `<prefix>.lock`, held while the object lives, so that two
/// runs of one output prefix cannot run at once (they would write the same files, and the
/// second would append to the first's restart record). The lock file holds the taker's pid
/// (for the message) and is removed when the last holder releases it; a lock file left by a
/// killed run is taken over (flock is released by the kernel when its holder dies). The lock
/// file is opened with `O_NOFOLLOW` and must have one name (a symbolic or hard link at
/// `<prefix>.lock` is refused, never written through).
///
/// One process takes it (exclusive); a run of several processes (MPI ranks) shares it: rank 0
/// takes it and calls `share()`, then every other rank `join`s it, so that a new run is
/// refused while any process of the earlier one still runs (after `mpiexec` alone was
/// killed, its ranks may live on for a while and write their restart records). A new run
/// can only take the lock exclusively, so it is refused as long as one holder remains.
/// Release: the holder that finds itself the last (it can turn its shared lock into an
/// exclusive one) removes the file; a run that releases its ranks in order (the others, a
/// barrier, then rank 0) leaves no file behind.
/// Not thread-safe (one owner per object); not collective (each process takes its own).
class OutputPrefixLock {
 public:
  /// Takes the lock exclusively for `prefix`; the prefix's folder must exist. `program` names
  /// the kind of run in the message (e.g. "herd-sample").
  /// @throws herd::InputError "output_prefix \"P\" is in use by another PROGRAM run (pid N,
  ///   lock file P.lock)" when another process holds it (shared or exclusive; when the pid in
  ///   the file has ended, the message says that other processes of that run still hold it),
  ///   or for a link at `P.lock`; herd::IoError when the lock file cannot be created (e.g. a
  ///   read-only folder).
  explicit OutputPrefixLock(const std::string& prefix, const std::string& program = "herd");
  /// Releases the lock; removes the lock file when no other process holds it.
  ~OutputPrefixLock();
  OutputPrefixLock(const OutputPrefixLock&) = delete;
  OutputPrefixLock& operator=(const OutputPrefixLock&) = delete;

  /// Turns the exclusive lock into a shared one, so that the other processes of this run can
  /// `join` it. flock(2) converts by releasing and re-taking, so a new run that tries at that
  /// instant may win the lock instead.
  /// @throws herd::InputError (the message of the constructor) when another run took the lock
  ///   in between; herd::IoError on another flock failure.
  void share();

  /// Another process of the run that holds the lock for `prefix` (shared, see `share`) takes
  /// a shared lock on the same file. Returns nullptr when `<prefix>.lock` does not exist here
  /// (a process whose node does not see the output folder of the taker).
  /// @throws herd::InputError when the lock is held exclusively (a new run took it) or the
  ///   file is a link; herd::IoError on another failure.
  static std::unique_ptr<OutputPrefixLock> join(const std::string& prefix, const std::string& program = "herd");

  /// The lock file, `<prefix>.lock`.
  const std::string& path() const noexcept { return path_; }

 private:
  struct Joined {};
  /// A shared lock `join` took on `fd`.
  OutputPrefixLock(Joined, std::string path, std::string prefix, std::string program, int fd)
      : path_(std::move(path)), prefix_(std::move(prefix)), program_(std::move(program)), fd_(fd), shared_(true) {}

  std::string path_;
  std::string prefix_, program_;
  int fd_ = -1;
  bool shared_ = false;
};

/// Removes, from a handler of a signal that ends the process (SIGINT, SIGTERM), the lock files
/// of the `OutputPrefixLock`s this process holds, as their destructors would: a file is
/// removed by its last holder only (an exclusive holder, or a shared one that can take it
/// exclusively), and only while it is still this lock's file. The locks themselves go with
/// the process. Async-signal-safe; thread-safe against locks taken or released meanwhile (a
/// lock whose path has 4096 bytes or more is not covered: its file stays, and the next run
/// takes it over).
void release_prefix_locks_on_signal() noexcept;

}  // namespace herd::io
