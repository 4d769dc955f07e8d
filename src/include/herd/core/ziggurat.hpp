#pragma once
/// @file ziggurat.hpp
/// Standard normal draws by the ziggurat method (Marsaglia & Tsang, "The ziggurat method
/// for generating random variables", J. Stat. Softw. 5(8), 2000), 256 layers, on the
/// Philox words of an `RngCursor` (DESIGN.md §4 "normals are the hot spot").
///
/// Exactness: each attempt takes one 64-bit draw; bits 0..7 choose the layer, bit 8 the
/// sign and bits 12..63 a 52-bit uniform inside the layer (independent bits, unlike the
/// original 32-bit version criticised by Doornik 2005). Wedges use a further uniform
/// double and the tail Marsaglia's exponential method, so the output is exactly normal up
/// to the 2^-52 resolution of the uniforms. Rejections (about 1.3% of attempts) take more
/// words from the same cursor, so a draw is still addressed by (seed, stream, purpose,
/// index, position) and does not depend on threads or ranks.
///
/// The tables (257 layer edges and densities) are computed once on first use by
/// `ziggurat_tables()` (host); pass them explicitly to `ziggurat_normal` in hot loops,
/// or copy the struct to device memory: the drawing functions are `HERD_HOST_DEVICE`.
/// Host and device results differ only in the last bits of exp/log (wedges and tail).
///
/// Thread-safety: the tables are immutable after first use (thread-safe static init);
/// a cursor belongs to one thread.

#include <cmath>
#include <cstdint>
#include <cstring>

#include "herd/core/host_device.hpp"
#include "herd/core/rng.hpp"

