#include "herd/io/atomic_file.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "herd/core/error.hpp"
#include "herd/io/checkpoint.hpp"
#include "posix_file.hpp"

namespace herd::io {

using detail::Fd;
using detail::throw_errno;

namespace {

std::string parent_folder(const std::string& path) {
  const auto slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace

std::string temp_path_for(const std::string& path) {
  static std::atomic<unsigned long> counter{0};
  return fmt::format("{}.tmp.{}.{}", path, static_cast<long>(::getpid()), counter++);
}

void fsync_path(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) throw_errno("open", path);
  if (::fsync(fd.get()) != 0) throw_errno("fsync", path);
}

void start_writeback(const std::string& path) noexcept {
#if defined(__linux__)
  const Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() >= 0) (void)::sync_file_range(fd.get(), 0, 0, SYNC_FILE_RANGE_WRITE);
#else
  (void)path;
#endif
}

void fsync_parent_folder(const std::string& path) {
  const std::string dir = parent_folder(path);
  Fd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) throw_errno("open folder", dir);
  if (::fsync(fd.get()) != 0) throw_errno("fsync folder", dir);
}

void publish_file(const std::string& temp_path, const std::string& final_path) {
  fsync_path(temp_path);
  if (::rename(temp_path.c_str(), final_path.c_str()) != 0) throw_errno(("rename to " + final_path).c_str(), temp_path);
  fsync_parent_folder(final_path);
}

void write_file_atomic(const std::string& path, std::span<const std::byte> bytes) {
  const std::string tmp = temp_path_for(path);
  try {
    Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
    // Named by the file asked for (a missing folder is the usual cause), not the temporary.
    if (fd.get() < 0) throw_errno(("create (as the temporary " + tmp + ")").c_str(), path);
    detail::write_all(fd.get(), bytes.data(), bytes.size(), tmp);
    if (::fsync(fd.get()) != 0) throw_errno("fsync", tmp);
    if (::close(fd.release()) != 0) throw_errno("close", tmp);
    if (::rename(tmp.c_str(), path.c_str()) != 0) throw_errno(("rename to " + path).c_str(), tmp);
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
  fsync_parent_folder(path);
}

std::vector<std::byte> read_file_bytes(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) throw_errno("open", path);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) throw_errno("stat", path);
  if (!S_ISREG(st.st_mode)) throw IoError(fmt::format("{}: not a regular file", path));
  std::vector<std::byte> out(static_cast<std::size_t>(st.st_size));
  std::size_t got = 0;
  while (got < out.size()) {
    const ssize_t r = ::read(fd.get(), out.data() + got, out.size() - got);
    if (r < 0) {
      if (errno == EINTR) continue;
      throw_errno("read", path);
    }
    if (r == 0) break;  // shrank while reading
    got += static_cast<std::size_t>(r);
  }
  out.resize(got);
  return out;
}

// --- AppendFile -------------------------------------------------------------------------

AppendFile::AppendFile(AppendFile&& o) noexcept
    : fd_(o.fd_), size_(o.size_), writeback_(o.writeback_), path_(std::move(o.path_)) {
  o.fd_ = -1;
}

AppendFile& AppendFile::operator=(AppendFile&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    size_ = o.size_;
    writeback_ = o.writeback_;
    path_ = std::move(o.path_);
    o.fd_ = -1;
  }
  return *this;
}

AppendFile::~AppendFile() {
  if (fd_ >= 0) ::close(fd_);
}

AppendFile AppendFile::create(const std::string& path) {
  AppendFile f;
  f.path_ = path;
  f.fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (f.fd_ < 0) throw_errno("create", path);
  return f;
}

