#include "herd/io/checkpoint.hpp"

#include <array>

#include "herd/core/error.hpp"
#include "herd/io/atomic_file.hpp"

namespace herd::io {

namespace {

constexpr char kMagic[8] = {'H', 'E', 'R', 'D', 'C', 'K', 'P', 'T'};
constexpr char kEndMagic[8] = {'T', 'P', 'K', 'C', 'D', 'R', 'E', 'H'};
constexpr std::size_t kHeaderSize = 24;
constexpr std::size_t kTrailerSize = 12;

/// Tables for CRC-32 "slicing by 8": table[0] is the classic byte-wise table; table[k][b]
/// is the CRC of byte b followed by k zero bytes, so 8 bytes are folded per step.
constexpr std::array<std::array<std::uint32_t, 256>, 8> make_crc_tables() {
  std::array<std::array<std::uint32_t, 256>, 8> t{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1u) ? (0xEDB88320u ^ (c >> 1)) : (c >> 1);
    t[0][i] = c;
  }
  for (std::uint32_t i = 0; i < 256; ++i)
    for (std::size_t k = 1; k < 8; ++k) t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xFFu];
  return t;
}
constexpr auto kCrcTables = make_crc_tables();

/// Appends little-endian fields to a buffer sized in advance.
class Output {
 public:
  explicit Output(std::size_t size) : buf_(size) {}
  void bytes(const void* data, std::size_t n) {
    if (n > 0) std::memcpy(buf_.data() + pos_, data, n);
    pos_ += n;
  }
  template <class T>
  void put(T v) {
    bytes(&v, sizeof(T));
  }
  std::span<const std::byte> written() const { return std::span<const std::byte>(buf_).first(pos_); }
  std::vector<std::byte> take() { return std::move(buf_); }

 private:
  std::vector<std::byte> buf_;
  std::size_t pos_ = 0;
};

/// Bounds-checked reading of the payload.
class Cursor {
 public:
  Cursor(std::span<const std::byte> b, std::size_t pos, std::size_t end, const std::string& src)
      : b_(b), pos_(pos), end_(end), src_(src) {}
  template <class T>
  T get(const char* what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, b_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  std::size_t skip(std::uint64_t n, const char* what) {
    need(n, what);
    const std::size_t at = pos_;
    pos_ += static_cast<std::size_t>(n);
    return at;
  }
  std::size_t pos() const { return pos_; }
  std::size_t end() const { return end_; }

 private:
  void need(std::uint64_t n, const char* what) const {
    if (n > end_ - pos_)
      throw IoError(fmt::format("{}: malformed checkpoint: {} at byte {} runs past the payload end ({})", src_, what,
                                pos_, end_));
  }
  std::span<const std::byte> b_;
  std::size_t pos_, end_;
  const std::string& src_;
};

}  // namespace

std::uint32_t crc32(std::span<const std::byte> data, std::uint32_t crc) noexcept {
  const auto& t = kCrcTables;
  crc = ~crc;
  const std::byte* p = data.data();
  std::size_t n = data.size();
  while (n >= 8) {
    std::uint32_t lo, hi;  // little-endian host (static_assert in the header)
    std::memcpy(&lo, p, 4);
    std::memcpy(&hi, p + 4, 4);
    lo ^= crc;
    crc = t[7][lo & 0xFFu] ^ t[6][(lo >> 8) & 0xFFu] ^ t[5][(lo >> 16) & 0xFFu] ^ t[4][lo >> 24] ^ t[3][hi & 0xFFu] ^
          t[2][(hi >> 8) & 0xFFu] ^ t[1][(hi >> 16) & 0xFFu] ^ t[0][hi >> 24];
    p += 8;
    n -= 8;
  }
  for (; n > 0; --n, ++p) crc = t[0][(crc ^ static_cast<std::uint32_t>(*p)) & 0xFFu] ^ (crc >> 8);
  return ~crc;
}

// --- CheckpointWriter -------------------------------------------------------------------

CheckpointWriter::CheckpointWriter(std::string kind, std::uint32_t kind_version)
    : kind_(std::move(kind)), kind_version_(kind_version) {}

void CheckpointWriter::add_bytes(std::string_view name, std::span<const std::byte> bytes) {
  HERD_REQUIRE(!name.empty(), "checkpoint: section name is empty");
  sections_.insert_or_assign(std::string(name), std::vector<std::byte>(bytes.begin(), bytes.end()));
}

void CheckpointWriter::add_string(std::string_view name, std::string_view text) {
  add_bytes(name, std::as_bytes(std::span<const char>(text.data(), text.size())));
}

std::vector<std::byte> CheckpointWriter::serialize() const {
  std::size_t payload = 4 + kind_.size() + 4 + 8;
  for (const auto& [name, data] : sections_) payload += 4 + name.size() + 8 + data.size();
  Output out(kHeaderSize + payload + kTrailerSize);
  out.bytes(kMagic, sizeof kMagic);
  out.put<std::uint32_t>(kCheckpointFormatVersion);
  out.put<std::uint32_t>(0);
  out.put<std::uint64_t>(payload);
  out.put<std::uint32_t>(static_cast<std::uint32_t>(kind_.size()));
  out.bytes(kind_.data(), kind_.size());
  out.put<std::uint32_t>(kind_version_);
  out.put<std::uint64_t>(sections_.size());
  for (const auto& [name, data] : sections_) {
    out.put<std::uint32_t>(static_cast<std::uint32_t>(name.size()));
    out.bytes(name.data(), name.size());
    out.put<std::uint64_t>(data.size());
    out.bytes(data.data(), data.size());
  }
  out.put<std::uint32_t>(crc32(out.written()));
  out.bytes(kEndMagic, sizeof kEndMagic);
  return out.take();
}

