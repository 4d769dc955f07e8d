#include "herd/io/checkpoint.hpp"

#include <array>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

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

std::uint32_t detail::crc32_portable(std::span<const std::byte> data, std::uint32_t crc) noexcept {
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

#if defined(__x86_64__)
namespace {

/// x folded forward by the constant pair k (x.lo k.lo ^ x.hi k.hi), plus the next block.
__attribute__((target("pclmul,sse4.1"), always_inline)) inline __m128i fold(__m128i x, __m128i k,
                                                                            __m128i next) noexcept {
  return _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11)), next);
}

/// The CRC register (not inverted: `crc32_portable`'s internal state) after the `n` bytes at
/// `p`, `n` >= 64 and a multiple of 16: carry-less multiplication folding (Gopal et al.,
/// "Fast CRC Computation for Generic Polynomials Using PCLMULQDQ Instruction", Intel 2009), four
/// 128-bit lanes folded across 512 bits, then to 128, 64 and 32 bits and a Barrett reduction.
/// The constants are those of the reflected polynomial 0xEDB88320 (Linux
/// arch/x86/crypto/crc32-pclmul_asm.S): x^(4*128+32) and x^(4*128-32) mod P (R1, R2), x^(128+32)
/// and x^(128-32) mod P (R3, R4), x^64 mod P (R5), P' and mu' for the reduction, all bit-reflected.
__attribute__((target("pclmul,sse4.1"))) std::uint32_t crc32_clmul_blocks(const std::byte* p, std::size_t n,
                                                                          std::uint32_t crc) noexcept {
  auto load = [](const std::byte* q) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(q)); };
  const __m128i k1k2 = _mm_set_epi64x(0x1c6e41596ll, 0x154442bd4ll);
  const __m128i k3k4 = _mm_set_epi64x(0x0ccaa009ell, 0x1751997d0ll);
  const __m128i k5 = _mm_set_epi64x(0, 0x163cd6124ll);
  const __m128i poly_mu = _mm_set_epi64x(0x1F7011641ll, 0x1DB710641ll);
  const __m128i mask32 = _mm_set_epi32(0, 0, 0, -1);
  __m128i x1 = _mm_xor_si128(load(p), _mm_cvtsi32_si128(static_cast<int>(crc)));
  __m128i x2 = load(p + 16), x3 = load(p + 32), x4 = load(p + 48);
  p += 64;
  n -= 64;
  for (; n >= 64; n -= 64, p += 64) {
    x1 = fold(x1, k1k2, load(p));
    x2 = fold(x2, k1k2, load(p + 16));
    x3 = fold(x3, k1k2, load(p + 32));
    x4 = fold(x4, k1k2, load(p + 48));
  }
  x1 = fold(x1, k3k4, x2);
  x1 = fold(x1, k3k4, x3);
  x1 = fold(x1, k3k4, x4);
  for (; n >= 16; n -= 16, p += 16) x1 = fold(x1, k3k4, load(p));
  // 128 -> 64 bits (appending 32 zero bits), then 64 -> 32.
  x1 = _mm_xor_si128(_mm_clmulepi64_si128(x1, k3k4, 0x10), _mm_srli_si128(x1, 8));
  x1 = _mm_xor_si128(_mm_clmulepi64_si128(_mm_and_si128(x1, mask32), k5, 0x00), _mm_srli_si128(x1, 4));
  // Barrett reduction 64 -> 32 bits.
  __m128i t = _mm_clmulepi64_si128(_mm_and_si128(x1, mask32), poly_mu, 0x10);
  t = _mm_clmulepi64_si128(_mm_and_si128(t, mask32), poly_mu, 0x00);
  return static_cast<std::uint32_t>(_mm_extract_epi32(_mm_xor_si128(t, x1), 1));
}

bool have_clmul() noexcept {
  __builtin_cpu_init();
  return __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
}

}  // namespace
#endif

std::uint32_t crc32(std::span<const std::byte> data, std::uint32_t crc) noexcept {
#if defined(__x86_64__)
  static const bool clmul = have_clmul();
  if (clmul && data.size() >= 64) {
    const std::size_t bulk = data.size() & ~std::size_t{15};
    crc = ~crc32_clmul_blocks(data.data(), bulk, ~crc);
    data = data.subspan(bulk);
  }
#endif
  return detail::crc32_portable(data, crc);
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
