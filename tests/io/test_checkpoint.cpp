// Checkpoints: CRC-32 known answers, round trips, rejection of truncated/foreign/corrupt
// files, and a writer SIGKILLed mid-write leaving the previous checkpoint readable.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#include "herd/core/error.hpp"
#include "herd/io/atomic_file.hpp"
#include "herd/io/checkpoint.hpp"
#include "temp_dir.hpp"

using namespace herd::io;
using herd::test::TempDir;

namespace {

std::span<const std::byte> as_bytes_of(std::string_view s) {
  return std::as_bytes(std::span<const char>(s.data(), s.size()));
}

void write_raw(const std::string& path, const std::vector<std::byte>& b, std::size_t n) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(n));
}

CheckpointWriter sample_writer() {
  CheckpointWriter w("herd.test", 3);
  w.add("state", std::vector<double>{1.5, -2.5, 3.25});
  w.add_value("step", std::uint64_t{42});
  w.add_string("note", "hello checkpoint!");
  w.add("empty", std::vector<float>{});
  return w;
}

}  // namespace

TEST_CASE("checkpoint: crc32 known answers", "[io]") {
  CHECK(crc32(as_bytes_of("")) == 0u);
  CHECK(crc32(as_bytes_of("123456789")) == 0xCBF43926u);
  CHECK(crc32(as_bytes_of("The quick brown fox jumps over the lazy dog")) == 0x414FA339u);
  // The 8-byte fast path agrees with the byte-wise definition at every length and offset.
  std::vector<std::byte> data(300);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = std::byte(static_cast<unsigned char>(i * 37 + 11));
  auto bytewise = [](std::span<const std::byte> d) {
    std::uint32_t c = 0xFFFFFFFFu;
    for (std::byte b : d) {
      c ^= static_cast<std::uint32_t>(b);
      for (int k = 0; k < 8; ++k) c = (c & 1u) ? (0xEDB88320u ^ (c >> 1)) : (c >> 1);
    }
    return ~c;
  };
  for (std::size_t off = 0; off < 9; ++off)
    for (std::size_t len = 0; len + off <= data.size(); len += 7)
      REQUIRE(crc32(std::span<const std::byte>(data).subspan(off, len)) ==
              bytewise(std::span<const std::byte>(data).subspan(off, len)));
  // Running checksum equals one-shot checksum.
  CHECK(crc32(as_bytes_of("6789"), crc32(as_bytes_of("12345"))) == 0xCBF43926u);
}

TEST_CASE("checkpoint: crc32 of long inputs (the carry-less multiplication path) equals the table method", "[io]") {
  // Known answers (Python's zlib.crc32) of inputs long enough for the folding path.
  std::vector<std::byte> pattern(4096);
  for (std::size_t i = 0; i < pattern.size(); ++i) pattern[i] = std::byte(static_cast<unsigned char>(i * 37 + 11));
  CHECK(crc32(pattern) == 0xFD7BB204u);
  CHECK(crc32(std::vector<std::byte>(std::size_t{1} << 20)) == 0xA738EA1Cu);
  std::string digits;
  for (int i = 0; i < 100; ++i) digits += "123456789";
  CHECK(crc32(as_bytes_of(digits)) == 0x09FD0FD7u);
  // Random data, lengths, offsets (alignments) and running values: identical to the portable
  // table implementation, and running checksums over split inputs equal the one-shot ones.
  std::mt19937_64 gen(20261205);
  std::vector<std::byte> data(70000);
  for (auto& b : data) b = std::byte(static_cast<unsigned char>(gen()));
  const std::span<const std::byte> all(data);
  for (int trial = 0; trial < 3000; ++trial) {
    const std::size_t off = gen() % 64;
    const std::size_t len = trial < 600 ? static_cast<std::size_t>(trial) : gen() % (data.size() - off);
    const auto start = static_cast<std::uint32_t>(gen());
    const auto piece = all.subspan(off, len);
    REQUIRE(crc32(piece, start) == herd::io::detail::crc32_portable(piece, start));
    const std::size_t cut = len > 0 ? gen() % (len + 1) : 0;
    REQUIRE(crc32(piece.subspan(cut), crc32(piece.first(cut))) == crc32(piece));
  }
}