void CheckpointWriter::commit(const std::string& path) const { write_file_atomic(path, serialize()); }

// --- CheckpointReader -------------------------------------------------------------------

CheckpointReader::CheckpointReader(const std::string& path) : source_(path) {
  data_ = read_file_bytes(path);
  parse(data_);
}

CheckpointReader::CheckpointReader(std::span<const std::byte> bytes, std::string source)
    : source_(std::move(source)), data_(bytes.begin(), bytes.end()) {
  parse(data_);
}

void CheckpointReader::parse(std::span<const std::byte> b) {
  const std::size_t n = b.size();
  if (n == 0) throw IoError(fmt::format("{}: empty file, not a herd checkpoint", source_));
  if (n < sizeof kMagic || std::memcmp(b.data(), kMagic, sizeof kMagic) != 0) {
    if (n > 0 && n < sizeof kMagic && std::memcmp(b.data(), kMagic, n) == 0)
      throw IoError(
          fmt::format("{}: truncated checkpoint ({} bytes, the header alone needs {})", source_, n, kHeaderSize));
    throw IoError(fmt::format("{}: not a herd checkpoint (no HERDCKPT magic; {} bytes)", source_, n));
  }
  if (n < kHeaderSize)
    throw IoError(
        fmt::format("{}: truncated checkpoint ({} bytes, the header alone needs {})", source_, n, kHeaderSize));
  std::uint32_t version, flags;
  std::uint64_t payload;
  std::memcpy(&version, b.data() + 8, 4);
  std::memcpy(&flags, b.data() + 12, 4);
  std::memcpy(&payload, b.data() + 16, 8);
  if (version > kCheckpointFormatVersion || version == 0)
    throw IoError(fmt::format("{}: checkpoint format version {}, but this build reads versions 1 to {}", source_,
                              version, kCheckpointFormatVersion));
  const std::uint64_t announced =
      payload <= (std::uint64_t{1} << 62) ? kHeaderSize + payload + kTrailerSize : ~std::uint64_t{0};
  if (n < announced)
    throw IoError(
        fmt::format("{}: truncated checkpoint ({} bytes, but the header announces {})", source_, n, announced));
  if (n > announced)
    throw IoError(fmt::format("{}: corrupt checkpoint: {} bytes, but the header announces {}", source_, n, announced));
  const std::size_t end = kHeaderSize + static_cast<std::size_t>(payload);
  if (std::memcmp(b.data() + end + 4, kEndMagic, sizeof kEndMagic) != 0)
    throw IoError(fmt::format("{}: corrupt checkpoint: end marker missing", source_));
  std::uint32_t stored;
  std::memcpy(&stored, b.data() + end, 4);
  const std::uint32_t actual = crc32(b.first(end));
  if (stored != actual)
    throw IoError(
        fmt::format("{}: corrupt checkpoint: CRC-32 is {:08x}, but the file records {:08x}", source_, actual, stored));
  (void)flags;

  Cursor c(b, kHeaderSize, end, source_);
  const auto kind_len = c.get<std::uint32_t>("kind length");
  const std::size_t kind_at = c.skip(kind_len, "kind");
  kind_.assign(reinterpret_cast<const char*>(b.data() + kind_at), kind_len);
  kind_version_ = c.get<std::uint32_t>("kind version");
  const auto count = c.get<std::uint64_t>("section count");
  for (std::uint64_t i = 0; i < count; ++i) {
    const auto name_len = c.get<std::uint32_t>("section name length");
    const std::size_t name_at = c.skip(name_len, "section name");
    std::string name(reinterpret_cast<const char*>(b.data() + name_at), name_len);
    const auto size = c.get<std::uint64_t>("section length");
    const std::size_t at = c.skip(size, "section data");
    if (!sections_.emplace(std::move(name), std::make_pair(at, static_cast<std::size_t>(size))).second)
      throw IoError(fmt::format("{}: malformed checkpoint: duplicate section", source_));
  }
  if (c.pos() != c.end())
    throw IoError(fmt::format("{}: malformed checkpoint: {} unused payload bytes", source_, c.end() - c.pos()));
}

void CheckpointReader::expect_kind(std::string_view kind, std::uint32_t max_version) const {
  if (kind_ != kind)
    throw IoError(fmt::format("{}: a checkpoint of \"{}\", but \"{}\" was expected", source_, kind_, kind));
  if (kind_version_ > max_version)
    throw IoError(fmt::format("{}: a \"{}\" checkpoint of state version {}, but this build reads versions up to {}",
                              source_, kind_, kind_version_, max_version));
}

std::vector<std::string> CheckpointReader::names() const {
  std::vector<std::string> out;
  for (const auto& [name, loc] : sections_) out.push_back(name);
  return out;
}

std::span<const std::byte> CheckpointReader::bytes(std::string_view name) const {
  auto it = sections_.find(name);
  if (it == sections_.end()) throw IoError(fmt::format("{}: checkpoint has no section \"{}\"", source_, name));
  return std::span<const std::byte>(data_).subspan(it->second.first, it->second.second);
}

std::string CheckpointReader::string(std::string_view name) const {
  auto b = bytes(name);
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

void CheckpointReader::check_multiple(std::string_view name, std::size_t size, std::size_t elem) const {
  if (size % elem != 0)
    throw IoError(
        fmt::format("{}: checkpoint section \"{}\" has {} bytes, not a multiple of {}", source_, name, size, elem));
}

void CheckpointReader::check_size(std::string_view name, std::size_t size, std::size_t expected) const {
  if (size != expected)
    throw IoError(
        fmt::format("{}: checkpoint section \"{}\" has {} bytes, but {} were expected", source_, name, size, expected));
}

}  // namespace herd::io
