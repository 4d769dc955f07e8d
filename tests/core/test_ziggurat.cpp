// Tests of the ziggurat normal generator on Philox cursors (herd/core/ziggurat.hpp).
//
// Statistical assertions use fixed seeds and are each designed for a false-failure rate of
// 1e-4 (5-sigma z-tests have 6e-7; KS and chi-square thresholds are at p = 1e-4), so the
// whole file fails by chance with probability below 1e-3 for an exact generator.
#include <algorithm>
#include <cmath>
#include <vector>

#include <catch2/catch.hpp>

#include "ks.hpp"

#include "herd/core/philox_lanes.hpp"
#include "herd/core/rng.hpp"
#include "herd/core/ziggurat.hpp"

using herd::RngPurpose;
using herd::RngStream;

namespace {

using herd::testing::ks_pvalue;

double phi_cdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

// Wilson-Hilferty upper quantile of chi-square with k degrees of freedom at normal z.
double chi2_quantile(double k, double z) {
  const double a = 2.0 / (9.0 * k);
  const double t = 1.0 - a + z * std::sqrt(a);
  return k * t * t * t;
}

// `per_index` normals per index, by the bulk function (`bulk`) or one at a time.
std::vector<double> draw(const RngStream& s, std::size_t n, int per_index, bool bulk) {
  const auto& t = herd::ziggurat_tables();
  std::vector<double> z;
  z.reserve(n + per_index);
  std::vector<double> buf(per_index);
  for (std::uint64_t i = 0; z.size() < n; ++i) {
    auto c = s.at(i);
    if (bulk) {
      herd::ziggurat_normals(c, t, buf.data(), per_index);
      z.insert(z.end(), buf.begin(), buf.end());
    } else {
      for (int k = 0; k < per_index; ++k) z.push_back(herd::ziggurat_normal(c, t));
    }
  }
  z.resize(n);
  return z;
}

}  // namespace

TEST_CASE("ziggurat tables: Marsaglia-Tsang r and equal layer areas", "[core][rng][ziggurat]") {
  const auto& t = herd::ziggurat_tables();
  CHECK(t.r == Approx(3.6541528853610088).epsilon(1e-13));
  CHECK(t.x[1] == t.r);
  CHECK(t.x[256] == 0.0);
  CHECK(t.f[256] == 1.0);
  // Common area v: the base layer (rectangle to r plus the tail) and every other layer.
  const double v = t.r * t.f[1] + std::sqrt(M_PI / 2.0) * std::erfc(t.r / std::sqrt(2.0));
  CHECK(t.x[0] * t.f[1] == Approx(v).epsilon(1e-14));
  for (int i = 1; i < 256; ++i) {
    INFO("layer " << i);
    CHECK(t.x[i] * (t.f[i + 1] - t.f[i]) == Approx(v).epsilon(1e-10));
    CHECK(t.x[i + 1] < t.x[i]);
    CHECK(t.f[i] == Approx(std::exp(-0.5 * t.x[i] * t.x[i])).epsilon(1e-14));
  }
}

TEST_CASE("ziggurat normals are addressed by (seed, stream, purpose, index)", "[core][rng][ziggurat]") {
  const RngStream s(7, 3, RngPurpose::kProposal);
  const auto& t = herd::ziggurat_tables();
  double a[16], b[16];
  auto c1 = s.at(12345);
  herd::ziggurat_normals(c1, t, a, 16);
  auto c2 = s.at(12345);
  herd::ziggurat_normals(c2, b, 16);
  for (int k = 0; k < 16; ++k) CHECK(a[k] == b[k]);
  auto c3 = RngStream(7, 4, RngPurpose::kProposal).at(12345);
  CHECK(herd::ziggurat_normal(c3, t) != a[0]);
  for (double x : a) CHECK(std::isfinite(x));
}

