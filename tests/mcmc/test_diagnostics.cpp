// Tests of the convergence diagnostics against R posterior 1.4.0, emcee and R's ks.test
// (tests/mcmc/data/diagnostics_reference.md), plus edge cases and identities.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <limits>
#include <mutex>
#include <numeric>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include <boost/math/distributions/normal.hpp>
#include <catch2/catch.hpp>

#include "diagnostics_detail.hpp"
#include "diagnostics_vectors.hpp"
#include "herd/core/error.hpp"
#include "herd/core/rng.hpp"
#include "herd/mcmc/autocorrelation.hpp"
#include "herd/mcmc/diagnostics.hpp"
#include "herd/mcmc/ks_test.hpp"
#include "herd/mcmc/refinement.hpp"
#include "summary_bits.hpp"

using herd::mcmc::DrawsView;
using herd_test::kReference;
using herd_test::test_vector;

namespace {
constexpr double kRel = 1e-9;
#define CHECK_REL(a, b) CHECK_THAT((a), Catch::Matchers::WithinRel((b), kRel))
}  // namespace

TEST_CASE("summarize matches R posterior on the five test vectors", "[mcmc]") {
  for (int k = 1; k <= 5; ++k) {
    INFO("TV" << k);
    const auto tv = test_vector(k);
    const DrawsView v(tv.x, tv.m, tv.n);
    const auto s = herd::mcmc::summarize(v);
    const auto& ref = kReference[k - 1];
    CHECK_REL(s.rhat, ref.rhat);
    CHECK_REL(s.rhat_tail, ref.rhat_tail);
    CHECK_REL(s.ess_bulk, ref.ess_bulk);
    CHECK_REL(s.ess_tail, ref.ess_tail);
    CHECK_REL(s.ess_mean, ref.ess_mean);
    CHECK_REL(s.mcse_mean, ref.mcse_mean);
    CHECK_REL(s.mcse_sd, ref.mcse_sd);
    CHECK_REL(s.mcse_q5, ref.mcse_q05);
    CHECK_REL(s.rhat_basic, ref.rhat_basic);
  }
}

TEST_CASE("single-purpose functions agree with summarize", "[mcmc]") {
  namespace m = herd::mcmc;
  for (int k = 1; k <= 5; ++k) {
    INFO("TV" << k);
    const auto tv = test_vector(k);
    const DrawsView v(tv.x, tv.m, tv.n);
    const auto s = m::summarize(v);
    CHECK(m::rhat(v) == s.rhat);
    CHECK(m::rhat_bulk(v) == s.rhat_bulk);
    CHECK(m::rhat_tail(v) == s.rhat_tail);
    CHECK(m::rhat_basic(v) == s.rhat_basic);
    CHECK(m::ess_bulk(v) == s.ess_bulk);
    CHECK(m::ess_tail(v) == s.ess_tail);
    CHECK(m::ess_mean(v) == s.ess_mean);
    CHECK(m::ess_sd(v) == s.ess_sd);
    CHECK(m::mcse_mean(v) == s.mcse_mean);
    CHECK(m::mcse_sd(v) == s.mcse_sd);
    CHECK(m::mcse_quantile(v, 0.05) == s.mcse_q5);
    CHECK(m::mcse_quantile(v, 0.95) == s.mcse_q95);
    CHECK(m::quantile(v, 0.05) == s.q5);
    CHECK(m::quantile(v, 0.5) == s.q50);
    CHECK(m::quantile(v, 0.95) == s.q95);
    CHECK(std::min(m::ess_quantile(v, 0.05), m::ess_quantile(v, 0.95)) == s.ess_tail);
  }
}

TEST_CASE("TV1 sanity: sum, first draws, type-7 quantiles", "[mcmc]") {
  const auto tv = test_vector(1);
  CHECK(tv.x[0] == Approx(-0.479597314144485).epsilon(1e-14));
  CHECK(tv.x[1] == Approx(-0.915089734375943).epsilon(1e-14));
  CHECK(tv.x[2] == Approx(-0.780424966324354).epsilon(1e-14));
  double sum = 0;
  for (double x : tv.x) sum += x;
  CHECK(sum == Approx(543.741784903179).epsilon(1e-12));
  // Type 7 on a small sample: R quantile(c(1,2,3,4,10), c(0, .1, .5, .95, 1)).
  const std::vector<double> s{10, 2, 4, 1, 3}, p{0, 0.1, 0.5, 0.95, 1};
  const auto q = herd::mcmc::quantiles(s, p);
  CHECK(q[0] == 1.0);
  CHECK(q[1] == Approx(1.4));
  CHECK(q[2] == 3.0);
  CHECK(q[3] == Approx(8.8));
  CHECK(q[4] == 10.0);
}

TEST_CASE("quantiles by selection equal type 7 on the fully sorted sample, bit for bit", "[mcmc]") {
  // Ties, infinities and unsorted, repeated probabilities; the reference sorts everything.
  std::vector<double> s;
  std::uint64_t u = 12345;
  for (int i = 0; i < 20001; ++i) {
    u = u * 6364136223846793005ULL + 1442695040888963407ULL;
    s.push_back(static_cast<double>(u >> 40) / 1024.0 - 8192.0);
  }
  for (int i = 0; i < 500; ++i) s[static_cast<std::size_t>(i) * 37] = 3.25;  // ties
  s[11] = std::numeric_limits<double>::infinity();
  s[12] = -std::numeric_limits<double>::infinity();
  const std::vector<double> p{0.95, 0.05, 0.5, 0.25, 0.75, 0.5, 0.0, 1.0, 0.333, 1e-9, 1.0 - 1e-9};
  std::vector<double> sorted = s;
  std::sort(sorted.begin(), sorted.end());
  const auto q = herd::mcmc::quantiles(s, p);
  REQUIRE(q.size() == p.size());
  for (std::size_t i = 0; i < p.size(); ++i) {
    const double index = 1.0 + static_cast<double>(sorted.size() - 1) * p[i];
    const double lo = std::floor(index), h = index - lo;
    double want = sorted[static_cast<std::size_t>(lo) - 1];
    const double hi = sorted[static_cast<std::size_t>(std::ceil(index)) - 1];
    if (h > 0 && hi != want) want = (1.0 - h) * want + h * hi;
    INFO("p = " << p[i]);
    CHECK(std::bit_cast<std::uint64_t>(q[i]) == std::bit_cast<std::uint64_t>(want));
  }
}

TEST_CASE("FFT autocovariance equals the direct O(n^2) sum", "[mcmc]") {
  const auto tv = test_vector(2);
  const std::vector<double> x(tv.x.begin(), tv.x.begin() + 999);
  const auto a = herd::mcmc::autocovariance(x);
  double mu = 0;
  for (double v : x) mu += v;
  mu /= 999.0;
  for (std::size_t k : {0u, 1u, 2u, 7u, 100u, 500u, 998u}) {
    double s = 0;
    for (std::size_t t = 0; t + k < 999; ++t) s += (x[t] - mu) * (x[t + k] - mu);
    CHECK(a[k] == Approx(s / 999.0).margin(1e-14));
  }
  const auto r = herd::mcmc::autocorrelation(x);
  CHECK(r[0] == 1.0);
}

namespace {
/// posterior's .ess (Geyer's initial monotone sequence, written out) from the chain means
/// and the chain-averaged autocovariance acov(k) (divisor m n) of m chains of n draws;
/// `max_lag` (if not null) gets the lag where the sequence stopped.
double geyer_ess_reference(const std::vector<double>& means, std::size_t n,
                           const std::function<double(std::size_t)>& acov, std::int64_t* max_lag = nullptr) {
  const std::size_t mc = means.size();
  const double hd = static_cast<double>(n);
  const double mean_var = acov(0) * hd / (hd - 1.0);
  double mm = 0;
  for (double mu : means) mm += mu / static_cast<double>(mc);
  double vb = 0;
  for (double mu : means) vb += (mu - mm) * (mu - mm);
  const double var_plus = mean_var * (hd - 1.0) / hd + (mc > 1 ? vb / static_cast<double>(mc - 1) : 0.0);
  std::vector<double> rho(n, 0.0);
  auto rho_at = [&](std::size_t k) { return 1.0 - (mean_var - acov(k)) / var_plus; };
  std::int64_t t = 0;
  double re = 1.0, ro = rho_at(1);
  rho[0] = re;
  rho[1] = ro;
  while (t < static_cast<std::int64_t>(n) - 5 && re + ro > 0) {
    t += 2;
    re = rho_at(static_cast<std::size_t>(t));
    ro = rho_at(static_cast<std::size_t>(t + 1));
    if (re + ro >= 0) {
      rho[static_cast<std::size_t>(t)] = re;
      rho[static_cast<std::size_t>(t + 1)] = ro;
    }
  }
  const std::int64_t max_t = t;
  if (max_lag != nullptr) *max_lag = max_t;
  if (re > 0) rho[static_cast<std::size_t>(max_t)] = re;
  for (t = 2; t <= max_t - 2; t += 2) {
    const auto k = static_cast<std::size_t>(t);
    if (rho[k] + rho[k + 1] > rho[k - 2] + rho[k - 1]) rho[k] = rho[k + 1] = (rho[k - 2] + rho[k - 1]) / 2.0;
  }
  double sum = 0;
  for (std::int64_t k = 0; k < max_t; ++k) sum += rho[static_cast<std::size_t>(k)];
  const double total = static_cast<double>(mc * n);
  const double tau = std::max(-1.0 + 2.0 * sum + rho[static_cast<std::size_t>(max_t)], 1.0 / std::log10(total));
  return total / tau;
}
}  // namespace

TEST_CASE("ESS of a long-memory series (the FFT path over all lags) equals Geyer's sums of direct lags", "[mcmc]") {
  // AR(1) with phi = 0.99 (tau about 200): Geyer's sequence runs far past the directly summed
  // lags, so ess_chains takes every lag from the FFT (FFTW). Reference: posterior's .ess with
  // each lag summed directly (biased autocovariance, chain-averaged), on 3 chains x 40001
  // draws split in halves as ess_mean splits them.
  const std::size_t m = 3, n = 40001, h = n / 2;
  std::vector<double> x(m * n);
  std::uint64_t u = 99;
  auto normal = [&u] {  // Box-Muller on a 64-bit LCG: deterministic on every platform
    u = u * 6364136223846793005ULL + 1442695040888963407ULL;
    const double a = (static_cast<double>(u >> 11) + 0.5) / 9007199254740992.0;
    u = u * 6364136223846793005ULL + 1442695040888963407ULL;
    const double b = (static_cast<double>(u >> 11) + 0.5) / 9007199254740992.0;
    return std::sqrt(-2.0 * std::log(a)) * std::cos(6.283185307179586 * b);
  };
  for (std::size_t c = 0; c < m; ++c) {
    double v = normal() * 7.0;
    for (std::size_t t = 0; t < n; ++t) x[c * n + t] = v = 0.99 * v + normal();
  }
  // Split chains [2m, h].
  std::vector<std::vector<double>> chains;
  for (std::size_t c = 0; c < m; ++c) {
    chains.emplace_back(x.begin() + static_cast<std::ptrdiff_t>(c * n),
                        x.begin() + static_cast<std::ptrdiff_t>(c * n + h));
    chains.emplace_back(x.begin() + static_cast<std::ptrdiff_t>(c * n + n - h),
                        x.begin() + static_cast<std::ptrdiff_t>(c * n + n));
  }
  const std::size_t mc = chains.size();
  std::vector<double> means(mc);
  for (std::size_t c = 0; c < mc; ++c) {
    double s = 0;
    for (double v : chains[c]) s += v;
    means[c] = s / static_cast<double>(h);
  }
  auto acov = [&](std::size_t k) {  // chain-averaged, divisor h
    double s = 0;
    for (std::size_t c = 0; c < mc; ++c)
      for (std::size_t t = 0; t + k < h; ++t) s += (chains[c][t] - means[c]) * (chains[c][t + k] - means[c]);
    return s / (static_cast<double>(mc) * static_cast<double>(h));
  };
  std::int64_t max_t = 0;
  const double want = geyer_ess_reference(means, h, acov, &max_t);
  REQUIRE(max_t > 400);  // far beyond the directly summed lags
  const double got = herd::mcmc::ess_mean(herd::mcmc::DrawsView(x, m, n));
  INFO("ESS " << got << " want " << want);
  CHECK(std::fabs(got - want) <= 1e-9 * want);
}

namespace {
/// Long-memory test series for the ESS's FFT in pieces: m chains of n values, [m, n].
struct LagSeries {
  std::string name;
  std::size_t m, n;
  std::vector<double> y;
};

std::vector<LagSeries> long_memory_series() {
  std::mt19937_64 rng(2024);
  std::normal_distribution<double> normal;
  std::vector<LagSeries> out;
  auto ar = [&](std::size_t m, std::size_t n, double phi, double step) {
    std::vector<double> y(m * n);
    for (std::size_t c = 0; c < m; ++c) {
      double v = phi < 1.0 ? normal(rng) / std::sqrt(1.0 - phi * phi) : 0.0;
      for (std::size_t t = 0; t < n; ++t) {
        v = phi * v + normal(rng);
        y[c * n + t] = step > 0 ? step * std::round(v / step) : v;  // step > 0: ties
      }
    }
    return y;
  };
  out.push_back({"AR(1) 0.999, 2 chains", 2, 100000, ar(2, 100000, 0.999, 0.0)});
  out.push_back({"random walk, 1 chain of 2^16 (whole pieces)", 1, 65536, ar(1, 65536, 1.0, 0.0)});
  out.push_back({"AR(1) 0.995 in steps of 0.5 (ties), 3 chains", 3, 30001, ar(3, 30001, 0.995, 0.5)});
  // Constant stretches of 1 to 3000 draws at a random walk's levels, and a constant chain.
  {
    const std::size_t m = 3, n = 40000;
    std::vector<double> y(m * n, 0.0);
    std::uniform_int_distribution<std::size_t> len(1, 3000);
    for (std::size_t c = 0; c + 1 < m; ++c) {
      double level = 0;
      for (std::size_t t = 0; t < n;) {
        level += normal(rng);
        const std::size_t e = std::min(n, t + len(rng));
        for (; t < e; ++t) y[c * n + t] = level;
      }
    }
    std::fill(y.begin() + 2 * n, y.end(), 1.25);
    out.push_back({"constant stretches, and a constant chain", m, n, y});
  }
  out.push_back({"AR(1) 0.999, 5 chains of 700 (one piece)", 5, 700, ar(5, 700, 0.999, 0.0)});
  return out;
}

/// Each chain of [m, n] minus its mean (the mean in long double), in place.
void centre_chains(std::vector<double>& y, std::size_t m, std::size_t n) {
  for (std::size_t c = 0; c < m; ++c) {
    long double s = 0;
    for (std::size_t t = 0; t < n; ++t) s += y[c * n + t];
    const auto mu = static_cast<double>(s / static_cast<long double>(n));
    for (std::size_t t = 0; t < n; ++t) y[c * n + t] -= mu;
  }
}

/// The chain-averaged autocovariance (divisor m n) of the centred chains [m, n] at lag k,
/// each product and the sum in long double.
long double direct_acov(const std::vector<double>& y, std::size_t m, std::size_t n, std::size_t k) {
  long double s = 0;
  for (std::size_t c = 0; c < m; ++c)
    for (std::size_t t = 0; t + k < n; ++t)
      s += static_cast<long double>(y[c * n + t]) * static_cast<long double>(y[c * n + t + k]);
  return s / (static_cast<long double>(m) * static_cast<long double>(n));
}

}  // namespace

TEST_CASE("FFT in pieces: every lag within 1e-12 of lag 0 of the direct sum in long double", "[mcmc]") {
  // piece_lags_stored at requests from the ESS's switch (a few hundred lags) to a few
  // thousand: pieces of P = 1024 to 32768 values (4 (lag + 1) rounded up to a power of two),
  // two pieces exactly (2^16 values, P = 2^15), the whole chains when 2P > n; lags checked at
  // 0, 1, the request, the last valid one and every 97th between. The error of the transforms (pieces summed in the
  // spectrum) is about 1e-16 to 1e-15 of lag 0 here; a lag wrapped around a piece or a piece's cross term left out (or
  // given the wrong sign) would be off by a whole product sum.
  namespace d = herd::mcmc::detail;
  d::Workspace& ws = d::workspace();
  // 4 (lag + 1) rounded up, at least 1024, a later pass 16 times the last one's pieces.
  CHECK(d::piece_length(160, 0) == 1024);
  CHECK(d::piece_length(425, 0) == 2048);
  CHECK(d::piece_length(1025, 1024) == 16384);
  CHECK(d::piece_length(8193, 2048) == 65536);
  for (LagSeries& s : long_memory_series()) {
    centre_chains(s.y, s.m, s.n);
    for (const std::size_t lag : {160u, 425u, 1500u, 5000u}) {
      if (lag >= s.n) continue;
      INFO(s.name << ", lag " << lag);
      std::size_t valid = 0;
      const double* got = d::piece_lags_stored(s.y.data(), s.m, s.n, lag, ws, &valid);
      const std::size_t p = d::piece_length(lag, 0);
      CHECK(valid == (2 * p > s.n ? s.n : p + 1));
      REQUIRE(valid > lag);
      std::vector<std::size_t> ks{0, 1, lag, valid - 1};
      for (std::size_t k = 2; k < valid; k += 97) ks.push_back(k);
      const std::vector<double> lags(got, got + valid);  // got is valid until the next transform
      const long double scale = direct_acov(s.y, s.m, s.n, 0);
      double worst = 0;
      for (std::size_t k : ks) {
        const long double want = direct_acov(s.y, s.m, s.n, k);
        worst = std::max(worst, static_cast<double>(std::fabs(static_cast<long double>(lags[k]) - want) / scale));
      }
      INFO("largest error " << worst << " of lag 0");
      CHECK(worst <= 1e-12);
    }
  }
}

