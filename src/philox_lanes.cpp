// Bulk Philox4x32-10 across indices (philox_lanes.hpp), with run-time dispatch.
#include "herd/core/philox_lanes.hpp"

#include <immintrin.h>

namespace herd {

namespace {

struct Lanes {
  std::uint32_t c0, c3, k0, k1;
  std::uint32_t c1[16], c2[16];
};

void fill_lanes(const RngStream& s, std::uint64_t index0, std::uint32_t sub, int n, Lanes& l) {
  l.c0 = sub;
  l.c3 = s.stream();
  l.k0 = static_cast<std::uint32_t>(s.seed());
  l.k1 = static_cast<std::uint32_t>(s.seed() >> 32);
  const auto purpose = static_cast<std::uint32_t>(s.purpose());
  for (int i = 0; i < n; ++i) {
    const std::uint64_t idx = index0 + static_cast<std::uint64_t>(i);
    l.c1[i] = static_cast<std::uint32_t>(idx);
    l.c2[i] = static_cast<std::uint32_t>((idx >> 32) & 0xffffu) | (purpose << 16);
  }
}

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_epi32(), which -Wall reports as
// uninitialised (a known false positive of the headers).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
__attribute__((target("avx512f"))) void blocks_avx512(const Lanes& l, std::uint32_t* out, std::size_t stride) {
  const __m512i m0 = _mm512_set1_epi32(static_cast<int>(0xD2511F53u));
  const __m512i m1 = _mm512_set1_epi32(static_cast<int>(0xCD9E8D57u));
  const __m512i lo_mask = _mm512_set1_epi64(0xffffffffll);
  __m512i a = _mm512_set1_epi32(static_cast<int>(l.c0));
  __m512i b = _mm512_loadu_si512(l.c1);
  __m512i c = _mm512_loadu_si512(l.c2);
  __m512i d = _mm512_set1_epi32(static_cast<int>(l.c3));
  std::uint32_t k0 = l.k0, k1 = l.k1;
  for (int r = 0; r < 10; ++r) {
    const __m512i pa_e = _mm512_mul_epu32(a, m0);
    const __m512i pa_o = _mm512_mul_epu32(_mm512_srli_epi64(a, 32), m0);
    const __m512i pc_e = _mm512_mul_epu32(c, m1);
    const __m512i pc_o = _mm512_mul_epu32(_mm512_srli_epi64(c, 32), m1);
    const __m512i lo0 = _mm512_or_si512(_mm512_and_si512(pa_e, lo_mask), _mm512_slli_epi64(pa_o, 32));
    const __m512i hi0 = _mm512_or_si512(_mm512_srli_epi64(pa_e, 32), _mm512_andnot_si512(lo_mask, pa_o));
    const __m512i lo1 = _mm512_or_si512(_mm512_and_si512(pc_e, lo_mask), _mm512_slli_epi64(pc_o, 32));
    const __m512i hi1 = _mm512_or_si512(_mm512_srli_epi64(pc_e, 32), _mm512_andnot_si512(lo_mask, pc_o));
    a = _mm512_xor_si512(_mm512_xor_si512(hi1, b), _mm512_set1_epi32(static_cast<int>(k0)));
    b = lo1;
    c = _mm512_xor_si512(_mm512_xor_si512(hi0, d), _mm512_set1_epi32(static_cast<int>(k1)));
    d = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  alignas(64) std::uint32_t w[4][16];
  _mm512_store_si512(w[0], a);
  _mm512_store_si512(w[1], b);
  _mm512_store_si512(w[2], c);
  _mm512_store_si512(w[3], d);
  for (int i = 0; i < 16; ++i)
    for (int k = 0; k < 4; ++k) out[stride * i + k] = w[k][i];
}

#pragma GCC diagnostic pop

// Philox4x32-10 in 8 lanes of AVX2: the state of one group of lanes, its round and its
// transposed store (lane i's block (a_i, b_i, c_i, d_i) to out + stride * i).
struct Avx2Group {
  __m256i a, b, c, d;
};

__attribute__((target("avx2"))) inline Avx2Group avx2_load(const Lanes& l, std::uint32_t c0) {
  return {_mm256_set1_epi32(static_cast<int>(c0)), _mm256_loadu_si256(reinterpret_cast<const __m256i*>(l.c1)),
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(l.c2)), _mm256_set1_epi32(static_cast<int>(l.c3))};
}

__attribute__((target("avx2"))) inline void avx2_round(Avx2Group& g, __m256i k0, __m256i k1) {
  const __m256i m0 = _mm256_set1_epi32(static_cast<int>(0xD2511F53u));
  const __m256i m1 = _mm256_set1_epi32(static_cast<int>(0xCD9E8D57u));
  // Even lanes' 64-bit products in pa_e, odd lanes' in pa_o; a blend (one cheap instruction)
  // takes each lane's 32-bit half from the right one.
  const __m256i pa_e = _mm256_mul_epu32(g.a, m0);
  const __m256i pa_o = _mm256_mul_epu32(_mm256_srli_epi64(g.a, 32), m0);
  const __m256i pc_e = _mm256_mul_epu32(g.c, m1);
  const __m256i pc_o = _mm256_mul_epu32(_mm256_srli_epi64(g.c, 32), m1);
  const __m256i lo0 = _mm256_blend_epi32(pa_e, _mm256_slli_epi64(pa_o, 32), 0xAA);
  const __m256i hi0 = _mm256_blend_epi32(_mm256_srli_epi64(pa_e, 32), pa_o, 0xAA);
  const __m256i lo1 = _mm256_blend_epi32(pc_e, _mm256_slli_epi64(pc_o, 32), 0xAA);
  const __m256i hi1 = _mm256_blend_epi32(_mm256_srli_epi64(pc_e, 32), pc_o, 0xAA);
  g.a = _mm256_xor_si256(_mm256_xor_si256(hi1, g.b), k0);
  g.b = lo1;
  g.c = _mm256_xor_si256(_mm256_xor_si256(hi0, g.d), k1);
  g.d = lo0;
}

// Transpose: lane i's block (a_i, b_i, c_i, d_i) is one 128-bit store; r_j holds lanes j
// (low half) and j + 4 (high half).
__attribute__((target("avx2"))) inline void avx2_store(const Avx2Group& g, std::uint32_t* out, std::size_t stride) {
  const __m256i ab_lo = _mm256_unpacklo_epi32(g.a, g.b), ab_hi = _mm256_unpackhi_epi32(g.a, g.b);
  const __m256i cd_lo = _mm256_unpacklo_epi32(g.c, g.d), cd_hi = _mm256_unpackhi_epi32(g.c, g.d);
  const __m256i r[4] = {_mm256_unpacklo_epi64(ab_lo, cd_lo), _mm256_unpackhi_epi64(ab_lo, cd_lo),
                        _mm256_unpacklo_epi64(ab_hi, cd_hi), _mm256_unpackhi_epi64(ab_hi, cd_hi)};
  for (int j = 0; j < 4; ++j) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + stride * j), _mm256_castsi256_si128(r[j]));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + stride * (j + 4)), _mm256_extracti128_si256(r[j], 1));
  }
}

