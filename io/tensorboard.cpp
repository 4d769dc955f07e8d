#include "herd/io/tensorboard.hpp"

#include <array>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <system_error>

#include <unistd.h>

#include "herd/core/error.hpp"

namespace herd::io {

namespace {

// Table of the reflected CRC-32C polynomial 0x82F63B78, one byte at a time.
constexpr std::array<std::uint32_t, 256> make_crc32c_table() {
  std::array<std::uint32_t, 256> t{};
  for (std::uint32_t i = 0; i < 256; ++i) {
    std::uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1u) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    t[i] = c;
  }
  return t;
}
constexpr std::array<std::uint32_t, 256> kCrc32cTable = make_crc32c_table();

void put_le(std::string& out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFFu));
}

// Protocol-buffer wire format (base-128 varints; wire types 0 varint, 1 fixed64,
// 2 length-delimited, 5 fixed32).
void put_varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7Fu) | 0x80u));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}
void put_key(std::string& out, int field, int wire) {
  put_varint(out, (static_cast<std::uint64_t>(field) << 3) | static_cast<std::uint64_t>(wire));
}
void put_bytes(std::string& out, int field, std::string_view bytes) {
  put_key(out, field, 2);
  put_varint(out, bytes.size());
  out.append(bytes);
}
void put_double(std::string& out, int field, double v) {
  std::uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof bits);
  put_key(out, field, 1);
  put_le(out, bits, 8);
}
void put_float(std::string& out, int field, float v) {
  std::uint32_t bits = 0;
  std::memcpy(&bits, &v, sizeof bits);
  put_key(out, field, 5);
  put_le(out, bits, 4);
}

// Event {1: wall_time, 2: step} followed by the caller's `what` field.
std::string event_head(double wall_time, std::int64_t step) {
  std::string e;
  put_double(e, 1, wall_time);
  if (step != 0) {  // proto3: a zero scalar is not written
    put_key(e, 2, 0);
    put_varint(e, static_cast<std::uint64_t>(step));
  }
  return e;
}

std::string host_name() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof buf - 1) != 0 || buf[0] == '\0') return "localhost";
  std::string h(buf);
  for (char& c : h)
    if (c == '/') c = '_';
  return h;
}

}  // namespace

std::uint32_t crc32c(std::string_view bytes) {
  std::uint32_t c = 0xFFFFFFFFu;
  for (const char ch : bytes) c = kCrc32cTable[(c ^ static_cast<unsigned char>(ch)) & 0xFFu] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

std::uint32_t masked_crc32c(std::string_view bytes) {
  const std::uint32_t c = crc32c(bytes);
  return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

std::string tfrecord(std::string_view data) {
  std::string len;
  put_le(len, data.size(), 8);
  std::string r = len;
  r.reserve(data.size() + 16);
  put_le(r, masked_crc32c(len), 4);
  r.append(data);
  put_le(r, masked_crc32c(data), 4);
  return r;
}

std::string tb_file_version_event(double wall_time, std::string_view version) {
  std::string e = event_head(wall_time, 0);
  put_bytes(e, 3, version);
  return e;
}

std::string tb_scalars_event(double wall_time, std::int64_t step, const std::vector<TbScalar>& scalars) {
  std::string summary;
  for (const auto& s : scalars) {
    std::string value;
    put_bytes(value, 1, s.tag);
    put_float(value, 2, static_cast<float>(s.value));
    put_bytes(summary, 1, value);
  }
  std::string e = event_head(wall_time, step);
  put_bytes(e, 5, summary);
  return e;
}

std::string tb_session_start_event(double wall_time, std::int64_t step) {
  std::string log;
  put_key(log, 1, 0);
  put_varint(log, 1);  // SessionLog.START
  std::string e = event_head(wall_time, step);
  put_bytes(e, 7, log);
  return e;
}

double unix_time_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

TensorBoardWriter::TensorBoardWriter(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir))
    throw IoError(fmt::format("{}: cannot create the TensorBoard folder{}", dir,
                              ec ? ": " + ec.message() : std::string(": a file has that name")));
  const double now = unix_time_seconds();
  const std::string base =
      (fs::path(dir) / fmt::format("events.out.tfevents.{}.{}", static_cast<long long>(now), host_name())).string();
  std::string path = base;
  for (int n = 2; fs::exists(path); ++n) path = base + "." + std::to_string(n);
  file_ = LogFile(path, LogOpen::kCreateNew);
  file_.write(tfrecord(tb_file_version_event(now)));
}

void TensorBoardWriter::add_scalars(std::int64_t step, const std::vector<TbScalar>& scalars, double wall_time) {
  file_.write(tfrecord(tb_scalars_event(wall_time, step, scalars)));
}

void TensorBoardWriter::add_session_start(std::int64_t step, double wall_time) {
  file_.write(tfrecord(tb_session_start_event(wall_time, step)));
}

}  // namespace herd::io
