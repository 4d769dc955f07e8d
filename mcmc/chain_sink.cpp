// Compact chain sinks (chain_sink.hpp).
#include "herd/mcmc/chain_sink.hpp"

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>

#include <unistd.h>

#include "herd/core/error.hpp"
#include "herd/io/atomic_file.hpp"
#include "herd/io/output_files.hpp"

namespace herd::mcmc {

namespace {
constexpr char kMagic[8] = {'H', 'E', 'R', 'D', 'C', 'H', 'N', '1'};
constexpr std::uint32_t kVersion = 1;
constexpr std::size_t kBufferBytes = std::size_t{1} << 20;
/// Bytes of the file header: the magic, then four 32-bit words (chain_sink.hpp).
constexpr std::size_t kHeaderBytes = kBinaryChainHeaderBytes;

/// Writes `v` at `p` least significant byte first, whatever the host's byte order.
void put_u32_le(std::byte* p, std::uint32_t v) noexcept {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<std::byte>((v >> (8 * i)) & 0xffU);
}

/// Reads a 32-bit word stored least significant byte first at `p`.
std::uint32_t get_u32_le(const std::byte* p) noexcept {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<std::uint32_t>(std::to_integer<unsigned>(p[i])) << (8 * i);
  return v;
}
}  // namespace

namespace detail {

/// The file-backed columns of a MemoryChainSink: blocks of `per` states in an unlinked
/// scratch file, each block column by column (8-byte columns first, the 4-byte DR stages
/// last, so every column is aligned); the block being filled is `tail`, in memory, and is
/// written when full. Blocks [0, size / per) are in the file, the rest in `tail`.
class ChainStore {
 public:
  ChainStore(const std::string& dir, int ndim, std::size_t block_states)
      : d_(static_cast<std::size_t>(ndim)), rec_(44 + 8 * d_) {
    per_ = block_states > 0 ? block_states : std::max<std::size_t>(2, kBlockBytes / rec_);
    per_ += per_ % 2;  // even: the 4-byte column ends 8-byte aligned
    fd_ = io::create_unlinked_scratch(dir, ".herd-chain-", path_);
    if (fd_ < 0) fail("creating");
    tail_.resize(per_ * rec_);
  }
  ~ChainStore() {
    if (fd_ >= 0) ::close(fd_);
  }
  ChainStore(const ChainStore&) = delete;
  ChainStore& operator=(const ChainStore&) = delete;

  std::size_t size() const { return n_; }
  std::size_t per() const { return per_; }
  std::size_t dim() const { return d_; }
  std::size_t resident_bytes() const { return tail_.capacity(); }

  /// Byte offset of column `c` (a ChainColumns bit; the points: coordinate `k`) in a block.
  std::size_t offset(unsigned c, std::size_t k = 0) const {
    switch (c) {
      case kStepColumn:
        return 0;
      case kWeightColumn:
        return 8 * per_;
      case kLogDensityColumn:
        return 16 * per_;
      case kAcceptProbColumn:
        return 24 * per_;
      case kAdaptMeasureColumn:
        return 32 * per_;
      case kPointColumns:
        return (40 + 8 * k) * per_;
      default:
        return (40 + 8 * d_) * per_;  // kDrStageColumn
    }
  }

  void write(const ChainRecord& r) {
    const std::size_t j = n_ % per_;
    std::byte* t = tail_.data();
    const auto put = [&](unsigned c, const void* v, std::size_t bytes, std::size_t k = 0) {
      std::memcpy(t + offset(c, k) + j * bytes, v, bytes);
    };
    put(kStepColumn, &r.step, 8);
    put(kWeightColumn, &r.weight, 8);
    put(kLogDensityColumn, &r.log_density, 8);
    put(kAcceptProbColumn, &r.accept_prob, 8);
    put(kAdaptMeasureColumn, &r.adapt_measure, 8);
    for (std::size_t k = 0; k < d_; ++k) put(kPointColumns, r.point + k, 8, k);
    put(kDrStageColumn, &r.dr_stage, 4);
    if (j + 1 == per_) {  // the block is full: to the file
      const std::uint64_t at = static_cast<std::uint64_t>(n_ / per_) * tail_.size();
      if (!io::pwrite_all(fd_, tail_.data(), tail_.size(), at)) fail("writing");
    }
    ++n_;
  }

