#pragma once
/// @file rng.hpp
/// Counter-based random streams on Random123's Philox4x32-10 (Salmon et al., "Parallel
/// random numbers: as easy as 1, 2, 3", SC'11), usable on the host and in CUDA device code.
///
/// Layout (DESIGN.md §4). Key = the 64-bit seed (low word, high word). Counter words:
///   c0 = sub-index (block number inside one index),
///   c1 = index, low 32 bits,
///   c2 = index bits 32..47 in the low 16 bits | purpose << 16,
///   c3 = stream id (the *global* id of a chain or an environment).
/// Each index owns 2^32 blocks of four 32-bit words: enough for d normals, rejections and
/// the delayed-rejection stages of one proposal. A draw depends only on
/// (seed, stream, purpose, index, position), never on call order, thread or rank.
///
/// Integers and uniforms are bit-identical on host and device. Normals (Box-Muller, which
/// uses log, sqrt and sincos) may differ in the last bits between host and device.
///
/// Thread-safety: `RngStream` is an immutable value; `RngCursor` is a small value type
/// owned by one thread. Both are trivially copyable and may be passed to kernels.

#include <cmath>
#include <cstdint>

#include <Random123/philox.h>

#if defined(__SSE2__) && !defined(__CUDA_ARCH__)
#include <emmintrin.h>
#endif

#include "herd/core/host_device.hpp"