TEST_CASE("RngCursor::skip_u32 leaves the cursor where next_u32 calls do, from any position", "[core][rng]") {
  const RngStream s(99, 7, RngPurpose::kDelayedRejection);
  for (int before : {0, 1, 2, 3, 4, 5, 7}) {
    for (int n : {0, 1, 2, 3, 4, 5, 8, 19, 20, 21, 33}) {
      auto a = s.at(77), b = s.at(77);
      for (int k = 0; k < before; ++k) CHECK(a.next_u32() == b.next_u32());
      a.skip_u32(n);
      for (int k = 0; k < n; ++k) b.next_u32();
      for (int k = 0; k < 9; ++k) CHECK(a.next_u32() == b.next_u32());
      CHECK(a.blocks_used() == b.blocks_used());
    }
  }
}

TEST_CASE("RngCursor::fill_u32 returns the words of next_u32, from any position", "[core][rng][ziggurat]") {
  const RngStream s(99, 7, RngPurpose::kProposal);
  for (int skip : {0, 1, 3, 4, 6}) {
    for (int n : {0, 1, 5, 16, 20, 37, 70}) {
      auto a = s.at(123), b = s.at(123);
      for (int k = 0; k < skip; ++k) {
        a.next_u32();
        b.next_u32();
      }
      std::vector<std::uint32_t> w(n + 3);
      a.fill_u32(w.data(), n);
      for (int k = 0; k < n; ++k) CHECK(w[k] == b.next_u32());
      // The cursors continue in step.
      CHECK(a.next_u32() == b.next_u32());
      CHECK(a.blocks_used() == b.blocks_used());
    }
  }
  const std::uint32_t ctr[4] = {5, 6, 7, 8}, key[2] = {9, 10};
  std::uint32_t out[16];
  herd::philox4x32_10_x4(ctr, key, out);
  for (int l = 0; l < 4; ++l) {
    const std::uint32_t c[4] = {5u + l, 6, 7, 8};
    const auto blk = herd::philox4x32_10(c, key);
    for (int k = 0; k < 4; ++k) CHECK(out[4 * l + k] == blk.v[k]);
  }
}

TEST_CASE("single ziggurat normals: KS", "[core][rng][ziggurat]") {
  const auto z = draw(RngStream(31, 4, RngPurpose::kProposal), 400000, 1, false);
  CHECK(ks_pvalue(z, phi_cdf) > 1e-4);
}

TEST_CASE("ziggurat normals: moments, KS and fine-bin chi-square", "[core][rng][ziggurat]") {
  const std::size_t n = 2000000;
  const auto z = draw(RngStream(20261129, 17, RngPurpose::kProposal), n, 10, true);
  double m = 0, m2 = 0, m3 = 0, m4 = 0;
  for (double x : z) m += x;
  m /= n;
  for (double x : z) {
    const double d = x - m;
    m2 += d * d;
    m3 += d * d * d;
    m4 += d * d * d * d;
  }
  m2 /= n;
  m3 /= n;
  m4 /= n;
  CHECK(std::abs(m) < 5.0 / std::sqrt(n));
  CHECK(std::abs(m2 - 1.0) < 5.0 * std::sqrt(2.0 / n));
  CHECK(std::abs(m3) < 5.0 * std::sqrt(15.0 / n));
  CHECK(std::abs(m4 - 3.0) < 5.0 * std::sqrt(96.0 / n));
  CHECK(ks_pvalue(z, phi_cdf) > 1e-4);

  // 512 equiprobable bins resolve the layers (about 2 bins per layer edge) and wedges.
  const int bins = 512;
  std::vector<double> count(bins, 0.0);
  for (double x : z) {
    const int b = std::min(bins - 1, static_cast<int>(phi_cdf(x) * bins));
    count[b] += 1;
  }
  const double e = static_cast<double>(n) / bins;
  double chi2 = 0;
  for (double c : count) chi2 += (c - e) * (c - e) / e;
  CHECK(chi2 < chi2_quantile(bins - 1, 3.719));  // p = 1e-4
}