__attribute__((target("avx2"))) void blocks_avx2(const Lanes& l, std::uint32_t c0, std::uint32_t* out,
                                                 std::size_t stride) {
  Avx2Group g = avx2_load(l, c0);
  std::uint32_t k0 = l.k0, k1 = l.k1;
  for (int r = 0; r < 10; ++r) {
    avx2_round(g, _mm256_set1_epi32(static_cast<int>(k0)), _mm256_set1_epi32(static_cast<int>(k1)));
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  avx2_store(g, out, stride);
}

// Two groups of 8 lanes at once (same key): a round's multiplies wait on the previous
// round's, so one group leaves the vector units idle most of the time; two independent
// chains fill them. The same words as two blocks_avx2 calls.
__attribute__((target("avx2"))) void blocks_avx2_pair(const Lanes& l0, std::uint32_t c00, std::uint32_t* out0,
                                                      const Lanes& l1, std::uint32_t c01, std::uint32_t* out1,
                                                      std::size_t stride) {
  Avx2Group g0 = avx2_load(l0, c00);
  Avx2Group g1 = avx2_load(l1, c01);
  std::uint32_t k0 = l0.k0, k1 = l0.k1;
  for (int r = 0; r < 10; ++r) {
    const __m256i v0 = _mm256_set1_epi32(static_cast<int>(k0)), v1 = _mm256_set1_epi32(static_cast<int>(k1));
    avx2_round(g0, v0, v1);
    avx2_round(g1, v0, v1);
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  avx2_store(g0, out0, stride);
  avx2_store(g1, out1, stride);
}

int detect_width() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return 16;
  if (__builtin_cpu_supports("avx2")) return 8;
#endif
  return 1;
}

}  // namespace

