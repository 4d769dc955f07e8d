#pragma once
/// @file philox_lanes.hpp
/// Host-side bulk Philox4x32-10 across consecutive *indices* of one stream: block `sub` of
/// indices index0, index0 + 1, ..., index0 + count - 1, computed with the widest SIMD the
/// CPU offers (AVX-512: 16 indices per pass, AVX2: 8, else one by one), chosen at run time.
/// The words are exactly `RngStream::block(index, sub)`. The DRAM sampler uses it to draw
/// the proposal and acceptance words of its next proposals ahead of time, which is
/// several times cheaper than block by block. Host only; thread-safe (pure).

#include <cstddef>
#include <cstdint>

#include "herd/core/rng.hpp"

namespace herd {

/// Writes `RngStream::block(index0 + i, sub)` to `out[4 i .. 4 i + 3]` for i in [0, count).
void philox_blocks_by_index(const RngStream& s, std::uint64_t index0, std::uint32_t sub, int count, std::uint32_t* out);

/// Writes `RngStream::block(index0 + i, sub0 + j)` to `out[stride i + 4 j .. stride i + 4 j + 3]`
/// for i in [0, count), j in [0, nsub): several consecutive blocks of each index, laid out index
/// by index (`stride` >= 4 nsub words apart), without a separate transposing copy.
void philox_blocks_by_index(const RngStream& s, std::uint64_t index0, std::uint32_t sub0, int nsub, int count,
                            std::uint32_t* out, std::size_t stride);

/// The SIMD width in use (16, 8 or 1), for benchmarks and tests.
int philox_lanes_width();

}  // namespace herd
