// The byte encoding of a compact chain record (chain_record.hpp): a hand-written record of
// known bytes, through the encoder, the decoder and the two files that hold such records
// (the binary chain file and a restart record's chain file).
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <span>
#include <string>
#include <vector>

#include <unistd.h>

#include <catch2/catch.hpp>

#include "herd/core/error.hpp"
#include "herd/mcmc/chain_record.hpp"
#include "herd/mcmc/chain_sink.hpp"
#include "herd/mcmc/parallel.hpp"

using namespace herd::mcmc;
namespace fs = std::filesystem;

namespace {

// Bit patterns of the doubles of the known record.
constexpr std::uint64_t kNegZero = 0x8000000000000000ULL;       // -0.0
constexpr std::uint64_t kHalf = 0x3FE0000000000000ULL;          // 0.5
constexpr std::uint64_t kOne = 0x3FF0000000000000ULL;           // 1.0
constexpr std::uint64_t kNanPayload = 0xFFF800000000BEEFULL;    // quiet NaN, sign set, payload 0xBEEF
constexpr std::uint64_t kMinusOneHalf = 0xBFF8000000000000ULL;  // -1.5

/// The record of a 2-dimensional chain that `kExpectedBytes` encodes.
struct KnownRecord {
  std::array<double, 2> point{std::bit_cast<double>(kNanPayload), std::bit_cast<double>(kMinusOneHalf)};
  ChainRecord record() const {
    ChainRecord r;
    r.step = 0x0102030405060708ULL;
    r.weight = 3;
    r.log_density = std::bit_cast<double>(kNegZero);
    r.dr_stage = -2;
    r.chain_id = 0xA1B2C3D4U;
    r.accept_prob = std::bit_cast<double>(kHalf);
    r.adapt_measure = std::bit_cast<double>(kOne);
    r.point = point.data();
    r.ndim = 2;
    return r;
  }
};

// Written out by hand from the layout of chain_record.hpp (little-endian, 48 + 8 * 2 bytes).
constexpr std::array<unsigned char, 64> kExpectedBytes{
    0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01,  //  0 u64 step 0x0102030405060708
    0x03, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,  //  8 i64 weight 3
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80,  // 16 f64 log density -0.0
    0xFE, 0xFF, 0xFF, 0xFF,                          // 24 i32 DR stage -2
    0xD4, 0xC3, 0xB2, 0xA1,                          // 28 u32 chain id 0xA1B2C3D4
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xE0, 0x3F,  // 32 f64 acceptance probability 0.5
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xF0, 0x3F,  // 40 f64 adaptation measure 1.0
    0xEF, 0xBE, 0x00, 0x00, 0x00, 0x00, 0xF8, 0xFF,  // 48 f64 point[0]: NaN, payload 0xBEEF, sign set
    0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xF8, 0xBF,  // 56 f64 point[1] -1.5
};

std::vector<std::byte> expected_bytes() {
  std::vector<std::byte> v(kExpectedBytes.size());
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<std::byte>(kExpectedBytes[i]);
  return v;
}

std::uint64_t bits(double x) { return std::bit_cast<std::uint64_t>(x); }

/// Every field of `r` equals the known record's, bit for bit.
void check_known(const ChainRecord& r) {
  CHECK(r.step == 0x0102030405060708ULL);
  CHECK(r.weight == 3);
  CHECK(bits(r.log_density) == kNegZero);
  CHECK(r.dr_stage == -2);
  CHECK(r.chain_id == 0xA1B2C3D4U);
  CHECK(bits(r.accept_prob) == kHalf);
  CHECK(bits(r.adapt_measure) == kOne);
  REQUIRE(r.ndim == 2);
  REQUIRE(r.point != nullptr);
  CHECK(bits(r.point[0]) == kNanPayload);
  CHECK(bits(r.point[1]) == kMinusOneHalf);
}

std::vector<std::byte> slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::vector<char> c((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::byte> out(c.size());
  for (std::size_t i = 0; i < c.size(); ++i) out[i] = static_cast<std::byte>(c[i]);
  return out;
}

void write_bytes(const fs::path& p, std::span<const std::byte> b) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

fs::path scratch(const char* name) {
  fs::path d = fs::temp_directory_path() / ("herd_test_chain_record_" + std::to_string(::getpid())) / name;
  fs::create_directories(d.parent_path());
  fs::remove(d);
  return d;
}

}  // namespace

TEST_CASE("chain record: size is 48 + 8 ndim", "[mcmc][chain_record]") {
  STATIC_REQUIRE(chain_record_bytes(0) == 48);
  STATIC_REQUIRE(chain_record_bytes(2) == 64);
  STATIC_REQUIRE(chain_record_bytes(3) == 72);
  CHECK(chain_record_bytes(1000) == 8048);
}

TEST_CASE("chain record: encodes a known record to hand-written bytes", "[mcmc][chain_record]") {
  const KnownRecord k;
  std::vector<std::byte> out(chain_record_bytes(2) + 2, std::byte{0x5A});
  encode_chain_record(k.record(), out.data() + 1);  // unaligned on purpose
  const auto want = expected_bytes();
  CHECK(std::vector<std::byte>(out.begin() + 1, out.end() - 1) == want);
  CHECK(out.front() == std::byte{0x5A});  // nothing written outside the record
  CHECK(out.back() == std::byte{0x5A});
}

TEST_CASE("chain record: decodes hand-written bytes, bit for bit", "[mcmc][chain_record]") {
  const auto bytes = expected_bytes();
  std::array<double, 2> pt{};
  const ChainRecord r = decode_chain_record(bytes, 2, pt.data());
  check_known(r);
  CHECK(r.point == pt.data());

  // Round trip: decode(encode(r)) == r and encode(decode(b)) == b.
  std::vector<std::byte> again(chain_record_bytes(2));
  encode_chain_record(r, again.data());
  CHECK(again == bytes);

  // Bytes after the record are ignored; a record of no dimensions is its 48 fixed bytes.
  std::vector<std::byte> longer = bytes;
  longer.push_back(std::byte{0x11});
  check_known(decode_chain_record(longer, 2, pt.data()));
  const ChainRecord r0 = decode_chain_record(std::span<const std::byte>(bytes).first(48), 0, nullptr);
  CHECK(r0.ndim == 0);
  CHECK(r0.weight == 3);
  CHECK(bits(r0.adapt_measure) == kOne);
}

TEST_CASE("chain record: a truncated buffer is refused with the sizes named", "[mcmc][chain_record]") {
  const auto bytes = expected_bytes();
  std::array<double, 2> pt{1.0, 2.0};
  const std::span<const std::byte> all(bytes);
  CHECK_THROWS_AS(decode_chain_record(all.first(63), 2, pt.data()), herd::IoError);
  CHECK_THROWS_WITH(decode_chain_record(all.first(63), 2, pt.data()),
                    "decode_chain_record: truncated chain record: 63 bytes given, a record of 2 dimensions has "
                    "64 (48 + 8 ndim)");
  CHECK_THROWS_WITH(decode_chain_record({}, 2, pt.data()), Catch::Contains("0 bytes given"));
  CHECK_THROWS_WITH(decode_chain_record(all.first(47), 0, nullptr), Catch::Contains("47 bytes given"));
  CHECK_THROWS_WITH(decode_chain_record(all, -1, pt.data()), "decode_chain_record: ndim -1 is negative, expected >= 0");
  CHECK(pt[0] == 1.0);  // the point is untouched by a refusal
  CHECK(pt[1] == 2.0);
}

TEST_CASE("chain record: the binary chain file holds the same bytes after its header", "[mcmc][chain_record]") {
  const fs::path path = scratch("known.bin");
  const KnownRecord k;
  {
    BinaryChainSink sink(path.string());
    sink.begin(0xA1B2C3D4U, 2);
    sink.write(k.record());
    sink.write(k.record());
  }
  const auto file = slurp(path);
  const auto want = expected_bytes();
  REQUIRE(file.size() == 24 + 2 * want.size());
  CHECK(std::vector<std::byte>(file.begin() + 24, file.begin() + 88) == want);
  CHECK(std::vector<std::byte>(file.begin() + 88, file.end()) == want);

  const MemoryChainSink back = read_binary_chain(path.string());
  REQUIRE(back.size() == 2);
  CHECK(back.chain_id == 0xA1B2C3D4U);
  CHECK(bits(back.log_density[1]) == kNegZero);
  CHECK(bits(back.point(1)[0]) == kNanPayload);

  // A file cut inside its second record is refused, naming the file.
  write_bytes(path, std::span<const std::byte>(file).first(file.size() - 1));
  CHECK_THROWS_WITH(read_binary_chain(path.string()),
                    Catch::Contains(path.string()) && Catch::Contains("ends inside a record"));
  fs::remove_all(path.parent_path());
}

TEST_CASE("chain record: the binary chain file's 24-byte header is little-endian, hand-written bytes",
          "[mcmc][chain_record]") {
  // Written out by hand from the layout of chain_sink.hpp: chain 0xA1B2C3D4, ndim 2.
  constexpr std::array<unsigned char, 24> kHeader{
      'H',  'E',  'R',  'D',  'C', 'H', 'N', '1',  //  0 magic
      0x01, 0x00, 0x00, 0x00,                      //  8 u32 version 1
      0x02, 0x00, 0x00, 0x00,                      // 12 i32 ndim 2
      0xD4, 0xC3, 0xB2, 0xA1,                      // 16 u32 chain id 0xA1B2C3D4
      0x40, 0x00, 0x00, 0x00,                      // 20 u32 record size 64
  };
  std::vector<std::byte> header(kHeader.size());
  for (std::size_t i = 0; i < header.size(); ++i) header[i] = static_cast<std::byte>(kHeader[i]);

  // The writer: exactly these bytes, then the record.
  const fs::path written = scratch("header_written.bin");
  {
    BinaryChainSink sink(written.string());
    sink.begin(0xA1B2C3D4U, 2);
    sink.write(KnownRecord().record());
  }
  const auto file = slurp(written);
  REQUIRE(file.size() == 24 + 64);
  CHECK(std::vector<std::byte>(file.begin(), file.begin() + 24) == header);

  // The reader: a file of hand-written bytes decodes to the known chain.
  const fs::path by_hand = scratch("header_by_hand.bin");
  std::vector<std::byte> bytes = header;
  const auto rec = expected_bytes();
  bytes.insert(bytes.end(), rec.begin(), rec.end());
  write_bytes(by_hand, bytes);
  const MemoryChainSink back = read_binary_chain(by_hand.string());
  CHECK(back.chain_id == 0xA1B2C3D4U);
  CHECK(back.ndim == 2);
  REQUIRE(back.size() == 1);
  CHECK(back.step[0] == 0x0102030405060708ULL);
  CHECK(bits(back.point(0)[0]) == kNanPayload);
  CHECK(bits(back.point(0)[1]) == kMinusOneHalf);

  // The words are read least significant byte first: a version written big-endian is 2^24.
  std::vector<std::byte> swapped = bytes;
  swapped[8] = std::byte{0x00};
  swapped[11] = std::byte{0x01};
  write_bytes(by_hand, swapped);
  CHECK_THROWS_WITH(read_binary_chain(by_hand.string()),
                    Catch::Contains(by_hand.string()) && Catch::Contains("version 16777216 ndim 2 record size 64"));
  fs::remove_all(written.parent_path());
}

TEST_CASE("chain record: a restart record's chain file of hand-written bytes reads back", "[mcmc][chain_record]") {
  const fs::path path = scratch("known.chain");
  auto bytes = expected_bytes();
  const auto one = bytes;
  bytes.insert(bytes.end(), one.begin(), one.end());
  write_bytes(path, bytes);
  const MemoryChainSink c = read_resumable_chain(path.string(), 2);
  REQUIRE(c.size() == 2);
  CHECK(c.chain_id == 0xA1B2C3D4U);
  for (std::size_t i = 0; i < 2; ++i) {
    CHECK(c.step[i] == 0x0102030405060708ULL);
    CHECK(c.weight[i] == 3);
    CHECK(bits(c.log_density[i]) == kNegZero);
    CHECK(c.dr_stage[i] == -2);
    CHECK(bits(c.accept_prob[i]) == kHalf);
    CHECK(bits(c.adapt_measure[i]) == kOne);
    CHECK(bits(c.point(i)[0]) == kNanPayload);
    CHECK(bits(c.point(i)[1]) == kMinusOneHalf);
  }
  fs::remove_all(path.parent_path());
}
