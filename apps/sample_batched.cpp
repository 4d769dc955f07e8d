// herd-sample's batched devices (sample_batched.hpp).
#include "sample_batched.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <span>
#include <vector>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <hdf5.h>

#include "herd/core/config.hpp"
#include "herd/core/device.hpp"
#include "herd/core/error.hpp"
#include "herd/core/mpi_communicator.hpp"
#include "herd/core/timer.hpp"
#include "herd/io/atomic_file.hpp"
#include "herd/io/checkpoint.hpp"
#include "herd/io/hdf5.hpp"
#include "herd/io/output_files.hpp"
#include "herd/mcmc/diagnostics.hpp"
#include "herd/mcmc/paradram_run.hpp"
#include "herd/mcmc/posterior_report.hpp"
#include "herd/mcmc/run_progress.hpp"
#include "herd/mcmc/sampler_specs.hpp"
#if HERD_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace herd::apps {

namespace {

/// `<prefix>_restart/draws.bin` (rank 0): the gathered blocks of draws, each `x` `[chains,
/// n, d]` then `lp` `[chains, n]` (doubles), appended as they come; a checkpoint records the
/// length that belongs to it and the CRC-32 of each MiB of it, and a resumed run checks
/// those and cuts the file back to that length.
class DrawRecord {
 public:
  /// Opens (creates) `path`, checks its first `sums.bytes` bytes against `sums` and cuts
  /// it to that length. @throws IoError (a corrupt record names the file and block)
  DrawRecord(std::string path, io::BlockChecksums sums) : path_(std::move(path)), sums_(std::move(sums)) {
    const std::uint64_t keep = sums_.bytes;
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd_ < 0) fail("open");
    struct stat st {};
    if (::fstat(fd_, &st) != 0) fail("fstat");
    if (static_cast<std::uint64_t>(st.st_size) < keep)
      throw IoError(fmt::format("herd-sample: the restart record \"{}\" has {} bytes, but its checkpoint needs {}; set "
                                "overwrite = true to start afresh",
                                path_, static_cast<long long>(st.st_size), keep));
    sums_.verify(path_, "the batched restart record");
    if (::ftruncate(fd_, static_cast<off_t>(keep)) != 0) fail("ftruncate");
    size_ = keep;
  }
  ~DrawRecord() {
    if (fd_ >= 0) ::close(fd_);
  }
  DrawRecord(const DrawRecord&) = delete;
  DrawRecord& operator=(const DrawRecord&) = delete;

  void append(const double* data, std::size_t n) {
    const char* p = reinterpret_cast<const char*>(data);
    std::size_t left = n * sizeof(double);
    sums_.add(std::as_bytes(std::span<const double>(data, n)));
    while (left > 0) {
      const ssize_t w = ::pwrite(fd_, p, left, static_cast<off_t>(size_));
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) fail("write");
      p += w;
      left -= static_cast<std::size_t>(w);
      size_ += static_cast<std::uint64_t>(w);
    }
  }
  void read(std::uint64_t offset, double* data, std::size_t n) const {
    char* p = reinterpret_cast<char*>(data);
    std::size_t left = n * sizeof(double);
    while (left > 0) {
      const ssize_t r = ::pread(fd_, p, left, static_cast<off_t>(offset));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) fail("read");
      p += r;
      offset += static_cast<std::uint64_t>(r);
      left -= static_cast<std::size_t>(r);
    }
  }
  /// Makes the appended blocks durable (before a checkpoint that counts them).
  void sync() {
    if (::fsync(fd_) != 0) fail("fsync");
  }
  std::uint64_t size() const { return size_; }
  /// CRC-32s of the bytes appended so far (for the checkpoint).
  const io::BlockChecksums& checksums() const { return sums_; }

 private:
  [[noreturn]] void fail(const char* what) const {
    throw IoError(fmt::format("herd-sample: {} of the restart record \"{}\" failed: {}", what, path_,
                              std::strerror(errno)));
  }
  std::string path_;
  io::BlockChecksums sums_;
  int fd_ = -1;
  std::uint64_t size_ = 0;
};

/// Gathers each block of draws from the ranks to rank 0 (global chain order: rank-major),
/// which streams it into fixed-size chunked datasets `posterior/<name>` and
/// `sample_stats/lp` `[chain, draw]` and keeps it in memory for the diagnostics.
class GatherSink final : public mcmc::BatchedDrawSink {
 public:
  /// `record` (rank 0, may be null) receives every gathered block; `replay` draws per chain
  /// are read back from it at `begin` (a resumed run's), in blocks of `block_draws`.
  GatherSink(Communicator& comm, io::H5File* file, std::vector<std::string> names, DrawRecord* record = nullptr,
             std::int64_t replay = 0, std::int64_t block_draws = 256)
      : comm_(comm), file_(file), names_(std::move(names)), record_(record), replay_(replay),
        block_draws_(block_draws) {}
  ~GatherSink() override { close_sets(); }