TEST_CASE("ESS past the directly summed lags (FFT in pieces) within 1e-12 of Geyer's on long double lags", "[mcmc]") {
  // ess_chains and ess_chains_overwrite on the long-memory series, against posterior's .ess
  // on every lag summed directly in long double. The constant chain's series is left out
  // (its ESS is that of the others'); one chain of 700 never leaves the direct sums.
  namespace d = herd::mcmc::detail;
  d::Workspace& ws = d::workspace();
  for (LagSeries& s : long_memory_series()) {
    if (s.name.find("constant") != std::string::npos) continue;
    INFO(s.name);
    std::vector<double> means(s.m);
    for (std::size_t c = 0; c < s.m; ++c) {
      long double sum = 0;
      for (std::size_t t = 0; t < s.n; ++t) sum += s.y[c * s.n + t];
      means[c] = static_cast<double>(sum / static_cast<long double>(s.n));
    }
    std::vector<double> centred = s.y;
    for (std::size_t c = 0; c < s.m; ++c)
      for (std::size_t t = 0; t < s.n; ++t) centred[c * s.n + t] -= means[c];
    const double want = geyer_ess_reference(
        means, s.n, [&](std::size_t k) { return static_cast<double>(direct_acov(centred, s.m, s.n, k)); });
    const double got = d::ess_chains(s.y.data(), s.m, s.n, ws);
    std::vector<double> scratch = s.y;
    const double overwrite = d::ess_chains_overwrite(scratch.data(), s.m, s.n, ws);
    INFO("ESS " << got << ", want " << want);
    CHECK(std::bit_cast<std::uint64_t>(got) == std::bit_cast<std::uint64_t>(overwrite));
    CHECK_THAT(got, Catch::Matchers::WithinRel(want, 1e-12));
  }
}

TEST_CASE("emcee integrated autocorrelation times", "[mcmc]") {
  const auto tv1 = test_vector(1);
  const auto t0 = herd::mcmc::integrated_time(DrawsView(std::span(tv1.x).first(1000), 1, 1000));
  CHECK_REL(t0.tau, 13.404608268077887);
  CHECK(t0.window == 68);
  CHECK_FALSE(t0.too_short);
  const auto t4 = herd::mcmc::integrated_time(DrawsView(tv1.x, 4, 1000));
  CHECK_REL(t4.tau, 29.15332198502599);
  CHECK(t4.window == 147);
  CHECK(t4.too_short);  // 50 * 29.15 > 1000
  const auto tv2 = test_vector(2);
  const auto t2 = herd::mcmc::integrated_time(DrawsView(std::span(tv2.x).first(999), 1, 999));
  CHECK_REL(t2.tau, 2.4473648418220324);
  CHECK(t2.window == 13);
  // A constant walker: NaN, no crash.
  const std::vector<double> c(100, 1.5);
  CHECK(std::isnan(herd::mcmc::integrated_time(DrawsView(c, 1, 100)).tau));
}

TEST_CASE("two-sample Kolmogorov-Smirnov against R", "[mcmc]") {
  const auto tv = test_vector(1);
  const std::span<const double> x(tv.x);
  const auto a = herd::mcmc::ks_two_sample(x.subspan(0, 1000), x.subspan(1000, 1000));
  CHECK(a.statistic == Approx(0.138).epsilon(1e-15));
  CHECK_FALSE(a.exact);
  CHECK_REL(a.p_value, 1.0723236447634352e-08);
  const auto b = herd::mcmc::ks_two_sample(x.subspan(0, 60), x.subspan(2000, 40));
  CHECK(b.statistic == Approx(0.3).epsilon(1e-15));
  CHECK(b.exact);
  CHECK_REL(b.p_value, 0.02254577544632308);
  // Symmetric in its arguments; identical samples give D = 0, p = 1.
  const auto b2 = herd::mcmc::ks_two_sample(x.subspan(2000, 40), x.subspan(0, 60));
  CHECK(b2.p_value == Approx(b.p_value).epsilon(1e-14));
  const auto same = herd::mcmc::ks_two_sample(x.subspan(0, 50), x.subspan(0, 50), herd::mcmc::KsMethod::kAsymptotic);
  CHECK(same.statistic == 0.0);
  CHECK(same.p_value == 1.0);
  // Kolmogorov's Q: both series forms agree around l = 1; Q(0) = 1.
  CHECK(herd::mcmc::kolmogorov_q(0.0) == 1.0);
  CHECK(herd::mcmc::kolmogorov_q(1.0 - 1e-12) == Approx(herd::mcmc::kolmogorov_q(1.0)).epsilon(1e-10));
  CHECK_REL(herd::mcmc::kolmogorov_q(1.0), 0.26999967167735456);  // R: 1 - pkolmogorov1x(1)
  // Exact small case by hand: n = m = 1, D = 1 always, p = 1.
  CHECK(herd::mcmc::smirnov_p_exact(1, 1, 1) == Approx(1.0));
  // n = m = 2, D = 1: paths xx yy and yy xx out of 6 -> 1/3.
  CHECK(herd::mcmc::smirnov_p_exact(2, 2, 4) == Approx(1.0 / 3.0).epsilon(1e-15));
}

TEST_CASE("ties switch the KS test to the asymptotic p-value; weights equal expansion", "[mcmc]") {
  const std::vector<double> x{1, 2, 2, 3, 5}, y{2, 4, 6, 7};
  const auto t = herd::mcmc::ks_two_sample(x, y);
  CHECK_FALSE(t.exact);
  const std::vector<double> xc{1, 2, 3, 5};
  const std::vector<std::int64_t> wx{1, 2, 1, 1}, wy{1, 1, 1, 1};
  const auto tw = herd::mcmc::ks_two_sample(xc, wx, y, wy);
  CHECK(tw.statistic == t.statistic);
  CHECK(tw.p_value == t.p_value);
  CHECK(tw.exact == t.exact);
  // Pairwise table over weighted chains: symmetric, diagonal 0/1.
  const std::vector<double> vals{1, 2, 3, 5, 2, 4, 6, 7};
  const std::vector<std::int64_t> w{1, 2, 1, 1, 1, 1, 2, 1};
  const auto table = herd::mcmc::ks_pairwise(DrawsView(vals, w, 2, 4));
  REQUIRE(table.size() == 4);
  CHECK(table[0].statistic == 0.0);
  CHECK(table[1].statistic == table[2].statistic);
  const std::vector<double> nan_x{1, std::nan(""), 3};
  CHECK(std::isnan(herd::mcmc::ks_two_sample(nan_x, y).p_value));
}

TEST_CASE("compact (weighted) input gives the results of the expanded chain", "[mcmc]") {
  // Compact chains of different lengths: chain c repeats draw t (t % (c + 2)) + 1 times,
  // truncated to a common verbose length; padding entries have weight 0.
  const auto tv = test_vector(1);
  const std::size_t m = 4, nv = 700, d = 700;
  std::vector<double> compact(m * d, 0.0), verbose(m * nv);
  std::vector<std::int64_t> w(m * d, 0);
  for (std::size_t c = 0; c < m; ++c) {
    std::size_t pos = 0;
    for (std::size_t t = 0; pos < nv; ++t) {
      const auto rep = static_cast<std::int64_t>(std::min<std::size_t>(t % (c + 2) + 1, nv - pos));
      compact[c * d + t] = tv.x[c * 1000 + t];
      w[c * d + t] = rep;
      for (std::int64_t r = 0; r < rep; ++r) verbose[c * nv + pos++] = tv.x[c * 1000 + t];
    }
  }
  const DrawsView wv(compact, w, m, d), ev(verbose, m, nv);
  CHECK(wv.verbose_draws() == nv);
  const auto a = herd::mcmc::summarize(wv), b = herd::mcmc::summarize(ev);
  CHECK(a.mean == b.mean);
  CHECK(a.sd == b.sd);
  CHECK(a.rhat == b.rhat);
  CHECK(a.ess_bulk == b.ess_bulk);
  CHECK(a.ess_tail == b.ess_tail);
  CHECK(a.mcse_sd == b.mcse_sd);
  CHECK(a.mcse_q95 == b.mcse_q95);
  CHECK(herd::mcmc::nested_rhat(wv, 2) == herd::mcmc::nested_rhat(ev, 2));
  const auto ia = herd::mcmc::integrated_time(wv), ib = herd::mcmc::integrated_time(ev);
  CHECK(ia.tau == ib.tau);
  const std::span<const double> c0(compact.data(), d), v0(verbose.data(), nv);
  CHECK(herd::mcmc::batch_means_iac(c0, std::span<const std::int64_t>(w.data(), d)) ==
        Approx(herd::mcmc::batch_means_iac(v0)).epsilon(1e-12));
  // Unequal verbose lengths or negative weights are input errors.
  std::vector<std::int64_t> bad = w;
  bad[0] += 1;
  CHECK_THROWS_AS(DrawsView(compact, bad, m, d), herd::InputError);
  bad = w;
  bad[1] = -1;
  CHECK_THROWS_AS(DrawsView(compact, bad, m, d), herd::InputError);
}

namespace {
/// A compact column [m, d] with weights (zero-padded to a common d) and its verbose
/// expansion [m, n]: chain c's states come from `value(c, i)` with weights from `weight(c, i)`
/// (>= 0), the last state's weight cut so that every chain has exactly n draws.
struct CompactColumn {
  std::vector<double> values, verbose;
  std::vector<std::int64_t> weights;
  std::size_t m = 0, d = 0, n = 0;
  DrawsView weighted() const { return {values, weights, m, d}; }
  DrawsView expanded() const { return {verbose, m, n}; }
};

template <class Value, class Weight>
CompactColumn compact_column(std::size_t m, std::size_t n, Value value, Weight weight) {
  std::vector<std::vector<double>> vals(m);
  std::vector<std::vector<std::int64_t>> ws(m);
  CompactColumn col;
  col.m = m;
  col.n = n;
  for (std::size_t c = 0; c < m; ++c) {
    std::int64_t left = static_cast<std::int64_t>(n);
    for (std::size_t i = 0; left > 0; ++i) {
      const std::int64_t w = std::min(weight(c, i), left);
      vals[c].push_back(value(c, i));
      ws[c].push_back(w);
      left -= w;
    }
    col.d = std::max(col.d, vals[c].size());
  }
  col.values.assign(m * col.d, -7.0);  // padding values are never draws
  col.weights.assign(m * col.d, 0);
  for (std::size_t c = 0; c < m; ++c) {
    std::copy(vals[c].begin(), vals[c].end(), col.values.begin() + static_cast<std::ptrdiff_t>(c * col.d));
    std::copy(ws[c].begin(), ws[c].end(), col.weights.begin() + static_cast<std::ptrdiff_t>(c * col.d));
    for (std::size_t i = 0; i < vals[c].size(); ++i) col.verbose.insert(col.verbose.end(), ws[c][i], vals[c][i]);
  }
  return col;
}

/// Equal bits, or both NaN.
bool same_bits(double a, double b) {
  return (std::isnan(a) && std::isnan(b)) || std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b);
}

/// Sets the split draws up to which a weighted view's split layout is stored (detail::
/// stored_split_limit) for its lifetime, then restores the default.
struct StoredSplitLimit {
  std::size_t saved;
  explicit StoredSplitLimit(std::size_t limit) : saved(herd::mcmc::detail::stored_split_limit().exchange(limit)) {}
  ~StoredSplitLimit() { herd::mcmc::detail::stored_split_limit().store(saved); }
  StoredSplitLimit(const StoredSplitLimit&) = delete;
  StoredSplitLimit& operator=(const StoredSplitLimit&) = delete;
};

void check_weighted_equals_expanded_once(const CompactColumn& col);

/// Every field of summarize() and the rank- and order-based single-purpose functions agree,
/// bit for bit, between the weighted view and its expansion: with the weighted view's split
/// layout generated window by window for every pass, and stored once per series.
void check_weighted_equals_expanded(const CompactColumn& col) {
  for (const std::size_t limit : {std::size_t{0}, std::numeric_limits<std::size_t>::max()}) {
    INFO((limit == 0 ? "split layout generated per window" : "split layout stored"));
    const StoredSplitLimit set(limit);
    check_weighted_equals_expanded_once(col);
  }
}

void check_weighted_equals_expanded_once(const CompactColumn& col) {
  namespace m = herd::mcmc;
  const DrawsView wv = col.weighted(), ev = col.expanded();
  REQUIRE(wv.verbose_draws() == col.n);
  const m::DiagnosticSummary a = m::summarize(wv), b = m::summarize(ev);
  const double m::DiagnosticSummary::*fields[] = {
      &m::DiagnosticSummary::mean,      &m::DiagnosticSummary::sd,        &m::DiagnosticSummary::q5,
      &m::DiagnosticSummary::q50,       &m::DiagnosticSummary::q95,       &m::DiagnosticSummary::mcse_mean,
      &m::DiagnosticSummary::mcse_sd,   &m::DiagnosticSummary::mcse_q5,   &m::DiagnosticSummary::mcse_q95,
      &m::DiagnosticSummary::ess_bulk,  &m::DiagnosticSummary::ess_tail,  &m::DiagnosticSummary::ess_mean,
      &m::DiagnosticSummary::ess_sd,    &m::DiagnosticSummary::rhat,      &m::DiagnosticSummary::rhat_bulk,
      &m::DiagnosticSummary::rhat_tail, &m::DiagnosticSummary::rhat_basic};
  static_assert(sizeof(m::DiagnosticSummary) == sizeof(fields) / sizeof(fields[0]) * sizeof(double));
  for (std::size_t f = 0; f < std::size(fields); ++f) {
    INFO("field " << f << ": weighted " << a.*fields[f] << ", expanded " << b.*fields[f]);
    CHECK(same_bits(a.*fields[f], b.*fields[f]));
  }
  CHECK(same_bits(m::rhat_bulk(wv), m::rhat_bulk(ev)));
  CHECK(same_bits(m::rhat_tail(wv), m::rhat_tail(ev)));
  CHECK(same_bits(m::ess_bulk(wv), m::ess_bulk(ev)));
  CHECK(same_bits(m::ess_tail(wv), m::ess_tail(ev)));
  for (double prob : {0.0, 0.05, 0.37, 0.5, 0.95, 1.0}) {
    INFO("prob " << prob);
    CHECK(same_bits(m::quantile(wv, prob), m::quantile(ev, prob)));
    CHECK(same_bits(m::ess_quantile(wv, prob), m::ess_quantile(ev, prob)));
    CHECK(same_bits(m::mcse_quantile(wv, prob), m::mcse_quantile(ev, prob)));
  }
  // The same median as the plain type-7 quantile of the expansion (== : the sorted records
  // keep -0 as +0).
  if (std::all_of(col.verbose.begin(), col.verbose.end(), [](double x) { return std::isfinite(x); }))
    CHECK(a.q50 == m::quantiles(col.verbose, std::vector<double>{0.5})[0]);
}
}  // namespace

TEST_CASE("DrawsView: 32-bit weights are not copied and give the 64-bit ones' results; past 2^32 - 1 refused",
          "[mcmc]") {
  const auto tv = test_vector(2);
  const std::size_t m = 3, d = 600;
  std::vector<double> x(m * d);
  std::vector<std::int64_t> w64(m * d);
  std::vector<std::uint32_t> w32(m * d);
  for (std::size_t c = 0; c < m; ++c) {
    std::size_t total = 0;
    for (std::size_t t = 0; t < d; ++t) {
      x[c * d + t] = tv.x[c * 1000 + t];
      // Chain c's weights sum to 1500 over its first states, then padding.
      const std::size_t want = std::min<std::size_t>((t * (c + 3)) % 7, 1500 - total);
      w64[c * d + t] = static_cast<std::int64_t>(want);
      w32[c * d + t] = static_cast<std::uint32_t>(want);
      total += want;
    }
    REQUIRE(total == 1500);
  }
  const DrawsView a(x, w64, m, d), b(x, w32, m, d);
  CHECK(b.weights().data() == w32.data());  // the caller's weights, not a copy
  CHECK(a.weights().data() != reinterpret_cast<const std::uint32_t*>(w64.data()));
  REQUIRE(std::equal(a.weights().begin(), a.weights().end(), w32.begin(), w32.end()));
  CHECK(a.verbose_draws() == 1500);
  CHECK(b.verbose_draws() == 1500);
  const herd::mcmc::DiagnosticSummary sa = herd::mcmc::summarize(a), sb = herd::mcmc::summarize(b);
  CHECK(herd::mcmc::testing::summary_bits(sa) == herd::mcmc::testing::summary_bits(sb));
  // A copy of the int64 view shares its weights and outlives the original.
  std::optional<DrawsView> copy;
  {
    const DrawsView tmp(x, w64, m, d);
    copy.emplace(tmp);
  }
  const herd::mcmc::DiagnosticSummary sc = herd::mcmc::summarize(*copy);
  CHECK(herd::mcmc::testing::summary_bits(sa) == herd::mcmc::testing::summary_bits(sc));
  // 2^32 - 1 draws in all are accepted, in one weight too; one more is refused, as one
  // weight (int64, before it is narrowed) or as a sum (no wrap of the 32-bit weights).
  const std::vector<double> one{1.0}, two{1.0, 2.0};
  constexpr std::uint32_t kMax = 4294967295U;
  const std::vector<std::int64_t> big64{std::int64_t{kMax}}, over64{std::int64_t{kMax} + 1};
  CHECK(DrawsView(one, big64, 1, 1).verbose_draws() == kMax);
  CHECK(DrawsView(one, big64, 1, 1).weights()[0] == kMax);
  CHECK_THROWS_WITH(DrawsView(one, over64, 1, 1), Catch::Contains("at most 2^32 - 1"));
  const std::vector<std::uint32_t> sum_over{kMax, 1}, halves{2147483648U, 2147483648U};
  CHECK_THROWS_WITH(DrawsView(two, sum_over, 1, 2), Catch::Contains("4294967296 verbose draws in all"));
  CHECK_THROWS_WITH(DrawsView(two, halves, 2, 1), Catch::Contains("4294967296 verbose draws in all"));
  const std::vector<std::uint32_t> unequal{3, 4};
  CHECK_THROWS_WITH(DrawsView(two, unequal, 2, 1), Catch::Contains("same verbose length"));
  const std::vector<std::uint32_t> zeros{0, 0};
  CHECK_THROWS_WITH(DrawsView(two, zeros, 1, 2), Catch::Contains("sum to 0"));
}

