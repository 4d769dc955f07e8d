// Tests of herd::RngStream (Philox4x32-10 streams, DESIGN.md §4).
#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

#include "ks.hpp"

#include "herd/core/rng.hpp"
#include "herd/core/thread_pool.hpp"

using herd::RngPurpose;
using herd::RngStream;

namespace {

using herd::testing::ks_pvalue;

}  // namespace

TEST_CASE("Philox4x32-10 known-answer vectors", "[core][rng]") {
  {
    const std::uint32_t c[4] = {0, 0, 0, 0}, k[2] = {0, 0};
    const auto r = herd::philox4x32_10(c, k);
    CHECK(r.v[0] == 0x6627e8d5u);
    CHECK(r.v[1] == 0xe169c58du);
    CHECK(r.v[2] == 0xbc57ac4cu);
    CHECK(r.v[3] == 0x9b00dbd8u);
  }
  {
    const std::uint32_t c[4] = {0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu};
    const std::uint32_t k[2] = {0xffffffffu, 0xffffffffu};
    const auto r = herd::philox4x32_10(c, k);
    CHECK(r.v[0] == 0x408f276du);
    CHECK(r.v[1] == 0x41c83b0eu);
    CHECK(r.v[2] == 0xa20bc7c6u);
    CHECK(r.v[3] == 0x6d5451fdu);
  }
  {
    const std::uint32_t c[4] = {0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u};
    const std::uint32_t k[2] = {0xa4093822u, 0x299f31d0u};
    const auto r = herd::philox4x32_10(c, k);
    CHECK(r.v[0] == 0xd16cfe09u);
    CHECK(r.v[1] == 0x94fdccebu);
    CHECK(r.v[2] == 0x5001e420u);
    CHECK(r.v[3] == 0x24126ea1u);
  }
}

TEST_CASE("RngStream maps (seed, stream, purpose, index, sub) to the documented counter", "[core][rng]") {
  const std::uint64_t seed = 0x0123456789abcdefull;
  const std::uint64_t index = 0x0000a1b2c3d4e5f6ull;  // 48 bits
  const RngStream s(seed, 77u, RngPurpose::kAcceptance);
  const std::uint32_t key[2] = {0x89abcdefu, 0x01234567u};
  const std::uint32_t ctr[4] = {5u, 0xc3d4e5f6u, 0xa1b2u | (2u << 16), 77u};
  const auto expect = herd::philox4x32_10(ctr, key);
  const auto got = s.block(index, 5);
  for (int k = 0; k < 4; ++k) CHECK(got.v[k] == expect.v[k]);
  CHECK(s.seed() == seed);
  CHECK(s.stream() == 77u);
  CHECK(s.purpose() == RngPurpose::kAcceptance);

  // A cursor reads blocks 0, 1, 2 ... of its index, word by word.
  auto cur = s.at(index);
  for (std::uint32_t sub = 0; sub < 3; ++sub) {
    const auto b = s.block(index, sub);
    for (int k = 0; k < 4; ++k) CHECK(cur.next_u32() == b.v[k]);
  }
  CHECK(cur.blocks_used() == 3);
}

TEST_CASE("uniforms are in the open interval (0, 1)", "[core][rng]") {
  CHECK(herd::u64_to_uniform(0) > 0.0);
  CHECK(herd::u64_to_uniform(~0ull) < 1.0);
  CHECK(herd::u64_to_uniform(0) == 0x1.0p-53);
  CHECK(herd::u64_to_uniform(~0ull) == 1.0 - 0x1.0p-53);
  CHECK(herd::u32_to_uniformf(~0u) == 1.0f - 0x1.0p-24f);
  CHECK(herd::u32_to_uniformf(0) > 0.0f);
  CHECK(herd::u32_to_uniformf(~0u) < 1.0f);
}

TEST_CASE("streams, purposes and indices give different draws", "[core][rng]") {
  const RngStream a(1, 0, RngPurpose::kProposal), b(1, 1, RngPurpose::kProposal), c(1, 0, RngPurpose::kAcceptance),
      d(2, 0, RngPurpose::kProposal);
  CHECK(a.u64(0) != b.u64(0));
  CHECK(a.u64(0) != c.u64(0));
  CHECK(a.u64(0) != d.u64(0));
  CHECK(a.u64(0) != a.u64(1));
  CHECK(a.u64(0) != a.u64(std::uint64_t{1} << 32));  // high index bits are used
  CHECK(a.with_purpose(RngPurpose::kAcceptance).u64(7) == c.u64(7));
}