  void begin(std::int64_t m, std::uint32_t /*first*/, int d, std::int64_t draws) override {
    m_ = m;
    d_ = d;
    total_ = m * comm_.size();
    if (file_ == nullptr) return;
    memory.begin(total_, 0, d, draws);
    io::H5Group root = file_->root();
    post_ = root.create_group("posterior");
    stats_ = root.create_group("sample_stats");
    // Vector parameters (beta[1..K]) are one ArviZ variable [chain, draw, beta_dim_0].
    vars_ = mcmc::arviz_variables(names_);
    for (const auto& v : vars_) ids_.push_back(create(post_, v.name, draws, v.is_vector ? v.columns.size() : 0));
    ids_.push_back(create(stats_, "lp", draws));
    // A resumed run: the recorded blocks (the same blocks the engine wrote) into the file.
    std::uint64_t offset = 0;
    for (std::int64_t first = 0; first < replay_;) {
      const std::int64_t n = std::min(block_draws_, draws - first);
      const auto nx = static_cast<std::size_t>(total_ * n * d_), nl = static_cast<std::size_t>(total_ * n);
      gx_.resize(nx);
      glp_.resize(nl);
      record_->read(offset, gx_.data(), nx);
      record_->read(offset + nx * sizeof(double), glp_.data(), nl);
      offset += (nx + nl) * sizeof(double);
      store(first, n);
      first += n;
    }
  }

  void write_block(std::int64_t first, std::int64_t n, const double* x, const double* lp) override {
    const auto nx = static_cast<std::size_t>(m_ * n * d_), nl = static_cast<std::size_t>(m_ * n);
    const bool root = file_ != nullptr;
    if (root) {
      gx_.resize(nx * static_cast<std::size_t>(comm_.size()));
      glp_.resize(nl * static_cast<std::size_t>(comm_.size()));
    }
    comm_.gather(x, root ? gx_.data() : nullptr, nx, DataType::kFloat64, 0);
    comm_.gather(lp, root ? glp_.data() : nullptr, nl, DataType::kFloat64, 0);
    if (!root) return;
    if (record_ != nullptr) {
      record_->append(gx_.data(), nx * static_cast<std::size_t>(comm_.size()));
      record_->append(glp_.data(), nl * static_cast<std::size_t>(comm_.size()));
    }
    store(first, n);
  }

  /// Rank 0: the gathered block in gx_, glp_ into memory and the datasets.
  void store(std::int64_t first, std::int64_t n) {
    memory.write_block(first, n, gx_.data(), glp_.data());
    // gx_ is [total, n, d]: one [total, n] slab per scalar, [total, n, K] per vector.
    const auto rows = static_cast<std::size_t>(total_ * n);
    std::vector<double> slab;
    for (std::size_t v = 0; v < vars_.size(); ++v) {
      const auto& cols = vars_[v].columns;
      slab.resize(rows * cols.size());
      for (std::size_t q = 0; q < rows; ++q)
        for (std::size_t e = 0; e < cols.size(); ++e)
          slab[q * cols.size() + e] = gx_[q * static_cast<std::size_t>(d_) + cols[e]];
      write(ids_[v], first, n, slab.data(), vars_[v].is_vector ? cols.size() : 0);
    }
    write(ids_.back(), first, n, glp_.data());
  }

  void finish() override {
    if (file_ == nullptr) return;
    close_sets();
    std::vector<std::int64_t> chain(static_cast<std::size_t>(total_)), draw(static_cast<std::size_t>(memory.draws));
    for (std::size_t i = 0; i < chain.size(); ++i) chain[i] = static_cast<std::int64_t>(i);
    for (std::size_t i = 0; i < draw.size(); ++i) draw[i] = static_cast<std::int64_t>(i);
    for (io::H5Group* g : {&post_, &stats_}) {
      g->create_coordinate<std::int64_t>("chain", chain);
      g->create_coordinate<std::int64_t>("draw", draw);
    }
    for (const auto& v : vars_) {
      io::H5Dataset ds = post_.open_dataset(v.name);
      if (!v.is_vector) {
        post_.attach_dimensions(ds, {"chain", "draw"});
        continue;
      }
      std::vector<std::int64_t> idx(v.columns.size());
      for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<std::int64_t>(i);
      post_.create_coordinate<std::int64_t>(v.name + "_dim_0", idx);
      post_.attach_dimensions(ds, {"chain", "draw", v.name + "_dim_0"});
    }
    io::H5Dataset ds = stats_.open_dataset("lp");
    stats_.attach_dimensions(ds, {"chain", "draw"});
  }

  mcmc::MemoryBatchedSink memory;  ///< rank 0: every chain's draws (for the diagnostics)

