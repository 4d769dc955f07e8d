// The batched run's restart record (herd/mcmc/run/batched_record.hpp).
#include "herd/mcmc/run/batched_record.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <span>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "herd/core/error.hpp"
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
  char* p = static_cast<char*>(data);
  std::size_t left = bytes;
  while (left > 0) {
    const ssize_t r = ::pread(fd_, p, left, static_cast<off_t>(offset));
    if (r < 0 && errno == EINTR) continue;
    if (r == 0) errno = 0;  // end of file
    if (r <= 0) fail("read");
    p += r;
    offset += static_cast<std::uint64_t>(r);
    left -= static_cast<std::size_t>(r);
  }
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
                                           std::uint64_t input_hash, bool resuming)
    : comm_(comm),
      specs_(specs),
      hash_(input_hash),
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
  const std::int64_t n = m_ * comm_.size();
  if (r.value<std::uint64_t>("input_hash") != hash_ || r.value<std::int64_t>("chains") != n ||
      r.value<std::int64_t>("chains_per_rank") != m_ || r.value<std::int64_t>("ndim") != d_ ||
      r.value<std::int64_t>("stages") != stages_)
    throw InputError(
        fmt::format("the restart record \"{}\" is of another batched run ({} chains, {} per process); "
                    "resume with the same input and number of processes, or set overwrite = true",
                    path, r.value<std::int64_t>("chains"), r.value<std::int64_t>("chains_per_rank")));
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