namespace herd {

/// Purposes separate the uses of one stream (16 bits). Values are part of the on-disk
/// reproducibility contract: never renumber them.
enum class RngPurpose : std::uint16_t {
  kGeneric = 0,
  kProposal = 1,          ///< proposal normals of an MCMC chain
  kAcceptance = 2,        ///< acceptance uniforms of an MCMC chain
  kDelayedRejection = 3,  ///< normals and uniforms of delayed-rejection stages
  kStartPoint = 4,        ///< random start points
  kEnvReset = 5,          ///< environment reset distributions
  kEnvStep = 6,           ///< stochastic environment dynamics
  kPolicy = 7,            ///< action sampling of an RL policy
  kInit = 8,              ///< parameter initialisation of nn modules
  kShuffle = 9,           ///< minibatch permutations
  kUser = 0x8000,         ///< first value free for user code
};

/// One Philox4x32-10 block: four 32-bit words.
struct RngBlock {
  std::uint32_t v[4];
};

/// Raw Philox4x32-10 of one counter and key; the known-answer function.
/// Host and device; thread-safe (pure).
HERD_HOST_DEVICE inline RngBlock philox4x32_10(const std::uint32_t counter[4], const std::uint32_t key[2]) {
  r123::Philox4x32 gen;
  r123::Philox4x32::ctr_type c = {{counter[0], counter[1], counter[2], counter[3]}};
  r123::Philox4x32::key_type k = {{key[0], key[1]}};
  const auto r = gen(c, k);
  return RngBlock{{r.v[0], r.v[1], r.v[2], r.v[3]}};
}

/// Uniform double in the open interval (0, 1) from a 64-bit integer: the top 52 bits,
/// centred in their cell ((k + 1/2) 2^-52), so 0 and 1 never occur (the extremes are
/// 2^-53 and 1 - 2^-53, both exact). Host and device; bit-identical on both.
HERD_HOST_DEVICE inline double u64_to_uniform(std::uint64_t x) {
  // x >> 12 < 2^52 fits a signed integer: the signed conversion is one instruction.
  return (static_cast<double>(static_cast<std::int64_t>(x >> 12)) + 0.5) * 0x1.0p-52;
}

#if defined(__SSE2__) && !defined(__CUDA_ARCH__)
/// Philox4x32-10's ten rounds on four independent blocks at once, one block per 32-bit lane
/// of the SSE2 registers: counter words `a, b, c, d` (in: the counters, out: the blocks'
/// words) and key words `k0, k1` per lane. The same bits as `philox4x32_10` per lane
/// (Salmon et al. 2011). `_mm_mul_epu32` multiplies lanes 0 and 2, so the odd lanes are
/// shifted down for a second multiply. Host only (x86-64); thread-safe (pure).
inline void philox4x32_10_sse2(__m128i& a, __m128i& b, __m128i& c, __m128i& d, __m128i k0, __m128i k1) {
  const __m128i m0 = _mm_set1_epi32(static_cast<int>(0xD2511F53u));
  const __m128i m1 = _mm_set1_epi32(static_cast<int>(0xCD9E8D57u));
  const __m128i w0 = _mm_set1_epi32(static_cast<int>(0x9E3779B9u));
  const __m128i w1 = _mm_set1_epi32(static_cast<int>(0xBB67AE85u));
  const __m128i lo_mask = _mm_set1_epi64x(0xffffffffll);
  for (int r = 0; r < 10; ++r) {
    const __m128i pa_even = _mm_mul_epu32(a, m0);
    const __m128i pa_odd = _mm_mul_epu32(_mm_srli_epi64(a, 32), m0);
    const __m128i pc_even = _mm_mul_epu32(c, m1);
    const __m128i pc_odd = _mm_mul_epu32(_mm_srli_epi64(c, 32), m1);
    const __m128i lo0 = _mm_or_si128(_mm_and_si128(pa_even, lo_mask), _mm_slli_epi64(pa_odd, 32));
    const __m128i hi0 = _mm_or_si128(_mm_srli_epi64(pa_even, 32), _mm_andnot_si128(lo_mask, pa_odd));
    const __m128i lo1 = _mm_or_si128(_mm_and_si128(pc_even, lo_mask), _mm_slli_epi64(pc_odd, 32));
    const __m128i hi1 = _mm_or_si128(_mm_srli_epi64(pc_even, 32), _mm_andnot_si128(lo_mask, pc_odd));
    a = _mm_xor_si128(_mm_xor_si128(hi1, b), k0);
    b = lo1;
    c = _mm_xor_si128(_mm_xor_si128(hi0, d), k1);
    d = lo0;
    k0 = _mm_add_epi32(k0, w0);
    k1 = _mm_add_epi32(k1, w1);
  }
}
#endif

/// Four consecutive Philox4x32-10 blocks, sub-indices `ctr[0] .. ctr[0] + 3` of one
/// counter, written to `out[16]` in block order: the same words as four calls of
/// `philox4x32_10`. Written lane-parallel so that compilers vectorise it (the bulk path
/// of `RngCursor::fill_u32`). Host and device; thread-safe (pure).
HERD_HOST_DEVICE inline void philox4x32_10_x4(const std::uint32_t ctr[4], const std::uint32_t key[2],
                                              std::uint32_t out[16]) {
#if defined(__SSE2__) && !defined(__CUDA_ARCH__)
  // SSE2 (every x86-64): the four blocks are the four lanes.
  __m128i a = _mm_add_epi32(_mm_set1_epi32(static_cast<int>(ctr[0])), _mm_set_epi32(3, 2, 1, 0));
  __m128i b = _mm_set1_epi32(static_cast<int>(ctr[1]));
  __m128i c = _mm_set1_epi32(static_cast<int>(ctr[2]));
  __m128i d = _mm_set1_epi32(static_cast<int>(ctr[3]));
  philox4x32_10_sse2(a, b, c, d, _mm_set1_epi32(static_cast<int>(key[0])), _mm_set1_epi32(static_cast<int>(key[1])));
  // Transpose lanes (blocks) to block-major words.
  const __m128i ab_lo = _mm_unpacklo_epi32(a, b), ab_hi = _mm_unpackhi_epi32(a, b);
  const __m128i cd_lo = _mm_unpacklo_epi32(c, d), cd_hi = _mm_unpackhi_epi32(c, d);
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out), _mm_unpacklo_epi64(ab_lo, cd_lo));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 4), _mm_unpackhi_epi64(ab_lo, cd_lo));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 8), _mm_unpacklo_epi64(ab_hi, cd_hi));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 12), _mm_unpackhi_epi64(ab_hi, cd_hi));
#else
  std::uint32_t a[4], b[4], c[4], d[4];
  for (int l = 0; l < 4; ++l) {
    a[l] = ctr[0] + static_cast<std::uint32_t>(l);
    b[l] = ctr[1];
    c[l] = ctr[2];
    d[l] = ctr[3];
  }
  std::uint32_t k0 = key[0], k1 = key[1];
  for (int r = 0; r < 10; ++r) {
    for (int l = 0; l < 4; ++l) {
      const std::uint64_t p0 = static_cast<std::uint64_t>(0xD2511F53u) * a[l];
      const std::uint64_t p1 = static_cast<std::uint64_t>(0xCD9E8D57u) * c[l];
      const auto hi0 = static_cast<std::uint32_t>(p0 >> 32), lo0 = static_cast<std::uint32_t>(p0);
      const auto hi1 = static_cast<std::uint32_t>(p1 >> 32), lo1 = static_cast<std::uint32_t>(p1);
      a[l] = hi1 ^ b[l] ^ k0;
      b[l] = lo1;
      c[l] = hi0 ^ d[l] ^ k1;
      d[l] = lo0;
    }
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  for (int l = 0; l < 4; ++l) {
    out[4 * l] = a[l];
    out[4 * l + 1] = b[l];
    out[4 * l + 2] = c[l];
    out[4 * l + 3] = d[l];
  }
#endif
}