 private:
  /// A chunked dataset [chains, draws] (k = 0) or [chains, draws, k] (a vector of k elements).
  hid_t create(const io::H5Group& g, const std::string& name, std::int64_t draws, std::size_t k = 0) {
    const hsize_t dims[3] = {static_cast<hsize_t>(total_), static_cast<hsize_t>(draws), static_cast<hsize_t>(k)};
    const hsize_t chunk[3] = {static_cast<hsize_t>(std::min<std::int64_t>(total_, 64)),
                              static_cast<hsize_t>(std::clamp<std::int64_t>(draws, 1, 256)), static_cast<hsize_t>(k)};
    const int rank = k > 0 ? 3 : 2;
    const hid_t space = H5Screate_simple(rank, dims, nullptr);
    const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, rank, chunk);
    H5Pset_obj_track_times(dcpl, false);
    const hid_t id = H5Dcreate2(g.id(), name.c_str(), H5T_NATIVE_DOUBLE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    H5Pclose(dcpl);
    H5Sclose(space);
    if (id < 0) throw IoError(fmt::format("herd-sample: cannot create the dataset {}/{}", g.path(), name));
    return id;
  }
  /// Writes draws [first, first + n) of every chain: `data` is [chains, n] or [chains, n, k].
  void write(hid_t id, std::int64_t first, std::int64_t n, const double* data, std::size_t k = 0) const {
    const hid_t fs = H5Dget_space(id);
    const hsize_t start[3] = {0, static_cast<hsize_t>(first), 0};
    const hsize_t count[3] = {static_cast<hsize_t>(total_), static_cast<hsize_t>(n), static_cast<hsize_t>(k)};
    const int rank = k > 0 ? 3 : 2;
    H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, nullptr, count, nullptr);
    const hid_t ms = H5Screate_simple(rank, count, nullptr);
    const herr_t e = H5Dwrite(id, H5T_NATIVE_DOUBLE, ms, fs, H5P_DEFAULT, data);
    H5Sclose(ms);
    H5Sclose(fs);
    if (e < 0) throw IoError("herd-sample: writing a block of draws to the HDF5 file failed");
  }
  void close_sets() {
    for (hid_t id : ids_) H5Dclose(id);
    ids_.clear();
  }

  Communicator& comm_;
  io::H5File* file_;
  std::vector<std::string> names_;
  std::vector<mcmc::ArvizVariable> vars_;
  DrawRecord* record_;
  std::int64_t replay_, block_draws_;
  io::H5Group post_, stats_;
  std::vector<hid_t> ids_;
  std::int64_t m_ = 0, total_ = 0;
  int d_ = 0;
  std::vector<double> gx_, glp_;
};

/// The batched run's checkpoints in `<prefix>_restart/` (docs/batched.md "Restart"):
/// `batched.ckpt`, written atomically by rank 0, holds every rank's chains (gathered in
/// global chain order), the shared adaptation state, the proposal index, the draws already
/// recorded and the length of `draws.bin` that holds them; every rank reads its own rows
/// back on resume. Collective: `due` and `save` on every rank at the same boundaries.
class BatchedRecord final : public mcmc::BatchedCheckpointer {
 public:
  static constexpr const char* kKind = "herd-sample-batched";

  BatchedRecord(Communicator& comm, const mcmc::SamplerSpecs& specs, const mcmc::BatchedDramOptions& o,
                std::uint64_t input_hash, bool resuming)
      : comm_(comm), specs_(specs), hash_(input_hash), m_(o.num_chains), d_(o.ndim),
        stages_(1 + o.delayed_rejection_count), per_chain_(o.adaptation == mcmc::BatchedAdaptation::kPerChain),
        adapt_(o.adaptation != mcmc::BatchedAdaptation::kNone && o.warmup > 0) {
    const std::string dir = specs.output_prefix + "_restart";
    path_ = dir + "/batched.ckpt";
    if (resuming && std::filesystem::exists(path_)) read(path_);
    if (comm_.rank() == 0) draws_ = std::make_unique<DrawRecord>(dir + "/draws.bin", draw_sums_);
    last_k_ = have_ ? snap_.next_proposal : 0;
  }

  const mcmc::BatchedSnapshot* resume_state() override { return have_ ? &snap_ : nullptr; }

  bool due(std::uint64_t k) override {
    std::int32_t yes = 0;
    if (comm_.rank() == 0) {
      const bool steps = specs_.checkpoint_period > 0 &&
                         k - last_k_ >= static_cast<std::uint64_t>(specs_.checkpoint_period);
      const bool time = specs_.checkpoint_period_seconds > 0 && since_.seconds() >= specs_.checkpoint_period_seconds;
      yes = steps || time ? 1 : 0;
    }
    if (comm_.size() > 1) comm_.broadcast(&yes, 1, DataType::kInt32, 0);
    if (yes != 0) last_k_ = k;
    return yes != 0;
  }