TEST_CASE("weighted summaries rank the compact states: bit for bit the expanded chain's", "[mcmc]") {
  std::mt19937_64 rng(20211203);
  std::normal_distribution<double> normal;
  std::uniform_int_distribution<int> small(0, 4);
  std::vector<double> pool(4000);
  for (double& x : pool) x = normal(rng);
  const double levels[] = {-1.5, 0.0, 0.25, 0.25 + 1e-17, 3.0};  // 0.25 + 1e-17 == 0.25: a tie
  for (std::size_t m : {1u, 4u}) {
    for (std::size_t n : {2u, 3u, 6u, 7u, 8u, 101u, 1000u, 1001u, 4097u}) {
      // Random weights 0..4 (zeros inside the chain are states that stand for no draw).
      std::vector<std::int64_t> wt(m * 5000);
      for (auto& w : wt) w = small(rng);
      const auto weight = [&](std::size_t c, std::size_t i) { return wt[(c * 5000 + i) % wt.size()]; };
      SECTION("normal values, m " + std::to_string(m) + ", n " + std::to_string(n)) {
        check_weighted_equals_expanded(compact_column(
            m, n, [&](std::size_t c, std::size_t i) { return pool[(c * 997 + i) % pool.size()]; }, weight));
      }
      SECTION("values from a small set (ties across states), m " + std::to_string(m) + ", n " + std::to_string(n)) {
        check_weighted_equals_expanded(compact_column(
            m, n, [&](std::size_t c, std::size_t i) { return levels[(c * 3 + i * 7 + i / 5) % 5]; }, weight));
      }
      SECTION("+0 and -0 tie, m " + std::to_string(m) + ", n " + std::to_string(n)) {
        check_weighted_equals_expanded(compact_column(
            m, n, [&](std::size_t c, std::size_t i) { return (c + i) % 3 == 0 ? -0.0 : (i % 3 == 1 ? 0.0 : 1.0); },
            weight));
      }
      SECTION("constant, m " + std::to_string(m) + ", n " + std::to_string(n)) {
        const auto col = compact_column(
            m, n, [](std::size_t, std::size_t) { return 2.5; }, weight);
        check_weighted_equals_expanded(col);
        CHECK(herd::mcmc::summarize(col.weighted()).q95 == 2.5);
      }
    }
  }
  SECTION("long correlated chains: split chains generated window by window, lags across windows, the FFT") {
    // Split chains of 10,000 to 25,000 draws (several of the windows of a few thousand draws
    // that the weighted view's split layout is generated in), AR(1) values: 0.9 sums a few
    // dozen lags directly (each sum carried across windows), 0.998 runs past the directly
    // summed lags to the FFT; odd n drops a middle draw, m = 3 leaves a chain pair of one.
    for (const double phi : {0.9, 0.998})
      for (std::size_t m : {1u, 3u})
        for (std::size_t n : {20001u, 50000u}) {
          INFO("phi " << phi << ", m " << m << ", n " << n);
          std::vector<double> ar(m * n);
          for (std::size_t c = 0; c < m; ++c) {
            double y = 0;
            for (std::size_t i = 0; i < n; ++i) ar[c * n + i] = y = phi * y + normal(rng);
          }
          const auto col = compact_column(
              m, n, [&](std::size_t c, std::size_t i) { return ar[c * n + i]; },
              [&](std::size_t c, std::size_t i) { return static_cast<std::int64_t>((i * 7 + c * 3 + i / 11) % 5); });
          check_weighted_equals_expanded(col);
        }
  }
  SECTION("a state of weight > n/2 (over the middle, at the start, at the end)") {
    for (std::size_t m : {1u, 4u})
      for (std::size_t n : {1000u, 1001u})
        for (std::size_t at : {0u, 1u, 3u, 200u}) {
          INFO("m " << m << ", n " << n << ", heavy state " << at);
          const auto col = compact_column(
              m, n, [&](std::size_t c, std::size_t i) { return pool[(c * 131 + i) % pool.size()]; },
              [&](std::size_t c, std::size_t i) -> std::int64_t {
                if (i == at + c) return static_cast<std::int64_t>(n / 2 + 1 + c);
                return static_cast<std::int64_t>((i * 5 + c) % 4);
              });
          check_weighted_equals_expanded(col);
        }
  }
  SECTION("states of 255 draws or more among light ones (their counts kept apart from the byte per state)") {
    // Weights at and around the byte per state's limit (254 fits, 255 and more are looked up
    // by slot), heavy states cut at the middle of odd chains, ties between heavy and light
    // states, and quantiles (q5, q50, q95, the MCSE's order statistics) inside heavy runs.
    const std::int64_t weights[] = {1, 0, 254, 2, 255, 3, 256, 1, 1000, 4, 300, 1};
    for (std::size_t m : {1u, 3u})
      for (std::size_t n : {20000u, 20001u, 150001u}) {
        INFO("m " << m << ", n " << n);
        const auto col = compact_column(
            m, n,
            [&](std::size_t c, std::size_t i) { return levels[(c + i * 3) % 5] + 0.001 * static_cast<double>(i % 7); },
            [&](std::size_t c, std::size_t i) {
              return i == 37 + c ? std::int64_t{70000} : weights[(c * 5 + i) % std::size(weights)];
            });
        check_weighted_equals_expanded(col);
      }
  }
  SECTION("one bucket of the radix sort's top 16 bits (MSD digits below, or LSD passes)") {
    // Values in [1, 1 + 1/16) share the keys' top 16 bits: one bucket of every state (3,000:
    // msd_sort; 20,000: lsd_sort48), and keys that differ only in their lowest bits or in a
    // few clustered ones (msd_sort's digits recurse down to bit 0).
    std::uniform_real_distribution<double> unit(0.0, 1.0);
    for (std::size_t states : {3000u, 20000u}) {
      for (int shape = 0; shape < 3; ++shape) {
        INFO("states " << states << ", shape " << shape);
        std::vector<double> vals(states);
        for (std::size_t i = 0; i < states; ++i) {
          const double u = unit(rng);
          if (shape == 0) vals[i] = 1.0 + u / 16.0;
          else if (shape == 1) vals[i] = 1.0 + std::ldexp(std::floor(u * 4096.0), -52);  // low 12 bits
          else vals[i] = 1.0 + std::ldexp(std::floor(u * 64.0), -30) + std::ldexp(std::floor(u * 1e4), -52);
        }
        const std::size_t n = states * 2 + 1;
        const auto col = compact_column(
            1, n, [&](std::size_t /*c*/, std::size_t i) { return vals[i % states]; },
            [&](std::size_t /*c*/, std::size_t i) -> std::int64_t { return 1 + static_cast<std::int64_t>(i % 3); });
        check_weighted_equals_expanded(col);
      }
    }
  }
  SECTION("weights of 1 (the z-scores' slots fill the split buffer's tail exactly)") {
    // Every slot's state has one draw (its split positions catch up with the unread slots
    // at every step), then weights 1 with a heavy last state or a heavy first state.
    for (std::size_t m : {1u, 3u})
      for (std::size_t n : {9u, 10u, 1000u, 1001u})
        for (int shape = 0; shape < 3; ++shape) {
          INFO("m " << m << ", n " << n << ", shape " << shape);
          const auto col = compact_column(
              m, n, [&](std::size_t c, std::size_t i) { return pool[(c * 71 + i) % pool.size()]; },
              [&](std::size_t /*c*/, std::size_t i) -> std::int64_t {
                if (shape == 1 && i == n / 2 - 1) return static_cast<std::int64_t>(n);  // the rest
                if (shape == 2 && i == 0) return 5;
                return 1;
              });
          check_weighted_equals_expanded(col);
        }
  }
  SECTION("the middle draw alone, or starting a state, in an odd chain") {
    // n = 9, h = 4: the middle draw (t = 4) is a state of weight 1 (only a dropped record),
    // starts a state of weight 3, or ends one.
    for (const std::vector<std::int64_t>& w :
         {std::vector<std::int64_t>{2, 2, 1, 0, 2, 2}, {1, 3, 3, 2}, {4, 0, 3, 2}, {5, 4}, {9}, {0, 4, 1, 4}}) {
      const auto col = compact_column(
          2, 9, [&](std::size_t c, std::size_t i) { return pool[c * 31 + i]; },
          [&](std::size_t /*c*/, std::size_t i) { return i < w.size() ? w[i] : std::int64_t{1}; });
      check_weighted_equals_expanded(col);
    }
  }
  SECTION("a non-finite draw makes every field NaN; a non-finite padding value does not") {
    for (double bad : {std::nan(""), std::numeric_limits<double>::infinity()}) {
      for (std::size_t m : {1u, 4u}) {
        auto col = compact_column(
            m, 1001, [&](std::size_t c, std::size_t i) { return pool[(c * 577 + i) % pool.size()]; },
            [&](std::size_t c, std::size_t i) { return static_cast<std::int64_t>((c + i) % 3); });
        // A zero-weight state: not a draw.
        const auto zero = static_cast<std::size_t>(std::find(col.weights.begin(), col.weights.end(), std::int64_t{0}) -
                                                   col.weights.begin());
        col.values[zero] = bad;
        check_weighted_equals_expanded(col);
        CHECK(std::isfinite(herd::mcmc::summarize(col.weighted()).rhat));
        // A state of positive weight: every verbose draw it stands for is non-finite.
        const auto pos = zero + 1;
        REQUIRE(col.weights[pos] > 0);
        col.values[pos] = bad;
        col.verbose.clear();
        for (std::size_t i = 0; i < col.values.size(); ++i)
          col.verbose.insert(col.verbose.end(), col.weights[i], col.values[i]);
        check_weighted_equals_expanded(col);
        const auto s = herd::mcmc::summarize(col.weighted());
        CHECK(std::isnan(s.mean));
        CHECK(std::isnan(s.q50));
        CHECK(std::isnan(s.rhat_tail));
      }
    }
  }
}

TEST_CASE("edge cases: 1 chain, few draws, constant, NaN/Inf, ties, monotone maps", "[mcmc]") {
  namespace m = herd::mcmc;
  const auto tv = test_vector(1);
  // One chain: split R-hat and ESS are defined (two split halves); unsplit basic R-hat is not.
  const DrawsView one(std::span(tv.x).first(1000), 1, 1000);
  const auto s1 = m::summarize(one);
  CHECK(std::isfinite(s1.rhat));
  CHECK(std::isfinite(s1.ess_bulk));
  CHECK(std::isnan(m::rhat_basic(one, false)));
  // 2, 3, 4, 5 draws per chain: ESS needs 3 per split chain (6 draws); R-hat 2 per split chain.
  for (std::size_t n : {2u, 3u, 4u, 5u, 6u}) {
    INFO("draws " << n);
    std::vector<double> x;
    for (std::size_t c = 0; c < 3; ++c)
      for (std::size_t t = 0; t < n; ++t) x.push_back(tv.x[c * 1000 + t]);
    const auto s = m::summarize(DrawsView(x, 3, n));
    CHECK(std::isfinite(s.mean));
    CHECK(std::isfinite(s.q50));
    CHECK(std::isnan(s.ess_bulk) == (n < 6));
    CHECK(std::isnan(s.rhat) == (n < 4));
  }
  // Constant chains: mean and quantiles exact, sd 0, R-hat/ESS/MCSE NaN, no throw.
  const std::vector<double> c(4 * 50, 2.5);
  const auto sc = m::summarize(DrawsView(c, 4, 50));
  CHECK(sc.mean == 2.5);
  CHECK(sc.sd == 0.0);
  CHECK(sc.q5 == 2.5);
  CHECK(std::isnan(sc.rhat));
  CHECK(std::isnan(sc.ess_bulk));
  CHECK(std::isnan(sc.mcse_mean));
  // Two values symmetric about the mean: (x - mean)^2 is constant, so ESS(sd) and MCSE(sd)
  // are NaN, while the rest is defined.
  std::vector<double> pm(4 * 50);
  for (std::size_t i = 0; i < pm.size(); ++i) pm[i] = ((i * 7919) % 13) < 6 ? -1.0 : 1.0;
  for (std::size_t i = 0; i < 100; ++i) pm[2 * i] = -1.0, pm[2 * i + 1] = 1.0;
  const auto spm = m::summarize(DrawsView(pm, 4, 50));
  CHECK(spm.mean == 0.0);
  CHECK(std::isnan(spm.ess_sd));
  CHECK(std::isnan(spm.mcse_sd));
  CHECK(std::isfinite(spm.ess_bulk));
  // Odd draw count whose only varying draws are the dropped middle ones.
  std::vector<double> mid(3 * 7, 1.0);
  mid[3] = 2.0;
  const auto smid = m::summarize(DrawsView(mid, 3, 7));
  CHECK(std::isnan(smid.rhat_basic));
  CHECK(std::isnan(smid.ess_mean));
  CHECK(std::isnan(smid.rhat));
  CHECK(std::isnan(smid.ess_bulk));
  CHECK(smid.mean == Approx(22.0 / 21.0));
  // NaN or Inf anywhere: every field NaN.
  for (double bad : {std::nan(""), std::numeric_limits<double>::infinity()}) {
    std::vector<double> x = tv.x;
    x[1234] = bad;
    const DrawsView v(x, 4, 1000);
    const auto s = m::summarize(v);
    CHECK(std::isnan(s.mean));
    CHECK(std::isnan(s.rhat));
    CHECK(std::isnan(s.ess_bulk));
    CHECK(std::isnan(m::ess_mean(v)));
    CHECK(std::isnan(m::rhat_basic(v)));
    CHECK(std::isnan(m::quantile(v, 0.5)));
    CHECK(std::isnan(m::nested_rhat(v, 2)));
  }
  // Bulk-ESS and bulk R-hat are invariant under a strictly increasing map (ranks only).
  std::vector<double> e = tv.x;
  for (double& v : e) v = std::exp(3.0 * v) + 7.0;
  const auto a = m::summarize(DrawsView(tv.x, 4, 1000));
  const auto b = m::summarize(DrawsView(e, 4, 1000));
  CHECK(b.ess_bulk == a.ess_bulk);
  CHECK(b.rhat_bulk == a.rhat_bulk);
  CHECK(b.ess_tail == a.ess_tail);
  // Arguments outside their domain.
  CHECK_THROWS_AS(m::quantile(DrawsView(tv.x, 4, 1000), 1.5), herd::InputError);
  CHECK_THROWS_AS(DrawsView(tv.x, 3, 1000), herd::InputError);
}

TEST_CASE("nested R-hat: defining identities and many short chains", "[mcmc]") {
  namespace m = herd::mcmc;
  const auto tv = test_vector(1);
  // One chain per superchain: sqrt(1 + var(chain means) / mean(chain variances)).
  double means[4], vars[4];
  for (int c = 0; c < 4; ++c) {
    double s = 0;
    for (int t = 0; t < 1000; ++t) s += tv.x[c * 1000 + t];
    means[c] = s / 1000;
    double v = 0;
    for (int t = 0; t < 1000; ++t) v += (tv.x[c * 1000 + t] - means[c]) * (tv.x[c * 1000 + t] - means[c]);
    vars[c] = v / 999;
  }
  const double mm = (means[0] + means[1] + means[2] + means[3]) / 4;
  double vb = 0;
  for (double mu : means) vb += (mu - mm) * (mu - mm);
  vb /= 3;
  const double wv = (vars[0] + vars[1] + vars[2] + vars[3]) / 4;
  CHECK_REL(m::nested_rhat(DrawsView(tv.x, 4, 1000), 4), std::sqrt(1 + vb / wv));
  // Superchains with equal means (the same chains in another order): exactly 1.
  std::vector<double> x;
  for (int c : {0, 1, 1, 0}) x.insert(x.end(), tv.x.begin() + c * 1000, tv.x.begin() + c * 1000 + 1000);
  CHECK(m::nested_rhat(DrawsView(x, 4, 1000), 2) == 1.0);
  // Many short chains (1024 chains x 10 draws): 16 superchains of 64 chains. Converged
  // (all from one AR(1)) gives ~1; superchains started apart (offsets) give >> 1.
  const auto conv = herd_test::lcg_ar1(1024, 10, 0.3, 99, 0.0);
  const double r_conv = m::nested_rhat(DrawsView(conv, 1024, 10), 16);
  CHECK(r_conv < 1.01);
  auto apart = conv;
  for (std::size_t c = 0; c < 1024; ++c) {
    const std::size_t superchain = c / 64;  // chain c's superchain: its offset is 0.5 per superchain
    for (std::size_t t = 0; t < 10; ++t) apart[c * 10 + t] += 0.5 * static_cast<double>(superchain);
  }
  CHECK(m::nested_rhat(DrawsView(apart, 1024, 10), 16) > 1.5);
  // One draw per chain (N = 1): within-chain variance is 0, the between-chain part remains.
  CHECK(std::isfinite(m::nested_rhat(DrawsView(conv, 1024 * 10 / 4, 4), 10)));
  CHECK_THROWS_AS(m::nested_rhat(DrawsView(conv, 1024, 10), 3), herd::InputError);
  CHECK_THROWS_AS(m::nested_rhat(DrawsView(conv, 1024, 10), 1), herd::InputError);
}

TEST_CASE("ParaDRAM refinement: weights, rounds, stopping rule", "[mcmc]") {
  namespace m = herd::mcmc;
  const std::vector<std::int64_t> w{5, 0, 1, 3, 1};
  CHECK(m::refined_weights(w, 1.0) == w);
  // ParaMonte's getRefinedWeight keeps verbose positions skip, 2 skip, ... (its doc comment's
  // example, 3 0 0 2 0, starts at position 1 instead; its code, followed here, does not).
  CHECK(m::refined_weights(w, 2.0) == std::vector<std::int64_t>{2, 0, 1, 1, 1});
  CHECK(m::refined_weights(w, 3.0) == std::vector<std::int64_t>{1, 0, 1, 1, 0});
  CHECK(m::refined_weights(w, 2.5) == std::vector<std::int64_t>{2, 0, 0, 1, 1});
  CHECK_THROWS_AS(m::refined_weights(w, 0.5), herd::InputError);
  // A strongly correlated AR(1) chain (2 variables), compact with weights 1..3.
  const auto x = herd_test::lcg_ar1(2, 20000, 0.95, 5, 0.0);
  std::vector<double> states(2 * 20000);
  std::vector<std::int64_t> wt(20000);
  for (std::size_t i = 0; i < 20000; ++i) {
    states[2 * i] = x[i];
    states[2 * i + 1] = x[20000 + i];
    wt[i] = static_cast<std::int64_t>(i % 3 + 1);
  }
  const auto r = m::refine_sample(states, wt, 2);
  REQUIRE(r.rounds.size() >= 3);
  CHECK_FALSE(r.rounds.front().verbose_stage);
  CHECK(r.rounds.back().verbose_stage);
  CHECK(r.rounds.front().iac_summary > 2.0);
  CHECK(r.rounds.back().iac_summary < 2.0);
  CHECK(r.rounds.front().compact_size == 20000);
  CHECK(r.rounds.front().verbose_size == 39999);
  std::int64_t total = 0;
  for (std::int64_t v : r.weight) total += v;
  CHECK(total == r.rounds.back().verbose_size);
  CHECK(r.index.size() == r.rounds.back().compact_size);
  for (std::size_t k = 1; k < r.index.size(); ++k) CHECK(r.index[k] > r.index[k - 1]);
  // Every round's IAC is the batch-means IAC of that round's chain; the sample shrinks.
  for (std::size_t k = 1; k < r.rounds.size(); ++k) CHECK(r.rounds[k].verbose_size <= r.rounds[k - 1].verbose_size);
  // Batch means against the formula written out (b = floor(W^0.666666666666666) = 2154,
  // 46 batches); numpy gives 1.64442216507178 on this LCG stream.
  const auto wn = herd_test::lcg_ar1(1, 100000, 0.0, 3, 0.0);
  CHECK(m::batch_means_iac(wn) == Approx(1.64442216507178).epsilon(1e-12));
  CHECK(m::batch_means_iac(std::span(wn).first(3)) == 1.0);
}