int philox_lanes_width() {
  static const int w = detect_width();
  return w;
}

void philox_blocks_by_index(const RngStream& s, std::uint64_t index0, std::uint32_t sub, int count,
                            std::uint32_t* out) {
  philox_blocks_by_index(s, index0, sub, 1, count, out, 4);
}

void philox_blocks_by_index(const RngStream& s, std::uint64_t index0, std::uint32_t sub0, int nsub, int count,
                            std::uint32_t* out, std::size_t stride) {
  const int width = philox_lanes_width();
  int done = 0;
  if (width == 8) {
    // Every (group of 8 indices, sub-counter) job of the full groups, two jobs per call.
    const int groups = count / 8;
    Lanes lanes[2];
    int pending = -1;  // job waiting for a partner: its group slot and sub-counter
    std::uint32_t pending_c0 = 0;
    std::uint32_t* pending_out = nullptr;
    for (int g = 0; g < groups; ++g) {
      Lanes& l = lanes[g & 1];
      fill_lanes(s, index0 + static_cast<std::uint64_t>(8 * g), sub0, 8, l);
      std::uint32_t* o = out + stride * static_cast<std::size_t>(8 * g);
      for (int j = 0; j < nsub; ++j) {
        const std::uint32_t c0 = sub0 + static_cast<std::uint32_t>(j);
        if (pending < 0) {
          pending = g & 1;
          pending_c0 = c0;
          pending_out = o + 4 * j;
        } else {
          blocks_avx2_pair(lanes[pending], pending_c0, pending_out, l, c0, o + 4 * j, stride);
          pending = -1;
        }
      }
    }
    if (pending >= 0) blocks_avx2(lanes[pending], pending_c0, pending_out, stride);
    done = 8 * groups;
  }
  while (done < count) {
    const int left = count - done;
    std::uint32_t* o = out + stride * static_cast<std::size_t>(done);
    if (width >= 8 && left >= 8) {
      Lanes l;
      const int n = (width == 16 && left >= 16) ? 16 : 8;
      fill_lanes(s, index0 + static_cast<std::uint64_t>(done), sub0, n, l);
      for (int j = 0; j < nsub; ++j) {
        l.c0 = sub0 + static_cast<std::uint32_t>(j);
        if (n == 16) blocks_avx512(l, o + 4 * j, stride);
        else blocks_avx2(l, l.c0, o + 4 * j, stride);
      }
      done += n;
    } else {
      for (int j = 0; j < nsub; ++j) {
        const RngBlock b = s.block(index0 + static_cast<std::uint64_t>(done), sub0 + static_cast<std::uint32_t>(j));
        for (int k = 0; k < 4; ++k) o[4 * j + k] = b.v[k];
      }
      ++done;
    }
  }
}

}  // namespace herd
