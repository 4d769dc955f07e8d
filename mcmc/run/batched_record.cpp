// The batched run's restart record (herd/mcmc/run/batched_record.hpp).
#include "herd/mcmc/run/batched_record.hpp"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <span>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/uio.h>
#include <unistd.h>

#include <fmt/format.h>

#include "herd/core/error.hpp"
#include "herd/io/atomic_file.hpp"
#include "herd/io/checkpoint.hpp"

namespace herd::mcmc {

BatchedDrawRecord::BatchedDrawRecord(std::string path, io::BlockChecksums sums)
    : path_(std::move(path)), sums_(std::move(sums)) {
  const std::uint64_t keep = sums_.bytes;
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd_ < 0) fail("open");
  struct stat st {};
  if (::fstat(fd_, &st) != 0) fail("fstat");
  if (static_cast<std::uint64_t>(st.st_size) < keep) {
    ::close(fd_);
    fd_ = -1;
    throw IoError(
        fmt::format("the restart record \"{}\" has {} bytes, but its checkpoint needs {}; set "
                    "overwrite = true to start afresh",
                    path_, static_cast<long long>(st.st_size), keep));
  }
  try {
    sums_.verify(path_, "the batched restart record");
  } catch (...) {
    ::close(fd_);
    fd_ = -1;
    throw;
  }
  if (::ftruncate(fd_, static_cast<off_t>(keep)) != 0) fail("ftruncate");
  size_ = keep;
}

BatchedDrawRecord::~BatchedDrawRecord() {
  if (fd_ >= 0) ::close(fd_);
}

void BatchedDrawRecord::append_bytes(const void* data, std::size_t bytes) {
  const char* p = static_cast<const char*>(data);
  std::size_t left = bytes;
  sums_.add(std::span<const std::byte>(static_cast<const std::byte*>(data), bytes));
  while (left > 0) {
    const ssize_t w = ::pwrite(fd_, p, left, static_cast<off_t>(size_));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) fail("write");
    p += w;
    left -= static_cast<std::size_t>(w);
    size_ += static_cast<std::uint64_t>(w);
  }
}

void BatchedDrawRecord::read_bytes(std::uint64_t offset, void* data, std::size_t bytes) const {
  if (!io::pread_all(fd_, data, bytes, offset)) fail("read");
}

void BatchedDrawRecord::sync() {
  if (::fsync(fd_) != 0) fail("fsync");
}

void BatchedDrawRecord::fail(const char* what) const {
  const int e = errno;
  throw IoError(fmt::format("{} of the restart record \"{}\" failed: {}", what, path_,
                            e != 0 ? std::strerror(e) : "unexpected end of file"));
}

BatchedRestartRecord::BatchedRestartRecord(Communicator& comm, const SamplerSpecs& specs, const BatchedDramOptions& o,
                                           std::uint64_t input_hash, bool resuming, std::uint64_t legacy_input_hash)
    : comm_(comm),
      specs_(specs),
      hash_(input_hash),
      legacy_hash_(legacy_input_hash),
      m_(o.num_chains),
      d_(o.ndim),
      stages_(1 + o.delayed_rejection_count),
      per_chain_(o.adaptation == BatchedAdaptation::kPerChain),
      adapt_(o.adaptation != BatchedAdaptation::kNone && o.warmup > 0) {
  const std::string dir = specs.output_prefix + "_restart";
  path_ = dir + "/batched.ckpt";
  if (resuming && std::filesystem::exists(path_)) read(path_);
  if (comm_.rank() == 0) draws_ = std::make_unique<BatchedDrawRecord>(dir + "/draws.bin", draw_sums_);
  last_k_ = have_ ? snap_.next_proposal : 0;
}

bool BatchedRestartRecord::due(std::uint64_t k) {
  std::int32_t yes = 0;
  if (comm_.rank() == 0) {
    const bool steps =
        specs_.checkpoint_period > 0 && k - last_k_ >= static_cast<std::uint64_t>(specs_.checkpoint_period);
    const bool time = specs_.checkpoint_period_seconds > 0 && since_.seconds() >= specs_.checkpoint_period_seconds;
    yes = steps || time ? 1 : 0;
  }
  if (comm_.size() > 1) comm_.broadcast(&yes, 1, DataType::kInt32, 0);
  if (yes != 0) last_k_ = k;
  return yes != 0;
}