TEST_CASE("concurrent calls on several threads give the serial results", "[mcmc]") {
  std::vector<herd::mcmc::DiagnosticSummary> serial(5), par(5);
  std::vector<herd_test::TestVector> tvs;
  for (int k = 1; k <= 5; ++k) tvs.push_back(test_vector(k));
  for (int k = 0; k < 5; ++k) serial[k] = herd::mcmc::summarize(DrawsView(tvs[k].x, tvs[k].m, tvs[k].n));
  std::vector<std::thread> threads;
  threads.reserve(5);
  for (int k = 0; k < 5; ++k)
    threads.emplace_back([&, k] { par[k] = herd::mcmc::summarize(DrawsView(tvs[k].x, tvs[k].m, tvs[k].n)); });
  for (auto& t : threads) t.join();
  herd::mcmc::release_diagnostics_workspace();
  CHECK(herd::mcmc::summarize(DrawsView(tvs[4].x, tvs[4].m, tvs[4].n)).ess_bulk == serial[4].ess_bulk);
  for (int k = 0; k < 5; ++k) {
    CHECK(par[k].rhat == serial[k].rhat);
    CHECK(par[k].ess_bulk == serial[k].ess_bulk);
    CHECK(par[k].mcse_q95 == serial[k].mcse_q95);
  }
}

TEST_CASE("bulk R-hat of a large input (staged scatter) equals the formula written out", "[mcmc]") {
  // 8 chains x 40001 draws (odd: middle draws dropped), rounded to 1/64 so there are ties.
  const std::size_t m = 8, n = 40001, h = n / 2;
  auto x = herd_test::lcg_ar1(m, n, 0.7, 2024, 0.01);
  for (double& v : x) v = std::round(v * 64.0) / 64.0;
  // Split, rank with average ties, z = qnorm((r - 3/8) / (S + 1/4)), split R-hat.
  std::vector<double> sp(2 * m * h);
  for (std::size_t c = 0; c < m; ++c)
    for (std::size_t t = 0; t < h; ++t) {
      sp[2 * c * h + t] = x[c * n + t];
      sp[(2 * c + 1) * h + t] = x[c * n + n - h + t];
    }
  std::vector<std::size_t> idx(sp.size());
  for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  std::sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) { return sp[a] < sp[b]; });
  std::vector<double> z(sp.size());
  const double s = static_cast<double>(sp.size());
  for (std::size_t i = 0; i < idx.size();) {
    std::size_t j = i;
    while (j < idx.size() && sp[idx[j]] == sp[idx[i]]) ++j;
    const double r = 0.5 * static_cast<double>(i + 1 + j);
    const double zz = boost::math::quantile(boost::math::normal(), (r - 0.375) / (s + 0.25));
    for (std::size_t k = i; k < j; ++k) z[idx[k]] = zz;
    i = j;
  }
  std::vector<double> means(2 * m), vars(2 * m);
  for (std::size_t c = 0; c < 2 * m; ++c) {
    double mu = 0;
    for (std::size_t t = 0; t < h; ++t) mu += z[c * h + t];
    mu /= static_cast<double>(h);
    double v = 0;
    for (std::size_t t = 0; t < h; ++t) v += (z[c * h + t] - mu) * (z[c * h + t] - mu);
    means[c] = mu;
    vars[c] = v / static_cast<double>(h - 1);
  }
  double mm = 0, w = 0;
  for (std::size_t c = 0; c < 2 * m; ++c)
    mm += means[c] / static_cast<double>(2 * m), w += vars[c] / static_cast<double>(2 * m);
  double b = 0;
  for (double mu : means) b += (mu - mm) * (mu - mm);
  b = static_cast<double>(h) * b / static_cast<double>(2 * m - 1);
  const double nd = static_cast<double>(h);
  const double expected = std::sqrt((b / w + nd - 1.0) / nd);
  CHECK_THAT(herd::mcmc::rhat_bulk(DrawsView(x, m, n)), Catch::Matchers::WithinRel(expected, 1e-12));
}

TEST_CASE("summarize_all on several threads gives one thread's results, bit for bit", "[mcmc]") {
  // Quantities of different shapes and costs: the five test vectors, two large inputs of one
  // draw count (the second reuses the first's normal-quantile table on the same thread), one
  // with ties and an odd draw count, and a constant one (NaN diagnostics).
  std::vector<std::vector<double>> values;
  std::vector<std::pair<std::size_t, std::size_t>> shape;
  for (int k = 1; k <= 5; ++k) {
    const auto tv = test_vector(k);
    values.push_back(tv.x);
    shape.emplace_back(tv.m, tv.n);
  }
  values.push_back(herd_test::lcg_ar1(6, 50000, 0.9, 7, 0.0));
  shape.emplace_back(6, 50000);
  values.push_back(herd_test::lcg_ar1(6, 50000, 0.3, 8, 0.0));
  shape.emplace_back(6, 50000);
  auto ties = herd_test::lcg_ar1(4, 30001, 0.6, 9, 0.0);
  for (double& v : ties) v = std::round(v * 32.0) / 32.0;
  values.push_back(ties);
  shape.emplace_back(4, 30001);
  values.emplace_back(2 * 100, 1.5);
  shape.emplace_back(2, 100);
  const auto view = [&](std::size_t q, std::vector<double>& buffer) {
    buffer = values[q];  // through the thread's buffer, as herd-diagnose does
    return DrawsView(buffer, shape[q].first, shape[q].second);
  };
  std::vector<herd::mcmc::DiagnosticSummary> one;
  for (std::size_t q = 0; q < values.size(); ++q) {
    herd::mcmc::release_diagnostics_workspace();  // each reference from a fresh workspace
    one.push_back(herd::mcmc::summarize(DrawsView(values[q], shape[q].first, shape[q].second)));
  }
  CHECK(std::isnan(one.back().rhat));
  CHECK(one.back().sd == 0.0);
  const auto bits = herd::mcmc::testing::summary_bits;
  for (std::size_t threads : {1, 2, 3, 0}) {
    INFO("threads " << threads);
    const auto all = herd::mcmc::summarize_all(values.size(), view, threads);
    REQUIRE(all.size() == values.size());
    for (std::size_t q = 0; q < values.size(); ++q) {
      INFO("quantity " << q);
      CHECK(bits(all[q]) == bits(one[q]));
    }
  }
  // An exception of one quantity's draws reaches the caller.
  CHECK_THROWS_WITH(herd::mcmc::summarize_all(
                        4,
                        [&](std::size_t q, std::vector<double>& buffer) {
                          if (q == 2) throw herd::InputError("quantity 2 is unreadable");
                          return view(q, buffer);
                        },
                        2),
                    "quantity 2 is unreadable");
  CHECK(herd::mcmc::summarize_all(0, view, 2).empty());
}

TEST_CASE(
    "summarize_all of weighted views in the callback's buffer: summarize's bits, no z-scores per state of "
    "its own",
    "[mcmc]") {
  // summarize_all lends a weighted view's values buffer (the one given to the callback) to
  // summarize, which writes the z-scores per state there once the values are read no more,
  // instead of into a buffer of the workspace (8 bytes per state). Views of every path: a
  // stored split layout (few draws), split chains generated window by window (past
  // detail::stored_split_limit), odd and even draw counts, several chains, ties, and one view
  // whose values are not in the buffer (the callback's own, which must stay untouched).
  std::vector<CompactColumn> cols;
  const auto wt = [](std::size_t c, std::size_t i) { return static_cast<std::int64_t>((i * 7 + c * 3 + i / 11) % 5); };
  const std::vector<double> ar = herd_test::lcg_ar1(3, 120000, 0.8, 31, 0.0);
  const auto from_ar = [&](std::size_t c, std::size_t i) { return ar[c * 120000 + i % 120000]; };
  cols.push_back(compact_column(1, 1001, from_ar, wt));
  cols.push_back(compact_column(3, 200001, from_ar, wt));
  cols.push_back(compact_column(2, 300000, from_ar, wt));
  cols.push_back(compact_column(
      2, 99999, [&](std::size_t c, std::size_t i) { return std::round(from_ar(c, i) * 8.0) / 8.0; }, wt));
  const std::vector<double> own = cols[1].values;  // the view of quantity 4: not in the buffer
  const auto view = [&](std::size_t q, std::vector<double>& buffer) {
    if (q == cols.size()) return DrawsView(own, cols[1].weights, cols[1].m, cols[1].d);
    buffer = cols[q].values;
    return DrawsView(buffer, cols[q].weights, cols[q].m, cols[q].d);
  };
  std::vector<herd::mcmc::DiagnosticSummary> one;
  for (const auto& col : cols) {
    herd::mcmc::release_diagnostics_workspace();
    one.push_back(herd::mcmc::summarize(col.weighted()));
  }
  one.push_back(one[1]);
  const auto bits = herd::mcmc::testing::summary_bits;
  for (std::size_t threads : {1, 2, 3}) {
    INFO("threads " << threads);
    herd::mcmc::release_diagnostics_workspace();
    const auto all = herd::mcmc::summarize_all(one.size(), view, threads);
    REQUIRE(all.size() == one.size());
    for (std::size_t q = 0; q < one.size(); ++q) {
      INFO("quantity " << q);
      CHECK(bits(all[q]) == bits(one[q]));
    }
    CHECK(own == cols[1].values);
  }
  // Memory: one thread, the last quantity's values in the buffer: the workspace holds the z
  // table (1.25 bytes per draw) and the sort records with their counts (13 bytes per state), no
  // z-scores per state (8 more per state of positive weight; summarize() of the same view
  // holds them).
  const CompactColumn& big = cols[2];
  const double s = static_cast<double>(big.m * big.n), k = static_cast<double>(big.values.size());
  REQUIRE(s > static_cast<double>(herd::mcmc::detail::stored_split_limit().load()));
  constexpr double kSlack = 1 << 20;
  const auto only_big = [&](std::size_t /*q*/, std::vector<double>& buffer) {
    buffer = big.values;
    return DrawsView(buffer, big.weights, big.m, big.d);
  };
  herd::mcmc::release_diagnostics_workspace();
  CHECK(bits(herd::mcmc::summarize_all(1, only_big, 1)[0]) == bits(one[2]));
  const auto lent = static_cast<double>(herd::mcmc::diagnostics_workspace_bytes());
  herd::mcmc::release_diagnostics_workspace();
  (void)herd::mcmc::summarize(big.weighted());
  const auto own_slots = static_cast<double>(herd::mcmc::diagnostics_workspace_bytes());
  INFO("lent: " << lent << " bytes, own: " << own_slots << " bytes, S = " << s << ", K = " << k);
  CHECK(lent >= 1.25 * s + 13.0 * k);
  CHECK(lent <= 1.3 * s + 13.0 * k + kSlack);
  const auto slots = static_cast<double>(
      std::count_if(big.weights.begin(), big.weights.end(), [](std::int64_t w) { return w > 0; }));  // even n: no cut
  CHECK(own_slots - lent >= 8.0 * slots);
  herd::mcmc::release_diagnostics_workspace();
}

TEST_CASE("summarize_all's threads share their rank buffers: none in a thread's workspace between quantities",
          "[mcmc]") {
  // 6 quantities (AR(1) series of different memory) as weighted views of K states of weights
  // 1..5 (S = 3 K draws, past stored_split_limit), on 2 threads. Each thread's workspace,
  // read when the callback asks for its next quantity, holds no sort records, draws per slot
  // or radix scratch (13 bytes per state: 2.6 MB here, past the bound) and no z table (1.25
  // per draw): they are summarize_all's, one set for both threads, lent for each quantity's
  // rank part. What is left is per draw of a split chain at most the packed indicators'
  // 1 / 8 byte and the few buffers of the ESS's lags. The results are one thread's, bit for bit.
  constexpr std::size_t kStates = 200000, kQuantities = 6;
  std::vector<std::int64_t> w(kStates);
  for (std::size_t i = 0; i < kStates; ++i) w[i] = static_cast<std::int64_t>(1 + i % 5);
  std::vector<std::vector<double>> values;
  for (std::size_t q = 0; q < kQuantities; ++q)
    values.push_back(herd_test::lcg_ar1(1, kStates, 0.15 * static_cast<double>(q), 100 + q, 0.0));
  const double s = 3.0 * static_cast<double>(kStates), k = static_cast<double>(kStates);
  REQUIRE(s > static_cast<double>(herd::mcmc::detail::stored_split_limit().load()));
  std::mutex mu;
  std::vector<std::thread::id> seen;  // threads that have summarized a quantity
  std::vector<double> later;          // a thread's workspace bytes before its second and later quantities
  const auto view = [&](std::size_t q, std::vector<double>& buffer) {
    {
      const std::lock_guard<std::mutex> lock(mu);
      const auto id = std::this_thread::get_id();
      if (std::find(seen.begin(), seen.end(), id) != seen.end())
        later.push_back(static_cast<double>(herd::mcmc::diagnostics_workspace_bytes()));
      else seen.push_back(id);
    }
    buffer = values[q];
    return DrawsView(buffer, w, 1, kStates);
  };
  std::vector<herd::mcmc::DiagnosticSummary> one;
  for (std::size_t q = 0; q < kQuantities; ++q) {
    herd::mcmc::release_diagnostics_workspace();
    one.push_back(herd::mcmc::summarize(DrawsView(values[q], w, 1, kStates)));
  }
  herd::mcmc::release_diagnostics_workspace();
  const auto all = herd::mcmc::summarize_all(kQuantities, view, 2);
  REQUIRE(all.size() == kQuantities);
  for (std::size_t q = 0; q < kQuantities; ++q) {
    INFO("quantity " << q);
    CHECK(herd::mcmc::testing::summary_bits(all[q]) == herd::mcmc::testing::summary_bits(one[q]));
  }
  REQUIRE(later.size() == kQuantities - seen.size());
  REQUIRE(!later.empty());
  constexpr double kSlack = 1 << 20;
  for (const double bytes : later) {
    INFO("a thread's workspace between quantities: " << bytes << " bytes, S = " << s << ", K = " << k);
    CHECK(bytes <= 0.125 * s + kSlack);
    CHECK(bytes < 13.0 * k);  // (the bound above is below one set of rank buffers)
  }
  herd::mcmc::release_diagnostics_workspace();
}

TEST_CASE("packed indicators: pairs of ones k draws apart by popcount equal the double loop", "[mcmc]") {
  namespace d = herd::mcmc::detail;
  std::mt19937_64 rng(20261205);
  // Lengths around and off multiples of 64; densities from sparse to dense ones.
  for (std::size_t n : {1u, 2u, 63u, 64u, 65u, 127u, 128u, 129u, 200u, 1000u, 4099u}) {
    for (double p1 : {0.03, 0.5, 0.97}) {
      INFO("n " << n << " density " << p1);
      std::bernoulli_distribution one(p1);
      std::vector<double> x(n);
      for (double& v : x) v = one(rng) ? -1.0 : 1.0;  // I(x <= 0)
      std::vector<std::uint64_t> bits(d::indicator_words(n), ~std::uint64_t{0});
      REQUIRE(bits.size() == (n + 63) / 64 + 1);
      d::pack_indicator(x.data(), n, 0.0, bits.data());
      for (std::size_t t = 0; t < 64 * bits.size(); ++t) {
        const bool bit = (bits[t / 64] >> (t % 64)) & 1U;
        if (bit != (t < n && x[t] <= 0.0)) FAIL("bit " << t << " is " << bit);
      }
      // All lags at once, and the same lags from a block starting past 0.
      std::vector<std::uint64_t> all(n), part(n);
      d::indicator_lag_counts(bits.data(), n, 0, n, all.data());
      const std::size_t k0 = n / 3;
      d::indicator_lag_counts(bits.data(), n, k0, n, part.data());
      for (std::size_t k = 0; k < n; ++k) {
        double want = 0;  // written out on the 0/1 values
        for (std::size_t t = 0; t + k < n; ++t) want += (x[t] <= 0.0 ? 1.0 : 0.0) * (x[t + k] <= 0.0 ? 1.0 : 0.0);
        if (static_cast<double>(all[k]) != want) FAIL("lag " << k << ": " << all[k] << " pairs, want " << want);
        if (k >= k0 && part[k - k0] != all[k]) FAIL("lag " << k << " from a block at " << k0 << ": " << part[k - k0]);
      }
    }
  }
}

namespace {
/// m chains of n indicators I(x <= q) of an AR(1) series (phi) as 0/1 doubles [m, n] and
/// packed [m, indicator_words(n)].
void ar1_indicators(std::size_t m, std::size_t n, double phi, double q, std::uint64_t seed, std::vector<double>& vals,
                    std::vector<std::uint64_t>& bits) {
  namespace d = herd::mcmc::detail;
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  std::vector<double> x(n);
  const std::size_t wpc = d::indicator_words(n);
  vals.assign(m * n, 0.0);
  bits.assign(m * wpc, 0);
  for (std::size_t c = 0; c < m; ++c) {
    double v = normal(rng) / std::sqrt(1.0 - phi * phi);
    for (std::size_t t = 0; t < n; ++t) {
      x[t] = v = phi * v + normal(rng);
      vals[c * n + t] = x[t] <= q ? 1.0 : 0.0;
    }
    d::pack_indicator(x.data(), n, q, bits.data() + c * wpc);
  }
}
}  // namespace

TEST_CASE("ESS of packed indicators equals ess_chains of the 0/1 draws", "[mcmc]") {
  namespace d = herd::mcmc::detail;
  d::Workspace& ws = d::workspace();
  std::vector<double> vals;
  std::vector<std::uint64_t> bits;
  struct Case {
    std::size_t m, n;
    double phi, q;
  };
  // Short and long chains, lengths off multiples of 64, tails and the middle, white noise to
  // strong memory (lags summed directly up to the FFT switch of ess_chains and past it).
  for (const Case& k : {Case{2, 3, 0.0, 0.0}, Case{4, 37, 0.3, 0.5}, Case{2, 1001, 0.5, -1.6}, Case{8, 5000, 0.9, 1.6},
                        Case{2, 100003, 0.95, -1.0}, Case{3, 20011, 0.0, 0.2}, Case{1, 65, 0.7, 0.0}}) {
    INFO("m " << k.m << " n " << k.n << " phi " << k.phi << " q " << k.q);
    ar1_indicators(k.m, k.n, k.phi, k.q, 77 + k.n, vals, bits);
    const double want = d::ess_chains(vals.data(), k.m, k.n, ws);
    REQUIRE(std::isfinite(want));
    const double got = d::ess_indicator_bits(bits.data(), k.m, k.n, ws);
    CHECK_THAT(got, Catch::Matchers::WithinRel(want, 1e-12));
  }
  // Geyer's sequence past 2048 lags: every lag from the FFT, as ess_chains takes them.
  ar1_indicators(2, 200000, 0.9995, 0.0, 5, vals, bits);
  const double want = d::ess_chains(vals.data(), 2, 200000, ws);
  CHECK_THAT(d::ess_indicator_bits(bits.data(), 2, 200000, ws), Catch::Matchers::WithinRel(want, 1e-12));
  CHECK(std::isnan(d::ess_indicator_bits(bits.data(), 2, 2, ws)));
}

