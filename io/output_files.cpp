#include "herd/io/output_files.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <mutex>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "herd/core/error.hpp"

namespace herd::io {

namespace fs = std::filesystem;

namespace {

std::string link_message(const std::string& path) {
  std::error_code ec;
  const fs::path target = fs::read_symlink(path, ec);
  return fmt::format(
      "\"{}\" is a symbolic link{}; herd does not write through links: remove it or choose another "
      "output_prefix",
      path, ec ? std::string() : fmt::format(" (to \"{}\")", target.string()));
}

bool is_link(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode);
}

}  // namespace

bool process_alive(long pid) {
  if (pid <= 0) return false;
  if (!(::kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM)) return false;
  // A zombie (killed, not yet reaped by its parent, e.g. mpiexec) holds no files any more.
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  const std::size_t close = line.rfind(')');  // comm may hold spaces and parentheses
  if (close == std::string::npos || close + 2 >= line.size()) return true;
  return line[close + 2] != 'Z' && line[close + 2] != 'X';
}

void refuse_symlink(const std::string& path) {
  if (is_link(path)) throw InputError(link_message(path));
}

std::FILE* open_output_file(const std::string& path, bool append) {
  const int flags = O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC | (append ? O_APPEND : O_TRUNC);
  const int fd = ::open(path.c_str(), flags, 0644);
  if (fd < 0) {
    const int e = errno;
    if (e == ELOOP && is_link(path)) throw InputError(link_message(path));
    throw IoError(fmt::format("cannot {} \"{}\": {}", append ? "open" : "create", path, std::strerror(e)));
  }
  std::FILE* f = ::fdopen(fd, append ? "ab" : "wb");
  if (f == nullptr) {
    const int e = errno;
    ::close(fd);
    throw IoError(fmt::format("cannot open \"{}\": {}", path, std::strerror(e)));
  }
  return f;
}

void check_folder_writable(const std::string& dir, const std::string& what) {
  const std::string d = dir.empty() ? std::string(".") : dir;
  const std::string probe = fmt::format("{}/.herd-write-test.{}", d, static_cast<long>(::getpid()));
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    const int e = errno;
    if (e == EEXIST) return;  // this process's own probe of another prefix in the same folder
    throw InputError(fmt::format("{}: the output folder \"{}\" is not writable: {}", what, d, std::strerror(e)));
  }
  ::close(fd);
  ::unlink(probe.c_str());
}

void remove_stale_temporaries(const std::string& dir, const std::vector<std::string>& names) {
  std::error_code ec;
  if (is_link(dir) || !fs::is_directory(dir, ec)) return;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    const std::size_t t = n.rfind(".tmp.");
    if (t == std::string::npos || t == 0) continue;
    const std::string rest = n.substr(t + 5);
    const std::size_t dot = rest.find('.');
    if (dot == std::string::npos || dot == 0 || dot + 1 == rest.size() ||
        rest.find_first_not_of("0123456789.") != std::string::npos || rest.find('.', dot + 1) != std::string::npos)
      continue;
    if (!names.empty() && std::find(names.begin(), names.end(), n.substr(0, t)) == names.end()) continue;
    if (dot > 18) continue;  // not a pid
    const long pid = std::stol(rest.substr(0, dot));
    if (pid == static_cast<long>(::getpid()) || process_alive(pid)) continue;
    std::error_code rec;
    if (!e.is_symlink(rec) && !e.is_regular_file(rec)) continue;  // never a folder
    fs::remove(e.path(), rec);                                    // a link itself, not its target
  }
}

