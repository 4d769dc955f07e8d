// TensorBoard event files: CRC-32C known answers (RFC 3720 B.4), the TFRecord framing, and
// the Event protobuf decoded back by an independent reader written here from the format's
// description (wire types, field numbers of event.proto / summary.proto).
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "herd/core/error.hpp"
#include "herd/io/log_file.hpp"
#include "herd/io/tensorboard.hpp"
#include "temp_dir.hpp"

namespace fs = std::filesystem;
using herd::io::crc32c;

namespace {

std::string bytes_of(std::initializer_list<int> v) {
  std::string s;
  for (int b : v) s.push_back(static_cast<char>(b));
  return s;
}

// Bitwise CRC-32C, one bit at a time (no table): the reference for random inputs.
std::uint32_t crc32c_bitwise(const std::string& s) {
  std::uint32_t c = 0xFFFFFFFFu;
  for (unsigned char ch : s) {
    c ^= ch;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1u)));
  }
  return ~c;
}

std::uint64_t le(const std::string& s, std::size_t at, int n) {
  std::uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= static_cast<std::uint64_t>(static_cast<unsigned char>(s[at + i])) << (8 * i);
  return v;
}

std::uint32_t unmask(std::uint32_t m) {
  const std::uint32_t r = m - 0xa282ead8u;
  return (r >> 17) | (r << 15);
}

// Splits a file into its records' data, checking both CRCs of every record.
std::vector<std::string> read_records(const std::string& file) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at < file.size()) {
    REQUIRE(at + 12 <= file.size());
    const std::uint64_t n = le(file, at, 8);
    CHECK(unmask(static_cast<std::uint32_t>(le(file, at + 8, 4))) == crc32c(file.substr(at, 8)));
    REQUIRE(at + 12 + n + 4 <= file.size());
    const std::string data = file.substr(at + 12, n);
    CHECK(unmask(static_cast<std::uint32_t>(le(file, at + 12 + n, 4))) == crc32c(data));
    out.push_back(data);
    at += 12 + n + 4;
  }
  return out;
}