void BatchedRestartRecord::save(const BatchedSnapshot& st) {
  Timer t;
  const bool root = comm_.rank() == 0;
  io::CheckpointWriter w(kKind, kVersion);
  // Per-chain arrays, gathered in global chain order (rank-major).
  auto rows = [&](const char* name, const auto& v) {
    using T = typename std::decay_t<decltype(v)>::value_type;
    std::vector<T> all(root ? v.size() * static_cast<std::size_t>(comm_.size()) : 0);
    comm_.gather(v.data(), root ? all.data() : nullptr, v.size(), data_type_of<T>(), 0);
    if (root) w.add(name, all);
  };
  rows("x", st.x);
  rows("lp", st.lp);
  rows("accepted", st.accepted);
  rows("out_of_domain", st.out_of_domain);
  rows("nan_count", st.nan_count);
  if (!st.accepted_warmup.empty()) rows("accepted_warmup", st.accepted_warmup);
  rows("state_step", st.state_step);
  rows("state_stage", st.state_stage);
  rows("state_alpha", st.state_alpha);
  if (adapt_) rows("adapt_measure", st.adapt_measure);
  // The factor(s) and the adaptation state: per chain, or shared (the same on every rank).
  for (const auto& [name, v] : {std::pair<const char*, const std::vector<double>*>{"chol", &st.chol},
                                {"run_n", &st.run_n},
                                {"run_mean", &st.run_mean},
                                {"run_m2", &st.run_m2},
                                {"ad_ref", &st.ad_ref}}) {
    if (per_chain_ && (adapt_ || v == &st.chol)) rows(name, *v);
    else if (root) w.add(name, *v);
  }
  if (!root) return;
  draws_->sync();
  w.add_value("input_hash", hash_);
  w.add_value("chains", m_ * comm_.size());
  w.add_value("chains_per_rank", m_);
  w.add_value("ndim", static_cast<std::int64_t>(d_));
  w.add_value("stages", static_cast<std::int64_t>(stages_));
  w.add_value("next_proposal", st.next_proposal);
  w.add_value("draws_done", st.draws_done);
  w.add_value("draw_bytes", draws_->size());
  w.add("draw_crc32", draws_->checksums().crcs);
  w.add_value("seconds", st.seconds);
  w.add_value("adaptive_updates", st.adaptive_updates);
  w.add_value("chol_failures", st.chol_failures);
  w.commit(path_);
  ++checkpoints;
  checkpoint_seconds += t.seconds();
  since_ = Timer();
}

void BatchedRestartRecord::discard() {
  draws_.reset();
  std::error_code ec;
  std::filesystem::remove(path_, ec);
  std::filesystem::remove(specs_.output_prefix + "_restart/draws.bin", ec);
}

void BatchedRestartRecord::read(const std::string& path) {
  io::CheckpointReader r(path);
  r.expect_kind(kKind, kVersion);
  if (r.kind_version() < kVersion)
    throw IoError(
        fmt::format("the batched restart record \"{}\" has layout version {}, but this herd records per-draw "
                    "statistics (version {}); set overwrite = true to start afresh",
                    path, r.kind_version(), kVersion));
  // The arrays are in global chain order: any layout of the same total reads its rows.
  const std::int64_t n = m_ * comm_.size();
  const auto hash = r.value<std::uint64_t>("input_hash");
  if ((hash != hash_ && (legacy_hash_ == 0 || hash != legacy_hash_)) || r.value<std::int64_t>("chains") != n ||
      r.value<std::int64_t>("ndim") != d_ || r.value<std::int64_t>("stages") != stages_)
    throw InputError(
        fmt::format("the restart record \"{}\" is of another batched run ({} chains, {} per process; this run: {} "
                    "chains); resume with the same input and total of chains (processes x chains_per_rank), or set "
                    "overwrite = true",
                    path, r.value<std::int64_t>("chains"), r.value<std::int64_t>("chains_per_rank"), n));
  read_arrays(r);
  snap_.next_proposal = r.value<std::uint64_t>("next_proposal");
  snap_.draws_done = r.value<std::int64_t>("draws_done");
  snap_.seconds = r.value<double>("seconds");
  snap_.adaptive_updates = r.value<std::int64_t>("adaptive_updates");
  snap_.chol_failures = r.value<std::int64_t>("chol_failures");
  draw_sums_.bytes = r.value<std::uint64_t>("draw_bytes");
  if (!r.has("draw_crc32"))
    throw IoError(
        fmt::format("the batched restart record \"{}\" has no checksums of its draws (it was "
                    "written by an earlier version of herd); set overwrite = true to start afresh",
                    path));
  draw_sums_.crcs = r.get<std::uint32_t>("draw_crc32");
  have_ = true;
}

