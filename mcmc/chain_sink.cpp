// Compact chain sinks (chain_sink.hpp).
#include "herd/mcmc/chain_sink.hpp"

#include <cstring>
#include <utility>

#include "herd/core/error.hpp"
#include "herd/io/output_files.hpp"

namespace herd::mcmc {

namespace {
constexpr char kMagic[8] = {'H', 'E', 'R', 'D', 'C', 'H', 'N', '1'};
constexpr std::uint32_t kVersion = 1;
constexpr std::size_t kBufferBytes = std::size_t{1} << 20;
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
  const auto rb = static_cast<std::uint32_t>(chain_record_bytes(ndim));
  const std::int32_t d = ndim;
  put(kMagic, 8);
  put(&kVersion, 4);
  put(&d, 4);
  put(&chain_id, 4);
  put(&rb, 4);
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
  char magic[8];
  std::uint32_t version = 0, chain = 0, rb = 0;
  std::int32_t d = 0;
  if (std::fread(magic, 1, 8, f) != 8 || std::memcmp(magic, kMagic, 8) != 0 || std::fread(&version, 4, 1, f) != 1 ||
      std::fread(&d, 4, 1, f) != 1 || std::fread(&chain, 4, 1, f) != 1 || std::fread(&rb, 4, 1, f) != 1)
    throw IoError(fmt::format("read_binary_chain: '{}' is not a herd chain file", path));
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