TEST_CASE("checkpoint: round trip", "[io]") {
  TempDir tmp;
  const std::string path = tmp.file("run.ckpt");
  sample_writer().commit(path);
  CheckpointReader r(path);
  CHECK(r.kind() == "herd.test");
  CHECK(r.kind_version() == 3);
  CHECK_NOTHROW(r.expect_kind("herd.test", 3));
  CHECK_THROWS_WITH(r.expect_kind("herd.rl.ppo", 1), Catch::Contains("\"herd.rl.ppo\" was expected"));
  CHECK_THROWS_WITH(r.expect_kind("herd.test", 2), Catch::Contains("state version 3"));
  CHECK(r.get<double>("state") == std::vector<double>{1.5, -2.5, 3.25});
  CHECK(r.value<std::uint64_t>("step") == 42u);
  CHECK(r.string("note") == "hello checkpoint!");
  CHECK(r.get<float>("empty").empty());
  CHECK(r.names() == std::vector<std::string>{"empty", "note", "state", "step"});
  CHECK_THROWS_WITH(r.bytes("nope"), Catch::Contains("no section \"nope\""));
  CHECK_THROWS_WITH(r.value<std::uint32_t>("step"), Catch::Contains("8 bytes, but 4 were expected"));
  CHECK_THROWS_AS(r.get<double>("note"), herd::IoError);
  // Same content, same bytes.
  CHECK(sample_writer().serialize() == sample_writer().serialize());
}

TEST_CASE("checkpoint: every truncation is rejected clearly", "[io]") {
  const auto bytes = sample_writer().serialize();
  for (std::size_t n = 0; n < bytes.size(); ++n) {
    INFO("truncated to " << n << " bytes");
    std::span<const std::byte> part(bytes.data(), n);
    try {
      CheckpointReader r(part, "cut.ckpt");
      FAIL("accepted a truncated checkpoint");
    } catch (const herd::IoError& e) {
      const std::string msg = e.what();
      CHECK(msg.rfind("cut.ckpt: ", 0) == 0);
      CHECK((msg.find("truncated") != std::string::npos || msg.find("not a herd checkpoint") != std::string::npos));
    }
  }
}

TEST_CASE("checkpoint: every single-bit flip is rejected", "[io]") {
  const auto bytes = sample_writer().serialize();
  for (std::size_t i = 0; i < bytes.size(); ++i) {
    for (int bit : {0, 5}) {
      auto bad = bytes;
      bad[i] ^= std::byte(1u << bit);
      INFO("byte " << i << " bit " << bit);
      CHECK_THROWS_AS(CheckpointReader(bad, "bad.ckpt"), herd::IoError);
    }
  }
  // Appended garbage is rejected too.
  auto longer = bytes;
  longer.push_back(std::byte{0});
  CHECK_THROWS_WITH(CheckpointReader(longer, "long.ckpt"), Catch::Contains("corrupt"));
}

TEST_CASE("checkpoint: foreign, newer and missing files are rejected", "[io]") {
  TempDir tmp;
  { std::ofstream(tmp.file("foreign.ckpt")) << "{\"json\": true, \"not\": \"a checkpoint\"}\n"; }
  CHECK_THROWS_WITH(CheckpointReader(tmp.file("foreign.ckpt")), Catch::Contains("not a herd checkpoint"));
  CHECK_THROWS_WITH(CheckpointReader(tmp.file("missing.ckpt")),
                    Catch::Contains("missing.ckpt") && Catch::Contains("No such file"));
  auto bytes = sample_writer().serialize();
  bytes[8] = std::byte{9};  // format version 9
  write_raw(tmp.file("newer.ckpt"), bytes, bytes.size());
  CHECK_THROWS_WITH(CheckpointReader(tmp.file("newer.ckpt")), Catch::Contains("format version 9"));
  // A flipped payload byte: checksum mismatch.
  bytes = sample_writer().serialize();
  bytes[40] ^= std::byte{0x10};
  write_raw(tmp.file("flip.ckpt"), bytes, bytes.size());
  CHECK_THROWS_WITH(CheckpointReader(tmp.file("flip.ckpt")), Catch::Contains("CRC-32"));
  write_raw(tmp.file("cut.ckpt"), bytes, bytes.size() / 2);
  CHECK_THROWS_WITH(CheckpointReader(tmp.file("cut.ckpt")), Catch::Contains("truncated"));
  CHECK_THROWS_AS(CheckpointReader(tmp.path().string()), herd::IoError);  // a folder
}