void BatchedRestartRecord::read_arrays(io::CheckpointReader& r) {
  const auto rank = static_cast<std::size_t>(comm_.rank());
  // This rank's rows of an array gathered in global chain order.
  auto mine = [&](const char* name, auto& out) {
    using T = typename std::decay_t<decltype(out)>::value_type;
    const std::vector<T> all = r.get<T>(name);
    const std::size_t per = all.size() / static_cast<std::size_t>(comm_.size());
    out.assign(all.begin() + static_cast<std::ptrdiff_t>(rank * per),
               all.begin() + static_cast<std::ptrdiff_t>((rank + 1) * per));
  };
  mine("x", snap_.x);
  mine("lp", snap_.lp);
  mine("accepted", snap_.accepted);
  mine("out_of_domain", snap_.out_of_domain);
  mine("nan_count", snap_.nan_count);
  if (r.has("accepted_warmup")) mine("accepted_warmup", snap_.accepted_warmup);
  mine("state_step", snap_.state_step);
  mine("state_stage", snap_.state_stage);
  mine("state_alpha", snap_.state_alpha);
  if (adapt_) mine("adapt_measure", snap_.adapt_measure);
  for (const auto& [name, v] : {std::pair<const char*, std::vector<double>*>{"chol", &snap_.chol},
                                {"run_n", &snap_.run_n},
                                {"run_mean", &snap_.run_mean},
                                {"run_m2", &snap_.run_m2},
                                {"ad_ref", &snap_.ad_ref}}) {
    if (per_chain_ && (adapt_ || v == &snap_.chol)) mine(name, *v);
    else *v = r.get<double>(name);
  }
}

}  // namespace herd::mcmc

namespace herd::mcmc {

namespace {

/// Reads the file bytes at `offset` into the buffers `iov[0..count)` in order (preadv, at
/// most IOV_MAX buffers a call, short reads continued). Returns false with errno set on failure.
bool read_scattered(int fd, std::uint64_t offset, std::vector<iovec>& iov) {
  std::size_t i = 0;
  while (i < iov.size()) {
    const int count = static_cast<int>(std::min<std::size_t>(iov.size() - i, IOV_MAX));
    const ssize_t r = ::preadv(fd, iov.data() + i, count, static_cast<off_t>(offset));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      if (r == 0) errno = 0;
      return false;
    }
    offset += static_cast<std::uint64_t>(r);
    auto left = static_cast<std::size_t>(r);
    while (i < iov.size() && left >= iov[i].iov_len) left -= iov[i++].iov_len;
    if (left > 0) {  // a buffer read in part: continue inside it
      iov[i].iov_base = static_cast<char*>(iov[i].iov_base) + left;
      iov[i].iov_len -= left;
    }
  }
  return true;
}

}  // namespace

BatchedDrawStore::BatchedDrawStore(const std::string& dir, std::int64_t chains, int ndim, std::int64_t draws)
    : m_(chains), n_(draws), d_(ndim) {
  fd_ = io::create_unlinked_scratch(dir, ".herd-draws-", path_);
  if (fd_ < 0) fail("creating");
  const auto per = static_cast<std::uint64_t>(m_) * static_cast<std::uint64_t>(n_);
  for (int j = 0; j < d_ + 3; ++j) cols_.push_back({per * sizeof(double) * static_cast<std::uint64_t>(j), 8});
  end_ = per * sizeof(double) * static_cast<std::uint64_t>(d_ + 3);
  cols_.push_back({end_, 1});
  cols_.push_back({end_ + per, 1});
  end_ += 2 * per;
  // The file is sparse until written: check the free space now, before the sampling, not
  // when a block of draws fails to fit after hours of it. (Appended columns come later and
  // are checked by their writes.)
  struct statvfs fs {};
  if (::fstatvfs(fd_, &fs) == 0) {
    const std::uint64_t free_bytes = static_cast<std::uint64_t>(fs.f_bavail) * fs.f_frsize;
    if (end_ > free_bytes)
      throw IoError(fmt::format(
          "the scratch file of the draws \"{}\" needs {} bytes ({} chains x {} draws x (8 x ({} coordinates + 3) + "
          "2)), but its file system has {} bytes free; free space in \"{}\" (the folder of output_prefix) or "
          "record fewer draws (chain_size, thin)",
          path_, end_, m_, n_, d_, free_bytes, dir.empty() ? std::string(".") : dir));
  }
  if (::ftruncate(fd_, static_cast<off_t>(end_)) != 0) fail("sizing");
}