  /// Block `b`'s columns `cols` (for the points: coordinates [k0, k1)) into `out` (block
  /// layout), or a pointer to the tail when b is the block being filled.
  const std::byte* read(std::size_t b, unsigned cols, std::size_t k0, std::size_t k1, std::byte* out) const {
    if ((b + 1) * per_ > n_) return tail_.data();
    const std::uint64_t base = static_cast<std::uint64_t>(b) * tail_.size();
    const auto get = [&](std::size_t off, std::size_t bytes) {
      if (!io::pread_all(fd_, out + off, bytes, base + off)) fail("reading");
    };
    for (unsigned c : {kStepColumn, kWeightColumn, kLogDensityColumn, kAcceptProbColumn, kAdaptMeasureColumn})
      if ((cols & c) != 0U) get(offset(c), 8 * per_);
    if ((cols & kPointColumns) != 0U && k1 > k0) get(offset(kPointColumns, k0), 8 * per_ * (k1 - k0));
    if ((cols & kDrStageColumn) != 0U) get(offset(kDrStageColumn), 4 * per_);
    return out;
  }

 private:
  /// About this many bytes per block.
  static constexpr std::size_t kBlockBytes = std::size_t{1} << 20;

  [[noreturn]] void fail(const char* what) const {
    const int e = errno;
    throw IoError(fmt::format("{} the compact chain's scratch file \"{}\" (unlinked once created) failed: {}", what,
                              path_, e != 0 ? std::strerror(e) : "unexpected end of file"));
  }