TEST_CASE("ziggurat tail beyond r has the right mass and shape", "[core][rng][ziggurat]") {
  const auto& t = herd::ziggurat_tables();
  const std::size_t n = 4000000;
  const auto z = draw(RngStream(424242, 5, RngPurpose::kDelayedRejection), n, 3, false);
  std::vector<double> tail;
  for (double x : z)
    if (std::abs(x) > t.r) tail.push_back(std::abs(x));
  const double p = 2.0 * phi_cdf(-t.r);
  const double expected = p * n;
  CHECK(std::abs(tail.size() - expected) < 5.0 * std::sqrt(expected * (1 - p)));
  // Conditional law of |z| given |z| > r.
  const double tail_mass = phi_cdf(-t.r);
  CHECK(ks_pvalue(tail, [&](double x) { return 1.0 - phi_cdf(-x) / tail_mass; }) > 1e-4);
}

TEST_CASE("philox_blocks_by_index equals RngStream::block for every width path", "[core][rng]") {
  const RngStream s(0x0123456789abcdefull, 99, RngPurpose::kAcceptance);
  // Indices crossing the 2^32 boundary exercise the high-index word.
  for (std::uint64_t base : {std::uint64_t{0}, std::uint64_t{0xfffffff5u}}) {
    for (int count : {1, 7, 8, 15, 16, 17, 40}) {
      std::vector<std::uint32_t> out(4 * count);
      herd::philox_blocks_by_index(s, base, 3, count, out.data());
      for (int i = 0; i < count; ++i) {
        const auto b = s.block(base + i, 3);
        for (int k = 0; k < 4; ++k) CHECK(out[4 * i + k] == b.v[k]);
      }
    }
  }
  CHECK((herd::philox_lanes_width() == 1 || herd::philox_lanes_width() == 8 || herd::philox_lanes_width() == 16));
}

TEST_CASE("philox_blocks_by_index with several blocks per index and a stride equals RngStream::block", "[core][rng]") {
  const RngStream s(0xfedcba9876543210ull, 5, RngPurpose::kDelayedRejection);
  for (std::uint64_t base : {std::uint64_t{3}, std::uint64_t{0xfffffff9u}})
    for (int count : {1, 8, 13, 16, 33})
      for (int nsub : {1, 2, 5})
        for (std::size_t pad : {std::size_t{0}, std::size_t{3}}) {
          const std::size_t stride = 4 * static_cast<std::size_t>(nsub) + pad;
          std::vector<std::uint32_t> out(stride * static_cast<std::size_t>(count), 0xdeadbeefu);
          herd::philox_blocks_by_index(s, base, 2, nsub, count, out.data(), stride);
          for (int i = 0; i < count; ++i) {
            for (int j = 0; j < nsub; ++j) {
              const auto b = s.block(base + static_cast<std::uint64_t>(i), 2u + static_cast<std::uint32_t>(j));
              for (int k = 0; k < 4; ++k) REQUIRE(out[stride * i + 4 * j + k] == b.v[k]);
            }
            for (std::size_t q = 4 * static_cast<std::size_t>(nsub); q < stride; ++q)
              REQUIRE(out[stride * i + q] == 0xdeadbeefu);  // the padding is left alone
          }
        }
}

TEST_CASE("ziggurat_normals_from_words equals ziggurat_normals, retries included", "[core][rng][ziggurat]") {
  const RngStream s(2718, 28, RngPurpose::kProposal);
  const auto& t = herd::ziggurat_tables();
  int retries = 0;
  for (int n : {1, 3, 10, 16}) {
    for (std::uint64_t k = 0; k < 3000; ++k) {
      double a[16], b[16];
      auto c = s.at(k);
      herd::ziggurat_normals(c, t, a, n);
      std::uint32_t w[32];
      auto d = s.at(k);
      d.fill_u32(w, 2 * n);
      bool used = false;
      herd::ziggurat_normals_from_words(w, n, t, b, [&] {
        used = true;
        auto e = s.at(k);
        std::uint32_t skip[32];
        e.fill_u32(skip, 2 * n);
        return e;
      });
      retries += used;
      for (int i = 0; i < n; ++i) CHECK(a[i] == b[i]);
    }
  }
  CHECK(retries > 100);
}
