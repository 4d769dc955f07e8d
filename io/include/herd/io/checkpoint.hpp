#pragma once
#include "herd/core/cxx20.hpp"  // C++20 or one clear error
/// @file checkpoint.hpp
/// The atomic checkpoint container shared by the sampler and the RL trainer (DESIGN.md §4
/// "Everything restartable").
///
/// A checkpoint is a small binary file of named sections of bytes:
/// ```
///   offset 0   "HERDCKPT"              8-byte magic
///          8   u32 format version      (kCheckpointFormatVersion)
///         12   u32 header flags        (0)
///         16   u64 payload length P
///         24   payload: u32 kind length, kind bytes, u32 kind version, u64 section count,
///                       then per section: u32 name length, name, u64 data length, data
///     24 + P   u32 CRC-32 (IEEE 802.3, reflected, as zlib) of bytes [0, 24 + P)
///     28 + P   "TPKCDREH"              8-byte end magic
/// ```
/// All integers are little-endian (the library requires a little-endian host).
/// `CheckpointWriter::commit` writes it atomically (temporary file in the same folder, fsync,
/// rename, fsync folder), so a process killed at any moment leaves the previous checkpoint
/// intact. `CheckpointReader` rejects a missing, truncated, foreign, corrupt or
/// newer-format file with one clear `IoError`, never a crash or a silently wrong state.
///
/// Thread-safety: a writer or reader object is not shared between threads without locking;
/// different objects are independent.

#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace herd::io {

static_assert(std::endian::native == std::endian::little, "herd::io checkpoints assume a little-endian host");

/// The checkpoint container format written by this version.
inline constexpr std::uint32_t kCheckpointFormatVersion = 1;

/// CRC-32 (IEEE 802.3 polynomial 0xEDB88320, reflected, initial and final XOR 0xFFFFFFFF),
/// the checksum of zlib and PNG: `crc32("123456789") == 0xCBF43926`. Continue a running
/// checksum by passing the previous result as `crc`. On x86-64 CPUs with PCLMULQDQ (checked
/// once at run time) the whole 16-byte blocks of inputs of 64 bytes or more are folded by
/// carry-less multiplication, many times faster than the table method; the value is the same.
/// Thread-safe (pure).
std::uint32_t crc32(std::span<const std::byte> data, std::uint32_t crc = 0) noexcept;

namespace detail {
/// `crc32` by the portable method alone (table "slicing by 8"), whatever the CPU: the
/// reference the carry-less-multiplication path is tested against. Thread-safe (pure).
std::uint32_t crc32_portable(std::span<const std::byte> data, std::uint32_t crc = 0) noexcept;
}  // namespace detail

/// Builds a checkpoint in memory, then commits it atomically.
/// `kind` names the producer ("herd.mcmc.dram", "herd.rl.ppo") and `kind_version` its own
/// state layout version, both checked by `CheckpointReader::expect_kind`.
class CheckpointWriter {
 public:
  /// An empty checkpoint of producer `kind`, state layout version `kind_version`.
  explicit CheckpointWriter(std::string kind = "herd", std::uint32_t kind_version = 1);

  /// Adds (or replaces) a section of raw bytes.
  void add_bytes(std::string_view name, std::span<const std::byte> bytes);
  /// Adds a section holding a contiguous array of trivially copyable values.
  template <class T>
  requires std::is_trivially_copyable_v<T>
  void add(std::string_view name, std::span<const T> values) { add_bytes(name, std::as_bytes(values)); }
  /// Adds a section holding a vector of trivially copyable values.
  template <class T>
  requires std::is_trivially_copyable_v<T>
  void add(std::string_view name, const std::vector<T>& values) { add(name, std::span<const T>(values)); }
  /// Adds a section holding one trivially copyable value.
  template <class T>
  requires std::is_trivially_copyable_v<T>
  void add_value(std::string_view name, const T& value) { add(name, std::span<const T>(&value, 1)); }
  /// Adds a section holding a string.
  void add_string(std::string_view name, std::string_view text);

  /// The serialized checkpoint (header, sections, checksum, end magic).
  std::vector<std::byte> serialize() const;
  /// Writes the checkpoint to `path` atomically. @throws IoError; `path` is then unchanged.
  void commit(const std::string& path) const;

 private:
  std::string kind_;
  std::uint32_t kind_version_;
  std::map<std::string, std::vector<std::byte>, std::less<>> sections_;
};

/// Reads and verifies a checkpoint written by `CheckpointWriter`.
class CheckpointReader {
 public:
  /// Reads and verifies the file. @throws IoError naming the file and the defect (missing,
  /// truncated, not a herd checkpoint, newer format, checksum mismatch, malformed section).
  explicit CheckpointReader(const std::string& path);
  /// Verifies checkpoint bytes; `source` names them in messages. @throws IoError as above.
  CheckpointReader(std::span<const std::byte> bytes, std::string source);

  /// The producer's kind and state layout version.
  const std::string& kind() const noexcept { return kind_; }
  std::uint32_t kind_version() const noexcept { return kind_version_; }
  /// Checks the producer: @throws IoError when `kind` differs or the version is newer than
  /// `max_version` ("run.ckpt: a checkpoint of herd.rl.ppo, but herd.mcmc.dram was expected").
  void expect_kind(std::string_view kind, std::uint32_t max_version) const;

  /// True when section `name` exists.
  bool has(std::string_view name) const { return sections_.find(name) != sections_.end(); }
  /// Section names in name order.
  std::vector<std::string> names() const;
  /// The bytes of section `name`. @throws IoError when missing.
  std::span<const std::byte> bytes(std::string_view name) const;
  /// Section `name` as an array of `T`. @throws IoError when missing or its size is not a
  /// multiple of `sizeof(T)`.
  template <class T>
  requires std::is_trivially_copyable_v<T> std::vector<T> get(std::string_view name)
  const {
    auto b = bytes(name);
    check_multiple(name, b.size(), sizeof(T));
    std::vector<T> out(b.size() / sizeof(T));
    if (!b.empty()) std::memcpy(out.data(), b.data(), b.size());
    return out;
  }
  /// Section `name` as one `T`. @throws IoError when missing or of another size.
  template <class T>
  requires std::is_trivially_copyable_v<T> T value(std::string_view name)
  const {
    auto b = bytes(name);
    check_size(name, b.size(), sizeof(T));
    T v;
    std::memcpy(&v, b.data(), sizeof(T));
    return v;
  }
  /// Section `name` as a string. @throws IoError when missing.
  std::string string(std::string_view name) const;

 private:
  void parse(std::span<const std::byte> bytes);
  void check_multiple(std::string_view name, std::size_t size, std::size_t elem) const;
  void check_size(std::string_view name, std::size_t size, std::size_t expected) const;

  std::string source_;
  std::string kind_;
  std::uint32_t kind_version_ = 0;
  std::vector<std::byte> data_;
  std::map<std::string, std::pair<std::size_t, std::size_t>, std::less<>> sections_;  // offset, size
};

}  // namespace herd::io