TEST_CASE("checkpoint: a writer killed mid-write leaves the previous checkpoint", "[io]") {
  TempDir tmp;
  const std::string path = tmp.file("live.ckpt");
  // Each generation g holds 2 MiB of doubles that are a function of g, so a reader can
  // check that what it reads is exactly one completely written generation.
  constexpr std::size_t kValues = 256 * 1024;
  auto make = [&](std::uint64_t g) {
    CheckpointWriter w("herd.test.kill", 1);
    std::vector<double> v(kValues);
    for (std::size_t i = 0; i < kValues; ++i) v[i] = static_cast<double>(g) * 1e6 + static_cast<double>(i);
    w.add("values", v);
    w.add_value("generation", g);
    return w;
  };
  make(0).commit(path);

  std::mt19937 rng(20261129);  // fixed seed: kill times are reproducible
  std::uniform_int_distribution<int> delay_us(0, 40000);
  std::uint64_t max_seen = 0;
  int mid_write = 0;  // kills that left a temporary file: the writer was inside commit()
  // At least 12 kills, and more (with longer waits) until a few generations got through,
  // so that a slow, busy machine still exercises kills after successful commits.
  for (int k = 0; (k < 12 || max_seen < 3) && k < 60; ++k) {
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      // The child writes checkpoints forever, continuing from the last one.
      std::uint64_t g = CheckpointReader(path).value<std::uint64_t>("generation");
      for (;;) make(++g).commit(path);
    }
    ::usleep(static_cast<useconds_t>(5000 + 4000 * k + delay_us(rng)));
    ::kill(child, SIGKILL);
    int status = 0;
    ::waitpid(child, &status, 0);
    CHECK(WIFSIGNALED(status));

    CheckpointReader r(path);  // must not throw
    const auto g = r.value<std::uint64_t>("generation");
    const auto v = r.get<double>("values");
    REQUIRE(v.size() == kValues);
    bool ok = true;
    for (std::size_t i = 0; i < kValues; i += 997)
      ok = ok && v[i] == static_cast<double>(g) * 1e6 + static_cast<double>(i);
    CHECK(ok);
    CHECK(g >= max_seen);
    max_seen = g;
    // Leftover temporary files of the killed writer are harmless; remove them.
    for (const auto& e : std::filesystem::directory_iterator(tmp.path()))
      if (e.path().filename().string().find(".tmp.") != std::string::npos) {
        std::filesystem::remove(e.path());
        ++mid_write;
      }
  }
  INFO("generations written across kills: " << max_seen << ", kills inside a write: " << mid_write);
  CHECK(max_seen > 0);
}

TEST_CASE("append file: resume drops what came after the checkpoint", "[io]") {
  TempDir tmp;
  const std::string path = tmp.file("chain.txt");
  std::uint64_t recorded = 0;
  {
    AppendFile f = AppendFile::create(path);
    f.append(std::string_view("state 1\n"));
    f.append(std::string_view("state 2\n"));
    f.sync();
    recorded = f.size();  // what a checkpoint would store
    f.append(std::string_view("state 3 (after the checkpoint)\n"));
  }
  {
    AppendFile f = AppendFile::resume(path, recorded);
    CHECK(f.size() == recorded);
    f.append(std::string_view("state 3\n"));
    f.sync();
  }
  const auto bytes = read_file_bytes(path);
  CHECK(std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size()) == "state 1\nstate 2\nstate 3\n");
  CHECK_THROWS_WITH(AppendFile::resume(path, 1000), Catch::Contains("the checkpoint records 1000"));
  CHECK_THROWS_AS(AppendFile::resume(tmp.file("missing.txt"), 0), herd::IoError);
}