namespace {

/// The refusal when another process holds `path`'s lock (fd: an open descriptor of it, for
/// the holder's pid).
InputError lock_in_use(int fd, const std::string& prefix, const std::string& program, const std::string& path) {
  char buf[32] = {};
  const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  std::string holder = n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
  while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
  long pid = 0;
  try {
    pid = holder.empty() ? 0 : std::stol(holder);
  } catch (const std::exception&) {
    pid = 0;
  }
  if (pid > 0 && !process_alive(pid))
    return InputError(
        fmt::format("output_prefix \"{}\" is in use by another {} run (its rank 0, pid {}, has "
                    "ended; other processes of that run still hold the lock file \"{}\"): wait for "
                    "them to end or stop them, or choose another output_prefix",
                    prefix, program, holder, path));
  return InputError(
      fmt::format("output_prefix \"{}\" is in use by another {} run (pid {}, lock file \"{}\"); wait "
                  "for it to finish or choose another output_prefix",
                  prefix, program, holder.empty() ? std::string("?") : holder, path));
}

/// Opens `path` for locking: no links, one name. Returns -1 for a missing file when
/// `create` is false.
int open_lock_file(const std::string& path, bool create) {
  const int fd = ::open(path.c_str(), O_RDWR | O_NOFOLLOW | O_CLOEXEC | (create ? O_CREAT : 0), 0644);
  if (fd < 0) {
    const int e = errno;
    if (e == ENOENT && !create) return -1;
    if (e == ELOOP && is_link(path)) throw InputError(link_message(path));
    throw IoError(
        fmt::format("cannot {} the lock file \"{}\": {}", create ? "create" : "open", path, std::strerror(e)));
  }
  struct stat a {};
  if (::fstat(fd, &a) != 0 || !S_ISREG(a.st_mode) || a.st_nlink > 1) {
    ::close(fd);
    throw InputError(
        fmt::format("the lock file \"{}\" is not a plain file of its own (another name links to it); "
                    "herd does not write through links: remove it or choose another output_prefix",
                    path));
  }
  return fd;
}

/// flock(fd, op | LOCK_NB). On a failure closes fd and throws: the refusal (`lock_in_use`)
/// when another process holds the lock, herd::IoError otherwise.
void lock_or_throw(int fd, int op, const std::string& prefix, const std::string& program, const std::string& path) {
  if (::flock(fd, op | LOCK_NB) == 0) return;
  const int err = errno;
  if (err != EWOULDBLOCK && err != EINTR) {
    ::close(fd);
    throw IoError(fmt::format("cannot lock \"{}\": {}", path, std::strerror(err)));
  }
  InputError refusal = lock_in_use(fd, prefix, program, path);
  ::close(fd);
  throw refusal;
}

/// True when `fd` is still the file at `path` (not replaced or removed since it was opened).
bool same_file(int fd, const std::string& path) {
  struct stat a {
  }, b{};
  return ::fstat(fd, &a) == 0 && ::lstat(path.c_str(), &b) == 0 && a.st_ino == b.st_ino && a.st_dev == b.st_dev;
}

/// The lock files this process holds, for release_prefix_locks_on_signal: a fixed table that
/// a signal handler reads without allocating or locking. A slot is published by storing its
/// descriptor last and retired by storing -1 first; `held_mutex` orders the writers only.
struct HeldLock {
  std::atomic<int> fd{-1};
  std::atomic<bool> shared{false};
  char path[4096] = {};
};
constexpr std::size_t kHeldLocks = 16;
HeldLock held_locks[kHeldLocks];
std::mutex& held_mutex() {
  static std::mutex mu;
  return mu;
}

/// Records lock `fd` on `path`. A path too long for the table, or a table full, is not
/// recorded: its file is then left by a signal, and the next run takes it over.
void remember_lock(int fd, const std::string& path, bool shared) {
  if (path.size() >= sizeof(HeldLock::path)) return;
  const std::lock_guard<std::mutex> lock(held_mutex());
  for (HeldLock& h : held_locks)
    if (h.fd.load(std::memory_order_relaxed) < 0) {
      std::memcpy(h.path, path.c_str(), path.size() + 1);
      h.shared.store(shared, std::memory_order_relaxed);
      h.fd.store(fd, std::memory_order_release);
      return;
    }
}

/// Retires (or, with `shared`, marks shared) the record of lock `fd`.
void update_lock(int fd, bool forget, bool shared = true) {
  const std::lock_guard<std::mutex> lock(held_mutex());
  for (HeldLock& h : held_locks)
    if (h.fd.load(std::memory_order_relaxed) == fd) {
      if (forget) h.fd.store(-1, std::memory_order_release);
      else h.shared.store(shared, std::memory_order_release);
    }
}

/// The destructor's rule, for a lock on `fd` at `path`: the last holder (exclusive, or the
/// one that can turn its shared lock exclusive) removes the file if it is still this lock's.
/// Holders that end together (the ranks of one run, each stopped by the signal mpiexec
/// forwards) would each fail the conversion, which drops their own share (flock converts by
/// releasing first), and leave the file to nobody: a few retries 2 ms apart let the one that
/// retries after the others let go remove it. Async-signal-safe (flock, nanosleep, fstat,
/// lstat, unlink).
void remove_if_last(int fd, const char* path, bool shared) noexcept {
  bool last = !shared || ::flock(fd, LOCK_EX | LOCK_NB) == 0;
  for (int retry = 0; !last && retry < 10; ++retry) {
    const struct timespec pause { 0, 2'000'000 };
    ::nanosleep(&pause, nullptr);
    last = ::flock(fd, LOCK_EX | LOCK_NB) == 0;
  }
  struct stat a {
  }, b{};
  if (last && ::fstat(fd, &a) == 0 && ::lstat(path, &b) == 0 && a.st_ino == b.st_ino && a.st_dev == b.st_dev)
    ::unlink(path);
}

}  // namespace