AppendFile AppendFile::resume(const std::string& path, std::uint64_t length) {
  AppendFile f;
  f.path_ = path;
  f.fd_ = ::open(path.c_str(), O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
  if (f.fd_ < 0) throw_errno("open", path);
  struct stat st {};
  if (::fstat(f.fd_, &st) != 0) throw_errno("stat", path);
  if (static_cast<std::uint64_t>(st.st_size) < length)
    throw IoError(
        fmt::format("{}: {} bytes, but the checkpoint records {}; the file does not belong to this "
                    "checkpoint",
                    path, static_cast<long long>(st.st_size), length));
  if (::ftruncate(f.fd_, static_cast<off_t>(length)) != 0) throw_errno("truncate", path);
  f.size_ = length;
  f.writeback_ = length;
  return f;
}

void AppendFile::append(std::span<const std::byte> bytes) {
  if (fd_ < 0) throw IoError(fmt::format("{}: append to a closed file", path_));
  // On a failed write size_ keeps the last whole append: the checkpoint never records a
  // partial one (resume truncates the file back to the recorded length).
  detail::write_all(fd_, bytes.data(), bytes.size(), path_);
  size_ += bytes.size();
}

void AppendFile::start_writeback() noexcept {
  if (fd_ < 0 || size_ <= writeback_) return;
#if defined(__linux__)
  (void)::sync_file_range(fd_, static_cast<off_t>(writeback_), static_cast<off_t>(size_ - writeback_),
                          SYNC_FILE_RANGE_WRITE);
#endif
  writeback_ = size_;
}

void AppendFile::sync() {
  if (fd_ < 0) throw IoError(fmt::format("{}: sync of a closed file", path_));
  if (::fsync(fd_) != 0) throw_errno("fsync", path_);
}

void BlockChecksums::add(std::span<const std::byte> data) {
  while (!data.empty()) {
    if (bytes % kBlockBytes == 0) crcs.push_back(0);
    const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(kBlockBytes - bytes % kBlockBytes, data.size()));
    crcs.back() = crc32(data.first(n), crcs.back());
    bytes += n;
    data = data.subspan(n);
  }
}

void BlockChecksums::verify(const std::string& path, std::string_view what) const {
  const std::string again = "the restart record cannot be trusted; set overwrite = true to start afresh";
  const std::uint64_t blocks = (bytes + kBlockBytes - 1) / kBlockBytes;
  if (crcs.size() != blocks)
    throw IoError(fmt::format("{} \"{}\": its checkpoint holds {} block checksums, but {} bytes need {}; {}", what,
                              path, crcs.size(), bytes, blocks, again));
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw_errno("open", path);
  Fd guard(fd);
  std::vector<std::byte> buf(
      static_cast<std::size_t>(std::min<std::uint64_t>(kBlockBytes, std::max<std::uint64_t>(bytes, 1))));
  for (std::uint64_t b = 0; b < blocks; ++b) {
    const std::uint64_t first = b * kBlockBytes;
    const auto n = static_cast<std::size_t>(std::min(kBlockBytes, bytes - first));
    if (!pread_all(fd, buf.data(), n, first)) {
      if (errno != 0) throw_errno("read", path);
      throw IoError(
          fmt::format("{} \"{}\" has fewer bytes than its checkpoint records ({}); {}", what, path, bytes, again));
    }
    if (crc32(std::span<const std::byte>(buf.data(), n)) != crcs[static_cast<std::size_t>(b)])
      throw IoError(
          fmt::format("{} \"{}\" is corrupt: block {} of {} (bytes {} to {}) does not match its CRC-32 in the "
                      "checkpoint; {}",
                      what, path, b + 1, blocks, first, first + n - 1, again));
  }
}

bool pwrite_all(int fd, const void* p, std::size_t n, std::uint64_t offset) noexcept {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t w = ::pwrite(fd, c, n, static_cast<off_t>(offset));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    c += w;
    offset += static_cast<std::uint64_t>(w);
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

bool pread_all(int fd, void* p, std::size_t n, std::uint64_t offset) noexcept {
  char* c = static_cast<char*>(p);
  while (n > 0) {
    const ssize_t r = ::pread(fd, c, n, static_cast<off_t>(offset));
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) errno = 0;  // the file ended first
    if (r <= 0) return false;
    c += r;
    offset += static_cast<std::uint64_t>(r);
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

int create_unlinked_scratch(const std::string& dir, std::string_view stem, std::string& path) {
  path = (dir.empty() ? std::string(".") : dir) + "/" + std::string(stem) + "XXXXXX";
  std::vector<char> name(path.begin(), path.end());
  name.push_back('\0');
  const int fd = ::mkostemp(name.data(), O_CLOEXEC);
  if (fd < 0) return -1;
  path.assign(name.data());
  ::unlink(path.c_str());
  return fd;
}

}  // namespace herd::io
