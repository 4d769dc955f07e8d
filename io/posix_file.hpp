#pragma once
/// @file posix_file.hpp
/// Private helpers of io's POSIX file writers (atomic_file.cpp, log_file.cpp): an owning
/// descriptor, the whole-buffer write loop and errno errors. Not installed.

#include <cerrno>
#include <cstddef>
#include <cstring>
#include <string>

#include <unistd.h>

#include "herd/core/error.hpp"

namespace herd::io::detail {

/// Throws `IoError("<path>: <what> failed: <strerror(errno)>")`.
[[noreturn]] inline void throw_errno(const char* what, const std::string& path) {
  const int e = errno;
  throw IoError(fmt::format("{}: {} failed: {}", path, what, std::strerror(e)));
}

/// Writes all `n` bytes at `p` to `fd`, retrying short writes and EINTR.
/// @throws IoError naming `path` and errno on any other failure (some bytes may be written).
inline void write_all(int fd, const void* p, std::size_t n, const std::string& path) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t w = ::write(fd, c, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw_errno("write", path);
    }
    c += w;
    n -= static_cast<std::size_t>(w);
  }
}

/// An owned file descriptor (-1: none), closed on destruction. Movable, not copyable.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept {
    if (this != &o) reset(o.release());
    return *this;
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { reset(); }
  int get() const noexcept { return fd_; }
  /// Gives up ownership and returns the descriptor.
  int release() noexcept {
    const int f = fd_;
    fd_ = -1;
    return f;
  }
  /// Closes the held descriptor (if any) and holds `fd`.
  void reset(int fd = -1) noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

}  // namespace herd::io::detail