namespace herd {

/// Ziggurat tables for the unnormalised density f(x) = exp(-x^2/2), x >= 0.
/// Layer i (0..255) spans [0, x[i]) horizontally; x[0] = v/f(r) is the pseudo-width of
/// the base layer (rectangle plus tail), x[1] = r = 3.654..., x[256] = 0;
/// f[i] = exp(-x[i]^2/2); ratio[i] = x[i+1]/x[i] (the fast-accept bound).
struct ZigguratTables {
  static constexpr int kLayers = 256;
  double x[kLayers + 1];
  double f[kLayers + 1];
  double ratio[kLayers];
  double r;  ///< start of the tail (= x[1])
};

namespace detail {

/// Fills `t` for tail start `r`; returns the area of the top layer minus the common
/// layer area v (zero for the exact r). Host only.
inline double ziggurat_fill(double r, ZigguratTables& t) {
  const int n = ZigguratTables::kLayers;
  const double fr = std::exp(-0.5 * r * r);
  // v = r f(r) + integral_r^inf f
  const double v = r * fr + std::sqrt(M_PI / 2.0) * std::erfc(r / std::sqrt(2.0));
  t.r = r;
  t.x[0] = v / fr;
  t.f[0] = 0.0;  // unused: the base layer uses the tail instead of a wedge
  t.x[1] = r;
  t.f[1] = fr;
  for (int i = 1; i < n; ++i) {
    // f(x[i+1]) = f(x[i]) + v / x[i]
    const double fn = t.f[i] + v / t.x[i];
    if (fn >= 1.0) {  // r too small: the ladder reached the top early
      for (int j = i + 1; j <= n; ++j) {
        t.x[j] = 0.0;
        t.f[j] = 1.0;
      }
      return -v * (n - i);
    }
    t.x[i + 1] = std::sqrt(-2.0 * std::log(fn));
    t.f[i + 1] = fn;
  }
  // Top layer: x in [0, x[n-1]), height between f(x[n-1]) and 1. Its area must be v.
  const double top = t.x[n - 1] * (1.0 - t.f[n - 1]);
  // The loop above set x[n], f[n] from the recursion; the exact ladder ends at x = 0.
  t.x[n] = 0.0;
  t.f[n] = 1.0;
  return top - v;
}

/// Tables with r solved by bisection so that the top layer has exactly the common area
/// (to double precision). Host only.
inline ZigguratTables make_ziggurat_tables() {
  ZigguratTables t{};
  // The top-layer surplus grows with r (a larger r means thinner layers); bracket around
  // Marsaglia & Tsang's 3.6541528853610088.
  double lo = 3.5, hi = 3.8;
  for (int it = 0; it < 200; ++it) {
    const double mid = 0.5 * (lo + hi);
    if (mid == lo || mid == hi) break;
    if (ziggurat_fill(mid, t) > 0.0) hi = mid;
    else lo = mid;
  }
  ziggurat_fill(0.5 * (lo + hi), t);
  for (int i = 0; i < ZigguratTables::kLayers; ++i) t.ratio[i] = t.x[i + 1] / t.x[i];
  return t;
}

/// The double with bit pattern `b` (memcpy: valid on host and device, compiles to a move).
HERD_HOST_DEVICE HERD_FORCE_INLINE double bit_cast_double(std::uint64_t b) {
  double v;
  std::memcpy(&v, &b, sizeof v);
  return v;
}

/// The slow path of `ziggurat_normal`: wedge test or tail. Returns true and sets `out`
/// when the attempt is accepted.
HERD_HOST_DEVICE inline bool ziggurat_slow(RngCursor& c, const ZigguratTables& t, int i, double x, double& out) {
  if (i == 0) {
    // Tail beyond r (Marsaglia 1964): x = r + e1/r with acceptance exp(-e1^2/(2 r^2)),
    // i.e. accept when 2 e2 > (e1/r)^2 for two standard exponentials.
    for (;;) {
      const double a = -std::log(c.uniform()) / t.r;
      const double b = -std::log(c.uniform());
      if (b + b > a * a) {
        out = t.r + a;
        return true;
      }
    }
  }
  // Wedge: a uniform height in [f[i], f[i+1]) under the curve?
  const double y = t.f[i] + c.uniform() * (t.f[i + 1] - t.f[i]);
  if (y < std::exp(-0.5 * x * x)) {
    out = x;
    return true;
  }
  return false;
}

}  // namespace detail

/// The process-wide tables (computed on first call; thread-safe). Host only.
inline const ZigguratTables& ziggurat_tables() {
  static const ZigguratTables t = detail::make_ziggurat_tables();
  return t;
}

/// The fast path of one attempt from a 64-bit draw: true (and `out`) when the point falls
/// in the layer's rectangle; otherwise `layer` and `x` for the slow path.
HERD_HOST_DEVICE HERD_FORCE_INLINE bool ziggurat_try(std::uint64_t bits, const ZigguratTables& t, double& out,
                                                     int& layer, double& x, double& sign) {
  layer = static_cast<int>(bits & 0xffu);
  // Branch-free sign (a branch on a random bit mispredicts half the time): bit 8 of
  // `bits` moved to the sign bit of a double 1.0.
  sign = detail::bit_cast_double(0x3FF0000000000000ull | ((bits & 0x100u) << 55));
  // bits >> 12 < 2^52: the signed conversion is exact and one instruction.
  const double u = (static_cast<double>(static_cast<std::int64_t>(bits >> 12)) + 0.5) * 0x1.0p-52;
  x = u * t.x[layer];
  out = sign * x;
  return u < t.ratio[layer];
}

/// One standard normal from the words of `c` (one 64-bit draw per attempt, about 1.013
/// attempts per normal on average). Never NaN or Inf. Host and device (pass tables that
/// live in memory the caller can read).
HERD_HOST_DEVICE HERD_FORCE_INLINE double ziggurat_normal(RngCursor& c, const ZigguratTables& t) {
  for (;;) {
    double out, x, sign;
    int i;
    if (ziggurat_try(c.next_u64(), t, out, i, x, sign)) return out;
    if (detail::ziggurat_slow(c, t, i, x, out)) return sign * out;
  }
}

/// Fills `out[0..n)` with standard normals (ziggurat) from `c`, in chunks of up to 16:
/// the first attempts of a chunk's m normals use the cursor's next 2m words (normal k:
/// words 2k, 2k+1, the first one low), generated in bulk; retries, wedge and tail draws
/// use the words after them, in order. So the result depends only on the cursor's
/// position, as with `ziggurat_normal`, though the word order differs from n calls of it.
/// Host and device.
HERD_HOST_DEVICE inline void ziggurat_normals(RngCursor& c, const ZigguratTables& t, double* out, int n) {
  constexpr int kChunk = 16;
  std::uint32_t w[2 * kChunk];
  for (int base = 0; base < n; base += kChunk) {
    const int m = n - base < kChunk ? n - base : kChunk;
    c.fill_u32(w, 2 * m);
    for (int k = 0; k < m; ++k) {
      const std::uint64_t bits =
          static_cast<std::uint64_t>(w[2 * k]) | (static_cast<std::uint64_t>(w[2 * k + 1]) << 32);
      double v, x, sign;
      int i;
      if (!ziggurat_try(bits, t, v, i, x, sign)) [[unlikely]] {
        double tail;
        v = detail::ziggurat_slow(c, t, i, x, tail) ? sign * tail : ziggurat_normal(c, t);
      }
      out[base + k] = v;
    }
  }
}

/// As `ziggurat_normals(c, t, out, n)` for n <= 16 (one chunk), but with the chunk's 2n
/// first-attempt words given in `w` (drawn ahead of time, e.g. by
/// `philox_blocks_by_index`); `cursor_after()` must return a cursor positioned just after
/// those words and is called only when an attempt fails. Same output, bit for bit.
template <class CursorAfter>
HERD_HOST_DEVICE inline void ziggurat_normals_from_words(const std::uint32_t* w, int n, const ZigguratTables& t,
                                                         double* out, CursorAfter&& cursor_after) {
  bool have_cursor = false;
  RngCursor c(0, 0, 0, 0, 0);
  for (int k = 0; k < n; ++k) {
    const std::uint64_t bits = static_cast<std::uint64_t>(w[2 * k]) | (static_cast<std::uint64_t>(w[2 * k + 1]) << 32);
    double v, x, sign;
    int i;
    if (!ziggurat_try(bits, t, v, i, x, sign)) [[unlikely]] {
      if (!have_cursor) {
        c = cursor_after();
        have_cursor = true;
      }
      double tail;
      v = detail::ziggurat_slow(c, t, i, x, tail) ? sign * tail : ziggurat_normal(c, t);
    }
    out[k] = v;
  }
}

/// Host convenience: `n` standard normals with the process-wide tables.
inline void ziggurat_normals(RngCursor& c, double* out, int n) { ziggurat_normals(c, ziggurat_tables(), out, n); }

}  // namespace herd
