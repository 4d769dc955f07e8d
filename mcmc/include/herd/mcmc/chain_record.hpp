#pragma once
#include "herd/core/cxx20.hpp"  // C++20 or one clear error
/// @file chain_record.hpp
/// One state of a compact MCMC chain (`ChainRecord`) and its byte encoding: the one
/// encoder and decoder of the compact chain record, shared by the binary chain file
/// (`BinaryChainSink`, `read_binary_chain`, chain_sink.hpp) and the chain file of a restart
/// record (`run_resumable`, `read_resumable_chain`, parallel.hpp).
///
/// Encoded record of a `d`-dimensional chain: `chain_record_bytes(d)` = 48 + 8 d bytes, no
/// padding, no header, every field little-endian whatever the host (integers two's
/// complement; doubles IEEE 754 binary64 copied bit for bit, so -0.0, infinities and NaN
/// payloads are kept):
///
/// | offset | bytes | type      | field                       |
/// |-------:|------:|-----------|-----------------------------|
/// |      0 |     8 | u64       | `ChainRecord::step`          |
/// |      8 |     8 | i64       | `ChainRecord::weight`        |
/// |     16 |     8 | f64       | `ChainRecord::log_density`   |
/// |     24 |     4 | i32       | `ChainRecord::dr_stage`      |
/// |     28 |     4 | u32       | `ChainRecord::chain_id`      |
/// |     32 |     8 | f64       | `ChainRecord::accept_prob`   |
/// |     40 |     8 | f64       | `ChainRecord::adapt_measure` |
/// |     48 |   8 d | f64[d]    | `ChainRecord::point`         |

#include <cstddef>
#include <cstdint>
#include <span>

namespace herd::mcmc {

/// One state of a compact chain: a unique accepted point and its bookkeeping.
/// `point` points to `ndim` doubles owned by the sampler, valid only during the
/// `ChainSink::write` call.
struct ChainRecord {
  std::uint32_t chain_id = 0;  ///< global chain id (the RNG stream id)
  std::uint64_t step = 0;      ///< proposals made before this state became current (0: start point)
  std::int64_t weight = 0;     ///< number of steps the chain stayed in this state (>= 1)
  double log_density = 0.0;    ///< log target density at `point` (natural log)
  std::int32_t dr_stage = 0;   ///< stage that accepted it: 0 start point, 1 first stage, 2.. delayed-rejection stages
  double accept_prob = 1.0;    ///< acceptance probability with which it was accepted (1 for the start point)
  double adapt_measure = 0.0;  ///< largest Hellinger distance of the proposal adaptations made while it was current
  const double* point = nullptr;  ///< the state, `ndim` values
  int ndim = 0;
};

/// Bytes of the fields before the point in an encoded record (see the file comment).
inline constexpr std::size_t kChainRecordHeadBytes = 48;

/// Bytes of one encoded record of an `ndim`-dimensional chain: 48 + 8 `ndim` (`ndim` >= 0).
/// Pure; usable in constant expressions.
constexpr std::size_t chain_record_bytes(int ndim) noexcept {
  return kChainRecordHeadBytes + 8 * static_cast<std::size_t>(ndim);
}

/// Encodes `r` (its `r.ndim` point values included) into the `chain_record_bytes(r.ndim)`
/// bytes at `out`, in the layout of the file comment. `out` needs no alignment and must
/// not overlap `r.point`. Pure apart from the writes to `out`; thread-safe.
void encode_chain_record(const ChainRecord& r, std::byte* out) noexcept;

/// Decodes the record of an `ndim`-dimensional chain at the front of `in` (bytes after the
/// first `chain_record_bytes(ndim)` are ignored); its point is copied to `point` (`ndim`
/// doubles owned by the caller), which the returned record's `point` refers to. Exact
/// inverse of `encode_chain_record` (every bit of every field). Thread-safe.
/// @throws herd::IoError when `ndim` < 0 or `in` holds fewer than `chain_record_bytes(ndim)`
///   bytes (a truncated record), naming both sizes.
ChainRecord decode_chain_record(std::span<const std::byte> in, int ndim, double* point);

}  // namespace herd::mcmc
