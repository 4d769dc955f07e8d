#include "herd/io/log_file.hpp"

#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "herd/core/error.hpp"
#include "posix_file.hpp"

namespace herd::io {

using detail::throw_errno;

int open_log_file(const std::string& path, LogOpen how) {
  int flags = O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC;
  if (how == LogOpen::kTruncate) flags |= O_TRUNC;
  if (how == LogOpen::kCreateNew) flags |= O_EXCL;
  int fd = -1;
  do {
    fd = ::open(path.c_str(), flags, 0644);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) throw_errno(how == LogOpen::kCreateNew ? "create" : "open", path);
  return fd;
}

LogFile::LogFile(const std::string& path, LogOpen how) : fd_(open_log_file(path, how)), path_(path) {}

LogFile::LogFile(LogFile&& o) noexcept : fd_(o.fd_), path_(std::move(o.path_)) { o.fd_ = -1; }

LogFile& LogFile::operator=(LogFile&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    path_ = std::move(o.path_);
    o.fd_ = -1;
  }
  return *this;
}

LogFile::~LogFile() {
  if (fd_ >= 0) ::close(fd_);
}

void LogFile::write(std::string_view record) {
  if (fd_ < 0) throw IoError(fmt::format("{}: write to a closed file", path_));
  detail::write_all(fd_, record.data(), record.size(), path_);
}

void LogFile::truncate(std::uint64_t length) {
  if (fd_ < 0) throw IoError(fmt::format("{}: truncate of a closed file", path_));
  if (::ftruncate(fd_, static_cast<off_t>(length)) != 0) throw_errno("truncate", path_);
}

void LogFile::sync() {
  if (fd_ < 0) throw IoError(fmt::format("{}: sync of a closed file", path_));
  if (::fsync(fd_) != 0) throw_errno("fsync", path_);
}

}  // namespace herd::io