// A minimal protobuf reader: field number -> (wire type, raw value).
struct Field {
  int wire;
  std::uint64_t number;  // varint, fixed32, fixed64
  std::string bytes;     // length-delimited
};
std::uint64_t varint(const std::string& s, std::size_t& at) {
  std::uint64_t v = 0;
  for (int shift = 0;; shift += 7) {
    REQUIRE(at < s.size());
    const auto b = static_cast<unsigned char>(s[at++]);
    v |= static_cast<std::uint64_t>(b & 0x7F) << shift;
    if (!(b & 0x80)) return v;
  }
}
std::multimap<int, Field> parse(const std::string& s) {
  std::multimap<int, Field> m;
  std::size_t at = 0;
  while (at < s.size()) {
    const std::uint64_t key = varint(s, at);
    Field f{static_cast<int>(key & 7), 0, {}};
    if (f.wire == 0) f.number = varint(s, at);
    else if (f.wire == 1) f.number = le(s, at, 8), at += 8;
    else if (f.wire == 5) f.number = le(s, at, 4), at += 4;
    else if (f.wire == 2) {
      const std::uint64_t n = varint(s, at);
      f.bytes = s.substr(at, n);
      at += n;
    } else FAIL("unexpected wire type " << f.wire);
    m.emplace(static_cast<int>(key >> 3), f);
  }
  REQUIRE(at == s.size());
  return m;
}
double as_double(std::uint64_t bits) {
  double d;
  std::memcpy(&d, &bits, 8);
  return d;
}
float as_float(std::uint64_t bits) {
  const auto b = static_cast<std::uint32_t>(bits);
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

std::string slurp(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

TEST_CASE("crc32c: RFC 3720 B.4 known answers and the bitwise definition", "[io]") {
  CHECK(crc32c(std::string(32, '\0')) == 0x8A9136AAu);
  CHECK(crc32c(std::string(32, '\xFF')) == 0x62A8AB43u);
  std::string up, down;
  for (int i = 0; i < 32; ++i) up.push_back(static_cast<char>(i)), down.push_back(static_cast<char>(31 - i));
  CHECK(crc32c(up) == 0x46DD794Eu);
  CHECK(crc32c(down) == 0x113FDB5Cu);
  // The iSCSI read-command PDU of RFC 3720 B.4.
  const std::string pdu =
      bytes_of({0x01, 0xc0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
                0x14, 0x00, 0x00, 0x00, 0x00, 0x00, 0x04, 0x00, 0x00, 0x00, 0x00, 0x14, 0x00, 0x00, 0x00, 0x18,
                0x28, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00});
  CHECK(crc32c(pdu) == 0xD9963A56u);
  CHECK(crc32c("123456789") == 0xE3069283u);  // the CRC catalogue's check value
  CHECK(crc32c("") == 0u);
  std::string s;
  for (int i = 0; i < 1000; ++i) {
    s.push_back(static_cast<char>((i * 7919 + 13) & 0xFF));
    if (i % 97 == 0) CHECK(crc32c(s) == crc32c_bitwise(s));
  }
  // TFRecord's mask, by its definition.
  const std::uint32_t c = crc32c("abc");
  CHECK(herd::io::masked_crc32c("abc") == ((c >> 15) | (c << 17)) + 0xa282ead8u);
}

TEST_CASE("TensorBoardWriter: records decode to the written events", "[io]") {
  herd::test::TempDir tmp;
  const std::string dir = tmp.file("run_tb/sub");
  std::string path;
  {
    herd::io::TensorBoardWriter w(dir);
    path = w.path();
    w.add_scalars(256, {{"rollout/return_mean", 21.5}, {"train/value_loss", 0.125}}, 1700000000.25);
    w.add_session_start(512, 1700000001.0);
    w.add_scalars(512, {{"train/approx_kl", std::nan("")}, {"time/big", 3e38}}, 1700000002.5);
  }
  REQUIRE(fs::path(path).parent_path() == fs::path(dir));
  CHECK(fs::path(path).filename().string().rfind("events.out.tfevents.", 0) == 0);
  const auto recs = read_records(slurp(path));
  REQUIRE(recs.size() == 4u);
  // 1: file_version
  auto e = parse(recs[0]);
  REQUIRE(e.count(3) == 1);
  CHECK(e.find(3)->second.bytes == "brain.Event:2");
  CHECK(e.find(1)->second.wire == 1);
  CHECK(as_double(e.find(1)->second.number) > 1.6e9);  // now, in Unix seconds
  // 2: scalars at step 256
  e = parse(recs[1]);
  CHECK(as_double(e.find(1)->second.number) == 1700000000.25);
  CHECK(e.find(2)->second.number == 256u);
  REQUIRE(e.count(5) == 1);
  const auto summary = parse(e.find(5)->second.bytes);
  REQUIRE(summary.count(1) == 2);
  std::vector<std::pair<std::string, float>> values;
  for (auto it = summary.equal_range(1).first; it != summary.equal_range(1).second; ++it) {
    const auto v = parse(it->second.bytes);
    REQUIRE(v.find(2)->second.wire == 5);
    values.emplace_back(v.find(1)->second.bytes, as_float(v.find(2)->second.number));
  }
  CHECK(values[0] == std::make_pair(std::string("rollout/return_mean"), 21.5f));
  CHECK(values[1] == std::make_pair(std::string("train/value_loss"), 0.125f));
  // 3: SessionLog START at step 512
  e = parse(recs[2]);
  CHECK(e.find(2)->second.number == 512u);
  REQUIRE(e.count(7) == 1);
  const auto log = parse(e.find(7)->second.bytes);
  CHECK(log.find(1)->second.number == 1u);
  // 4: NaN and a large value survive as float32
  e = parse(recs[3]);
  const auto s4 = parse(e.find(5)->second.bytes);
  auto it = s4.equal_range(1).first;
  CHECK(std::isnan(as_float(parse(it->second.bytes).find(2)->second.number)));
  ++it;
  CHECK(as_float(parse(it->second.bytes).find(2)->second.number) == 3e38f);
  // A second writer in the same second gets a new file; the first is left alone.
  const std::string before = slurp(path);
  herd::io::TensorBoardWriter w2(dir);
  CHECK(w2.path() != path);
  CHECK(slurp(path) == before);
}

TEST_CASE("TensorBoardWriter: a folder that cannot be made is an IoError naming it", "[io]") {
  herd::test::TempDir tmp;
  std::ofstream(tmp.file("file")) << "x";
  CHECK_THROWS_AS(herd::io::TensorBoardWriter(tmp.file("file/tb")), herd::IoError);
  try {
    herd::io::TensorBoardWriter w(tmp.file("file/tb"));
  } catch (const herd::IoError& e) {
    CHECK_THAT(e.what(), Catch::Matchers::Contains("file/tb"));
  }
}

TEST_CASE("LogFile: whole records appended, truncated, exclusive create refused", "[io]") {
  herd::test::TempDir tmp;
  const std::string p = tmp.file("log.csv");
  {
    herd::io::LogFile f(p, herd::io::LogOpen::kTruncate);
    f.write("a,b\n");
    f.write("1,2\n");
  }
  {
    herd::io::LogFile f(p, herd::io::LogOpen::kAppend);
    f.write("3,4\n");
    f.truncate(8);
    f.write("5,6\n");  // O_APPEND: after the cut
  }
  CHECK(slurp(p) == "a,b\n1,2\n5,6\n");
  CHECK_THROWS_AS(herd::io::LogFile(p, herd::io::LogOpen::kCreateNew), herd::IoError);
  CHECK(slurp(p) == "a,b\n1,2\n5,6\n");
}