TEST_CASE("block checksums: independent of how bytes were appended; a changed byte names its block", "[io]") {
  TempDir tmp;
  const std::string path = tmp.file("record.bin");
  // 2.5 MiB of bytes: three blocks, the last partial.
  std::vector<std::byte> data(5 * (1u << 19));
  std::mt19937 g(3);
  for (auto& b : data) b = static_cast<std::byte>(g() & 0xff);
  BlockChecksums whole, pieces;
  whole.add(data);
  for (std::size_t at = 0; at < data.size();) {  // odd pieces across block boundaries
    const std::size_t n = std::min<std::size_t>(100003, data.size() - at);
    pieces.add(std::span<const std::byte>(data).subspan(at, n));
    at += n;
  }
  CHECK(whole.crcs.size() == 3);
  CHECK(whole.bytes == data.size());
  CHECK(pieces.crcs == whole.crcs);
  CHECK(whole.crcs[0] == crc32(std::span<const std::byte>(data).first(1u << 20)));
  write_raw(path, data, data.size());
  CHECK_NOTHROW(whole.verify(path, "the record"));
  std::vector<std::byte> bad = data;
  bad[(1u << 20) + 17] ^= std::byte{0x20};  // in block 2
  write_raw(path, bad, bad.size());
  CHECK_THROWS_WITH(whole.verify(path, "the record"),
                    Catch::Matchers::Contains("the record \"" + path +
                                              "\" is corrupt: block 2 of 3 (bytes 1048576 to "
                                              "2097151)") &&
                        Catch::Matchers::Contains("overwrite = true"));
  write_raw(path, data, data.size() - 10);  // shorter than recorded
  CHECK_THROWS_WITH(whole.verify(path, "the record"), Catch::Matchers::Contains("fewer bytes"));
  // Bytes after the recorded part (appended after the checkpoint) are not checked.
  write_raw(path, data, data.size());
  BlockChecksums part;
  part.add(std::span<const std::byte>(data).first(1000));
  CHECK_NOTHROW(part.verify(path, "the record"));
}

TEST_CASE("create_unlinked_scratch: a writable file that has no name once created; -1 and errno for a missing folder",
          "[io]") {
  TempDir dir;
  std::string path;
  const int fd = create_unlinked_scratch(dir.path().string(), ".herd-test-", path);
  REQUIRE(fd >= 0);
  CHECK(path.rfind(dir.path().string() + "/.herd-test-", 0) == 0);
  CHECK(path.size() == dir.path().string().size() + 1 + 11 + 6);  // "/", the stem, 6 random characters
  CHECK(std::filesystem::is_empty(dir.path()));                   // unlinked at once
  const char bytes[] = "scratch";
  CHECK(::pwrite(fd, bytes, sizeof bytes, 0) == static_cast<ssize_t>(sizeof bytes));
  char back[sizeof bytes] = {};
  CHECK(::pread(fd, back, sizeof back, 0) == static_cast<ssize_t>(sizeof back));
  CHECK(std::string(back) == "scratch");
  ::close(fd);
  errno = 0;
  const int bad = create_unlinked_scratch(dir.file("missing"), ".herd-test-", path);
  CHECK(bad == -1);
  CHECK(errno == ENOENT);
  CHECK(path == dir.file("missing") + "/.herd-test-XXXXXX");
}

TEST_CASE(
    "pwrite_all and pread_all: whole buffers at an offset; false with errno 0 past the end, errno set on a bad fd",
    "[io]") {
  TempDir dir;
  std::string path;
  const int fd = create_unlinked_scratch(dir.path().string(), ".herd-test-", path);
  REQUIRE(fd >= 0);
  std::vector<std::uint32_t> out(100000), back(out.size());
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<std::uint32_t>(i * 2654435761u);
  CHECK(pwrite_all(fd, out.data(), out.size() * 4, 1000));
  CHECK(pread_all(fd, back.data(), back.size() * 4, 1000));
  CHECK(back == out);
  errno = EINVAL;
  CHECK_FALSE(pread_all(fd, back.data(), 16, 1000 + out.size() * 4 - 8));  // 8 bytes left
  CHECK(errno == 0);
  ::close(fd);
  CHECK_FALSE(pwrite_all(fd, out.data(), 4, 0));
  CHECK(errno == EBADF);
  CHECK_FALSE(pread_all(fd, back.data(), 4, 0));
  CHECK(errno == EBADF);
}