  void save(const mcmc::BatchedSnapshot& st) override {
    Timer t;
    const bool root = comm_.rank() == 0;
    io::CheckpointWriter w(kKind, 1);
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
    // The factor(s) and the adaptation state: per chain, or shared (the same on every rank).
    for (const auto& [name, v] : {std::pair<const char*, const std::vector<double>*>{"chol", &st.chol},
                                  {"run_n", &st.run_n}, {"run_mean", &st.run_mean}, {"run_m2", &st.run_m2},
                                  {"ad_ref", &st.ad_ref}}) {
      if (per_chain_ && (adapt_ || v == &st.chol))
        rows(name, *v);
      else if (root)
        w.add(name, *v);
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

  /// Rank 0, once the outputs are written: removes the bulk of the record (batched.ckpt
  /// first, then draws.bin), which the `.h5` now holds; the program's run.ckpt says the
  /// run is complete. A kill in between leaves a record that restarts from the beginning.
  void discard() {
    draws_.reset();
    std::error_code ec;
    std::filesystem::remove(path_, ec);
    std::filesystem::remove(specs_.output_prefix + "_restart/draws.bin", ec);
  }

  DrawRecord* draws() { return draws_.get(); }
  std::int64_t draws_done() const { return have_ ? snap_.draws_done : 0; }
  std::uint64_t resumed_at() const { return have_ ? snap_.next_proposal : 0; }
  std::int64_t checkpoints = 0;     ///< written by this session (rank 0)
  double checkpoint_seconds = 0.0;  ///< their wall time (rank 0)

 private:
  void read(const std::string& path) {
    io::CheckpointReader r(path);
    r.expect_kind(kKind, 1);
    const std::int64_t n = m_ * comm_.size();
    if (r.value<std::uint64_t>("input_hash") != hash_ || r.value<std::int64_t>("chains") != n ||
        r.value<std::int64_t>("chains_per_rank") != m_ || r.value<std::int64_t>("ndim") != d_ ||
        r.value<std::int64_t>("stages") != stages_)
      throw InputError(fmt::format("the restart record \"{}\" is of another batched run ({} chains, {} per process); "
                                   "resume with the same input and number of processes, or set overwrite = true",
                                   path, r.value<std::int64_t>("chains"), r.value<std::int64_t>("chains_per_rank")));
    const auto rank = static_cast<std::size_t>(comm_.rank());
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
    for (const auto& [name, v] : {std::pair<const char*, std::vector<double>*>{"chol", &snap_.chol},
                                  {"run_n", &snap_.run_n}, {"run_mean", &snap_.run_mean}, {"run_m2", &snap_.run_m2},
                                  {"ad_ref", &snap_.ad_ref}}) {
      if (per_chain_ && (adapt_ || v == &snap_.chol))
        mine(name, *v);
      else
        *v = r.get<double>(name);
    }
    snap_.next_proposal = r.value<std::uint64_t>("next_proposal");
    snap_.draws_done = r.value<std::int64_t>("draws_done");
    snap_.seconds = r.value<double>("seconds");
    snap_.adaptive_updates = r.value<std::int64_t>("adaptive_updates");
    snap_.chol_failures = r.value<std::int64_t>("chol_failures");
    draw_sums_.bytes = r.value<std::uint64_t>("draw_bytes");
    if (!r.has("draw_crc32"))
      throw IoError(fmt::format("the batched restart record \"{}\" has no checksums of its draws (it was "
                                "written by an earlier version of herd); set overwrite = true to start afresh",
                                path));
    draw_sums_.crcs = r.get<std::uint32_t>("draw_crc32");
    have_ = true;
  }

  Communicator& comm_;
  const mcmc::SamplerSpecs& specs_;
  std::uint64_t hash_;
  std::int64_t m_;
  int d_, stages_;
  bool per_chain_, adapt_;
  std::string path_;
  std::unique_ptr<DrawRecord> draws_;
  mcmc::BatchedSnapshot snap_;
  bool have_ = false;
  io::BlockChecksums draw_sums_;  // of draws.bin's recorded part (resumed runs)
  std::uint64_t last_k_ = 0;
  Timer since_;
};

/// What the convergence warnings of a batched run say to run longer.
constexpr const char* kRunLonger = "raise warmup, so that the proposal adapts, and chain_size";

/// A point log density as a host functor for the fused (thread-pool) path.
struct HostPoint {
  const mcmc::PointLogDensity* f;
  double operator()(const double* x, int d) const { return (*f)(x, d); }
};

/// Superchains for nested R-hat: the largest K in {16, 8, 4, 2} dividing M with at least
/// two chains each (0: none).
std::size_t superchains(std::int64_t m) {
  for (std::int64_t k : {16, 8, 4, 2})
    if (m % k == 0 && m / k >= 2) return static_cast<std::size_t>(k);
  return 0;
}

}  // namespace

mcmc::BatchedDramOptions batched_options(const mcmc::SamplerSpecs& s, int ndim, int rank, int ranks) {
  mcmc::BatchedDramOptions o;
  const auto d = static_cast<std::size_t>(ndim);
  const std::int64_t first = static_cast<std::int64_t>(rank) * s.chains_per_rank;
  if (first + s.chains_per_rank > std::numeric_limits<std::uint32_t>::max())
    throw InputError(fmt::format("chains_per_rank is {}: processes x chains_per_rank must stay below 2^32 (chain ids)",
                                 s.chains_per_rank));
  o.ndim = ndim;
  o.num_chains = s.chains_per_rank;
  o.first_chain_id = static_cast<std::uint32_t>(first);
  o.seed = s.random_seed;
  o.start_points.resize(static_cast<std::size_t>(s.chains_per_rank) * d);
  mcmc::DramOptions k;
  for (std::int64_t i = 0; i < s.chains_per_rank; ++i) {
    // Only a random start point depends on the chain id.
    if (i == 0 || s.random_start_point)
      k = mcmc::to_dram_options(
          s, ndim,
          mcmc::start_point_chain(s, static_cast<std::uint32_t>(first + i),
                                  static_cast<std::int64_t>(std::max(ranks, 1)) * s.chains_per_rank));
    std::copy(k.start_point.begin(), k.start_point.end(), o.start_points.begin() + static_cast<std::ptrdiff_t>(i) * ndim);
  }
  o.proposal_start_cov = k.proposal_start_cov;
  o.proposal_start_std = k.proposal_start_std;
  o.scale_factor = s.scale_factor;
  o.warmup = s.warmup;
  o.steps = s.chain_size;
  o.thin = s.thin;
  o.adaptation = s.batched_adaptation == "per_chain" ? mcmc::BatchedAdaptation::kPerChain
                 : s.batched_adaptation == "none"    ? mcmc::BatchedAdaptation::kNone
                                                     : mcmc::BatchedAdaptation::kPooled;
  o.adaptive_update_period = s.adaptive_update_period;
  o.delayed_rejection_count = static_cast<int>(s.delayed_rejection_count);
  o.delayed_rejection_scale_factors = s.delayed_rejection_scale_factors;
  o.domain_lower = k.domain_lower;
  o.domain_upper = k.domain_upper;
  o.device = s.device == "cuda" ? mcmc::BatchedDevice::kCuda : mcmc::BatchedDevice::kHost;
  return o;
}

void check_batched_device(const mcmc::SamplerSpecs& s, const mcmc::BatchedTarget* batched, int ndim, int ranks) {
  if (s.device == "cpu") return;
  mcmc::BatchedDramOptions probe = batched_options(s, ndim, ranks - 1, ranks);
  probe.num_chains = 1;
  probe.start_points.resize(static_cast<std::size_t>(ndim));
  probe.device = mcmc::BatchedDevice::kHost;
  try {
    mcmc::detail::BatchedEngine engine(probe);
  } catch (const Error& e) {
    throw InputError(fmt::format("device = \"{}\": {}", s.device, e.what()));
  }
  if (s.device != "cuda") return;
  if (batched == nullptr)
    throw InputError(
        "key \"device\" is \"cuda\", but device = \"cuda\" needs a built-in target (normal, banana, rosenbrock, funnel); "
        "use device = \"cpu_batched\" for this target");
  if (!HERD_HAVE_CUDA)
    throw InputError("key \"device\" is \"cuda\", but this build of herd has no CUDA support; use device = \"cpu_batched\"");
  if (cuda_device_count() == 0)
    throw InputError(fmt::format("key \"device\" is \"cuda\", but no CUDA device is usable here ({}); use device = "
                                 "\"cpu_batched\"", describe_devices()));
}

void run_batched_sample(const mcmc::SamplerSpecs& specs, const mcmc::SampleTarget& target,
                        const std::shared_ptr<const mcmc::BatchedTarget>& batched,
                        const mcmc::SampleRunOptions& options, Communicator& comm, bool resuming) {
  const Timer session;
  const int rank = comm.rank(), size = comm.size();
  const bool root = rank == 0;
  const int d = target.ndim;
  mcmc::BatchedDramOptions o = batched_options(specs, d, rank, size);
  o.communicator = &comm;  // pooled adaptation pools every rank's chains (layout-independent)
#if HERD_HAVE_CUDA
  if (o.device == mcmc::BatchedDevice::kCuda) {
    // One GPU per rank of a node: the node-local rank (MPI_Comm_split_type shared) picks it.
    const int n = cuda_device_count();
    const int local = node_local_rank(comm);
    if (n > 0 && cudaSetDevice(local % n) != cudaSuccess)
      throw Error(fmt::format("herd-sample: rank {}: cannot select CUDA device {}", rank, local % n));
  }
#endif
  // Checkpoints (the serial run's settings): the restart record in <prefix>_restart/.
  std::unique_ptr<BatchedRecord> record;
  if (specs.checkpoint_period > 0 || specs.checkpoint_period_seconds > 0) {
    record = std::make_unique<BatchedRecord>(comm, specs, o, options.input_hash, resuming);
    o.checkpointer = record.get();
  }
  // Progress on rank 0's terminal, phase by phase (RunProgress: an updating line on a
  // terminal, a line every 10 s in a log); the phases' times go into the report.
  std::FILE* term = options.terminal != nullptr ? options.terminal : stdout;
  mcmc::RunProgress phases(term, options.quiet || specs.silent_mode || !root);
  phases.phase("sampling");
  if (root && !options.quiet && !specs.silent_mode) {
    const auto total = static_cast<std::uint64_t>(specs.warmup + specs.chain_size);
    const std::int64_t ndraws = specs.chain_size / specs.thin;
    const double chains = static_cast<double>(size) * static_cast<double>(specs.chains_per_rank);
    o.progress = [&phases, total, ndraws, chains, warm = static_cast<std::uint64_t>(specs.warmup),
                  eta = mcmc::EtaEstimator(static_cast<double>(total)), clock = Timer(), first = -1.0,
                  k0 = std::uint64_t{0}](std::uint64_t k, std::int64_t drawn) mutable {
      const double now = clock.seconds();
      if (first < 0) {
        first = now;
        k0 = k;
      }
      const double left = eta.update(now, static_cast<double>(k));
      const double rate = now > first ? chains * static_cast<double>(k - k0) / (now - first) : 0.0;
      phases.detail(fmt::format("{} {}/{} proposals per chain, {}/{} draws  {:.3g} chain-steps/s  ETA {}",
                                k < warm ? "warm-up" : "draws", k, total, drawn, ndraws, rate,
                                std::isfinite(left) ? fmt::format("{:.1f} s", left) : std::string("unknown")));
    };
  }
  const std::string h5_path = specs.output_prefix + ".h5";
  io::H5File h5;
  if (root) h5 = io::H5File::create_atomic(h5_path);
  GatherSink sink(comm, root ? &h5 : nullptr, specs.variable_names, record ? record->draws() : nullptr,
                  record ? record->draws_done() : 0, o.block_draws);
  mcmc::BatchedDramResult r;
  if (batched) {
    r = mcmc::run_batched(o, *batched, sink);
  } else if (target.thread_safe) {
    r = mcmc::run_batched_dram(o, HostPoint{&target.log_density}, sink);
  } else {
    const mcmc::PointLogDensity& f = target.log_density;
    r = mcmc::run_batched_dram(o,
                               mcmc::BatchedLogDensity([&f](const double* x, int n, int dd, double* out) {
                                 for (int i = 0; i < n; ++i) out[i] = f(x + static_cast<std::ptrdiff_t>(i) * dd, dd);
                               }),
                               sink);
  }
  phases.phase("post-processing: totals and diagnostics (R-hat, ESS, nested R-hat)");
  // Totals over the ranks (every rank runs the same number of chains).
  std::vector<double> sums = {r.acceptance_rate, static_cast<double>(r.nan_count), static_cast<double>(r.out_of_domain),
                              static_cast<double>(r.adaptive_updates), static_cast<double>(r.chol_failures)};
  for (auto a : r.stage_accepted) sums.push_back(static_cast<double>(a));
  comm.allreduce(sums.data(), sums.size(), DataType::kFloat64, ReduceOp::kSum);
  double seconds = r.seconds;
  comm.allreduce(&seconds, 1, DataType::kFloat64, ReduceOp::kMax);
  if (!root) return;

  mcmc::BatchedDramResult t = r;
  t.num_chains = r.num_chains * size;
  t.acceptance_rate = sums[0] / size;
  t.nan_count = static_cast<std::int64_t>(sums[1]);
  t.out_of_domain = static_cast<std::int64_t>(sums[2]);
  // Pooled updates are collective: every rank counts the same ones.
  const bool pooled = o.adaptation == mcmc::BatchedAdaptation::kPooled;
  t.adaptive_updates = pooled ? r.adaptive_updates : static_cast<std::int64_t>(sums[3]);
  t.chol_failures = pooled ? r.chol_failures : static_cast<std::int64_t>(sums[4]);
  for (std::size_t i = 0; i < t.stage_accepted.size(); ++i) t.stage_accepted[i] = static_cast<std::int64_t>(sums[5 + i]);
  t.seconds = seconds;
  t.chain_steps_per_second = static_cast<double>(t.num_chains * t.proposals_per_chain) / std::max(seconds, 1e-12);
  mcmc::BatchedDramOptions og = o;
  og.num_chains = t.num_chains;
  og.first_chain_id = 0;

  // Superchains of nested R-hat: the given ones (check_superchains: they divide the chains),
  // or the automatic choice.
  const std::size_t k = specs.superchains >= 2 ? static_cast<std::size_t>(specs.superchains) : superchains(t.num_chains);
  // One pass per coordinate: the summary row and `batched_diagnostics`' fields from it.
  std::vector<mcmc::BatchedDiagnostics> diag;
  std::vector<mcmc::QuantitySummary> rows;
  std::vector<std::vector<double>> columns;  // [quantity][chain, draw], for the HTML report
  for (int j = 0; j < d; ++j) {
    columns.push_back(sink.memory.coordinate(j));
    const std::vector<double>& v = columns.back();
    const mcmc::DrawsView view(v, static_cast<std::size_t>(t.num_chains), static_cast<std::size_t>(sink.memory.draws));
    rows.push_back({specs.variable_names[static_cast<std::size_t>(j)], mcmc::summarize(view)});
    const mcmc::DiagnosticSummary& sum = rows.back().stats;
    mcmc::BatchedDiagnostics b;
    b.rhat = sum.rhat;
    b.ess_bulk = sum.ess_bulk;
    b.mean = sum.mean;
    b.sd = sum.sd;
    b.nested_rhat = k > 0 ? mcmc::nested_rhat(view, k) : std::numeric_limits<double>::quiet_NaN();
    diag.push_back(b);
  }
  // Derived quantities (e.g. sigma beside a sampled log sigma), from the gathered draws:
  // `posterior/<name>` `[chain, draw]` and a summary row each, as the serial run reports them.
  if (target.quantities && !target.quantity_names.empty()) {
    const std::size_t nq = target.quantity_names.size(), M = static_cast<std::size_t>(t.num_chains),
                      D = static_cast<std::size_t>(sink.memory.draws), dd = static_cast<std::size_t>(d);
    std::vector<double> q(nq), all(nq * M * D);
    for (std::size_t c = 0; c < M * D; ++c) {
      target.quantities(sink.memory.x.data() + c * dd, q.data());
      for (std::size_t i = 0; i < nq; ++i) all[i * M * D + c] = q[i];
    }
    io::H5Group post = h5.root().open_group("posterior");
    // The quantities that are not sampled coordinates, as ArviZ variables (vectors with a dimension).
    std::vector<std::string> qnames;
    std::vector<std::size_t> qindex;
    for (std::size_t i = 0; i < nq; ++i) {
      const std::string& name = target.quantity_names[i];
      if (std::find(specs.variable_names.begin(), specs.variable_names.end(), name) != specs.variable_names.end())
        continue;
      qnames.push_back(name);
      qindex.push_back(i);
    }
    for (const auto& var : mcmc::arviz_variables(qnames)) {
      std::vector<double> data(M * D * var.columns.size());
      for (std::size_t e = 0; e < var.columns.size(); ++e) {
        const std::size_t i = qindex[var.columns[e]];
        const std::vector<double> v(all.begin() + static_cast<std::ptrdiff_t>(i * M * D),
                                    all.begin() + static_cast<std::ptrdiff_t>((i + 1) * M * D));
        for (std::size_t c = 0; c < M * D; ++c) data[c * var.columns.size() + e] = v[c];
        rows.push_back({qnames[var.columns[e]], mcmc::summarize(mcmc::DrawsView(v, M, D))});
        columns.push_back(v);
      }
      if (!var.is_vector) {
        io::H5Dataset ds = post.write(var.name, data, {static_cast<hsize_t>(M), static_cast<hsize_t>(D)});
        post.attach_dimensions(ds, {"chain", "draw"});
      } else {
        std::vector<std::int64_t> idx(var.columns.size());
        for (std::size_t k = 0; k < idx.size(); ++k) idx[k] = static_cast<std::int64_t>(k);
        post.create_coordinate<std::int64_t>(var.name + "_dim_0", idx);
        post.write_variable<double>(var.name, data, {"chain", "draw", var.name + "_dim_0"});
      }
    }
  }
  const std::string table = mcmc::format_summary_table(rows);

  phases.phase("writing " + h5_path);
  {
    io::H5Group rootg = h5.root();
    rootg.set_attribute("herd_version", HERD_VERSION_STRING);
    rootg.set_attribute("sampler", "batched DRAM (herd, docs/batched.md)");
    rootg.set_attribute("device", specs.device);
    rootg.set_attribute("target", target.description);
    rootg.set_attribute("input_source", options.input_source);
    rootg.set_attribute("random_seed", static_cast<std::uint64_t>(specs.random_seed));
    rootg.set_attribute("description", specs.description);
    io::H5Group input = rootg.create_group("input");
    for (const auto& [key, v] : options.input_attributes) input.set_attribute(key, v);
  }
  h5.commit();

  std::string rep = "herd-sample report (batched DRAM, docs/batched.md)\n";
  rep += fmt::format("target: {}\ndevice: {} on {} process{}, {} chains each (global chain ids rank x {} + i)\n",
                     target.description, specs.device, size, size > 1 ? "es" : "", specs.chains_per_rank,
                     specs.chains_per_rank);
  rep += "\n== resolved input ==\n" + options.resolved_input + "\n";
  rep += "\n== run ==\n" + mcmc::batched_report(og, t, diag);
  // R-hat, ESS and the acceptance rate checked as every engine checks them; in the report
  // and on the terminal, with what to try (a short warm-up leaves a batched run with a
  // poorly adapted proposal: hence "raise warmup").
  const std::string warnings =
      mcmc::convergence_warnings(rows, static_cast<std::size_t>(t.num_chains), t.acceptance_rate, kRunLonger);
  rep += fmt::format("pooled adaptation pools the chains of all processes (a fixed summation tree over global chain "
                     "ids: the same chains for every layout of processes); nested R-hat: {}\n",
                     k > 0 ? fmt::format("{} superchains of {} contiguous global chain ids ({}), {}", k,
                                         t.num_chains / static_cast<std::int64_t>(k),
                                         specs.superchains >= 2 ? "superchains" : "chosen: superchains = 0",
                                         specs.random_start_point && specs.random_start_point_scope == "superchain"
                                             ? "each superchain from its own random start"
                                         : specs.random_start_point ? "every chain from its own random start"
                                                                    : "every chain from the same start")
                           : std::string("not computed (needs a chain count divisible by 2, 4, 8 or 16, >= 4)"));
  if (record) {
    const std::string every =
        specs.checkpoint_period > 0 && specs.checkpoint_period_seconds > 0
            ? fmt::format("every {} proposals or {} s", specs.checkpoint_period, specs.checkpoint_period_seconds)
        : specs.checkpoint_period > 0 ? fmt::format("every {} proposals", specs.checkpoint_period)
                                      : fmt::format("every {} s", specs.checkpoint_period_seconds);
    rep += fmt::format("checkpoints: {} written to {}_restart/ ({}), {:.3f} s in all ({:.2f}% of this session's wall "
                       "time {:.3f} s)",
                       record->checkpoints, specs.output_prefix, every, record->checkpoint_seconds,
                       100.0 * record->checkpoint_seconds / std::max(session.seconds(), 1e-12), session.seconds());
    if (record->resume_state() != nullptr)
      rep += fmt::format("; resumed at proposal {} with {} draws per chain recorded", record->resumed_at(),
                         record->draws_done());
    rep += "\n";
  } else {
    rep += "checkpoints: none (checkpoint_period = checkpoint_period_seconds = 0; an interrupted run starts afresh)\n";
  }
  rep += "not used by batched devices: parallelization_model, sample_size and the refinement, adaptive_update_count, "
         "greedy_adaptation_count, burnin_adaptation_measure, target_acceptance_rate, chain_file_format\n";
  rep += "\n== posterior (thinned draws after the warm-up): statistics and diagnostics ==\n" + table;
  if (!warnings.empty()) rep += "\n== convergence warnings ==\n" + warnings;
  rep += fmt::format("\noutputs: {} (posterior, sample_stats/lp [chain, draw]), {}_report.txt, {}_report.html\n",
                     h5_path, specs.output_prefix, specs.output_prefix);
  phases.phase("writing " + specs.output_prefix + "_report.html");
  if (sink.memory.draws >= 1) {
    // <prefix>_report.html: the same run with plots (posterior_report.hpp).
    mcmc::PosteriorReportData h;
    h.title = "herd-sample report" + (specs.description.empty() ? std::string() : ": " + specs.description);
    h.subtitle = fmt::format("herd {}, batched DRAM (docs/batched.md) on {}; target: {}; input: {}", HERD_VERSION_STRING,
                             specs.device, target.description, options.input_source);
    h.facts = {{"dimension", std::to_string(d)},
               {"chains", fmt::format("{} ({} process{} x {})", t.num_chains, size, size > 1 ? "es" : "",
                                      specs.chains_per_rank)},
               {"random seed", std::to_string(specs.random_seed)},
               {"warm-up proposals per chain", std::to_string(specs.warmup)},
               {"draws per chain (thinned)", fmt::format("{} (thin {})", sink.memory.draws, specs.thin)},
               {"mean acceptance rate after the warm-up", fmt::format("{:.4f}", t.acceptance_rate)},
               {"chain-steps per second", fmt::format("{:.4g}", t.chain_steps_per_second)},
               {"wall time", fmt::format("{:.3f} s", t.seconds)},
               {"outputs", h5_path + ", " + specs.output_prefix + "_report.txt"}};
    for (const auto& q : rows) h.names.push_back(q.name);
    h.chains = static_cast<std::size_t>(t.num_chains);
    h.draws = static_cast<std::size_t>(sink.memory.draws);
    for (const auto& c : columns) h.values.emplace_back(c);
    for (const auto& q : rows) h.summary.push_back(q.stats);
    h.sampled = static_cast<std::size_t>(d);
    h.acceptance_rate = t.acceptance_rate;
    h.history_note = "Batched runs do not record the acceptance rate and adaptation over the run: the table gives "
                     "the mean acceptance rate after the warm-up.";
    const auto du = static_cast<std::size_t>(d);
    if (!o.proposal_start_cov.empty()) {
      h.start_covariance = o.proposal_start_cov;
    } else {
      h.start_covariance.assign(du * du, 0.0);
      for (std::size_t i = 0; i < du; ++i)
        h.start_covariance[i * du + i] = o.proposal_start_std.empty() ? 1.0 : o.proposal_start_std[i] * o.proposal_start_std[i];
    }
    if (t.proposal_cov.size() == du * du)
      h.final_covariances.emplace_back(o.adaptation == mcmc::BatchedAdaptation::kPerChain
                                           ? "proposal after the warm-up (chain 1)"
                                           : "proposal after the warm-up (shared)",
                                       t.proposal_cov);
    h.covariance_note = "Batched runs keep the start proposal covariance and the one frozen after the warm-up, not "
                        "their history: the figure shows those two.";
    if (k > 0)
      h.notes.push_back(fmt::format("Nested R-hat over {} superchains is in {}_report.txt.", k, specs.output_prefix));
    h.resolved_input = options.resolved_input;
    h.run_longer = kRunLonger;
    mcmc::write_posterior_report(specs.output_prefix + "_report.html", h);
  }
  // _report.txt last, so that it gives the time of every phase before it.
  phases.phase("writing " + specs.output_prefix + "_report.txt");
  rep += "\n== time per phase (this session; the last one, writing this report, so far) ==\n" + phases.phase_table();
  {
    const std::string path = specs.output_prefix + "_report.txt";
    std::FILE* f = io::open_output_file(path);  // never through a symbolic link
    const bool ok = std::fwrite(rep.data(), 1, rep.size(), f) == rep.size();
    if (std::fclose(f) != 0 || !ok) throw IoError(fmt::format("herd-sample: writing \"{}\" failed", path));
  }
  phases.finish();
  if (record) record->discard();
  if (!options.quiet && !specs.silent_mode) {
    std::FILE* out = options.terminal != nullptr ? options.terminal : stdout;
    std::fprintf(out, "\n%s", table.c_str());
    std::fprintf(out, "\n%lld chains x %lld draws (thin %lld after %lld warm-up proposals), acceptance rate %.3f, "
                      "%.4g chain-steps/s, %.2f s\n",
                 static_cast<long long>(t.num_chains), static_cast<long long>(sink.memory.draws),
                 static_cast<long long>(specs.thin), static_cast<long long>(specs.warmup), t.acceptance_rate,
                 t.chain_steps_per_second, t.seconds);
    std::fprintf(out, "%s", warnings.c_str());
    std::fflush(out);
  }
}

}  // namespace herd::apps