BatchedDrawStore::~BatchedDrawStore() {
  if (fd_ >= 0) ::close(fd_);
}

void BatchedDrawStore::fail(const char* what) const {
  const int e = errno;
  throw IoError(fmt::format("{} the scratch file of the draws \"{}\" (unlinked once created) failed: {}", what, path_,
                            e != 0 ? std::strerror(e) : "unexpected end of file"));
}

std::size_t BatchedDrawStore::block_of(std::int64_t first, std::int64_t n) {
  const auto it = std::lower_bound(blocks_.begin(), blocks_.end(), first,
                                   [](const Block& b, std::int64_t f) { return b.first < f; });
  if (it != blocks_.end() && it->first == first && it->n == n) return static_cast<std::size_t>(it - blocks_.begin());
  const std::int64_t next = blocks_.empty() ? 0 : blocks_.back().first + blocks_.back().n;
  if (it != blocks_.end() || first != next || n < 1 || first + n > n_)
    throw IoError(
        fmt::format("the draws' scratch file: block [{}, {}) does not follow the blocks written ({} of {} "
                    "draws per chain)",
                    first, first + n, next, n_));
  blocks_.push_back({first, n});
  return blocks_.size() - 1;
}

void BatchedDrawStore::put(const Column& c, const Block& b, std::int64_t c0, std::int64_t count, const void* data) {
  const auto offset = c.offset + static_cast<std::uint64_t>(m_ * b.first + c0 * b.n) * c.size;
  if (!io::pwrite_all(fd_, data, static_cast<std::size_t>(count * b.n) * c.size, offset)) fail("writing");
}

void BatchedDrawStore::get(const Column& c, const Block& b, std::int64_t c0, std::int64_t count, void* data) const {
  std::vector<iovec> iov{{data, static_cast<std::size_t>(count * b.n) * c.size}};
  if (!read_scattered(fd_, c.offset + static_cast<std::uint64_t>(m_ * b.first + c0 * b.n) * c.size, iov))
    fail("reading");
}

void BatchedDrawStore::write_block(std::int64_t first, std::int64_t n, const double* x, const double* lp) {
  const std::size_t known = blocks_.size();
  const Block b = blocks_[block_of(first, n)];
  const auto rows = static_cast<std::size_t>(m_ * n), d = static_cast<std::size_t>(d_);
  if (blocks_.size() > known) count_runs(b, x, lp);
  tmp_.resize(rows);
  for (std::size_t j = 0; j < d; ++j) {
    for (std::size_t q = 0; q < rows; ++q) tmp_[q] = x[q * d + j];
    put(cols_[j], b, 0, m_, tmp_.data());
  }
  put(cols_[lp_column()], b, 0, m_, lp);
}

void BatchedDrawStore::count_runs(const Block& b, const double* x, const double* lp) {
  // A draw starts a run unless it equals the chain's draw before it (x and lp, compared
  // with ==, as chain_compact merges them); last_ keeps each chain's last draw.
  const auto d = static_cast<std::size_t>(d_), n = static_cast<std::size_t>(b.n);
  const auto m = static_cast<std::size_t>(m_);
  if (b.first == 0) {
    runs_.assign(m, 0);
    last_.assign(m * (d + 1), 0.0);
  }
  for (std::size_t c = 0; c < m; ++c) {
    double* last = last_.data() + c * (d + 1);
    for (std::size_t t = 0; t < n; ++t) {
      const double* row = x + (c * n + t) * d;
      const double l = lp[c * n + t];
      const bool same = (b.first > 0 || t > 0) && std::equal(row, row + d, last) && l == last[d];
      if (!same) ++runs_[c];
      std::copy_n(row, d, last);
      last[d] = l;
    }
  }
}