/// Uniform float in the open interval (0, 1) from a 32-bit integer: the top 23 bits,
/// centred in their cell (extremes 2^-24 and 1 - 2^-24, exact).
HERD_HOST_DEVICE inline float u32_to_uniformf(std::uint32_t x) {
  return (static_cast<float>(x >> 9) + 0.5f) * 0x1.0p-23f;
}

/// A sequential reader of the draws owned by one index of one stream: word 0, 1, 2, ...
/// of blocks (sub-index) 0, 1, 2, .... Each call consumes words, so the k-th draw made
/// through a cursor depends only on the stream, the index and the kinds of draws before it.
class RngCursor {
 public:
  HERD_HOST_DEVICE RngCursor(std::uint32_t key0, std::uint32_t key1, std::uint32_t c1, std::uint32_t c2,
                             std::uint32_t c3)
      : key_{key0, key1}, ctr_{0u, c1, c2, c3} {}

  /// Next 32-bit word.
  HERD_HOST_DEVICE std::uint32_t next_u32() {
    if (pos_ == 4) refill();
    return buf_.v[pos_++];
  }
  /// Next 64-bit integer (two words, the first one low).
  HERD_HOST_DEVICE std::uint64_t next_u64() {
    const std::uint64_t lo = next_u32();
    const std::uint64_t hi = next_u32();
    return lo | (hi << 32);
  }
  /// Next uniform double in (0, 1) (two words).
  HERD_HOST_DEVICE double uniform() { return u64_to_uniform(next_u64()); }
  /// Next uniform float in (0, 1) (one word).
  HERD_HOST_DEVICE float uniformf() { return u32_to_uniformf(next_u32()); }
  /// Next standard normal (Box-Muller on two uniform doubles; the second normal of each
  /// pair is kept for the next call). NaN and Inf never occur: uniforms avoid 0.
  HERD_HOST_DEVICE double normal() {
    if (has_spare_) {
      has_spare_ = false;
      return spare_;
    }
    const double u1 = uniform();
    const double u2 = uniform();
    const double r = std::sqrt(-2.0 * std::log(u1));
    double s, c;
#if defined(__CUDA_ARCH__)
    sincospi(2.0 * u2, &s, &c);
#else
    const double a = 6.283185307179586476925286766559 * u2;
    s = std::sin(a);
    c = std::cos(a);
#endif
    spare_ = r * s;
    has_spare_ = true;
    return r * c;
  }
  /// Fills `out[0..n)` with standard normals.
  HERD_HOST_DEVICE void normals(double* out, int n) {
    for (int i = 0; i < n; ++i) out[i] = normal();
  }
  /// Uniform integer in [0, n) for n >= 1 (Lemire's multiply-shift with rejection: exact).
  HERD_HOST_DEVICE std::uint32_t below(std::uint32_t n) {
    std::uint64_t m = static_cast<std::uint64_t>(next_u32()) * n;
    auto l = static_cast<std::uint32_t>(m);
    if (l < n) {
      const std::uint32_t t = (0u - n) % n;
      while (l < t) {
        m = static_cast<std::uint64_t>(next_u32()) * n;
        l = static_cast<std::uint32_t>(m);
      }
    }
    return static_cast<std::uint32_t>(m >> 32);
  }
  /// Fills `out[0..n)` with the next `n` words: exactly what `n` calls of `next_u32`
  /// would return, and the cursor ends in the same position. Whole blocks are generated
  /// four at a time (`philox4x32_10_x4`), which is several times faster than one by one.
  HERD_HOST_DEVICE void fill_u32(std::uint32_t* out, int n) {
    int i = 0;
    while (i < n && pos_ < 4) out[i++] = buf_.v[pos_++];
    while (n - i >= 16) {
      philox4x32_10_x4(ctr_, key_, out + i);
      ctr_[0] += 4;
      i += 16;
    }
    while (n - i >= 4) {
      const RngBlock b = philox4x32_10(ctr_, key_);
      ++ctr_[0];
      for (int k = 0; k < 4; ++k) out[i + k] = b.v[k];
      i += 4;
    }
    if (i < n) {
      refill();
      while (i < n) out[i++] = buf_.v[pos_++];
    }
  }
  /// Skips the next `n` >= 0 words: the cursor ends where `n` calls of `next_u32` leave it,
  /// without generating the whole blocks skipped. Host and device.
  HERD_HOST_DEVICE void skip_u32(int n) {
    while (n > 0 && pos_ < 4) {
      ++pos_;
      --n;
    }
    ctr_[0] += static_cast<std::uint32_t>(n / 4);
    if (n % 4 != 0) {
      refill();
      pos_ = n % 4;
    }
  }
  /// Number of blocks generated so far (each 4 words).
  HERD_HOST_DEVICE std::uint32_t blocks_used() const { return ctr_[0]; }

