// The byte encoding of a compact chain record (chain_record.hpp).
#include "herd/mcmc/chain_record.hpp"

#include <algorithm>
#include <bit>
#include <cstring>

#include <fmt/format.h>

#include "herd/core/error.hpp"

namespace herd::mcmc {

namespace {

static_assert(std::endian::native == std::endian::little || std::endian::native == std::endian::big,
              "chain_record.cpp: mixed-endian hosts are not supported");

/// Writes `v` little-endian at `p` and advances `p`.
template <class T>
void put_le(std::byte*& p, const T& v) noexcept {
  std::memcpy(p, &v, sizeof(T));
  if constexpr (std::endian::native == std::endian::big) std::reverse(p, p + sizeof(T));
  p += sizeof(T);
}

/// Reads a little-endian `T` at `p` and advances `p`.
template <class T>
T get_le(const std::byte*& p) noexcept {
  std::byte b[sizeof(T)];
  std::memcpy(b, p, sizeof(T));
  if constexpr (std::endian::native == std::endian::big) std::reverse(b, b + sizeof(T));
  T v;
  std::memcpy(&v, b, sizeof(T));
  p += sizeof(T);
  return v;
}

}  // namespace

void encode_chain_record(const ChainRecord& r, std::byte* out) noexcept {
  std::byte* p = out;
  put_le(p, r.step);
  put_le(p, r.weight);
  put_le(p, r.log_density);
  put_le(p, r.dr_stage);
  put_le(p, r.chain_id);
  put_le(p, r.accept_prob);
  put_le(p, r.adapt_measure);
  const auto n = static_cast<std::size_t>(r.ndim);
  if constexpr (std::endian::native == std::endian::little) {
    if (n > 0) std::memcpy(p, r.point, 8 * n);
  } else {
    for (std::size_t i = 0; i < n; ++i) put_le(p, r.point[i]);
  }
}

ChainRecord decode_chain_record(std::span<const std::byte> in, int ndim, double* point) {
  if (ndim < 0) throw IoError(fmt::format("decode_chain_record: ndim {} is negative, expected >= 0", ndim));
  const std::size_t need = chain_record_bytes(ndim);
  if (in.size() < need)
    throw IoError(
        fmt::format("decode_chain_record: truncated chain record: {} bytes given, a record of {} "
                    "dimensions has {} (48 + 8 ndim)",
                    in.size(), ndim, need));
  const std::byte* p = in.data();
  ChainRecord r;
  r.step = get_le<std::uint64_t>(p);
  r.weight = get_le<std::int64_t>(p);
  r.log_density = get_le<double>(p);
  r.dr_stage = get_le<std::int32_t>(p);
  r.chain_id = get_le<std::uint32_t>(p);
  r.accept_prob = get_le<double>(p);
  r.adapt_measure = get_le<double>(p);
  const auto n = static_cast<std::size_t>(ndim);
  if constexpr (std::endian::native == std::endian::little) {
    if (n > 0) std::memcpy(point, p, 8 * n);
  } else {
    for (std::size_t i = 0; i < n; ++i) point[i] = get_le<double>(p);
  }
  r.point = point;
  r.ndim = ndim;
  return r;
}

}  // namespace herd::mcmc