void BatchedDrawStore::write_stats(std::int64_t first, std::int64_t n, const BatchedDrawStats& s) {
  const Block b = blocks_[block_of(first, n)];
  put(cols_[alpha_column()], b, 0, m_, s.acceptance_probability);
  put(cols_[measure_column()], b, 0, m_, s.adaptation_measure);
  put(cols_[measure_column() + 1], b, 0, m_, s.accepted);
  put(cols_[measure_column() + 2], b, 0, m_, s.dr_stage);
}

std::size_t BatchedDrawStore::add_columns(std::size_t count) {
  const std::size_t first = cols_.size();
  const auto bytes = static_cast<std::uint64_t>(m_) * static_cast<std::uint64_t>(n_) * sizeof(double);
  for (std::size_t i = 0; i < count; ++i) {
    cols_.push_back({end_, 8});
    end_ += bytes;
  }
  if (::ftruncate(fd_, static_cast<off_t>(end_)) != 0) fail("sizing");
  return first;
}

void BatchedDrawStore::write_chains(std::size_t col, std::int64_t c0, std::int64_t count, const double* values) {
  HERD_REQUIRE(col < cols_.size() && cols_[col].size == 8 && c0 >= 0 && c0 + count <= m_,
               "BatchedDrawStore::write_chains: column {} chains [{}, {})", col, c0, c0 + count);
  for (const Block& b : blocks_) {
    tmp_.resize(static_cast<std::size_t>(count * b.n));
    for (std::int64_t c = 0; c < count; ++c)
      std::copy_n(values + c * n_ + b.first, b.n, tmp_.begin() + static_cast<std::ptrdiff_t>(c * b.n));
    put(cols_[col], b, c0, count, tmp_.data());
  }
}

void BatchedDrawStore::column(std::size_t col, std::vector<double>& out) const {
  HERD_REQUIRE(col < cols_.size() && cols_[col].size == 8, "BatchedDrawStore::column: {} is not a column of doubles",
               col);
  out.resize(static_cast<std::size_t>(m_ * n_));
  gather(cols_[col], out.data());
}

void BatchedDrawStore::read_range(std::size_t col, std::size_t first, std::span<double> out) const {
  HERD_REQUIRE(col < cols_.size() && cols_[col].size == 8,
               "BatchedDrawStore::read_range: {} is not a column of doubles", col);
  get_range(cols_[col], first, out.size(), out.data());
}

void BatchedDrawStore::read_bytes_range(bool dr_stage, std::size_t first, std::span<std::uint8_t> out) const {
  get_range(cols_[measure_column() + (dr_stage ? 2 : 1)], first, out.size(), out.data());
}

void BatchedDrawStore::get_range(const Column& cl, std::size_t first, std::size_t count, void* data) const {
  const auto n = static_cast<std::size_t>(n_), m = static_cast<std::size_t>(m_);
  const std::size_t written = blocks_.empty() ? 0 : static_cast<std::size_t>(blocks_.back().first + blocks_.back().n);
  if (first + count > m * n || (count > 0 && written < n))
    throw IoError(
        fmt::format("the draws' scratch file: entries [{}, {}) of {} chains x {} draws ({} written per chain)", first,
                    first + count, m, n, written));
  // Pieces (chain c, draws [t, t1) of one block) in entry order; a piece that continues the
  // previous one in the file (the next chain of the same block) extends its read.
  std::uint64_t at = 0;  // the pending read: file offset and bytes
  std::size_t bytes = 0;
  char* to = static_cast<char*>(data);
  const auto flush = [&] {
    if (bytes > 0 && !io::pread_all(fd_, to, bytes, at)) fail("reading");
    to += bytes;
    bytes = 0;
  };
  for (std::size_t e = first, end = first + count; e < end;) {
    const std::size_t c = e / n, t = e % n;
    const auto it = std::upper_bound(blocks_.begin(), blocks_.end(), static_cast<std::int64_t>(t),
                                     [](std::int64_t v, const Block& b) { return v < b.first; }) -
                    1;
    const auto bf = static_cast<std::size_t>(it->first), bn = static_cast<std::size_t>(it->n);
    const std::size_t len = std::min(end - e, bf + bn - t);
    const std::uint64_t off = cl.offset + static_cast<std::uint64_t>(m * bf + c * bn + (t - bf)) * cl.size;
    if (bytes > 0 && at + bytes == off) {
      bytes += len * cl.size;
    } else {
      flush();
      at = off;
      bytes = len * cl.size;
    }
    e += len;
  }
  flush();
}