void release_prefix_locks_on_signal() noexcept {
  for (HeldLock& h : held_locks) {
    const int fd = h.fd.load(std::memory_order_acquire);
    if (fd >= 0) remove_if_last(fd, h.path, h.shared.load(std::memory_order_acquire));
  }
}

OutputPrefixLock::OutputPrefixLock(const std::string& prefix, const std::string& program)
    : path_(prefix + ".lock"), prefix_(prefix), program_(program) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    const int fd = open_lock_file(path_, true);
    lock_or_throw(fd, LOCK_EX, prefix, program, path_);
    // The holder may have removed the file between our open and flock: then the lock is on
    // an unlinked inode, and a third run could lock a new file. Retry until they agree.
    if (same_file(fd, path_)) {
      const std::string pid = std::to_string(static_cast<long>(::getpid())) + "\n";
      if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) < 0) {
        // The pid is only for the message; the lock itself holds.
      }
      fd_ = fd;
      remember_lock(fd_, path_, false);
      return;
    }
    ::close(fd);
  }
  throw IoError(fmt::format("cannot lock \"{}\": it keeps being replaced", path_));
}

void OutputPrefixLock::share() {
  if (shared_ || fd_ < 0) return;
  const int fd = fd_;
  fd_ = -1;  // on a failure the lock went to another run: never remove its file
  lock_or_throw(fd, LOCK_SH, prefix_, program_, path_);
  fd_ = fd;
  shared_ = true;
  update_lock(fd_, false, true);
}

std::unique_ptr<OutputPrefixLock> OutputPrefixLock::join(const std::string& prefix, const std::string& program) {
  std::string path = prefix + ".lock";
  const int fd = open_lock_file(path, false);
  if (fd < 0) return nullptr;
  lock_or_throw(fd, LOCK_SH, prefix, program, path);
  remember_lock(fd, path, true);
  return std::unique_ptr<OutputPrefixLock>(new OutputPrefixLock(Joined{}, std::move(path), prefix, program, fd));
}

OutputPrefixLock::~OutputPrefixLock() {
  if (fd_ < 0) return;
  update_lock(fd_, true);
  // The last holder removes the file, while still holding it exclusively (a waiting run sees
  // the inode change and retries). A holder that cannot get it exclusively leaves the file
  // to the others (flock converts by releasing first, so the lock may be gone already).
  remove_if_last(fd_, path_.c_str(), shared_);
  ::close(fd_);
}

}  // namespace herd::io