TEST_CASE("tail ESS and quantile MCSE from packed indicators equal the formula on 0/1 draws", "[mcmc]") {
  // summarize's ess_tail and ess_quantile against ess_chains of the split 0/1 indicators
  // (the unpacked computation), odd and even draw counts, weighted and not.
  namespace d = herd::mcmc::detail;
  for (std::size_t n : {4001u, 4000u}) {
    const std::size_t m = 3, h = n / 2;
    const auto x = herd_test::lcg_ar1(m, n, 0.8, 4242, 0.05);
    const DrawsView v(x, m, n);
    const auto s = herd::mcmc::summarize(v);
    std::vector<double> split(2 * m * h);
    d::split_chains(x.data(), m, n, split.data());
    auto ess_at = [&](double q) {
      std::vector<double> ind(split.size());
      for (std::size_t i = 0; i < split.size(); ++i) ind[i] = split[i] <= q ? 1.0 : 0.0;
      return d::ess_chains(ind.data(), 2 * m, h, d::workspace());
    };
    const double e05 = ess_at(s.q5), e95 = ess_at(s.q95);
    INFO("n " << n);
    CHECK_THAT(s.ess_tail, Catch::Matchers::WithinRel(std::min(e05, e95), 1e-12));
    CHECK_THAT(herd::mcmc::ess_quantile(v, 0.05), Catch::Matchers::WithinRel(e05, 1e-12));
    CHECK_THAT(herd::mcmc::ess_quantile(v, 0.95), Catch::Matchers::WithinRel(e95, 1e-12));
  }
}

TEST_CASE("direct lags of several chains in half blocks equal direct_lags per chain in blocks of 32, bit for bit",
          "[mcmc]") {
  // ess_chains sums chain after chain in whole blocks of 32 lags from 0 (direct_lags);
  // direct_lags_chains sums 2 chains at a time in half blocks of 16 and may stop after any of
  // them. Every lag's sum must be the same bits: odd and even chain counts, series lengths
  // around the blocks (the last partial block lag by lag), ranges in steps of 16 lags.
  namespace d = herd::mcmc::detail;
  std::mt19937_64 rng(77);
  std::normal_distribution<double> normal;
  for (std::size_t m : {1u, 2u, 3u, 4u}) {
    for (std::size_t n : {1u, 15u, 16u, 17u, 31u, 32u, 33u, 47u, 48u, 63u, 64u, 65u, 100u, 1001u, 5003u}) {
      INFO("m " << m << ", n " << n);
      std::vector<double> y(m * n);
      for (double& v : y) v = normal(rng) - 0.2;
      const std::size_t k1 = std::min<std::size_t>(n, 200);
      const std::size_t blocks = (k1 + 31) / 32 * 32;
      std::vector<double> want(blocks + 1, 0.25);
      for (std::size_t c = 0; c < m; ++c) d::direct_lags(y.data() + c * n, n, 0, blocks, want.data());
      // In steps of 16 lags, and in one call.
      for (std::size_t step : {std::size_t{16}, std::size_t{48}, blocks}) {
        std::vector<double> got(blocks + 1, 0.25);
        for (std::size_t k = 0; k < blocks; k += step)
          d::direct_lags_chains(y.data(), m, n, k, std::min(k + step, blocks), got.data());
        for (std::size_t k = 0; k <= blocks; ++k) {
          if (std::bit_cast<std::uint64_t>(got[k]) != std::bit_cast<std::uint64_t>(want[k]))
            FAIL("step " << step << ", lag " << k << ": " << got[k] << ", want " << want[k]);
        }
      }
    }
  }
}

TEST_CASE("direct autocovariance lags (blocks of 32 by fused multiply-adds) equal the sums written out", "[mcmc]") {
  // acc[k] += sum_{t < n - k} z[t] z[t + k] for [k0, k1): series lengths around the block of
  // 32 lags and the 16 draws of a tile, ranges starting inside and ending off a block;
  // reference in long double, tolerance a few units of the terms' absolute sum's rounding.
  namespace d = herd::mcmc::detail;
  std::mt19937_64 rng(31);
  std::normal_distribution<double> normal;
  struct Range {
    std::size_t n, k0, k1;
  };
  for (const Range& r : {Range{1, 0, 1}, Range{5, 0, 5}, Range{31, 0, 31}, Range{32, 0, 32}, Range{33, 0, 33},
                         Range{47, 3, 40}, Range{100, 0, 64}, Range{100, 32, 100}, Range{1000, 0, 160},
                         Range{1000, 7, 77}, Range{5003, 64, 200}, Range{20011, 0, 96}}) {
    INFO("n " << r.n << " lags [" << r.k0 << ", " << r.k1 << ")");
    std::vector<double> z(r.n);
    for (double& v : z) v = normal(rng) + 0.3;  // not centred: large sums too
    std::vector<double> acc(r.n + 1, 0.5);
    d::direct_lags(z.data(), r.n, r.k0, r.k1, acc.data());
    for (std::size_t k = 0; k <= r.n; ++k) {
      if (k < r.k0 || k >= r.k1) {
        if (acc[k] != 0.5) FAIL("lag " << k << " outside the range was changed to " << acc[k]);
        continue;
      }
      long double want = 0.5L, abs_sum = 0;
      for (std::size_t t = 0; t + k < r.n; ++t) {
        const long double p = static_cast<long double>(z[t]) * static_cast<long double>(z[t + k]);
        want += p;
        abs_sum += std::fabs(p);
      }
      const long double err = std::fabs(static_cast<long double>(acc[k]) - want);
      if (err > 1e-13L * (abs_sum + 1.0L))
        FAIL("lag " << k << ": " << acc[k] << ", want " << static_cast<double>(want));
    }
  }
}

TEST_CASE("summarize's scratch: no buffer per draw of a weighted view but the z table", "[mcmc]") {
  // White noise (its autocorrelations die out at once: the ESS sums a few direct lags, no
  // FFT), 1 chain, as a weighted view of K states of weights 1..5 (S = 3 K draws) and as the
  // S draws themselves. A weighted view is never expanded and, past 2^18 split draws
  // (detail::stored_split_limit), its split layout is never stored: the workspace holds the
  // z table (1.25 bytes per draw, normal quantiles by rank: an 8-bit difference per entry and
  // a knot of 8 bytes per 32 entries), the z-scores per state (8), the sort records (key,
  // slot: 12) and the draws per slot (1), 21 bytes per state (and the records' block index,
  // 4 bytes per 64 records, instead of a cumulative count per record); the split chains are generated window by window
  // (a few thousand draws). An unweighted view holds the split draws (8 bytes per draw), the z table (1.25) and 12
  // bytes of sort record (key, position) per draw. The radix sort's scratch is its largest bucket (a few thousand
  // records), the folded records are scaled as they are merged, the ESS keeps only the lags it sums (a few dozen here).
  // The expansion of a weighted view or a split buffer would add 8 bytes per draw (2.4 MB here, past kSlack), one
  // record per draw of a weighted view 20, a radix scratch or buffer of folded records of all records 12 per state (1.2
  // MB) or 12 per draw, the ESS's autocovariance or Geyer sequence sized by the split chain 4 each (S / 2 values: 1.2
  // MB here).
  constexpr std::size_t kStates = 100000;
  const std::vector<double> x = herd_test::lcg_ar1(1, kStates, 0.0, 4242, 0.0);
  std::vector<std::int64_t> w(kStates);
  std::vector<double> verbose;
  for (std::size_t i = 0; i < kStates; ++i) {
    w[i] = static_cast<std::int64_t>(1 + i % 5);
    verbose.insert(verbose.end(), static_cast<std::size_t>(w[i]), x[i]);
  }
  const double s = static_cast<double>(verbose.size()), k = static_cast<double>(kStates);
  REQUIRE(s == 3.0 * k);
  constexpr double kSlack = 1 << 20;  // fixed-size parts: radix histogram, means, ...
  // Past the split draws that a weighted view's split layout is stored up to (2 MiB).
  REQUIRE(s > static_cast<double>(herd::mcmc::detail::stored_split_limit().load()));
  herd::mcmc::release_diagnostics_workspace();
  CHECK(herd::mcmc::diagnostics_workspace_bytes() == 0);
  const auto weighted = herd::mcmc::summarize(DrawsView(x, w, 1, kStates));
  const auto weighted_bytes = static_cast<double>(herd::mcmc::diagnostics_workspace_bytes());
  INFO("weighted: " << weighted_bytes << " bytes for S = " << s << " draws of K = " << k << " states");
  CHECK(weighted_bytes >= 1.25 * s + 21.0 * k);
  CHECK(weighted_bytes <= 1.3 * s + 21.0 * k + kSlack);
  // Twice the states (the chain twice over): 1.25 bytes more per draw added (the z table) and
  // 21 per state, the packed indicators' 1 / 4 per draw and the radix scratch's larger
  // buckets; a buffer per draw would add 8 more per draw.
  std::vector<double> x2 = x;
  x2.insert(x2.end(), x.begin(), x.end());
  std::vector<std::int64_t> w2 = w;
  w2.insert(w2.end(), w.begin(), w.end());
  herd::mcmc::release_diagnostics_workspace();
  (void)herd::mcmc::summarize(DrawsView(x2, w2, 1, 2 * kStates));
  const auto weighted_twice = static_cast<double>(herd::mcmc::diagnostics_workspace_bytes());
  INFO("weighted, twice the states: " << weighted_twice << " bytes");
  CHECK(weighted_twice - weighted_bytes >= 1.25 * s + 21.0 * k);
  CHECK(weighted_twice - weighted_bytes <= 1.75 * s + 21.25 * k);
  herd::mcmc::release_diagnostics_workspace();
  const auto expanded = herd::mcmc::summarize(DrawsView(verbose, 1, verbose.size()));
  const auto expanded_bytes = static_cast<double>(herd::mcmc::diagnostics_workspace_bytes());
  CHECK(expanded_bytes >= 21.25 * s);
  CHECK(expanded_bytes <= 21.3 * s + kSlack);
  CHECK(herd::mcmc::testing::summary_bits(weighted) == herd::mcmc::testing::summary_bits(expanded));
  // Twice the draws (the white noise twice over): the workspace grows by 21.25 bytes per draw
  // added, the packed indicators' 1 / 4 (bits and prefix counts) and the radix scratch's
  // larger buckets (about 1 / 4), the fixed parts cancel.
  // An ESS buffer sized by the split chain would add 4 per draw (1.2 MB here) per buffer.
  std::vector<double> twice = verbose;
  twice.insert(twice.end(), verbose.begin(), verbose.end());
  herd::mcmc::release_diagnostics_workspace();
  (void)herd::mcmc::summarize(DrawsView(twice, 1, twice.size()));
  const auto twice_bytes = static_cast<double>(herd::mcmc::diagnostics_workspace_bytes());
  INFO("bytes " << expanded_bytes << " for S draws, " << twice_bytes << " for 2 S");
  CHECK(twice_bytes - expanded_bytes >= 21.25 * s);
  CHECK(twice_bytes - expanded_bytes <= 22.0 * s);
  herd::mcmc::release_diagnostics_workspace();
  CHECK(herd::mcmc::diagnostics_workspace_bytes() == 0);
}

TEST_CASE("batch_means_iacs: every variable's batch_means_iac bit for bit, of chosen rows and weights", "[mcmc]") {
  // 4 variables x 5000 states: AR(1) series of different memory, one with an infinity.
  constexpr std::size_t kVars = 4, kRows = 5000;
  std::mt19937_64 gen(11);
  std::normal_distribution<double> z;
  std::vector<double> states(kVars * kRows);
  for (std::size_t v = 0; v < kVars; ++v) {
    double x = 0;
    for (std::size_t i = 0; i < kRows; ++i) {
      x = 0.3 * static_cast<double>(v) * x + z(gen);
      states[i * kVars + v] = x;
    }
  }
  std::vector<std::size_t> rows;
  std::vector<std::int64_t> weights;
  for (std::size_t i = 0; i < kRows; i += 1 + i % 3) {
    rows.push_back(i);
    weights.push_back(static_cast<std::int64_t>(i % 4));  // zeros included
  }
  const auto column = [&](std::size_t v, bool all) {
    std::vector<double> c;
    if (all)
      for (std::size_t i = 0; i < kRows; ++i) c.push_back(states[i * kVars + v]);
    else
      for (std::size_t r : rows) c.push_back(states[r * kVars + v]);
    return c;
  };
  const std::vector<double> every = herd::mcmc::batch_means_iacs(states, kVars);
  const std::vector<double> chosen = herd::mcmc::batch_means_iacs(states, kVars, rows, weights);
  const std::vector<double> batch7 = herd::mcmc::batch_means_iacs(states, kVars, rows, weights, 7);
  REQUIRE(every.size() == kVars);
  for (std::size_t v = 0; v < kVars; ++v) {
    INFO("variable " << v);
    CHECK(same_bits(every[v], herd::mcmc::batch_means_iac(column(v, true))));
    CHECK(same_bits(chosen[v], herd::mcmc::batch_means_iac(column(v, false), weights)));
    CHECK(same_bits(batch7[v], herd::mcmc::batch_means_iac(column(v, false), weights, 7)));
  }
  CHECK(every[3] > every[0]);  // more memory, longer IAC
  states[100 * kVars + 2] = std::numeric_limits<double>::infinity();
  const std::vector<double> with_inf = herd::mcmc::batch_means_iacs(states, kVars);
  CHECK(std::isnan(with_inf[2]));
  CHECK(same_bits(with_inf[1], every[1]));
  CHECK_THROWS_AS(herd::mcmc::batch_means_iacs(std::vector<double>(7), 2), herd::InputError);
  CHECK_THROWS_AS(herd::mcmc::batch_means_iacs(states, kVars, std::vector<std::size_t>{kRows}), herd::InputError);
  CHECK_THROWS_AS(herd::mcmc::batch_means_iacs(states, kVars, rows, std::vector<std::int64_t>(3, 1)), herd::InputError);
}

TEST_CASE("batch_means_iac of weighted states: bit for bit the batch sums of the position-divided walk", "[mcmc]") {
  // The batch of each run of equal draws was pos / b per run; it is now followed along the
  // runs. The reference below is the divided walk, on weights whose runs span several
  // batches, end exactly at batch ends, and leave a tail past nb * b.
  const herd::RngStream rng(20261205, 41);
  for (const std::size_t n : {std::size_t{7}, std::size_t{1000}, std::size_t{30011}}) {
    std::vector<double> x(n);
    std::vector<std::int64_t> w(n);
    for (std::size_t i = 0; i < n; ++i) {
      x[i] = rng.normal(2 * i) + (i % 5 == 0 ? 3.0 : 0.0);
      w[i] = i % 11 == 0 ? 57 + static_cast<std::int64_t>(i % 7) : 1 + static_cast<std::int64_t>(i * 5 % 6);
    }
    std::int64_t total = 0;
    for (auto v : w) total += v;
    for (const std::size_t batch : {std::size_t{0}, std::size_t{1}, std::size_t{3}, std::size_t{64}}) {
      INFO("n " << n << " batch size " << batch);
      const auto b = static_cast<std::int64_t>(
          batch > 0 ? static_cast<double>(batch) : std::floor(std::pow(static_cast<double>(total), 0.666666666666666)));
      const std::int64_t nb = total / b, neff = nb * b;
      if (nb < 2) continue;
      std::vector<double> sums(static_cast<std::size_t>(nb), 0.0);
      std::int64_t pos = 0;
      for (std::size_t i = 0; i < n && pos < neff; ++i) {
        std::int64_t take = std::min(w[i], neff - pos);
        while (take > 0) {
          const std::int64_t k = pos / b;
          const std::int64_t put = std::min((k + 1) * b - pos, take);
          sums[static_cast<std::size_t>(k)] += x[i] * static_cast<double>(put);
          pos += put;
          take -= put;
        }
      }
      double total_sum = 0;
      for (double& s : sums) {
        total_sum += s;
        s /= static_cast<double>(b);
      }
      const double avg = total_sum / static_cast<double>(neff);
      double avg_batch = 0;
      for (double s : sums) avg_batch += s;
      avg_batch /= static_cast<double>(nb);
      double var_batch = 0;
      for (double s : sums) var_batch += (s - avg_batch) * (s - avg_batch);
      var_batch /= static_cast<double>(nb - 1);
      double var_point = 0;
      pos = 0;
      for (std::size_t i = 0; i < n && pos < neff; ++i) {
        const std::int64_t take = std::min(w[i], neff - pos);
        var_point += (x[i] - avg) * (x[i] - avg) * static_cast<double>(take);
        pos += take;
      }
      var_point /= static_cast<double>(neff - 1);
      const double expected = static_cast<double>(b) * var_batch / var_point;
      const double got = herd::mcmc::batch_means_iac(x, w, batch);
      CHECK(std::bit_cast<std::uint64_t>(got) == std::bit_cast<std::uint64_t>(expected));
      CHECK(got > 0.5);
    }
  }
}