  std::size_t d_, rec_, per_ = 0, n_ = 0;
  std::string path_;
  int fd_ = -1;
  std::vector<std::byte> tail_;
};

}  // namespace detail

MemoryChainSink::MemoryChainSink() = default;

MemoryChainSink::MemoryChainSink(const std::string& scratch_dir, std::size_t block_states) {
  // The file is created at `begin` (its layout needs ndim).
  store_dir_ = scratch_dir;
  store_block_ = block_states;
  pending_ = true;
}

MemoryChainSink::~MemoryChainSink() = default;

MemoryChainSink::MemoryChainSink(const MemoryChainSink& o)
    : ChainSink(o),
      chain_id(o.chain_id),
      ndim(o.ndim),
      step(o.step),
      weight(o.weight),
      log_density(o.log_density),
      dr_stage(o.dr_stage),
      accept_prob(o.accept_prob),
      adapt_measure(o.adapt_measure),
      points(o.points) {
  HERD_CHECK(!o.store_ && !o.pending_, "MemoryChainSink: a file-backed sink cannot be copied");
}

MemoryChainSink& MemoryChainSink::operator=(const MemoryChainSink& o) {
  if (this != &o) {
    MemoryChainSink c(o);
    *this = std::move(c);
  }
  return *this;
}

MemoryChainSink::MemoryChainSink(MemoryChainSink&& o) noexcept = default;
MemoryChainSink& MemoryChainSink::operator=(MemoryChainSink&& o) noexcept = default;

void MemoryChainSink::begin(std::uint32_t id, int d) {
  chain_id = id;
  ndim = d;
  if (pending_ && !store_) store_ = std::make_unique<detail::ChainStore>(store_dir_, d, store_block_);
}

void MemoryChainSink::write(const ChainRecord& r) {
  if (pending_ && !store_) begin(chain_id, r.ndim);  // no `begin` (a chain read back): the record's ndim
  if (store_) {
    store_->write(r);
    return;
  }
  step.push_back(r.step);
  weight.push_back(r.weight);
  log_density.push_back(r.log_density);
  dr_stage.push_back(r.dr_stage);
  accept_prob.push_back(r.accept_prob);
  adapt_measure.push_back(r.adapt_measure);
  points.insert(points.end(), r.point, r.point + r.ndim);
}

std::size_t MemoryChainSink::size() const { return store_ ? store_->size() : weight.size(); }

std::size_t MemoryChainSink::block_states() const { return store_ ? store_->per() : 0; }

std::size_t MemoryChainSink::resident_bytes() const {
  std::size_t b = step.capacity() * sizeof(std::uint64_t) + weight.capacity() * sizeof(std::int64_t) +
                  (log_density.capacity() + accept_prob.capacity() + adapt_measure.capacity() + points.capacity()) *
                      sizeof(double) +
                  dr_stage.capacity() * sizeof(std::int32_t);
  if (store_) b += store_->resident_bytes();
  return b;
}

std::int64_t MemoryChainSink::total_weight() const {
  std::int64_t s = 0;
  ChainReader rd(*this, kWeightColumn);
  for (std::size_t i = 0; i < size(); ++i) s += rd.weight(i);
  return s;
}

std::vector<double> MemoryChainSink::verbose(std::int64_t burnin_steps) const {
  std::vector<double> out;
  std::int64_t t = 0;
  ChainReader rd(*this, kWeightColumn | kPointColumns);
  for (std::size_t i = 0; i < size(); ++i) {
    const std::int64_t w = rd.weight(i);
    for (std::int64_t k = 0; k < w; ++k, ++t)
      if (t >= burnin_steps) {
        const double* p = rd.point(i);
        out.insert(out.end(), p, p + ndim);
      }
  }
  return out;
}

ChainReader::ChainReader(const MemoryChainSink& chain, unsigned columns, int coordinate)
    : chain_(&chain), columns_(columns), coord_(coordinate) {}

void ChainReader::load(std::size_t i) {
  const MemoryChainSink& c = *chain_;
  HERD_CHECK(i < c.size(), "ChainReader: state {} of a chain of {}", i, c.size());
  const auto d = static_cast<std::size_t>(c.ndim);
  const auto k0 = coord_ >= 0 ? static_cast<std::size_t>(coord_) : 0;
  const std::size_t k1 = coord_ >= 0 ? k0 + 1 : d;
  b_ = ChainBlock{};
  const auto want = [&](unsigned col) { return (columns_ & col) != 0U; };
  if (!c.store_) {  // the vectors themselves: one block of every state
    b_.count = c.size();
    if (want(kStepColumn)) b_.step = c.step.data();
    if (want(kWeightColumn)) b_.weight = c.weight.data();
    if (want(kLogDensityColumn)) b_.log_density = c.log_density.data();
    if (want(kDrStageColumn)) b_.dr_stage = c.dr_stage.data();
    if (want(kAcceptProbColumn)) b_.accept_prob = c.accept_prob.data();
    if (want(kAdaptMeasureColumn)) b_.adapt_measure = c.adapt_measure.data();
    if (want(kPointColumns)) {
      b_.points = c.points.data();
      b_.state_stride = d;
      b_.coord_stride = 1;
    }
    return;
  }
  const detail::ChainStore& s = *c.store_;
  const std::size_t per = s.per(), blk = i / per;
  if (buf_.empty()) buf_.resize(per * (44 + 8 * d));
  const std::byte* base = s.read(blk, columns_, k0, k1, buf_.data());
  b_.first = blk * per;
  b_.count = std::min(per, c.size() - b_.first);
  const auto at = [&](unsigned col, std::size_t k = 0) { return base + s.offset(col, k); };
  // The block's columns are aligned for their types (ChainStore's layout; buf_ and the tail
  // come from operator new).
  if (want(kStepColumn)) b_.step = reinterpret_cast<const std::uint64_t*>(at(kStepColumn));
  if (want(kWeightColumn)) b_.weight = reinterpret_cast<const std::int64_t*>(at(kWeightColumn));
  if (want(kLogDensityColumn)) b_.log_density = reinterpret_cast<const double*>(at(kLogDensityColumn));
  if (want(kDrStageColumn)) b_.dr_stage = reinterpret_cast<const std::int32_t*>(at(kDrStageColumn));
  if (want(kAcceptProbColumn)) b_.accept_prob = reinterpret_cast<const double*>(at(kAcceptProbColumn));
  if (want(kAdaptMeasureColumn)) b_.adapt_measure = reinterpret_cast<const double*>(at(kAdaptMeasureColumn));
  if (want(kPointColumns)) {
    b_.points = reinterpret_cast<const double*>(at(kPointColumns, k0));
    b_.state_stride = 1;
    b_.coord_stride = per;
    b_.coord_first = k0;
  }
}

const double* ChainReader::point(std::size_t i) {
  const ChainBlock& b = at(i);
  if (b.coord_stride == 1) return b.points + (i - b.first) * b.state_stride;
  const auto d = static_cast<std::size_t>(chain_->ndim);
  row_.resize(d);
  for (std::size_t k = 0; k < d; ++k) row_[k] = b.points[(i - b.first) + k * b.coord_stride];
  return row_.data();
}

ChainRecord ChainReader::record(std::size_t i) {
  ChainRecord r;
  r.chain_id = chain_->chain_id;
  r.step = step(i);
  r.weight = weight(i);
  r.log_density = log_density(i);
  r.dr_stage = dr_stage(i);
  r.accept_prob = accept_prob(i);
  r.adapt_measure = adapt_measure(i);
  r.point = point(i);
  r.ndim = chain_->ndim;
  return r;
}

BinaryChainSink::BinaryChainSink(std::string path) : path_(std::move(path)), buf_(kBufferBytes) {
  file_ = io::open_output_file(path_);  // never through a symbolic link
}

BinaryChainSink::~BinaryChainSink() {
  try {
    flush();
  } catch (...) {
  }
  if (file_) std::fclose(file_);
}

void BinaryChainSink::drain() {
  if (used_ == 0) return;
  if (std::fwrite(buf_.data(), 1, used_, file_) != used_)
    throw IoError(fmt::format("BinaryChainSink: write to '{}' failed", path_));
  used_ = 0;
}

void BinaryChainSink::put(const void* p, std::size_t n) {
  if (used_ + n > buf_.size()) drain();
  if (n > buf_.size()) {
    if (std::fwrite(p, 1, n, file_) != n) throw IoError(fmt::format("BinaryChainSink: write to '{}' failed", path_));
    return;
  }
  std::memcpy(buf_.data() + used_, p, n);
  used_ += n;
}

void BinaryChainSink::begin(std::uint32_t chain_id, int ndim) {
  const auto h = binary_chain_header(chain_id, ndim);
  put(h.data(), h.size());
}

void BinaryChainSink::write(const ChainRecord& r) {
  const std::size_t n = chain_record_bytes(r.ndim);
  if (used_ + n > buf_.size()) drain();
  if (n > buf_.size()) throw IoError("BinaryChainSink: record larger than the buffer");
  encode_chain_record(r, buf_.data() + used_);
  used_ += n;
  ++records_;
}

void BinaryChainSink::flush() {
  if (!file_) return;
  drain();
  if (std::fflush(file_) != 0) throw IoError(fmt::format("BinaryChainSink: flush of '{}' failed", path_));
}

std::array<std::byte, kBinaryChainHeaderBytes> binary_chain_header(std::uint32_t chain_id, int ndim) {
  // Little-endian like the records (ndim as two's complement), not the host's byte order.
  std::array<std::byte, kBinaryChainHeaderBytes> h{};
  std::memcpy(h.data(), kMagic, 8);
  put_u32_le(h.data() + 8, kVersion);
  put_u32_le(h.data() + 12, static_cast<std::uint32_t>(ndim));
  put_u32_le(h.data() + 16, chain_id);
  put_u32_le(h.data() + 20, static_cast<std::uint32_t>(chain_record_bytes(ndim)));
  return h;
}

MemoryChainSink read_binary_chain(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw IoError(fmt::format("read_binary_chain: cannot open '{}'", path));
  struct Closer {
    std::FILE* f;
    ~Closer() { std::fclose(f); }
  } closer{f};
  std::byte h[kHeaderBytes];
  if (std::fread(h, 1, kHeaderBytes, f) != kHeaderBytes || std::memcmp(h, kMagic, 8) != 0)
    throw IoError(fmt::format("read_binary_chain: '{}' is not a herd chain file", path));
  const std::uint32_t version = get_u32_le(h + 8);
  const auto d = static_cast<std::int32_t>(get_u32_le(h + 12));  // two's complement
  const std::uint32_t chain = get_u32_le(h + 16);
  const std::uint32_t rb = get_u32_le(h + 20);
  if (version != kVersion || d <= 0 || rb != chain_record_bytes(d))
    throw IoError(
        fmt::format("read_binary_chain: '{}' has version {} ndim {} record size {}, "
                    "expected version {} and 48 + 8 ndim bytes",
                    path, version, d, rb, kVersion));
  MemoryChainSink m;
  m.begin(chain, d);
  std::vector<std::byte> rec(rb);
  std::vector<double> pt(d);
  for (;;) {
    const std::size_t got = std::fread(rec.data(), 1, rb, f);
    if (got == 0) break;
    if (got != rb) throw IoError(fmt::format("read_binary_chain: '{}' ends inside a record", path));
    m.write(decode_chain_record(rec, d, pt.data()));
  }
  return m;
}

}  // namespace herd::mcmc