void BatchedDrawStore::read_bytes_column(bool dr_stage, std::vector<std::uint8_t>& out) const {
  out.resize(static_cast<std::size_t>(m_ * n_));
  gather(cols_[measure_column() + (dr_stage ? 2 : 1)], out.data());
}

void BatchedDrawStore::gather(const Column& col, void* out) const {
  auto* to = static_cast<char*>(out);
  std::vector<iovec> iov;
  for (const Block& b : blocks_) {
    // The block's [chains, n] in the file, each chain's n elements to its row of `out`.
    iov.resize(static_cast<std::size_t>(m_));
    for (std::int64_t c = 0; c < m_; ++c)
      iov[static_cast<std::size_t>(c)] = {to + static_cast<std::size_t>(c * n_ + b.first) * col.size,
                                          static_cast<std::size_t>(b.n) * col.size};
    if (!read_scattered(fd_, col.offset + static_cast<std::uint64_t>(m_ * b.first) * col.size, iov)) fail("reading");
  }
}

void BatchedDrawStore::read_chains(std::int64_t c0, std::int64_t count, MemoryBatchedSink& out, bool stats) const {
  HERD_REQUIRE(c0 >= 0 && count >= 0 && c0 + count <= m_, "BatchedDrawStore::read_chains: chains [{}, {}) of {}", c0,
               c0 + count, m_);
  out.begin(count, static_cast<std::uint32_t>(c0), d_, n_);
  const auto d = static_cast<std::size_t>(d_);
  std::vector<double> tmp;
  std::vector<std::uint8_t> bytes;
  for (const Block& b : blocks_) {
    const auto n = static_cast<std::size_t>(b.n);
    // Element (c, t) of the block's [count, n] to draw first + t of chain c of `out`.
    auto to = [&](auto& dst, const auto& src) {
      for (std::size_t c = 0; c < static_cast<std::size_t>(count); ++c)
        std::copy_n(src.begin() + static_cast<std::ptrdiff_t>(c * n), n,
                    dst.begin() + static_cast<std::ptrdiff_t>(c * static_cast<std::size_t>(n_) +
                                                              static_cast<std::size_t>(b.first)));
    };
    // The coordinates: all of the block's columns, then each draw's row written whole.
    tmp.resize(static_cast<std::size_t>(count) * n * std::max<std::size_t>(d, 1));
    const std::size_t cn = static_cast<std::size_t>(count) * n;
    for (std::size_t j = 0; j < d; ++j) get(cols_[j], b, c0, count, tmp.data() + j * cn);
    for (std::size_t c = 0; c < static_cast<std::size_t>(count); ++c)
      for (std::size_t t = 0; t < n; ++t) {
        double* row = out.x.data() + (c * static_cast<std::size_t>(n_) + static_cast<std::size_t>(b.first) + t) * d;
        for (std::size_t j = 0; j < d; ++j) row[j] = tmp[j * cn + c * n + t];
      }
    get(cols_[lp_column()], b, c0, count, tmp.data());
    to(out.lp, tmp);
    if (!stats) continue;
    get(cols_[alpha_column()], b, c0, count, tmp.data());
    to(out.acceptance_probability, tmp);
    get(cols_[measure_column()], b, c0, count, tmp.data());
    to(out.adaptation_measure, tmp);
    bytes.resize(tmp.size());
    get(cols_[measure_column() + 1], b, c0, count, bytes.data());
    to(out.accepted, bytes);
    get(cols_[measure_column() + 2], b, c0, count, bytes.data());
    to(out.dr_stage, bytes);
  }
}

std::int64_t BatchedDrawStore::chain_group(std::size_t extra) const {
  // At most 16 MiB, and at most one quantity's draws (8 bytes per draw).
  const auto draws = static_cast<std::size_t>(std::max<std::int64_t>(n_, 1));
  const std::size_t per_chain = draws * (sizeof(double) * (static_cast<std::size_t>(d_) + 4) + 2 + extra);
  const std::size_t budget =
      std::min(std::size_t{16} << 20, static_cast<std::size_t>(std::max<std::int64_t>(m_, 1)) * draws * sizeof(double));
  const auto group = static_cast<std::int64_t>(budget / per_chain);
  return std::clamp<std::int64_t>(group, 1, std::max<std::int64_t>(m_, 1));
}

}  // namespace herd::mcmc