TEST_CASE("refine_sample: each round's IACs are batch_means_iac of the surviving columns, bit for bit", "[mcmc]") {
  // The refinement reads each row once for all its variables; the IACs must be those of
  // batch_means_iac over each variable's column (the compact stage unweighted, the verbose
  // stage weighted), NaN for a column with a non-finite value, whatever the other columns.
  const herd::RngStream rng(20261205, 43);
  const std::size_t n = 20000, nv = 4;
  std::vector<double> states(n * nv);
  std::vector<std::int64_t> w(n);
  double ar = 0;
  for (std::size_t i = 0; i < n; ++i) {
    ar = 0.9 * ar + rng.normal(i);  // autocorrelated: several thinning rounds
    states[i * nv] = ar;
    states[i * nv + 1] = ar + 0.5 * rng.normal(n + i);
    states[i * nv + 2] = rng.normal(2 * n + i);
    states[i * nv + 3] = i == 777 ? std::numeric_limits<double>::infinity() : 0.1 * ar;
    w[i] = 1 + static_cast<std::int64_t>(i * 7 % 5);
  }
  const auto column = [&](const std::vector<std::size_t>& rows, std::size_t v) {
    std::vector<double> c(rows.size());
    for (std::size_t k = 0; k < rows.size(); ++k) c[k] = states[rows[k] * nv + v];
    return c;
  };
  const auto bits = [](double x) { return std::bit_cast<std::uint64_t>(x); };
  for (const bool with_inf : {true, false}) {
    INFO("infinite draw in column 3: " << with_inf);
    if (!with_inf) states[777 * nv + 3] = 0.0;
    herd::mcmc::RefinementOptions ro;
    ro.summary = with_inf ? herd::mcmc::IacSummary::kMax : herd::mcmc::IacSummary::kAverage;
    const herd::mcmc::RefinedSample r = herd::mcmc::refine_sample(states, w, nv, ro);
    REQUIRE(r.rounds.size() >= 2);
    // Round 1: every state, unweighted (the compact stage).
    std::vector<std::size_t> all(n);
    for (std::size_t i = 0; i < n; ++i) all[i] = i;
    for (std::size_t v = 0; v < nv; ++v) {
      INFO("variable " << v);
      CHECK(bits(r.rounds[0].iac[v]) == bits(herd::mcmc::batch_means_iac(column(all, v))));
    }
    CHECK(std::isnan(r.rounds[0].iac[3]) == with_inf);
    CHECK(r.rounds[0].iac[0] > 5.0);  // AR(1) 0.9: IAC near (1 + 0.9) / (1 - 0.9) = 19
    // The last round, of the verbose stage: the surviving states with their refined weights.
    const auto& last = r.rounds.back();
    if (last.verbose_stage && last.compact_size == r.index.size())
      for (std::size_t v = 0; v < nv; ++v) {
        INFO("variable " << v << " (verbose stage)");
        CHECK(bits(last.iac[v]) == bits(herd::mcmc::batch_means_iac(column(r.index, v), r.weight)));
      }
  }
}

namespace {

/// ParaDRAM's refinement written out as refinement.hpp describes it, on gathered states:
/// the states with a positive weight, then rounds of batch_means_iacs (unweighted in the
/// compact stage) summarized by their average, median, minimum or maximum, thinned by
/// refined_weights; the compact stage then the verbose one (limit doubled), or one of them
/// alone (ParaMonte's "-compact" and "-verbose").
herd::mcmc::RefinedSample reference_refinement(const std::vector<double>& states, std::size_t nv,
                                               const std::vector<std::int64_t>& w,
                                               const herd::mcmc::RefinementOptions& ro) {
  herd::mcmc::RefinedSample r;
  const std::size_t n = states.size() / nv;
  for (std::size_t i = 0; i < n; ++i)
    if (w[i] > 0) {
      r.index.push_back(i);
      r.weight.push_back(w[i]);
    }
  if (r.index.size() == 1) return r;
  using herd::mcmc::RefinementStages;
  bool verbose = ro.stages == RefinementStages::kVerboseOnly;
  const bool one_stage = ro.stages != RefinementStages::kCompactThenVerbose;
  std::size_t limit = ro.max_rounds, thinnings = 0;
  for (;;) {
    herd::mcmc::RefinementRound round;
    round.verbose_stage = verbose;
    round.compact_size = r.index.size();
    for (std::int64_t x : r.weight) round.verbose_size += x;
    const std::span<const std::int64_t> weights =
        verbose ? std::span<const std::int64_t>(r.weight) : std::span<const std::int64_t>();
    if (ro.estimator == herd::mcmc::IacEstimator::kBatchMeans) {
      round.iac = herd::mcmc::batch_means_iacs(states, nv, r.index, weights);
    } else {
      for (std::size_t v = 0; v < nv; ++v) {
        std::vector<double> column;
        for (const std::size_t i : r.index) column.push_back(states[i * nv + v]);
        round.iac.push_back(herd::mcmc::autocorr_iac(ro.estimator == herd::mcmc::IacEstimator::kCutoffAutoCorr
                                                         ? herd::mcmc::AutocorrIac::kCutoff
                                                         : herd::mcmc::AutocorrIac::kMaxCumSum,
                                                     column, weights));
      }
    }
    double sum = 0;
    for (double x : round.iac) sum += x;
    std::vector<double> sorted = round.iac;
    std::sort(sorted.begin(), sorted.end());
    const std::size_t m = sorted.size();
    switch (ro.summary) {
      case herd::mcmc::IacSummary::kAverage:
        round.iac_summary = sum / static_cast<double>(m);
        break;
      case herd::mcmc::IacSummary::kMedian:
        round.iac_summary = m % 2 ? sorted[m / 2] : (sorted[m / 2 - 1] + sorted[m / 2]) / 2;
        break;
      case herd::mcmc::IacSummary::kMin:
        round.iac_summary = sorted.front();
        break;
      case herd::mcmc::IacSummary::kMax:
        round.iac_summary = sorted.back();
        break;
    }
    const double skip = round.iac_summary;
    r.rounds.push_back(round);
    if (!(skip >= 2.0) || thinnings >= limit) {
      if (verbose || one_stage) break;
      verbose = true;
      limit *= 2;
      continue;
    }
    const std::vector<std::int64_t> nw = herd::mcmc::refined_weights(r.weight, skip);
    herd::mcmc::RefinedSample next;
    for (std::size_t k = 0; k < nw.size(); ++k)
      if (nw[k] > 0) {
        next.index.push_back(r.index[k]);
        next.weight.push_back(nw[k]);
      }
    r.index = next.index;
    r.weight = next.weight;
    ++thinnings;
    if (r.index.size() <= 1) break;
  }
  return r;
}

}  // namespace

TEST_CASE("autocorr_iac: ParaMonte's cutoff and maximum-cumulative-sum IACs against the sums written out", "[mcmc]") {
  using herd::mcmc::AutocorrIac;
  // x = 1 2 3 4: centred -1.5 -0.5 0.5 1.5, rho = 1, 0.25, -0.3, -0.45; cutoff 2 / sqrt(4) = 1:
  // lag 1 is the first below it, so 2 (1 + 0.25) - 1 = 1.5; the cumulative sums 1, 1.25, 0.95,
  // 0.5 peak at 1.25: also 1.5.
  const std::vector<double> four{1, 2, 3, 4};
  CHECK(herd::mcmc::autocorr_iac(AutocorrIac::kCutoff, four) == Approx(1.5).epsilon(1e-14));
  CHECK(herd::mcmc::autocorr_iac(AutocorrIac::kMaxCumSum, four) == Approx(1.5).epsilon(1e-14));
  // An AR(1) series of 600 draws (phi 0.8): the normalized biased autocorrelation by direct
  // sums, then each estimator's rule by hand.
  const std::size_t n = 600;
  std::vector<double> x(n);
  std::uint64_t state = 12345;
  double ar = 0;
  for (std::size_t i = 0; i < n; ++i) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    const double u = static_cast<double>(state >> 11) * 0x1.0p-53 - 0.5;
    ar = 0.8 * ar + u;
    x[i] = ar;
  }
  double mean = 0;
  for (double v : x) mean += v;
  mean /= static_cast<double>(n);
  std::vector<double> rho(n);
  for (std::size_t k = 0; k < n; ++k) {
    double c = 0;
    for (std::size_t t = 0; t + k < n; ++t) c += (x[t] - mean) * (x[t + k] - mean);
    rho[k] = c;
  }
  for (std::size_t k = n; k-- > 0;) rho[k] /= rho[0];
  const double cutoff = 2.0 / std::sqrt(static_cast<double>(n));
  double sum = 0, best = -1e300, cut_iac = 0;
  bool cut = false;
  for (std::size_t k = 0; k < n; ++k) {
    sum += rho[k];
    best = std::max(best, sum);
    if (!cut && rho[k] < cutoff) {
      cut_iac = 2 * sum - 1;
      cut = true;
    }
  }
  REQUIRE(cut);
  CHECK(cut_iac > 5.0);  // (1 + 0.8) / (1 - 0.8) = 9 for the process
  CHECK(herd::mcmc::autocorr_iac(AutocorrIac::kCutoff, x) == Approx(cut_iac).epsilon(1e-10));
  CHECK(herd::mcmc::autocorr_iac(AutocorrIac::kMaxCumSum, x) == Approx(2 * best - 1).epsilon(1e-10));
  CHECK(2 * best - 1 >= cut_iac);
  // Weights repeat a value: the same as the series written out.
  std::vector<std::int64_t> w(n);
  std::vector<double> expanded;
  for (std::size_t i = 0; i < n; ++i) {
    w[i] = static_cast<std::int64_t>(i % 4);  // zeros too
    expanded.insert(expanded.end(), static_cast<std::size_t>(w[i]), x[i]);
  }
  for (const auto e : {AutocorrIac::kCutoff, AutocorrIac::kMaxCumSum}) {
    CHECK(herd::mcmc::autocorr_iac(e, x, w) == herd::mcmc::autocorr_iac(e, expanded));
    CHECK(std::isnan(herd::mcmc::autocorr_iac(e, std::vector<double>(5, 2.0))));  // zero variance
    CHECK(std::isnan(herd::mcmc::autocorr_iac(e, std::vector<double>{1.0, std::nan(""), 2.0})));
    CHECK(herd::mcmc::autocorr_iac(e, std::vector<double>{3.0}) == 1.0);
    CHECK_THROWS_AS(herd::mcmc::autocorr_iac(e, std::vector<double>{}), herd::InputError);
    CHECK_THROWS_AS(herd::mcmc::autocorr_iac(e, four, std::vector<std::int64_t>{1, 2}), herd::InputError);
    CHECK_THROWS_AS(herd::mcmc::autocorr_iac(e, four, std::vector<std::int64_t>{1, -1, 1, 1}), herd::InputError);
  }
}

TEST_CASE("parse_refinement_method: ParaMonte's estimator and qualifiers, refinement_method_name reads back",
          "[mcmc]") {
  using herd::mcmc::IacSummary;
  using herd::mcmc::RefinementStages;
  struct Case {
    const char* text;
    IacSummary summary;
    RefinementStages stages;
    const char* name;
  };
  const Case ok[] = {
      {"BatchMeans", IacSummary::kAverage, RefinementStages::kCompactThenVerbose, "batch_means"},
      {"batch_means", IacSummary::kAverage, RefinementStages::kCompactThenVerbose, "batch_means"},
      {"BatchMeans-max", IacSummary::kMax, RefinementStages::kCompactThenVerbose, "batch_means-max"},
      {"batchmeans maximum", IacSummary::kMax, RefinementStages::kCompactThenVerbose, "batch_means-max"},
      {"BATCHMEANS-Compact", IacSummary::kAverage, RefinementStages::kCompactOnly, "batch_means-compact"},
      {"BatchMeans-verbose-median", IacSummary::kMedian, RefinementStages::kVerboseOnly, "batch_means-verbose-median"},
      {"batch_means-min-compact", IacSummary::kMin, RefinementStages::kCompactOnly, "batch_means-compact-min"},
      {" BatchMeans - avg ", IacSummary::kAverage, RefinementStages::kCompactThenVerbose, "batch_means"},
      {"CutOffAutoCorr", IacSummary::kAverage, RefinementStages::kCompactThenVerbose, "cutoff_autocorr"},
      {"MaxCumSumAutoCorr-median", IacSummary::kMedian, RefinementStages::kCompactThenVerbose,
       "max_cumsum_autocorr-median"},
      {"max_cumsum_autocorr-verbose", IacSummary::kAverage, RefinementStages::kVerboseOnly,
       "max_cumsum_autocorr-verbose"},
  };
  for (const Case& c : ok) {
    INFO(c.text);
    std::string why;
    const auto o = herd::mcmc::parse_refinement_method(c.text, why);
    REQUIRE(o);
    CHECK(why.empty());
    CHECK(o->summary == c.summary);
    CHECK(o->stages == c.stages);
    CHECK(o->max_rounds == 20);
    CHECK(herd::mcmc::refinement_method_name(*o) == c.name);
    const bool cutoff = std::string(c.name).rfind("cutoff", 0) == 0, cumsum = std::string(c.name).rfind("max_", 0) == 0;
    CHECK(o->estimator == (cutoff   ? herd::mcmc::IacEstimator::kCutoffAutoCorr
                           : cumsum ? herd::mcmc::IacEstimator::kMaxCumSumAutoCorr
                                    : herd::mcmc::IacEstimator::kBatchMeans));
    const auto back = herd::mcmc::parse_refinement_method(herd::mcmc::refinement_method_name(*o), why);
    REQUIRE(back);
    CHECK(back->summary == c.summary);
    CHECK(back->stages == c.stages);
    CHECK(back->estimator == o->estimator);
  }
  const std::pair<const char*, const char*> bad[] = {
      {"", "names no estimator"},
      {"-max", "\"max\" is not an estimator"},
      {"BatchMean", "\"batchmean\" is not an estimator"},
      {"MaxCumSum", "\"maxcumsum\" is not an estimator: expected BatchMeans, CutOffAutoCorr or MaxCumSumAutoCorr"},
      {"BatchMeans-maxx", "\"maxx\" is not a qualifier"},
      {"BatchMeans-max-min", "\"min\" is a second summary qualifier"},
      {"BatchMeans-compact-verbose", "\"verbose\" is a second chain qualifier"},
  };
  for (const auto& [text, want] : bad) {
    INFO(text);
    std::string why;
    CHECK_FALSE(herd::mcmc::parse_refinement_method(text, why));
    CHECK_THAT(why, Catch::Matchers::Contains(want));
  }
}

/// Summaries and stages the refinement tests run: ParaMonte's default, each other summary,
/// and each one-stage variant.
struct RefinementVariant {
  herd::mcmc::IacSummary summary;
  herd::mcmc::RefinementStages stages;
  herd::mcmc::IacEstimator estimator = herd::mcmc::IacEstimator::kBatchMeans;
};
const std::vector<RefinementVariant> refinement_variants{
    {herd::mcmc::IacSummary::kAverage, herd::mcmc::RefinementStages::kCompactThenVerbose},
    {herd::mcmc::IacSummary::kMax, herd::mcmc::RefinementStages::kCompactThenVerbose},
    {herd::mcmc::IacSummary::kMedian, herd::mcmc::RefinementStages::kCompactThenVerbose},
    {herd::mcmc::IacSummary::kMin, herd::mcmc::RefinementStages::kCompactThenVerbose},
    {herd::mcmc::IacSummary::kAverage, herd::mcmc::RefinementStages::kCompactOnly},
    {herd::mcmc::IacSummary::kMax, herd::mcmc::RefinementStages::kVerboseOnly},
    {herd::mcmc::IacSummary::kAverage, herd::mcmc::RefinementStages::kCompactThenVerbose,
     herd::mcmc::IacEstimator::kCutoffAutoCorr},
    {herd::mcmc::IacSummary::kMedian, herd::mcmc::RefinementStages::kCompactThenVerbose,
     herd::mcmc::IacEstimator::kMaxCumSumAutoCorr},
};

TEST_CASE("refine_sample, both overloads: the refinement written out, bit for bit, with zero weights and held rows",
          "[mcmc]") {
  // refine_sample thins the weights in place, makes no index of every state before the first
  // thinning, and (read by row) holds the rows only once few states are left; the result
  // must be what the plain algorithm gives: rows, weights and every round's IACs.
  const auto bits = [](const std::vector<double>& v) {
    std::vector<std::uint64_t> b(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) b[i] = std::bit_cast<std::uint64_t>(v[i]);
    return b;
  };
  for (const std::size_t nv : {std::size_t{2}, std::size_t{12}}) {  // rows held at the first thinning, or later
    const std::size_t n = 30000;
    const auto x = herd_test::lcg_ar1(nv, n, 0.95, 17, 0.0);
    std::vector<double> states(n * nv);
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t v = 0; v < nv; ++v) states[i * nv + v] = x[v * n + i];
    for (const int weights : {0, 1, 2}) {  // positive; some zero; empty (all 1)
      for (const auto& [summary, stages, estimator] : refinement_variants) {
        INFO("nv " << nv << ", weights " << weights << ", summary " << static_cast<int>(summary) << ", stages "
                   << static_cast<int>(stages) << ", estimator " << static_cast<int>(estimator));
        std::vector<std::int64_t> w(n);
        for (std::size_t i = 0; i < n; ++i) w[i] = static_cast<std::int64_t>(1 + i * 7 % 5);
        if (weights == 1)
          for (std::size_t i = 0; i < n; i += 3) w[i] = 0;
        std::vector<std::int64_t> given = w;
        if (weights == 2) {
          std::fill(w.begin(), w.end(), 1);
          given.clear();
        }
        herd::mcmc::RefinementOptions ro;
        ro.summary = summary;
        ro.stages = stages;
        ro.estimator = estimator;
        const herd::mcmc::RefinedSample ref = reference_refinement(states, nv, w, ro);
        REQUIRE(ref.rounds.size() >= (stages == herd::mcmc::RefinementStages::kCompactThenVerbose ? 3U : 2U));
        // Each stage that runs shows in the rounds, and only those.
        const bool any_compact = std::any_of(ref.rounds.begin(), ref.rounds.end(),
                                             [](const herd::mcmc::RefinementRound& x) { return !x.verbose_stage; });
        const bool any_verbose = std::any_of(ref.rounds.begin(), ref.rounds.end(),
                                             [](const herd::mcmc::RefinementRound& x) { return x.verbose_stage; });
        CHECK(any_compact == (stages != herd::mcmc::RefinementStages::kVerboseOnly));
        CHECK(any_verbose == (stages != herd::mcmc::RefinementStages::kCompactOnly));
        const herd::mcmc::RefinedSample gathered = herd::mcmc::refine_sample(states, given, nv, ro);
        const herd::mcmc::RefinedSample by_row = herd::mcmc::refine_sample(
            n, nv, [&](std::size_t i) { return states.data() + i * nv; }, given, ro);
        for (const herd::mcmc::RefinedSample* got : {&gathered, &by_row}) {
          CHECK(got->index == ref.index);
          CHECK(got->weight == ref.weight);
          REQUIRE(got->rounds.size() == ref.rounds.size());
          for (std::size_t k = 0; k < ref.rounds.size(); ++k) {
            INFO("round " << k);
            CHECK(got->rounds[k].verbose_stage == ref.rounds[k].verbose_stage);
            CHECK(got->rounds[k].compact_size == ref.rounds[k].compact_size);
            CHECK(got->rounds[k].verbose_size == ref.rounds[k].verbose_size);
            CHECK(bits(got->rounds[k].iac) == bits(ref.rounds[k].iac));
            CHECK(std::bit_cast<std::uint64_t>(got->rounds[k].iac_summary) ==
                  std::bit_cast<std::uint64_t>(ref.rounds[k].iac_summary));
          }
        }
      }
    }
  }
  // One state with a positive weight, and none.
  const std::vector<double> three{1.0, 2.0, 3.0};
  const herd::mcmc::RefinedSample one =
      herd::mcmc::refine_sample(3, 1, [&](std::size_t i) { return three.data() + i; }, {0, 4, 0});
  CHECK(one.index == std::vector<std::size_t>{1});
  CHECK(one.weight == std::vector<std::int64_t>{4});
  CHECK_THROWS_AS(herd::mcmc::refine_sample(3, 1, [&](std::size_t i) { return three.data() + i; }, {0, 0, 0}),
                  herd::InputError);
  CHECK_THROWS_AS(herd::mcmc::refine_sample(3, 1, [&](std::size_t i) { return three.data() + i; }, {1, -1, 0}),
                  herd::InputError);
}