TEST_CASE("draws depend only on (seed, stream, purpose, index), not on order or thread", "[core][rng]") {
  const RngStream s(42, 3, RngPurpose::kProposal);
  const std::size_t n = 20000;
  std::vector<double> seq(n);
  for (std::size_t i = 0; i < n; ++i) {
    auto c = s.at(i);
    seq[i] = c.normal() + c.uniform();
  }
  // Reversed order.
  for (std::size_t i = n; i-- > 0;) {
    auto c = s.at(i);
    REQUIRE(c.normal() + c.uniform() == seq[i]);
  }
  // Many threads, shuffled chunks.
  herd::ThreadPool pool(4);
  std::vector<double> par(n);
  std::vector<std::size_t> perm(n);
  for (std::size_t i = 0; i < n; ++i) perm[i] = i;
  std::shuffle(perm.begin(), perm.end(), std::mt19937_64(7));
  pool.parallel_for_each(
      0, n,
      [&](std::size_t j) {
        const std::size_t i = perm[j];
        auto c = s.at(i);
        par[i] = c.normal() + c.uniform();
      },
      37);
  CHECK(par == seq);
}

// Statistical tests. Seeds are fixed; each assertion is designed for a false-failure rate
// below 1e-4 (z-thresholds of 5 sigma, KS p-value threshold 1e-4), so the whole case
// fails by chance with probability < 1e-3 for a correct generator.
TEST_CASE("uniforms: moments and KS test", "[core][rng]") {
  const RngStream s(20261129, 0, RngPurpose::kGeneric);
  const std::size_t n = 400000;
  std::vector<double> u(n);
  std::vector<double> uf(n);
  for (std::size_t i = 0; i < n; ++i) {
    auto c = s.at(i);
    u[i] = c.uniform();
    uf[i] = c.uniformf();
  }
  double m = 0, m2 = 0;
  for (double x : u) m += x;
  m /= n;
  for (double x : u) m2 += (x - m) * (x - m);
  m2 /= n;
  CHECK(std::abs(m - 0.5) < 5.0 * std::sqrt(1.0 / 12.0 / n));
  // Var of the sample variance of U(0,1): (1/80 - 1/144)/n.
  CHECK(std::abs(m2 - 1.0 / 12.0) < 5.0 * std::sqrt((1.0 / 80 - 1.0 / 144) / n));
  CHECK(ks_pvalue(u, [](double x) { return x; }) > 1e-4);
  CHECK(ks_pvalue(uf, [](double x) { return x; }) > 1e-4);
}

TEST_CASE("normals: moments and KS test", "[core][rng]") {
  const RngStream s(99, 12345, RngPurpose::kProposal);
  const std::size_t n = 400000;
  std::vector<double> z;
  z.reserve(n);
  for (std::size_t i = 0; z.size() < n; ++i) {
    auto c = s.at(i);
    for (int k = 0; k < 10; ++k) z.push_back(c.normal());  // 10 normals per index, as a 10-D step
  }
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
  CHECK(ks_pvalue(z, [](double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }) > 1e-4);
}

TEST_CASE("integers below n are uniform (chi-square)", "[core][rng]") {
  const RngStream s(5, 0);
  const std::uint32_t k = 7;
  const std::size_t n = 700000;
  std::vector<double> count(k, 0.0);
  for (std::size_t i = 0; i < n; ++i) {
    const auto v = s.at(i).below(k);
    REQUIRE(v < k);
    count[v] += 1;
  }
  double chi2 = 0;
  const double e = static_cast<double>(n) / k;
  for (double c : count) chi2 += (c - e) * (c - e) / e;
  // chi-square with 6 degrees of freedom: P(X > 27.86) = 1e-4.
  CHECK(chi2 < 27.86);
  // 64-bit words: both halves of u64 come from the block's first two words.
  const auto b = s.block(9);
  CHECK(s.u64(9) == (static_cast<std::uint64_t>(b.v[1]) << 32 | b.v[0]));
}