 private:
  HERD_HOST_DEVICE void refill() {
    buf_ = philox4x32_10(ctr_, key_);
    ++ctr_[0];
    pos_ = 0;
  }

  std::uint32_t key_[2];
  std::uint32_t ctr_[4];
  RngBlock buf_{};
  int pos_ = 4;
  bool has_spare_ = false;
  double spare_ = 0.0;
};

/// A random stream: (seed, stream id, purpose). Draws are addressed by a 48-bit index
/// (for example a chain's proposal number) and a position inside that index.
/// Host and device; an immutable, trivially copyable value; thread-safe.
class RngStream {
 public:
  /// Largest index + 1 (indices are 48-bit).
  static constexpr std::uint64_t kIndexLimit = std::uint64_t{1} << 48;

  RngStream() = default;
  /// @param seed   the run's 64-bit seed (the Philox key)
  /// @param stream the global id of a chain, environment or other consumer
  /// @param purpose what the draws are for (separates uses of one stream)
  HERD_HOST_DEVICE RngStream(std::uint64_t seed, std::uint32_t stream, RngPurpose purpose = RngPurpose::kGeneric)
      : key0_(static_cast<std::uint32_t>(seed)),
        key1_(static_cast<std::uint32_t>(seed >> 32)),
        stream_(stream),
        purpose_(static_cast<std::uint16_t>(purpose)) {}

  /// A cursor over the draws of `index` (only its low 48 bits are used).
  HERD_HOST_DEVICE RngCursor at(std::uint64_t index) const {
    const auto c1 = static_cast<std::uint32_t>(index);
    const auto c2 = static_cast<std::uint32_t>((index >> 32) & 0xffffu) | (static_cast<std::uint32_t>(purpose_) << 16);
    return RngCursor(key0_, key1_, c1, c2, stream_);
  }
  /// The Philox4x32-10 counter `ctr[4]` and key `key[2]` of block `sub` of `index`:
  /// `block(index, sub)` is `philox4x32_10(ctr, key)`, for callers that run the rounds of
  /// several streams' blocks at once (e.g. one per SIMD lane).
  HERD_HOST_DEVICE void block_input(std::uint64_t index, std::uint32_t sub, std::uint32_t ctr[4],
                                    std::uint32_t key[2]) const {
    ctr[0] = sub;
    ctr[1] = static_cast<std::uint32_t>(index);
    ctr[2] = static_cast<std::uint32_t>((index >> 32) & 0xffffu) | (static_cast<std::uint32_t>(purpose_) << 16);
    ctr[3] = stream_;
    key[0] = key0_;
    key[1] = key1_;
  }
  /// Block `sub` of `index`.
  HERD_HOST_DEVICE RngBlock block(std::uint64_t index, std::uint32_t sub = 0) const {
    std::uint32_t ctr[4], key[2];
    block_input(index, sub, ctr, key);
    return philox4x32_10(ctr, key);
  }
  /// First 32-bit word of `index`.
  HERD_HOST_DEVICE std::uint32_t u32(std::uint64_t index) const { return block(index).v[0]; }
  /// First 64-bit integer of `index` (words 0 and 1).
  HERD_HOST_DEVICE std::uint64_t u64(std::uint64_t index) const {
    const RngBlock b = block(index);
    return static_cast<std::uint64_t>(b.v[0]) | (static_cast<std::uint64_t>(b.v[1]) << 32);
  }
  /// First uniform double in (0, 1) of `index`.
  HERD_HOST_DEVICE double uniform(std::uint64_t index) const { return u64_to_uniform(u64(index)); }
  /// First uniform float in (0, 1) of `index`.
  HERD_HOST_DEVICE float uniformf(std::uint64_t index) const { return u32_to_uniformf(u32(index)); }
  /// First standard normal of `index`.
  HERD_HOST_DEVICE double normal(std::uint64_t index) const { return at(index).normal(); }

  HERD_HOST_DEVICE std::uint64_t seed() const {
    return static_cast<std::uint64_t>(key0_) | (static_cast<std::uint64_t>(key1_) << 32);
  }
  HERD_HOST_DEVICE std::uint32_t stream() const { return stream_; }
  HERD_HOST_DEVICE RngPurpose purpose() const { return static_cast<RngPurpose>(purpose_); }
  /// The same seed and stream id with another purpose.
  HERD_HOST_DEVICE RngStream with_purpose(RngPurpose p) const { return RngStream(seed(), stream_, p); }

 private:
  std::uint32_t key0_ = 0, key1_ = 0, stream_ = 0;
  std::uint16_t purpose_ = 0;
};

}  // namespace herd