TEST_CASE("refine_sample_out_of_core: the in-memory refinement's rounds, states and weights, bit for bit", "[mcmc]") {
  // The bounded path reads the weights per pass and keeps the states in play in scratch files
  // (index and weight, later with the rows); it must give refine_sample's result exactly, on
  // weighted chains (zero weights too) refined over several rounds, for d = 1 and d = 10
  // (log density and point: 2 and 11 values per state), whether the rows are kept at the
  // first thinning or later, and the scratch files must be gone when it returns.
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("herd_refine_ooc_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const auto bits = [](const std::vector<double>& v) {
    std::vector<std::uint64_t> b(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) b[i] = std::bit_cast<std::uint64_t>(v[i]);
    return b;
  };
  std::size_t cases = 0;
  for (const std::size_t nv : {std::size_t{2}, std::size_t{11}}) {
    for (const std::size_t n : {std::size_t{1}, std::size_t{700}, std::size_t{40000}}) {
      const auto x = herd_test::lcg_ar1(nv, n, 0.97, static_cast<double>(23 + n), 0.0);
      std::vector<double> states(n * nv);
      for (std::size_t i = 0; i < n; ++i)
        for (std::size_t v = 0; v < nv; ++v) states[i * nv + v] = x[v * n + i];
      for (const int weights : {0, 1, 2}) {  // 1..9; some zero; all 1
        for (const std::size_t rounds : {std::size_t{20}, std::size_t{1}}) {
          for (const auto& [summary, stages, estimator] : refinement_variants) {
            INFO("nv " << nv << ", n " << n << ", weights " << weights << ", rounds " << rounds << ", summary "
                       << static_cast<int>(summary) << ", stages " << static_cast<int>(stages) << ", estimator "
                       << static_cast<int>(estimator));
            std::vector<std::int64_t> w(n, 1);
            if (weights != 2)
              for (std::size_t i = 0; i < n; ++i) w[i] = static_cast<std::int64_t>(1 + (i * 2654435761U >> 7) % 9);
            if (weights == 1)
              for (std::size_t i = 1; i < n; i += 4) w[i] = 0;
            herd::mcmc::RefinementOptions ro;
            ro.summary = summary;
            ro.stages = stages;
            ro.estimator = estimator;
            ro.max_rounds = rounds;
            const herd::mcmc::RefinedSample want = herd::mcmc::refine_sample(states, w, nv, ro);
            std::size_t row_calls = 0;
            const herd::mcmc::RefinedStates got = herd::mcmc::refine_sample_out_of_core(
                n, nv,
                [&](std::size_t i, std::int64_t& wi) {
                  ++row_calls;
                  wi = w[i];
                  return states.data() + i * nv;
                },
                [&](std::size_t i) { return w[i]; }, dir.string(), ro);
            std::vector<std::size_t> index;
            std::vector<std::int64_t> weight;
            herd::mcmc::StateRecords::Reader rd(got.states);
            for (std::size_t k = 0; k < got.states.size(); ++k) {
              index.push_back(rd.index(k));
              weight.push_back(rd.weight(k));
            }
            CHECK(index == want.index);
            CHECK(weight == want.weight);
            std::int64_t total = 0;
            for (std::int64_t v : want.weight) total += v;
            CHECK(got.states.total_weight() == total);
            REQUIRE(got.rounds.size() == want.rounds.size());
            for (std::size_t k = 0; k < want.rounds.size(); ++k) {
              INFO("round " << k);
              CHECK(got.rounds[k].verbose_stage == want.rounds[k].verbose_stage);
              CHECK(got.rounds[k].compact_size == want.rounds[k].compact_size);
              CHECK(got.rounds[k].verbose_size == want.rounds[k].verbose_size);
              CHECK(bits(got.rounds[k].iac) == bits(want.rounds[k].iac));
              CHECK(std::bit_cast<std::uint64_t>(got.rounds[k].iac_summary) ==
                    std::bit_cast<std::uint64_t>(want.rounds[k].iac_summary));
            }
            // Each row read once per IAC pass (two per round with batch means, one per variable
            // with the autocorrelation estimators) and once to be kept: no more.
            const std::size_t passes = estimator == herd::mcmc::IacEstimator::kBatchMeans ? 2 : nv;
            CHECK(row_calls <= (passes * want.rounds.size() + 1) * n);
            if (n == 40000 && rounds == 20)
              CHECK(want.rounds.size() >= (stages == herd::mcmc::RefinementStages::kCompactThenVerbose ? 3U : 2U));
            CHECK(fs::is_empty(dir));  // unlinked at once
            ++cases;
          }
        }
      }
    }
  }
  CHECK(cases == 288);
  // One state with a positive weight; none; a negative weight; an unwritable folder.
  const std::vector<double> three{1.0, 2.0, 3.0};
  const std::vector<std::int64_t> w1{0, 4, 0}, w0{0, 0, 0}, wn{1, -1, 0}, w3{3, 1, 2};
  const auto run = [&](const std::vector<std::int64_t>& w, const std::string& folder) {
    return herd::mcmc::refine_sample_out_of_core(
        3, 1,
        [&](std::size_t i, std::int64_t& wi) {
          wi = w[i];
          return three.data() + i;
        },
        [&](std::size_t i) { return w[i]; }, folder);
  };
  const herd::mcmc::RefinedStates one = run(w1, dir.string());
  REQUIRE(one.states.size() == 1);
  herd::mcmc::StateRecords::Reader rd(one.states);
  CHECK(rd.index(0) == 1);
  CHECK(rd.weight(0) == 4);
  CHECK(one.rounds.empty());
  CHECK_THROWS_AS(run(w0, dir.string()), herd::InputError);
  CHECK_THROWS_AS(run(wn, dir.string()), herd::InputError);
  CHECK_THROWS_AS(run(w3, (dir / "missing" / "folder").string()), herd::IoError);
  fs::remove_all(dir);
}

TEST_CASE("summarize's scratch with the FFT: pieces of a few times the lags, no split buffer", "[mcmc]") {
  // AR(1) 0.999 (autocorrelation time about 2000: Geyer's sequence runs past the directly
  // summed lags, so the ESS takes its lags from the FFT in pieces), 1 chain, a weighted view
  // of K states of weights 1..5 (S = 3 K draws; 2 split chains of h = S / 2). The workspace
  // holds what the test above counts (1.25 bytes per draw, 21 per state) plus the piece
  // transforms of the lengths its passes used (16 bytes per point, 2P points for pieces of P
  // values, P a few times the lags) and their summed spectra (32 P bytes): 3 MiB at most
  // here, and no transform of the whole chains: the split chains are generated piece by piece
  // from the values per state, so a split buffer (8 bytes per draw: 2.4 MB here) or a
  // transform of fft_length(2 h) points (24 bytes per point: 7.2 MB) fails. The weighted
  // view's numbers are the expanded chain's, bit for bit.
  namespace d = herd::mcmc::detail;
  constexpr std::size_t kStates = 100000;
  const std::vector<double> x = herd_test::lcg_ar1(1, kStates, 0.999, 99, 0.0);
  std::vector<std::int64_t> w(kStates);
  std::vector<double> verbose;
  for (std::size_t i = 0; i < kStates; ++i) {
    w[i] = static_cast<std::int64_t>(1 + i % 5);
    verbose.insert(verbose.end(), static_cast<std::size_t>(w[i]), x[i]);
  }
  const double s = static_cast<double>(verbose.size()), k = static_cast<double>(kStates);
  constexpr double kSlack = 1 << 20;
  constexpr double kPieces = 3 << 20;
  REQUIRE(s > static_cast<double>(d::stored_split_limit().load()));
  herd::mcmc::release_diagnostics_workspace();
  const auto weighted = herd::mcmc::summarize(DrawsView(x, w, 1, kStates));
  const auto bytes = static_cast<double>(herd::mcmc::diagnostics_workspace_bytes());
  const d::Workspace& ws = d::workspace();
  std::size_t largest = 0;
  for (const d::RealFft& f : ws.piece_fft) largest = std::max(largest, f.length());
  INFO("bytes " << bytes << ", largest piece transform " << largest << " points");
  CHECK(largest > 0);           // the FFT was used
  CHECK(ws.fft.length() == 0);  // not on the whole chains
  CHECK(bytes >= 1.25 * s + 21.0 * k + 32.0 * static_cast<double>(largest));
  CHECK(bytes <= 1.3 * s + 21.0 * k + kPieces + kSlack);
  herd::mcmc::release_diagnostics_workspace();
  const auto expanded = herd::mcmc::summarize(DrawsView(verbose, 1, verbose.size()));
  CHECK(herd::mcmc::testing::summary_bits(weighted) == herd::mcmc::testing::summary_bits(expanded));
  herd::mcmc::release_diagnostics_workspace();
}

TEST_CASE("ess_series: the first pass's lag hint changes no bit, whatever it is", "[mcmc]") {
  // 3 chains of AR(1) 0.9 states of weights 1..4 (odd verbose length: the middle draws are
  // dropped), past stored_split_limit: Geyer's sequence stops after more than one pass of
  // kSeriesAhead lags and before the FFT. Every hint, below, at and past the stopping lag L
  // and past the directly summed lags, gives the stored layout's ESS and R-hat bit for bit,
  // and the same stopping lag.
  namespace d = herd::mcmc::detail;
  constexpr std::size_t kM = 3, kN = 200001;
  const std::vector<double> x = herd_test::lcg_ar1(kM, kN, 0.9, 4242, 0.05);
  const auto col = compact_column(
      kM, kN, [&](std::size_t c, std::size_t i) { return x[c * kN + i]; },
      [](std::size_t c, std::size_t i) { return static_cast<std::int64_t>(1 + (7 * i + c) % 4); });
  const DrawsView v = col.weighted();
  d::Workspace& ws = d::workspace();
  for (const auto kind : {d::SplitSeries::Kind::kState, d::SplitSeries::Kind::kSquare}) {
    const d::SplitSeries s(v, kind, nullptr, 0.01);
    const std::size_t m = s.chains(), h = s.length();
    std::vector<double> y(m * h);
    d::fill_series(s, y.data());
    std::vector<double> y2 = y;
    const double ess_ref = d::ess_chains_overwrite(y.data(), m, h, ws, true);
    double rhat_ref = 0, ess_ref2 = 0;
    d::rhat_ess_overwrite(y2.data(), m, h, ws, &rhat_ref, &ess_ref2);
    REQUIRE(same_bits(ess_ref, ess_ref2));
    REQUIRE(std::isfinite(ess_ref));
    CHECK(same_bits(d::ess_series(s, ws), ess_ref));
    const std::size_t lag = ws.geyer_lag;
    INFO("kind " << static_cast<int>(kind) << ", stopping lag " << lag);
    CHECK(lag > 64);   // more than one pass without a hint
    CHECK(lag < 160);  // no FFT (about 190 lags are summed directly here)
    for (const std::size_t hint : {std::size_t{1}, std::size_t{15}, std::size_t{16}, std::size_t{63}, lag - 9, lag - 1,
                                   lag, lag + 1, lag + 40, std::size_t{1000}, h}) {
      INFO("hint " << hint);
      CHECK(same_bits(d::ess_series(s, ws, false, hint), ess_ref));
      CHECK(ws.geyer_lag == lag);
      double rhat = 0, ess = 0;
      d::rhat_ess_series(s, ws, &rhat, &ess, false, hint);
      CHECK(same_bits(rhat, rhat_ref));
      CHECK(same_bits(ess, ess_ref));
      CHECK(ws.geyer_lag == lag);
    }
  }
  // summarize hands ess_mean's stopping lag to ess_sd and the bulk ESS: the expanded chain's numbers.
  const StoredSplitLimit set(0);
  check_weighted_equals_expanded_once(col);
  herd::mcmc::release_diagnostics_workspace();
}

TEST_CASE("ZQuantiles: each rank's normal quantile bit for bit, on first use and once stored", "[mcmc]") {
  // The table keeps most quantiles as 8-bit differences from a cubic through the knots (32
  // entries apart, 16 below 2^18 draws), and evaluates again those whose difference does not fit (the extreme
  // ranks, the entries around the median). Either way it must give boost's quantile under
  // the policy of the diagnostics (no promotion to long double), bit for bit: first in a
  // scattered order (evaluated, stored), then in order (read back from the differences).
  // S = 3.1e6 is a 1e6-state DRAM run's draw count; the small S cover tables with no knot
  // past the first block and entry S + 1 (the median, z = 0).
  using Policy =
      boost::math::policies::policy<boost::math::policies::domain_error<boost::math::policies::ignore_error>,
                                    boost::math::policies::overflow_error<boost::math::policies::ignore_error>,
                                    boost::math::policies::evaluation_error<boost::math::policies::ignore_error>,
                                    boost::math::policies::promote_double<false>>;
  for (const std::size_t s : {std::size_t{1}, std::size_t{2}, std::size_t{15}, std::size_t{16}, std::size_t{17},
                              std::size_t{1000}, std::size_t{99999}, std::size_t{1} << 18, std::size_t{3100000}}) {
    INFO("S = " << s);
    const auto want = [s](std::size_t i) {
      const double r = 0.5 * static_cast<double>(i);
      const double p = (r - 0.375) / (static_cast<double>(s) + 0.25);
      return std::bit_cast<std::uint64_t>(boost::math::quantile(boost::math::normal_distribution<double, Policy>(), p));
    };
    herd::mcmc::detail::ZQuantiles z;
    z.reset(s);
    CHECK(z.draws() == s);
    const double bytes = static_cast<double>(z.bytes()), n = static_cast<double>(s + 2);
    // 1 byte per entry and a knot of 8 per 32 entries (per 16 below 2^18 draws); 4 bytes per
    // entry of the tail (S / 64 entries, and at least 2 blocks).
    CHECK(bytes >= 1.0 * n);
    CHECK(bytes <= (s >= (std::size_t{1} << 18) ? 1.3 : 1.5625) * n + 320.0);
    const std::size_t count = s + 1;  // entries 1 .. S + 1
    std::size_t bad = 0;
    // A stride prime to count visits every entry once, far from the last one.
    std::size_t stride = 7919;
    while (std::gcd(stride, count) != 1) ++stride;
    for (std::size_t t = 0, i = 0; t < count; ++t, i = (i + stride) % count)
      bad += std::bit_cast<std::uint64_t>(z(i + 1)) != want(i + 1) ? 1 : 0;
    CHECK(bad == 0);
    for (std::size_t i = 1; i <= count; ++i) bad += std::bit_cast<std::uint64_t>(z(i)) != want(i) ? 1 : 0;
    CHECK(bad == 0);
    z.reset(s);  // the same S: kept
    CHECK(std::bit_cast<std::uint64_t>(z(count)) == want(count));
    // The same table on disk (every entry evaluated when it is made), read through a window:
    // in order, in reverse order (the mirrored half of a z-scaling) and scattered.
    const herd::mcmc::detail::ZQuantileFile file(s);
    CHECK(file.draws() == s);
    CHECK(static_cast<double>(file.file_bytes()) <= (s >= (std::size_t{1} << 18) ? 1.3 : 1.5625) * n + 320.0);
    herd::mcmc::detail::ZQuantileFile::Reader rd(file);
    for (std::size_t i = 1; i <= count; ++i) bad += std::bit_cast<std::uint64_t>(rd(i)) != want(i) ? 1 : 0;
    CHECK(bad == 0);
    for (std::size_t i = count; i >= 1; --i) bad += std::bit_cast<std::uint64_t>(rd(i)) != want(i) ? 1 : 0;
    CHECK(bad == 0);
    for (std::size_t t = 0, i = 0; t < count; ++t, i = (i + stride) % count)
      bad += std::bit_cast<std::uint64_t>(rd(i + 1)) != want(i + 1) ? 1 : 0;
    CHECK(bad == 0);
  }
}

namespace {
/// Sets diagnostics_rank_budget() for its lifetime, then restores it.
struct RankBudget {
  std::size_t saved;
  explicit RankBudget(std::size_t bytes) : saved(herd::mcmc::diagnostics_rank_budget()) {
    herd::mcmc::set_diagnostics_rank_budget(bytes);
  }
  ~RankBudget() { herd::mcmc::set_diagnostics_rank_budget(saved); }
  RankBudget(const RankBudget&) = delete;
  RankBudget& operator=(const RankBudget&) = delete;
};

/// A streamed view's reader of values (T = double) or weights (std::uint32_t) that copies
/// entries [first, first + out.size()) of `src`, which outlives it; with `in_range`, each
/// request is first checked to lie within `src` (*in_range cleared when one does not).
template <class T>
auto reader_of(const std::vector<T>& src, bool* in_range = nullptr) {
  return [&src, in_range](std::size_t first, std::span<T> out) {
    if (in_range != nullptr) *in_range = *in_range && first + out.size() <= src.size();
    std::copy_n(src.begin() + static_cast<std::ptrdiff_t>(first), out.size(), out.begin());
  };
}
}  // namespace

