// Compact chain sinks (chain_sink.hpp).
#include "herd/mcmc/chain_sink.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <utility>

#include "herd/core/error.hpp"
#include "herd/io/output_files.hpp"

namespace herd::mcmc {

namespace {
constexpr char kMagic[8] = {'H', 'E', 'R', 'D', 'C', 'H', 'N', '1'};
constexpr std::uint32_t kVersion = 1;
constexpr std::size_t kBufferBytes = std::size_t{1} << 20;
/// Bytes of the file header: the magic, then four 32-bit words (chain_sink.hpp).
constexpr std::size_t kHeaderBytes = 24;

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

void MemoryChainSink::begin(std::uint32_t id, int d) {
  chain_id = id;
  ndim = d;
}

void MemoryChainSink::write(const ChainRecord& r) {
  step.push_back(r.step);
  weight.push_back(r.weight);
  log_density.push_back(r.log_density);
  dr_stage.push_back(r.dr_stage);
  accept_prob.push_back(r.accept_prob);
  adapt_measure.push_back(r.adapt_measure);
  points.insert(points.end(), r.point, r.point + r.ndim);
}

std::int64_t MemoryChainSink::total_weight() const {
  std::int64_t s = 0;
  for (auto w : weight) s += w;
  return s;
}

std::vector<double> MemoryChainSink::verbose(std::int64_t burnin_steps) const {
  std::vector<double> out;
  std::int64_t t = 0;
  for (std::size_t i = 0; i < size(); ++i) {
    for (std::int64_t k = 0; k < weight[i]; ++k, ++t)
      if (t >= burnin_steps) out.insert(out.end(), point(i), point(i) + ndim);
  }
  return out;
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
  // Little-endian like the records (ndim as two's complement), not the host's byte order.
  std::byte h[kHeaderBytes];
  std::memcpy(h, kMagic, 8);
  put_u32_le(h + 8, kVersion);
  put_u32_le(h + 12, static_cast<std::uint32_t>(ndim));
  put_u32_le(h + 16, chain_id);
  put_u32_le(h + 20, static_cast<std::uint32_t>(chain_record_bytes(ndim)));
  put(h, kHeaderBytes);
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