TEST_CASE("out-of-core rank side: the same bits as in memory (ties, weights, odd chains, runs)", "[mcmc]") {
  // Weighted views ranked in memory (the default budget) and out of core (budget 0: runs of
  // 256 records, hundreds of runs, and 32 KiB: runs of 1,024), compared field by field, bit
  // for bit: 1 to 4 chains of states with weights 0 to 9 and some heavier than 255 (the big
  // counts), odd and even verbose lengths (the middle draw's record cut off), values with
  // many ties (rounded to a few levels), continuous, two values, constant (quantiles only),
  // and past stored_split_limit (the split series generated per window).
  std::mt19937_64 rng(20261206);
  std::uniform_int_distribution<int> small(0, 9);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  int cases = 0;
  for (const std::size_t m : {1u, 2u, 3u, 4u}) {
    for (const std::size_t d : {1u, 7u, 700u, 3001u, 40000u}) {
      for (const int kind : {0, 1, 2, 3}) {  // continuous AR(1), ties, two values, constant
        if (d == 40000u && m > 2) continue;
        std::vector<double> x = herd_test::lcg_ar1(m, d, 0.7, 1000.0 + static_cast<double>(d + m), 0.0);
        for (double& v : x) {
          if (kind == 1) v = std::round(v * 3.0) / 3.0;
          else if (kind == 2) v = v < 0.0 ? -1.0 : 2.5;
          else if (kind == 3) v = 4.0;
        }
        // Weights: the first chain's sum, matched by the others through their last state.
        std::vector<std::int64_t> w(m * d);
        std::int64_t total = 0;
        for (std::size_t c = 0; c < m; ++c) {
          std::int64_t sum = 0;
          for (std::size_t t = 0; t < d; ++t) {
            std::int64_t wt = small(rng);
            if (unit(rng) < 0.01) wt = 256 + small(rng) * 40;
            if (c > 0 && t + 1 == d) wt = std::max<std::int64_t>(0, total - sum);
            w[c * d + t] = wt;
            sum += wt;
          }
          if (c == 0) {
            if (sum == 0) w[d - 1] = sum = 1;
            total = sum;
          } else if (sum != total) {  // the others' states past the first chain's sum: trim
            for (std::size_t t = 0; t < d && sum > total; ++t) {
              const std::int64_t cut = std::min(w[c * d + t], sum - total);
              w[c * d + t] -= cut;
              sum -= cut;
            }
          }
        }
        const DrawsView v(x, w, m, d);
        INFO("m " << m << " d " << d << " kind " << kind << " verbose " << v.verbose_draws());
        herd::mcmc::release_diagnostics_workspace();
        const auto mem = herd::mcmc::testing::summary_bits(herd::mcmc::summarize(v));
        // The same values streamed (read in blocks, never held): out of core whatever the
        // budget, its z-scores per state written back through buckets of 2^10 states and
        // more (budget 0: several buckets from 1,024 states on).
        bool in_range = true;
        const DrawsView streamed(reader_of(x, &in_range), v.weights(), m, d);
        // And with the weights read in blocks too (nothing per state held), from a copy that
        // the test keeps (the view's own weights are not read).
        const std::vector<std::uint32_t> wcopy(v.weights().begin(), v.weights().end());
        bool w_in_range = true;
        const DrawsView read_weights(reader_of(x), reader_of(wcopy, &w_in_range), m, d);
        CHECK(read_weights.weighted());
        CHECK(read_weights.streamed());
        CHECK(read_weights.weights().empty());
        CHECK(read_weights.verbose_draws() == v.verbose_draws());
        for (const std::size_t budget : {std::size_t{0}, std::size_t{32} << 10}) {
          INFO("budget " << budget);
          const RankBudget b(budget);
          const auto ooc = herd::mcmc::testing::summary_bits(herd::mcmc::summarize(v));
          CHECK(ooc == mem);
          CHECK(herd::mcmc::testing::summary_bits(herd::mcmc::summarize(streamed)) == mem);
          CHECK(herd::mcmc::testing::summary_bits(herd::mcmc::summarize(read_weights)) == mem);
        }
        {  // the split series generated per window (stored_split_limit 0) from the streamed
           // values: the in-memory view's bits on the same path (in 3 of the 72 views ess_sd's
           // last bits differ between the stored and the windowed path, in memory too)
          const std::size_t saved = herd::mcmc::detail::stored_split_limit().exchange(0);
          const auto windowed = herd::mcmc::testing::summary_bits(herd::mcmc::summarize(v));
          CHECK(herd::mcmc::testing::summary_bits(herd::mcmc::summarize(streamed)) == windowed);
          CHECK(herd::mcmc::testing::summary_bits(herd::mcmc::summarize(read_weights)) == windowed);
          herd::mcmc::detail::stored_split_limit().store(saved);
        }
        CHECK(in_range);
        CHECK(w_in_range);
        ++cases;
      }
    }
  }
  CHECK(cases == 72);
  // summarize_all on 2 threads with lent values buffers (the z-scores per slot in them),
  // out of core: one thread's in-memory results.
  constexpr std::size_t kStates = 50000, kQ = 5;
  std::vector<std::int64_t> w(kStates);
  for (std::size_t i = 0; i < kStates; ++i) w[i] = static_cast<std::int64_t>(i % 4);
  w[0] = 1;
  std::vector<std::vector<double>> values;
  for (std::size_t q = 0; q < kQ; ++q)
    values.push_back(herd_test::lcg_ar1(1, kStates, 0.2 * static_cast<double>(q), 50 + q, 0.0));
  std::vector<std::vector<std::uint64_t>> one;
  for (std::size_t q = 0; q < kQ; ++q)
    one.push_back(herd::mcmc::testing::summary_bits(herd::mcmc::summarize(DrawsView(values[q], w, 1, kStates))));
  const RankBudget b(std::size_t{64} << 10);
  std::vector<std::vector<double>> buffers;
  const auto all = herd::mcmc::summarize_all(
      kQ,
      [&](std::size_t q, std::vector<double>& buffer) {
        buffer = values[q];
        return DrawsView(buffer, w, 1, kStates);
      },
      2, buffers);
  for (std::size_t q = 0; q < kQ; ++q) {
    INFO("quantity " << q);
    CHECK(herd::mcmc::testing::summary_bits(all[q]) == one[q]);
  }
  // Streamed views on 2 threads (each quantity's values read in blocks, its z-scores per
  // state out of core): one thread's in-memory results; the buffers are not used.
  const std::vector<std::uint32_t> w32(w.begin(), w.end());
  std::vector<std::vector<double>> unused;
  const auto streamed = herd::mcmc::summarize_all(
      kQ,
      [&](std::size_t q, std::vector<double>& /*buffer*/) { return DrawsView(reader_of(values[q]), w32, 1, kStates); },
      2, unused);
  for (std::size_t q = 0; q < kQ; ++q) {
    INFO("streamed quantity " << q);
    CHECK(herd::mcmc::testing::summary_bits(streamed[q]) == one[q]);
  }
  for (const auto& b : unused) CHECK(b.capacity() == 0);
  // The weights read in blocks too, on 2 threads (the threads share one z table on disk).
  const auto read_weights = herd::mcmc::summarize_all(
      kQ,
      [&](std::size_t q, std::vector<double>& /*buffer*/) {
        return DrawsView(reader_of(values[q]), reader_of(w32), 1, kStates);
      },
      2, unused);
  for (std::size_t q = 0; q < kQ; ++q) {
    INFO("streamed quantity, weights read " << q);
    CHECK(herd::mcmc::testing::summary_bits(read_weights[q]) == one[q]);
  }
  herd::mcmc::release_diagnostics_workspace();
}

TEST_CASE("streamed views: only summarize, summarize_all and nested_rhat take them; a reader's error propagates",
          "[mcmc]") {
  const std::vector<double> x = herd_test::lcg_ar1(2, 500, 0.5, 3.0, 0.0);
  const std::vector<std::uint32_t> w(1000, 3);
  const auto reader = reader_of(x);
  const DrawsView s(reader, w, 2, 500);
  CHECK(s.streamed());
  CHECK(s.values().empty());
  CHECK(s.verbose_draws() == 1500);
  CHECK_THROWS_AS(herd::mcmc::ess_bulk(s), herd::InputError);
  CHECK_THROWS_AS(DrawsView(herd::mcmc::DrawsReader{}, w, 2, 500), herd::InputError);
  CHECK_THROWS_AS(DrawsView(reader, std::span<const std::uint32_t>(w).first(999), 2, 500), herd::InputError);
  const std::vector<std::int64_t> w64(1000, 3);
  CHECK(herd::mcmc::testing::summary_bits(herd::mcmc::summarize(s)) ==
        herd::mcmc::testing::summary_bits(herd::mcmc::summarize(DrawsView(x, w64, 2, 500))));
  const DrawsView failing([](std::size_t, std::span<double>) { throw herd::IoError("reading the test's values"); }, w,
                          2, 500);
  CHECK_THROWS_WITH(herd::mcmc::summarize(failing), Catch::Matchers::Contains("reading the test's values"));
  // Weights read through a reader: checked when the view is made (chains' equal positive
  // sums), its errors propagate, and an empty reader is refused.
  const auto weights = reader_of(w);
  const DrawsView rw(reader, weights, 2, 500);
  CHECK(rw.weighted());
  CHECK(rw.weights_reader() != nullptr);
  CHECK(rw.verbose_draws() == 1500);
  CHECK(herd::mcmc::testing::summary_bits(herd::mcmc::summarize(rw)) ==
        herd::mcmc::testing::summary_bits(herd::mcmc::summarize(s)));
  CHECK_THROWS_AS(herd::mcmc::ess_bulk(rw), herd::InputError);
  CHECK_THROWS_AS(DrawsView(reader, herd::mcmc::WeightsReader{}, 2, 500), herd::InputError);
  CHECK_THROWS_WITH(DrawsView(
                        reader,
                        [&](std::size_t first, std::span<std::uint32_t> out) {
                          weights(first, out);
                          for (std::size_t i = 0; i < out.size(); ++i)
                            if (first + i == 999) out[i] = 4;  // chain 1 sums to 1501
                        },
                        2, 500),
                    Catch::Matchers::Contains("sum to 1501"));
  CHECK_THROWS_WITH(
      DrawsView(
          reader, [](std::size_t, std::span<std::uint32_t>) { throw herd::IoError("reading the test's weights"); }, 2,
          500),
      Catch::Matchers::Contains("reading the test's weights"));
  std::size_t calls = 0;
  const DrawsView fails_later(
      reader,
      [&](std::size_t first, std::span<std::uint32_t> out) {
        if (++calls > 1) throw herd::IoError("reading the test's weights again");
        weights(first, out);
      },
      2, 500);
  CHECK_THROWS_WITH(herd::mcmc::summarize(fails_later), Catch::Matchers::Contains("reading the test's weights again"));
  // nested_rhat of streamed views (weights in memory or read): the in-memory view's bits, for
  // 2 to 6 chains in 2 or 3 superchains, verbose lengths of every residue mod 4 (mean_of's
  // lanes and its tail), zero weights, and a non-finite value (NaN).
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int> wd(0, 5);
  for (const std::size_t chains : {2u, 4u, 6u}) {
    for (const std::size_t d : {2u, 3u, 5u, 200u, 70001u}) {  // 5 d draws per chain: every residue mod 4
      for (const std::size_t super : {2u, 3u}) {
        if (chains % super != 0) continue;
        std::vector<double> xv = herd_test::lcg_ar1(chains, d, 0.6, 11.0 + static_cast<double>(d), 0.0);
        for (std::size_t c = 0; c < chains; ++c)
          for (std::size_t t = 0; t < d; ++t) xv[c * d + t] += 0.3 * static_cast<double>(c % super);
        std::vector<std::uint32_t> wv(chains * d);
        for (auto& e : wv) e = static_cast<std::uint32_t>(wd(rng));
        for (std::size_t c = 0; c < chains; ++c) {  // equal sums: each chain's last weight tops it up
          std::uint32_t sum = 0;
          for (std::size_t t = 0; t + 1 < d; ++t) sum += wv[c * d + t];
          wv[c * d + d - 1] = 5 * static_cast<std::uint32_t>(d) - sum;  // >= 5: the others are <= 5
        }
        for (const bool nan : {false, true}) {
          if (nan) xv[chains * d / 2] = std::nan("");
          INFO("chains " << chains << " d " << d << " superchains " << super << " NaN " << nan);
          const DrawsView mem(xv, wv, chains, d);
          const auto rd = reader_of(xv);
          const auto rw = reader_of(wv);
          const double want = herd::mcmc::nested_rhat(mem, super);
          CHECK(std::bit_cast<std::uint64_t>(herd::mcmc::nested_rhat(DrawsView(rd, wv, chains, d), super)) ==
                std::bit_cast<std::uint64_t>(want));
          CHECK(std::bit_cast<std::uint64_t>(herd::mcmc::nested_rhat(DrawsView(rd, rw, chains, d), super)) ==
                std::bit_cast<std::uint64_t>(want));
          CHECK(std::isnan(want) == (nan && wv[chains * d / 2] > 0));
        }
      }
    }
  }
  CHECK(herd::mcmc::diagnostics_out_of_core(1, 100) == (13 * 101 > herd::mcmc::diagnostics_rank_budget()));
  const RankBudget b(1300);
  CHECK(herd::mcmc::diagnostics_out_of_core(1, 100));  // 13 (100 + 1) > 1300
  CHECK_FALSE(herd::mcmc::diagnostics_out_of_core(1, 99));
}

TEST_CASE("unweighted streamed views: the same bits as in memory (ties, constant, odd and even draws, 1-4 chains)",
          "[mcmc]") {
  // Unweighted views summarized in memory (the split buffer, the sort records) and streamed
  // (DrawsView(reader, chains, draws): read in blocks, summarized as a compact view of unit
  // weights out of core, the z-scores per draw through the scratch files), field by field,
  // bit for bit, under budgets 0 (buckets of 1,024 draws) and 32 KiB: draws per chain odd
  // and even, h = draws / 2 not a multiple of 4 (mean_of's last lanes), past
  // stored_split_limit (the split series per window) and past one block of the passes
  // (65,536 draws); values continuous, with ties, two values, constant and with a NaN.
  // nested_rhat of the streamed view too.
  using herd::mcmc::testing::summary_bits;
  int cases = 0;
  struct Shape {
    std::size_t m, d;
  };
  const std::vector<Shape> shapes = {{1, 1},   {1, 2},    {2, 7},    {3, 8},     {4, 9},     {1, 701},
                                     {2, 702}, {3, 3001}, {4, 4002}, {2, 40003}, {4, 70006}, {3, 90007}};
  for (const Shape& sh : shapes) {
    const std::size_t m = sh.m, d = sh.d;
    for (const int kind : {0, 1, 2, 3, 4}) {  // continuous AR(1), ties, two values, constant, a NaN
      if (d > 10000 && kind > 1) continue;
      std::vector<double> x = herd_test::lcg_ar1(m, d, 0.7, 2000.0 + static_cast<double>(d + m), 0.0);
      for (double& v : x) {
        if (kind == 1) v = std::round(v * 3.0) / 3.0;
        else if (kind == 2) v = v < 0.0 ? -1.0 : 2.5;
        else if (kind == 3) v = 4.0;
      }
      if (kind == 4) x[x.size() / 2] = std::numeric_limits<double>::quiet_NaN();
      const DrawsView v(x, m, d);
      INFO("m " << m << " d " << d << " kind " << kind);
      herd::mcmc::release_diagnostics_workspace();
      const auto mem = summary_bits(herd::mcmc::summarize(v));
      bool in_range = true;
      const DrawsView streamed(reader_of(x, &in_range), m, d);
      CHECK(streamed.streamed());
      CHECK_FALSE(streamed.weighted());
      CHECK(streamed.values().empty());
      CHECK(streamed.verbose_draws() == d);
      for (const std::size_t budget : {std::size_t{0}, std::size_t{32} << 10}) {
        INFO("budget " << budget);
        const RankBudget b(budget);
        CHECK(summary_bits(herd::mcmc::summarize(streamed)) == mem);
      }
      if (m % 2 == 0) {
        const double a = herd::mcmc::nested_rhat(v, 2), s = herd::mcmc::nested_rhat(streamed, 2);
        CHECK(std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(s));
      }
      CHECK(in_range);
      ++cases;
    }
  }
  CHECK(cases == 51);
  // summarize_all on 2 threads: streamed quantities (the buffers unused) give one thread's
  // in-memory bits; nested_rhat of 4 superchains read a group of chains at a time.
  constexpr std::size_t kM = 8, kD = 20001, kQ = 5;
  std::vector<std::vector<double>> values;
  for (std::size_t q = 0; q < kQ; ++q)
    values.push_back(herd_test::lcg_ar1(kM, kD, 0.2 * static_cast<double>(q), 70 + q, 0.0));
  std::vector<std::vector<std::uint64_t>> one;
  for (std::size_t q = 0; q < kQ; ++q) one.push_back(summary_bits(herd::mcmc::summarize(DrawsView(values[q], kM, kD))));
  const auto reader = [&values](std::size_t q) { return reader_of(values[q]); };
  for (const std::size_t budget : {std::size_t{0}, std::size_t{32} << 10}) {
    INFO("budget " << budget);
    const RankBudget b(budget);
    std::vector<std::vector<double>> unused;
    const auto all = herd::mcmc::summarize_all(
        kQ, [&](std::size_t q, std::vector<double>& /*buffer*/) { return DrawsView(reader(q), kM, kD); }, 2, unused);
    for (std::size_t q = 0; q < kQ; ++q) {
      INFO("quantity " << q);
      CHECK(summary_bits(all[q]) == one[q]);
    }
    for (const auto& buf : unused) CHECK(buf.capacity() == 0);
  }
  for (std::size_t q = 0; q < kQ; ++q) {
    const double a = herd::mcmc::nested_rhat(DrawsView(values[q], kM, kD), 4);
    const double s = herd::mcmc::nested_rhat(DrawsView(reader(q), kM, kD), 4);
    CHECK(std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(s));
  }
  // Only summarize, summarize_all and nested_rhat take them; a reader's error propagates.
  const DrawsView s(reader(0), kM, kD);
  CHECK_THROWS_AS(herd::mcmc::ess_bulk(s), herd::InputError);
  CHECK_THROWS_AS(DrawsView(herd::mcmc::DrawsReader{}, 2, 500), herd::InputError);
  CHECK_THROWS_AS(DrawsView(reader(0), 0, 500), herd::InputError);
  const DrawsView failing([](std::size_t, std::span<double>) { throw herd::IoError("reading the test's draws"); }, 2,
                          500);
  CHECK_THROWS_WITH(herd::mcmc::summarize(failing), Catch::Matchers::Contains("reading the test's draws"));
  CHECK_THROWS_WITH(herd::mcmc::nested_rhat(failing, 2), Catch::Matchers::Contains("reading the test's draws"));
  herd::mcmc::release_diagnostics_workspace();
}

TEST_CASE("out-of-core rank side: an unwritable scratch folder is an IoError, named", "[mcmc]") {
  const std::vector<double> x = herd_test::lcg_ar1(1, 1000, 0.5, 3.0, 0.0);
  const std::vector<std::int64_t> w(1000, 2);
  const RankBudget b(0);
  const std::string saved = herd::mcmc::diagnostics_scratch_dir();
  herd::mcmc::set_diagnostics_scratch_dir("/nonexistent-herd-folder/sub");
  CHECK_THROWS_WITH(
      herd::mcmc::summarize(DrawsView(x, w, 1, 1000)),
      Catch::Matchers::Contains("rank scratch file") && Catch::Matchers::Contains("/nonexistent-herd-folder/sub"));
  // A streamed view's z table on disk, likewise.
  CHECK_THROWS_WITH(
      herd::mcmc::detail::ZQuantileFile(1000),
      Catch::Matchers::Contains("z table scratch file") && Catch::Matchers::Contains("/nonexistent-herd-folder/sub"));
  herd::mcmc::set_diagnostics_scratch_dir(saved);
  CHECK(herd::mcmc::diagnostics_rank_budget() == 0);
}
