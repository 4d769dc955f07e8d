// Unit tests of the DRAM kernel: options, the delayed-rejection acceptance,
// reproducibility, the fork-join proposal API, sinks, error handling, adaptation fallback.
// Statistical validations are in test_dram_stats.cpp ([slow]).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "herd/core/error.hpp"
#include "herd/io/namelist.hpp"
#include "herd/io/schema.hpp"
#include "herd/io/toml_reader.hpp"
#include "herd/mcmc/batched_dram_kernel.hpp"
#include "herd/mcmc/chain_sink.hpp"
#include "herd/mcmc/dram.hpp"
#include "herd/mcmc/paradram_run.hpp"
#include "herd/mcmc/run/batched_sample.hpp"
#include "herd/mcmc/sampler_specs.hpp"
#include "herd/mcmc/targets.hpp"

#include "dram_detail.hpp"

using namespace herd::mcmc;

namespace {

double std_normal_2d(const double* x, int d) {
  double q = 0;
  for (int i = 0; i < d; ++i) q += x[i] * x[i];
  return -0.5 * q;
}

DramOptions small_options(int d = 2) {
  DramOptions o;
  o.start_point.assign(d, 0.5);
  o.chain_size = 2000;
  o.seed = 42;
  return o;
}

bool same_chain(const MemoryChainSink& a, const MemoryChainSink& b) {
  return a.step == b.step && a.weight == b.weight && a.log_density == b.log_density && a.dr_stage == b.dr_stage &&
         a.accept_prob == b.accept_prob && a.adapt_measure == b.adapt_measure && a.points == b.points;
}

}  // namespace

TEST_CASE("exp_upper_bound bounds std::exp from above, within 6.2%, and gives up outside (-700, 0]", "[mcmc][dram]") {
  using herd::mcmc::detail::exp_upper_bound;
  std::mt19937_64 g(7);
  std::uniform_real_distribution<double> any(-700.0, 0.0), near0(-1e-6, 0.0);
  std::vector<double> xs = {0.0, -0.0, -1e-300, -5e-324, -0.5, -std::log(2.0), -1.0, -2.0, -699.999, -1.0 / 3.0};
  for (int k = 0; k < 200000; ++k) xs.push_back(k % 4 == 0 ? near0(g) : any(g));
  for (int n = -1008; n <= 0; ++n) {  // powers of two and their neighbours in t = x log2(e)
    const double x = n / 1.4426950408889634;
    for (double y : {std::nextafter(x, -1e9), x, std::nextafter(x, 1.0)})
      if (y > -700.0 && y <= 0.0) xs.push_back(y);
  }
  for (double x : xs) {
    const double e = std::exp(x), b = exp_upper_bound(x);
    INFO("x = " << x);
    REQUIRE(b >= e);
    REQUIRE(b <= e * 1.0616);  // max of (1 + f) / 2^f at f = 1 / ln 2 - 1
  }
  const double inf = std::numeric_limits<double>::infinity();
  for (double x : {-700.0, -800.0, -inf, 1e-300, 1.0, inf, std::numeric_limits<double>::quiet_NaN()})
    CHECK(exp_upper_bound(x) == inf);
}

TEST_CASE("dr2_surely_rejects rejects only what the exact one-stage DR test rejects", "[mcmc][dram]") {
  // Random paths and log densities around a current state; whenever the bound says reject,
  // u >= exp(dr_log_acceptance(2, ...)), the exact test's rejection. It must also decide
  // most of the rejections with lp2 > lp1 (else the kernel gains nothing).
  using herd::mcmc::detail::dr2_surely_rejects;
  std::mt19937_64 g(11);
  std::normal_distribution<double> nd;
  std::uniform_real_distribution<double> ud(0.0, 1.0);
  long decided = 0, rejected = 0, cases = 0;
  for (int d : {1, 3, 10}) {
    std::vector<double> w(3 * static_cast<std::size_t>(d));
    for (int k = 0; k < 100000; ++k) {
      for (int i = 0; i < d; ++i) {
        w[static_cast<std::size_t>(i)] = 0.0;
        w[static_cast<std::size_t>(d + i)] = nd(g);
        w[static_cast<std::size_t>(2 * d + i)] = 0.5 * nd(g);
      }
      const double scale = k % 3 == 0 ? 1.0 : 0.7;
      const double lp0 = -10.0 * ud(g) - (k % 5 == 0 ? 1e3 : 0.0);
      const double lp1 = lp0 - (k % 7 == 0 ? 1e-12 : 4.0 * ud(g));
      const double lp2 = k % 11 == 0 ? lp1 + 1e-13 : lp0 + 2.0 * nd(g);
      const double lp[3] = {lp0, lp1, lp2};
      const double sc[2] = {scale, 0.5};
      const double alpha = std::exp(herd::mcmc::dr_log_acceptance(
          2, d, w.data(), lp, sc, herd::mcmc::ProposalKind::kNormal, herd::mcmc::DrRule::kExact));
      const double u = ud(g);
      ++cases;
      if (u >= alpha && lp2 > lp1) ++rejected;  // the rejections that need the log1m_exp
      if (dr2_surely_rejects(w.data(), lp, scale, u, d)) {
        ++decided;
        INFO("d " << d << " k " << k << " lp " << lp0 << " " << lp1 << " " << lp2 << " u " << u);
        REQUIRE(u >= alpha);
      }
    }
  }
  INFO("decided " << decided << " of " << rejected);
  CHECK(decided > rejected / 2);  // most such rejections are decided by the bound
  const double lp_inf[3] = {0.0, -std::numeric_limits<double>::infinity(), -1.0};
  const std::vector<double> w3(3, 0.0);
  CHECK_FALSE(dr2_surely_rejects(w3.data(), lp_inf, 1.0, 0.999, 1));  // -inf: left to the exact path
}

TEST_CASE("scale factor expressions", "[mcmc][dram]") {
  CHECK(DramSampler::parse_scale_factor("gelman", 4) == Approx(2.38 / 2.0));
  CHECK(DramSampler::parse_scale_factor(" 0.5 * Gelman ", 4) == Approx(0.5 * 2.38 / 2.0));
  CHECK(DramSampler::parse_scale_factor("1.5", 9) == Approx(1.5));
  CHECK(DramSampler::parse_scale_factor("2*3", 1) == Approx(6.0));
  CHECK_THROWS_AS(DramSampler::parse_scale_factor("fast", 2), herd::InputError);
  CHECK_THROWS_AS(DramSampler::parse_scale_factor("-1", 2), herd::InputError);
  CHECK_THROWS_AS(DramSampler::parse_scale_factor("0.5*", 2), herd::InputError);
}

TEST_CASE("options are validated with messages naming the field", "[mcmc][dram]") {
  auto expect_error = [](DramOptions o, const std::string& field) {
    try {
      DramSampler s(std::move(o), std_normal_2d);
      FAIL("no error for " << field);
    } catch (const herd::InputError& e) {
      CHECK_THAT(e.what(), Catch::Contains(field));
    }
  };
  DramOptions o = small_options();
  o.start_point.clear();
  expect_error(o, "start_point");
  o = small_options();
  o.proposal_start_cov = {1, 2, 2, 1};
  expect_error(o, "proposal_start_cov");
  o = small_options();
  o.delayed_rejection_count = 2;
  o.delayed_rejection_scale_factors = {0.5, 0.5, 0.5};
  expect_error(o, "delayed_rejection_scale_factors");
  o = small_options();
  o.domain_lower = {1.0, 1.0};
  expect_error(o, "start_point");
  o = small_options();
  o.target_acceptance_rate = {0.5, 0.2};
  expect_error(o, "target_acceptance_rate");
  o = small_options();
  o.chain_size = 0;
  expect_error(o, "chain_size");
  // A start point outside the support.
  CHECK_THROWS_AS(DramSampler(small_options(), [](const double*, int) { return -INFINITY; }), herd::InputError);
  // The message gives the point and tells -inf from NaN.
  CHECK_THROWS_WITH(DramSampler(small_options(), [](const double*, int) { return -INFINITY; }),
                    "dram: the log density at start_point [0.5, 0.5] is -inf; the start must be inside the support "
                    "of the target");
  CHECK_THROWS_WITH(DramSampler(small_options(12), [](const double*, int) { return NAN; }),
                    Catch::StartsWith("dram: the log density at start_point [0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, "
                                      "0.5, 0.5, ... (12 values)] is NaN;") &&
                        Catch::EndsWith("(a NaN also comes from an error in the log density itself)"));
}

TEST_CASE("delayed-rejection stage scales multiply", "[mcmc][dram]") {
  DramOptions o = small_options(4);
  o.delayed_rejection_count = 3;
  o.delayed_rejection_scale_factors = {0.3, 0.3, 0.3};
  DramSampler s(o, std_normal_2d);
  REQUIRE(s.stage_scales().size() == 4);
  CHECK(s.stage_scales()[1] == Approx(0.3));
  CHECK(s.stage_scales()[2] == Approx(0.09));
  CHECK(s.stage_scales()[3] == Approx(0.027));
  o.delayed_rejection_scale_factors.clear();
  DramSampler t(o, std_normal_2d);
  CHECK(t.stage_scales()[1] == Approx(std::pow(0.5, 0.25)));
  CHECK(t.stage_scales()[3] == Approx(std::pow(0.5, 0.75)));
}

// Stage 2 by hand: alpha_2 = min(1, pi(y2) q1(y2, y1) (1 - a1(y2, y1)) / (pi(x) q1(x, y1) (1 - a1(x, y1)))).
TEST_CASE("delayed-rejection acceptance: stage 2 by hand", "[mcmc][dram]") {
  const int d = 2;
  const double w[] = {0, 0, 1.2, -0.4, -0.3, 0.5};  // whitened path x, y1, y2
  const double lp[] = {-1.0, -3.0, -1.4};
  const double scale[] = {1.0, 0.4};
  auto lq1 = [&](int a, int b) {
    const double dx = w[2 * a] - w[2 * b], dy = w[2 * a + 1] - w[2 * b + 1];
    return -0.5 * (dx * dx + dy * dy);
  };
  const double a1_fwd = std::min(1.0, std::exp(lp[1] - lp[0]));
  const double a1_rev = std::min(1.0, std::exp(lp[1] - lp[2]));
  const double expect =
      std::min(0.0, (lp[2] + lq1(2, 1) + std::log(1 - a1_rev)) - (lp[0] + lq1(0, 1) + std::log(1 - a1_fwd)));
  CHECK(dr_log_acceptance(2, d, w, lp, scale, ProposalKind::kNormal) == Approx(expect).epsilon(1e-12));
  CHECK(dr_log_acceptance(1, d, w, lp, scale, ProposalKind::kNormal) == Approx(-2.0));
  // An impossible end point.
  const double lp_inf[] = {-1.0, -3.0, -std::numeric_limits<double>::infinity()};
  CHECK(dr_log_acceptance(2, d, w, lp_inf, scale, ProposalKind::kNormal) == -std::numeric_limits<double>::infinity());
}

// Detailed balance of each stage's kernel: for every path,
// pi(x) prod_j q_j(x, y_j) (1 - a_j(x..y_j)) a_m(x..y_m) equals the same of the reversed path.
TEST_CASE("delayed-rejection acceptance satisfies detailed balance for unequal scales", "[mcmc][dram]") {
  const int d = 3;
  const double scale[] = {1.0, 2.5, 0.3, 1.7};
  unsigned seed = 1;
  auto rnd = [&] {
    seed = seed * 1664525u + 1013904223u;
    return (seed >> 8) / double(1 << 24) - 0.5;
  };
  for (ProposalKind kind : {ProposalKind::kNormal, ProposalKind::kUniform}) {
    for (int m = 2; m <= 4; ++m) {
      for (int trial = 0; trial < 50; ++trial) {
        std::vector<double> w((m + 1) * d), lp(m + 1);
        for (int i = 0; i <= m; ++i) {
          for (int k = 0; k < d; ++k) w[i * d + k] = i == 0 ? 0.0 : 0.6 * rnd() * scale[i - 1];
          lp[i] = -2.0 + 3.0 * rnd();
        }
        // Reversed path re-centred at its start (the kernel works relative to the start).
        std::vector<double> wr((m + 1) * d), lpr(m + 1);
        for (int i = 0; i <= m; ++i) {
          for (int k = 0; k < d; ++k) wr[i * d + k] = w[(m - i) * d + k] - w[m * d + k];
          lpr[i] = lp[m - i];
        }
        auto kernel = [&](const std::vector<double>& p, const std::vector<double>& l) {
          double s = l[0];
          for (int j = 1; j < m; ++j) {
            double r2 = 0;
            for (int k = 0; k < d; ++k) r2 += p[j * d + k] * p[j * d + k];
            r2 /= scale[j - 1] * scale[j - 1];
            s += kind == ProposalKind::kNormal ? -0.5 * r2 : (r2 <= 1 ? 0.0 : -INFINITY);
            const double la = dr_log_acceptance(j, d, p.data(), l.data(), scale, kind);
            s += std::log1p(-std::exp(la));
          }
          return s + dr_log_acceptance(m, d, p.data(), l.data(), scale, kind);
        };
        const double f = kernel(w, lp), b = kernel(wr, lpr);
        INFO("kind " << int(kind) << " m " << m << " trial " << trial);
        if (std::isfinite(f) || std::isfinite(b)) CHECK(f == Approx(b).epsilon(1e-9).margin(1e-12));
      }
    }
  }
}

namespace {

// The textbook memoised recursion of the full-Hastings delayed-rejection acceptance
// probability (Mira 2001), kept here only as the reference the iterative table must match
// bit for bit.
template <int MaxPath>
struct RecursiveDrReference {
  int d = 0;
  const double* w = nullptr;
  const double* lp = nullptr;
  const double* scale = nullptr;
  bool uniform = false;
  double dist2[MaxPath][MaxPath];
  double memo[MaxPath][MaxPath];
  bool have_dist[MaxPath][MaxPath] = {};
  bool have_memo[MaxPath][MaxPath] = {};

  double dist(int a, int b) {
    if (!have_dist[a][b]) {
      double s = 0.0;
      for (int i = 0; i < d; ++i) s += (w[a * d + i] - w[b * d + i]) * (w[a * d + i] - w[b * d + i]);
      dist2[a][b] = dist2[b][a] = s;
      have_dist[a][b] = have_dist[b][a] = true;
    }
    return dist2[a][b];
  }
  double log_q(int j, int a, int b) {
    const double c = scale[j - 1];
    const double r2 = dist(a, b) / (c * c);
    if (!uniform) return -0.5 * r2;
    return r2 <= 1.0 ? 0.0 : -std::numeric_limits<double>::infinity();
  }
  double log_alpha(int s, int e) {
    constexpr double kNegInf = -std::numeric_limits<double>::infinity();
    if (have_memo[s][e]) return memo[s][e];
    const int dir = e > s ? 1 : -1;
    const int m = (e - s) * dir;
    double res;
    if (lp[e] == kNegInf) {
      res = kNegInf;
    } else {
      double num = lp[e], den = lp[s];
      for (int j = 1; j < m && num != kNegInf; ++j) {
        den += log_q(j, s, s + dir * j) + herd::mcmc::batched::log1m_exp(log_alpha(s, s + dir * j));
        num += log_q(j, e, e - dir * j) + herd::mcmc::batched::log1m_exp(log_alpha(e, e - dir * j));
      }
      if (num == kNegInf) res = kNegInf;
      else if (den == kNegInf) res = 0.0;
      else res = num - den < 0.0 ? num - den : 0.0;
    }
    have_memo[s][e] = true;
    memo[s][e] = res;
    return res;
  }
};

std::uint64_t bits_of(double v) {
  std::uint64_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

// Random whitened paths of m + 1 points and log densities, with some -inf log densities
// and, for uniform proposals, some steps outside the proposal ellipsoid; compares every
// sub-path's value of the iterative table with the recursive reference, bitwise.
template <int MaxPath>
void compare_with_recursive_reference(int max_m, int trials) {
  std::mt19937_64 gen(20261202);
  std::uniform_real_distribution<double> unif(-1.0, 1.0);
  const double scale[] = {1.0, 0.7, 1.9, 0.35, 1.1, 0.8, 2.2, 0.5, 1.3, 0.9, 1.6, 0.45, 1.05, 0.6, 1.4, 0.75};
  for (const bool uniform : {false, true}) {
    for (int m = 1; m <= max_m; ++m) {
      for (const int d : {1, 3, 7}) {
        for (int trial = 0; trial < trials; ++trial) {
          std::vector<double> w((m + 1) * d), lp(m + 1);
          for (int i = 0; i <= m; ++i) {
            for (int k = 0; k < d; ++k) w[i * d + k] = i == 0 ? 0.0 : (uniform ? 0.5 : 1.5) * unif(gen);
            lp[i] = 4.0 * unif(gen);
            if (unif(gen) > 0.8) lp[i] = -std::numeric_limits<double>::infinity();
          }
          // Both directions and every sub-path, as the recursion's callers and the
          // detailed-balance check use them.
          for (int s = 0; s <= m; ++s)
            for (int e = 0; e <= m; ++e) {
              if (s == e) continue;
              herd::mcmc::batched::DrRecursion<MaxPath> it;
              RecursiveDrReference<MaxPath> ref;
              it.d = ref.d = d;
              it.w = ref.w = w.data();
              it.lp = ref.lp = lp.data();
              it.scale = ref.scale = scale;
              it.uniform = ref.uniform = uniform;
              const double a = it.log_alpha(s, e), b = ref.log_alpha(s, e);
              INFO("uniform " << uniform << " m " << m << " d " << d << " trial " << trial << " sub-path " << s
                              << " -> " << e << ": iterative " << a << ", recursive " << b);
              REQUIRE(bits_of(a) == bits_of(b));
            }
        }
      }
    }
  }
}

}  // namespace

TEST_CASE("delayed-rejection table equals the recursive form bitwise (batched, 1..5 stages)", "[mcmc][dram]") {
  compare_with_recursive_reference<herd::mcmc::batched::kMaxPath>(herd::mcmc::batched::kMaxStages, 40);
  // The batched entry point reads the same table.
  std::mt19937_64 gen(7);
  std::uniform_real_distribution<double> unif(-1.0, 1.0);
  const double scale[] = {1.0, 0.6, 0.36, 0.2, 0.13};
  for (int m = 2; m <= herd::mcmc::batched::kMaxStages; ++m)
    for (int trial = 0; trial < 50; ++trial) {
      const int d = 4;
      std::vector<double> w((m + 1) * d, 0.0), lp(m + 1);
      for (int i = 1; i <= m; ++i)
        for (int k = 0; k < d; ++k) w[i * d + k] = unif(gen);
      for (int i = 0; i <= m; ++i) lp[i] = 3.0 * unif(gen);
      RecursiveDrReference<herd::mcmc::batched::kMaxPath> ref;
      ref.d = d;
      ref.w = w.data();
      ref.lp = lp.data();
      ref.scale = scale;
      CHECK(bits_of(herd::mcmc::batched::dr_log_alpha(m, d, w.data(), lp.data(), scale)) ==
            bits_of(ref.log_alpha(0, m)));
    }
}

TEST_CASE("dr_log_acceptance with one delayed-rejection stage equals the full table bitwise", "[mcmc][dram]") {
  // dram.cpp computes alpha(0 -> 2) of Gaussian proposals from the three sub-paths it needs;
  // DrRecursion fills every sub-path. Random paths with -inf log densities, ties and both
  // orders of lp[1], lp[2] (where the numerator is -inf and the denominator is skipped).
  std::mt19937_64 gen(20261205);
  std::uniform_real_distribution<double> unif(-1.0, 1.0);
  const double scale[] = {1.0, 0.37};
  const double ninf = -std::numeric_limits<double>::infinity();
  int finite = 0, neg_inf = 0;
  for (const int d : {1, 2, 10, 17})
    for (int trial = 0; trial < 3000; ++trial) {
      std::vector<double> w(3 * static_cast<std::size_t>(d)), lp(3);
      for (int i = 0; i < 3; ++i)
        for (int k = 0; k < d; ++k) w[i * d + k] = i == 0 ? 0.0 : 1.5 * unif(gen);
      for (int i = 0; i < 3; ++i) lp[i] = 4.0 * unif(gen);
      if (trial % 7 == 1) lp[1] = ninf;
      if (trial % 11 == 2) lp[2] = ninf;
      if (trial % 13 == 3) lp[2] = lp[1];
      if (trial % 17 == 4) lp[1] = lp[0];
      herd::mcmc::batched::DrRecursion<16> it;
      it.d = d;
      it.w = w.data();
      it.lp = lp.data();
      it.scale = scale;
      const double want = it.log_alpha(0, 2);
      const double got = dr_log_acceptance(2, d, w.data(), lp.data(), scale, ProposalKind::kNormal);
      INFO("d " << d << " trial " << trial << ": " << got << " vs " << want);
      REQUIRE(bits_of(got) == bits_of(want));
      (want == ninf ? neg_inf : finite) += 1;
    }
  CHECK(finite > 1000);
  CHECK(neg_inf > 1000);
}

TEST_CASE("delayed-rejection table equals the recursive form bitwise (serial, up to 9 stages)", "[mcmc][dram]") {
  compare_with_recursive_reference<16>(9, 6);
}

TEST_CASE("compact chain bookkeeping", "[mcmc][dram]") {
  DramOptions o = small_options(3);
  o.delayed_rejection_count = 2;
  DramSampler s(o, std_normal_2d);
  MemoryChainSink m;
  const auto r = s.run(m);
  REQUIRE(static_cast<std::int64_t>(m.size()) == o.chain_size);
  CHECK(r.chain_size == o.chain_size);
  CHECK(m.total_weight() == r.proposals + 1);
  CHECK(m.step[0] == 0u);
  CHECK(m.dr_stage[0] == 0);
  for (std::size_t i = 0; i + 1 < m.size(); ++i) {
    CHECK(m.step[i + 1] == m.step[i] + static_cast<std::uint64_t>(m.weight[i]));
    CHECK(m.dr_stage[i + 1] >= 1);
    CHECK(m.dr_stage[i + 1] <= 3);
    CHECK(m.accept_prob[i + 1] > 0.0);
    CHECK(m.accept_prob[i + 1] <= 1.0);
  }
  std::int64_t acc = 0;
  for (auto a : r.stage_accepted) acc += a;
  CHECK(acc == r.chain_size - 1);
  CHECK(r.stage_accepted[1] > 0);  // the DR stages did accept something
}

TEST_CASE("same seed, same chain; other chain id, other chain; thread count irrelevant", "[mcmc][dram]") {
  DramOptions o = small_options(3);
  o.delayed_rejection_count = 1;
  o.log_density_thread_safe = true;
  MemoryChainSink a, b;
  DramSampler(o, std_normal_2d).run(a);
  DramSampler(o, std_normal_2d).run(b);
  CHECK(same_chain(a, b));
  o.chain_id = 1;
  MemoryChainSink c;
  DramSampler(o, std_normal_2d).run(c);
  CHECK_FALSE(same_chain(a, c));

  o.chain_id = 0;
  std::vector<MemoryChainSink> s1(5), s3(5);
  std::vector<ChainSink*> p1, p3;
  for (int i = 0; i < 5; ++i) {
    p1.push_back(&s1[i]);
    p3.push_back(&s3[i]);
  }
  DramSampler(o, std_normal_2d).run_chains(p1, 1);
  const auto res = DramSampler(o, std_normal_2d).run_chains(p3, 3);
  for (int i = 0; i < 5; ++i) {
    CHECK(same_chain(s1[i], s3[i]));
    CHECK(res[i].chain_id == static_cast<std::uint32_t>(i));
  }
  CHECK(same_chain(s1[0], a));
  CHECK(same_chain(s1[1], c));
  // The batched interface gives the same chain.
  MemoryChainSink bt;
  DramSampler(o, BatchedLogDensity([](const double* x, int n, int d, double* out) {
                for (int i = 0; i < n; ++i) out[i] = std_normal_2d(x + i * d, d);
              }))
      .run(bt);
  CHECK(same_chain(bt, a));
}

TEST_CASE("batched lockstep chains equal single-chain runs", "[mcmc][dram]") {
  DramOptions o = small_options(3);
  o.delayed_rejection_count = 2;
  o.delayed_rejection_scale_factors = {3.0, 0.2};
  o.domain_lower = {-1.0, -1.0, -1.0};
  o.domain_upper = {1.5, 1.5, 1.5};
  o.chain_size = 700;
  const int n = 6;
  std::vector<MemoryChainSink> single(n), batched(n);
  std::vector<ChainSink*> ps, pb;
  for (int i = 0; i < n; ++i) {
    ps.push_back(&single[i]);
    pb.push_back(&batched[i]);
  }
  DramSampler(o, std_normal_2d).run_chains(ps, 1);
  int max_n = 0;
  std::int64_t points = 0;
  DramSampler b(o, BatchedLogDensity([&](const double* x, int m, int d, double* out) {
                  max_n = std::max(max_n, m);
                  points += m;
                  for (int i = 0; i < m; ++i) out[i] = std_normal_2d(x + i * d, d);
                }));
  const auto res = b.run_chains(pb);
  CHECK(max_n == n);
  std::int64_t evals = 0;
  for (int i = 0; i < n; ++i) {
    INFO("chain " << i);
    CHECK(same_chain(single[i], batched[i]));
    evals += res[i].evaluations;
  }
  CHECK(evals + 1 == points);  // the batch also saw the start point of b's own constructor
}

TEST_CASE("propose() reproduces the kernel's trial points (fork-join)", "[mcmc][dram]") {
  DramOptions o = small_options(3);
  o.delayed_rejection_count = 2;
  o.delayed_rejection_scale_factors = {0.3, 2.0};
  o.adaptive_update_period = 5;
  std::vector<std::vector<double>> evaluated;
  DramSampler s(o, [&](const double* x, int d) {
    evaluated.emplace_back(x, x + d);
    return std_normal_2d(x, d);
  });
  NullChainSink sink;
  int checked = 0;
  for (int k = 0; k < 200; ++k) {
    const DramState before = s.state();
    evaluated.clear();
    s.step(sink);
    for (std::size_t st = 0; st < evaluated.size(); ++st) {
      std::vector<double> y(3);
      s.propose(before.proposal_number, static_cast<int>(st) + 1, before.point.data(), before.chol.data(), y.data());
      CHECK(y == evaluated[st]);
      ++checked;
    }
  }
  CHECK(checked > 250);
}

// A fork-join scheduler evaluates proposal k elsewhere and decides it from the log
// densities, `dr_log_acceptance` and `acceptance_uniform`: replay the kernel that way.
TEST_CASE("propose + acceptance_uniform decide each step as the kernel does", "[mcmc][dram]") {
  DramOptions o = small_options(2);
  o.delayed_rejection_count = 2;
  o.delayed_rejection_scale_factors = {0.2, 4.0};
  o.adaptive_update_count = 0;  // fixed proposal: the replay needs no adaptation
  DramSampler s(o, std_normal_2d);
  NullChainSink sink;
  const double* chol = s.state().chol.data();
  for (int k = 0; k < 300; ++k) {
    const DramState before = s.state();
    s.step(sink);
    // Replay: whitened path w_j = c_j L^{-1}(y_j - x) is recomputed from propose().
    std::vector<double> w(4 * 2, 0.0), lp(4);
    lp[0] = before.log_density;
    int accepted_stage = 0;
    std::vector<double> y(2);
    for (int st = 1; st <= 3 && accepted_stage == 0; ++st) {
      s.propose(before.proposal_number, st, before.point.data(), chol, y.data());
      // L is lower triangular: forward substitution.
      const double w0 = (y[0] - before.point[0]) / chol[0];
      const double w1 = (y[1] - before.point[1] - chol[2] * w0) / chol[3];
      w[2 * st] = w0;
      w[2 * st + 1] = w1;
      lp[st] = std_normal_2d(y.data(), 2);
      const double la = dr_log_acceptance(st, 2, w.data(), lp.data(), s.stage_scales().data(), ProposalKind::kNormal);
      if (std::log(s.acceptance_uniform(before.proposal_number, st)) < la || la == 0.0) accepted_stage = st;
    }
    if (accepted_stage > 0) {
      CHECK(s.state().record_stage == accepted_stage);
      CHECK(s.state().record_step == before.proposal_number + 1);
    } else {
      CHECK(s.state().weight == before.weight + 1);
    }
  }
}

// The kernel's trial points (4-row vector blocks of the factor), its one-stage delayed-rejection
// normals and acceptance uniforms drawn ahead equal `propose` (apply_factor, a cursor per
// stage) and `acceptance_uniform` bit for bit, across adaptive updates, for d below, at and
// above the 16 of the draw-ahead path and not a multiple of 4.
TEST_CASE("the kernel's trial points and uniforms equal propose and acceptance_uniform bitwise", "[mcmc][dram]") {
  auto gauss = [](const double* x, int d) {
    double s = 0.0;
    for (int i = 0; i < d; ++i) s += (1.0 + 0.3 * i) * x[i] * x[i];
    return -0.5 * s;
  };
  for (const int d : {1, 3, 10, 13, 20})
    for (const int stages : {1, 2}) {
      DramOptions o = small_options(d);
      o.delayed_rejection_count = stages;
      o.adaptive_update_period = 25;
      o.seed = 1001 + static_cast<std::uint64_t>(d);
      DramSampler s(o, gauss);
      NullChainSink sink;
      int checked[4] = {0, 0, 0, 0};  // accepted at stage 1, 2, 3 (two delayed-rejection stages)
      for (int k = 0; k < 3000; ++k) {
        const DramState before = s.state();
        s.step(sink);
        const DramState& after = s.state();
        if (after.record_step != before.proposal_number + 1) continue;  // rejected
        const int st = after.record_stage;
        REQUIRE(st >= 1);
        REQUIRE(st <= stages + 1);
        std::vector<double> y(static_cast<std::size_t>(d));
        s.propose(before.proposal_number, st, before.point.data(), before.chol.data(), y.data());
        INFO("d " << d << " stages " << stages << " proposal " << k << " stage " << st);
        REQUIRE(after.point == y);
        REQUIRE(s.acceptance_uniform(before.proposal_number, st) < after.record_accept_prob);
        if (st == 1) {
          const double la = std::min(0.0, gauss(y.data(), d) - before.log_density);
          REQUIRE(after.record_accept_prob == (la == 0.0 ? 1.0 : std::exp(la)));
        }
        ++checked[st];
      }
      CHECK(checked[1] > 300);
      CHECK(checked[2] > 20);  // coverage: some second-stage acceptances in every case
    }
}

TEST_CASE("set_state restores a chain exactly (restart)", "[mcmc][dram]") {
  DramOptions o = small_options(2);
  o.delayed_rejection_count = 1;
  o.adaptive_update_period = 7;
  o.greedy_adaptation_count = 2;
  DramSampler whole(o, std_normal_2d);
  MemoryChainSink all;
  NullChainSink null;
  for (int k = 0; k < 300; ++k) whole.step(all);
  DramSampler first(o, std_normal_2d);
  MemoryChainSink part1, part2;
  for (int k = 0; k < 123; ++k) first.step(part1);
  const DramState saved = first.state();
  DramSampler second(o, std_normal_2d);
  second.set_state(saved);
  for (int k = 123; k < 300; ++k) second.step(part2);
  CHECK(part1.size() + part2.size() == all.size());
  CHECK(second.state().point == whole.state().point);
  CHECK(second.state().chol == whole.state().chol);
  CHECK(second.state().proposal_number == 300u);
}

TEST_CASE("binary chain file round trip", "[mcmc][dram]") {
  DramOptions o = small_options(4);
  MemoryChainSink mem;
  DramSampler(o, std_normal_2d).run(mem);
  const std::string path = "test_dram_chain.bin";
  {
    BinaryChainSink bin(path);
    DramSampler(o, std_normal_2d).run(bin);
    CHECK(bin.records() == mem.size());
  }
  const auto back = read_binary_chain(path);
  CHECK(back.ndim == 4);
  CHECK(same_chain(back, mem));
  std::remove(path.c_str());
  CHECK_THROWS_AS(read_binary_chain("no_such_file.bin"), herd::IoError);
}

TEST_CASE("NaN counts as -inf; +inf and exceptions stop the run after flushing", "[mcmc][dram]") {
  DramOptions o = small_options(2);
  o.chain_size = 500;
  {
    DramSampler s(o, [](const double* x, int d) { return x[0] > 1.5 ? NAN : std_normal_2d(x, d); });
    MemoryChainSink m;
    const auto r = s.run(m);
    CHECK(r.nan_count > 0);
    for (std::size_t i = 0; i < m.size(); ++i) CHECK(m.point(i)[0] <= 1.5);
  }
  {
    DramSampler s(o, [](const double* x, int d) {
      return x[0] > 1.5 ? std::numeric_limits<double>::infinity() : std_normal_2d(x, d);
    });
    MemoryChainSink m;
    CHECK_THROWS_AS(s.run(m), herd::NumericalError);
    CHECK(m.size() >= 1);
    CHECK(m.total_weight() == static_cast<std::int64_t>(s.state().proposal_number) + 1);
  }
  {
    DramSampler s(o, [](const double* x, int d) {
      if (x[1] > 1.5) throw std::runtime_error("model blew up");
      return std_normal_2d(x, d);
    });
    MemoryChainSink m;
    try {
      s.run(m);
      FAIL("no exception");
    } catch (const herd::Error& e) {
      CHECK_THAT(e.what(), Catch::Contains("model blew up"));
    }
    CHECK(m.size() >= 1);
  }
}

TEST_CASE("a proposal outside the domain is a rejected step, not redrawn", "[mcmc][dram]") {
  DramOptions o = small_options(2);
  o.domain_lower = {0.0, 0.0};
  o.domain_upper = {1.0, 1.0};
  o.proposal_start_std = {2.0, 2.0};
  o.adaptive_update_count = 0;
  std::int64_t calls = 0;
  DramSampler s(o, [&](const double*, int) {
    ++calls;
    return 0.0;
  });
  MemoryChainSink m;
  const auto r = s.run(m);
  CHECK(r.out_of_domain > 0);
  CHECK(r.out_of_domain + r.evaluations == r.proposals + 1);
  CHECK(calls == r.evaluations);
  for (std::size_t i = 0; i < m.size(); ++i) {
    CHECK(m.point(i)[0] >= 0.0);
    CHECK(m.point(i)[1] <= 1.0);
  }
  CHECK(m.total_weight() == r.proposals + 1);
}

TEST_CASE("trials in a row outside the domain or with a NaN log density warn, then stop the run", "[mcmc][dram]") {
  // ParaDRAM's maxNumDomainCheckToStop: a box far narrower than the proposal, no adaptation.
  DramOptions o = small_options(2);
  o.domain_lower = {0.4999, 0.4999};
  o.domain_upper = {0.5001, 0.5001};
  o.adaptive_update_count = 0;
  o.domain_check_warn = 100;
  o.domain_check_stop = 500;
  {
    DramSampler s(o, std_normal_2d);
    MemoryChainSink m;
    try {
      s.run(m);
      FAIL("no exception");
    } catch (const herd::Error& e) {
      CHECK_THAT(e.what(), Catch::Contains("chain 0: 500 trials in a row") &&
                               Catch::Contains("fell outside the domain: the run stops at") &&
                               Catch::Contains("maxNumDomainCheckToStop) = 500"));
    }
    CHECK(m.size() >= 1);  // flushed
    CHECK(s.state().out_of_domain >= 500);
  }
  {
    // 0: never; the run ends at max_proposals.
    o.domain_check_warn = 0;
    o.domain_check_stop = 0;
    o.max_proposals = 3000;
    DramSampler s(o, std_normal_2d);
    MemoryChainSink m;
    const auto r = s.run(m);
    CHECK(r.proposals == 3000);
    CHECK(r.out_of_domain > 2900);
  }
  {
    // NaN everywhere but at the start: the NaN trials count; without the stop, the halvings of a
    // chain that accepts nothing end at a floor (unbounded, the scale reached 0 after about 1075
    // updates of 8 proposals, and every trial, equal to the current point, was accepted).
    DramOptions n = small_options(2);
    n.domain_check_stop = 0;
    n.max_proposals = 20000;
    const auto only_start = [](const double* x, int) {
      return x[0] == 0.5 && x[1] == 0.5 ? 0.0 : std::numeric_limits<double>::quiet_NaN();
    };
    DramSampler s(n, only_start);
    MemoryChainSink m;
    const auto r = s.run(m);
    CHECK(r.proposals == 20000);
    CHECK(r.stage_accepted.at(0) == 0);
    CHECK(r.nan_count == 20000);
    CHECK(m.size() == 1);
    n.domain_check_stop = 1000;
    DramSampler t(n, only_start);
    MemoryChainSink mt;
    try {
      t.run(mt);
      FAIL("no exception");
    } catch (const herd::Error& e) {
      CHECK_THAT(e.what(), Catch::Contains("1000 trials in a row, up to proposal 999, had a NaN log density"));
    }
  }
  {
    // A NaN half-plane is hit often but never 40 times in a row (p ~ 2^-40): each good trial
    // ends the run of bad ones, so the chain completes.
    DramOptions h = small_options(2);
    h.domain_check_warn = 1000;
    h.domain_check_stop = 40;
    DramSampler s(h, [](const double* x, int d) {
      return x[0] > 1.5 ? std::numeric_limits<double>::quiet_NaN() : std_normal_2d(x, d);
    });
    MemoryChainSink m;
    const auto r = s.run(m);
    CHECK(r.chain_size == 2000);
    CHECK(r.nan_count > 100);
  }
}

TEST_CASE("the ball domain rejects trials outside the ellipsoid without calling the log density", "[mcmc][dram]") {
  DramOptions o = small_options(2);
  o.start_point = {1.0, -2.0};
  o.domain_ball_center = {1.0, -2.0};
  o.domain_ball_precision = {4.0, 0.0, 0.0, 1.0};  // radii 0.5 and 1
  std::int64_t calls = 0, outside_calls = 0;
  DramSampler s(o, [&](const double* x, int d) {
    ++calls;
    const double a = x[0] - 1.0, b = x[1] + 2.0;
    if (4 * a * a + b * b > 1.0) ++outside_calls;
    return std_normal_2d(x, d);
  });
  MemoryChainSink m;
  const auto r = s.run(m);
  CHECK(outside_calls == 0);
  CHECK(calls == r.evaluations);
  CHECK(r.out_of_domain > 0);
  CHECK(r.out_of_domain + r.evaluations == r.proposals + 1);
  double max_q = 0;
  for (std::size_t i = 0; i < m.size(); ++i) {
    const double a = m.point(i)[0] - 1.0, b = m.point(i)[1] + 2.0;
    max_q = std::max(max_q, 4 * a * a + b * b);
  }
  CHECK(max_q <= 1.0);
  CHECK(max_q > 0.8);  // it reaches the boundary
  o.start_point = {1.6, -2.0};
  CHECK_THROWS_WITH(DramSampler(o, std_normal_2d), Catch::Contains("start_point is outside the ball domain"));
}

TEST_CASE("a degenerate covariance estimate is shrunk to the start guess; a failed factor keeps the proposal",
          "[mcmc][dram]") {
  DramOptions o = small_options(3);
  o.adaptive_update_period = 10;
  DramSampler s(o, std_normal_2d);
  DramState st = s.state();
  // Running estimate of collinear points: rank 1, with enough unique states to attempt it.
  st.mean = {0, 0, 0};
  st.m2 = {1, 2, 3, 2, 4, 6, 3, 6, 9};
  st.cov_weight = 100;
  st.cov_unique = 50;
  st.weight = 1;
  st.current_counted = 1;  // the current state is already in the estimate
  s.set_state(st);
  const auto chol_before = s.state().chol;
  NullChainSink sink;
  // Reject everything for one period so that nothing new enters the estimate.
  auto reject = [](const double* x, int d) { return x[0] == 0.5 ? std_normal_2d(x, d) : -INFINITY; };
  {
    DramSampler t(o, reject);
    t.set_state(st);
    for (int k = 0; k < 10; ++k) t.step(sink);
    CHECK(t.state().chol_failures == 0);
    CHECK(t.state().updates_done == 1);
    CHECK(t.state().scale == Approx(0.5 * s.scale_factor()));  // no acceptance in the period: halved
    // C = scale^2 ((1 - l) M2 / W + l C0 / scale_factor^2) with C0 = I, l = 3 d^2 / (W + 3 d^2):
    // every direction keeps at least scale^2 l / scale_factor^2 of variance.
    const double w = t.state().cov_weight, l = 27.0 / (w + 27.0);
    const double floor = t.state().scale * t.state().scale * l / (s.scale_factor() * s.scale_factor());
    const auto& c = t.state().chol;
    auto var_along = [&](std::vector<double> v) {
      double n = 0, q = 0;
      for (double x : v) n += x * x;
      for (int i = 0; i < 3; ++i) {  // |L^T v|^2
        double y = 0;
        for (int k = i; k < 3; ++k) y += c[static_cast<std::size_t>(k) * 3 + i] * v[static_cast<std::size_t>(k)];
        q += y * y;
      }
      return q / n;
    };
    CHECK(var_along({2, -1, 0}) >= 0.999 * floor);
    CHECK(var_along({3, 0, -1}) >= 0.999 * floor);
    CHECK(var_along({0, 3, -2}) >= 0.999 * floor);
    CHECK(var_along({2, -1, 0}) < 2 * floor);
  }
  {
    // An estimate that overflowed: the factorisation fails and the previous proposal stays.
    DramState bad = st;
    bad.m2[0] = bad.m2[4] = bad.m2[8] = std::numeric_limits<double>::infinity();
    DramSampler t(o, reject);
    t.set_state(bad);
    for (int k = 0; k < 10; ++k) t.step(sink);
    CHECK(t.state().chol_failures == 1);
    CHECK(t.state().updates_done == 1);
    CHECK(t.state().chol == chol_before);
  }
  // Then it keeps sampling.
  for (int k = 0; k < 100; ++k) s.step(sink);
  CHECK(s.state().proposal_number == 100u);
}

TEST_CASE("burn-in: a far start is detected by the likelihood rule", "[mcmc][dram]") {
  DramOptions o = small_options(2);
  o.start_point = {40.0, -40.0};
  o.chain_size = 3000;
  DramSampler s(o, std_normal_2d);
  MemoryChainSink m;
  const auto r = s.run(m);
  REQUIRE(r.burnin_likelihood > 0);
  CHECK(r.burnin == std::max(r.burnin_likelihood, r.burnin_adaptation));
  const double best = *std::max_element(m.log_density.begin(), m.log_density.end());
  const double thr = best - std::log(static_cast<double>(m.size()));
  CHECK(m.log_density[r.burnin_likelihood] >= thr);
  for (std::int64_t i = 0; i < r.burnin_likelihood; ++i) CHECK(m.log_density[i] < thr);
}

TEST_CASE("greedy adaptation and the adaptation-measure burn-in rule", "[mcmc][dram]") {
  DramOptions o = small_options(2);
  o.chain_size = 3000;
  o.adaptive_update_period = 8;
  MemoryChainSink plain, greedy;
  const auto rp = DramSampler(o, std_normal_2d).run(plain);
  o.greedy_adaptation_count = 50;
  const auto rg = DramSampler(o, std_normal_2d).run(greedy);
  CHECK(rg.adaptive_updates > 50);
  CHECK(rp.proposal_cov != rg.proposal_cov);  // the early updates weighed states differently
  // Every record's adaptation measure is a Hellinger distance; with threshold 0 the
  // burn-in by adaptation ends after the last state that saw an adaptation.
  std::int64_t last = -1;
  for (std::size_t i = 0; i < plain.size(); ++i) {
    CHECK(plain.adapt_measure[i] >= 0.0);
    CHECK(plain.adapt_measure[i] <= 1.0);
    if (plain.adapt_measure[i] > 0.0) last = static_cast<std::int64_t>(i);
  }
  REQUIRE(last > 0);
  o.greedy_adaptation_count = 0;
  o.burnin_adaptation_measure = 0.0;
  MemoryChainSink again;
  const auto r0 = DramSampler(o, std_normal_2d).run(again);
  CHECK(same_chain(again, plain));
  CHECK(r0.burnin_adaptation == last + 1);
  CHECK(r0.burnin == std::max(r0.burnin_adaptation, r0.burnin_likelihood));
  CHECK(rp.burnin_adaptation == 0);  // threshold 1 (default) disables the rule
}

TEST_CASE("built-in targets: values and batches", "[mcmc][targets]") {
  const auto mvn = MultivariateNormal::ar1(3, 0.5);
  const double x[] = {0.1, -0.2, 0.3, 1.0, 2.0, -1.0};
  double out[2];
  mvn.batch(x, 2, 3, out);
  CHECK(out[0] == Approx(mvn(x, 3)));
  CHECK(out[1] == Approx(mvn(x + 3, 3)));
  // At the mean: -d/2 log(2 pi) - 1/2 log det; det of AR(1) = (1 - rho^2)^(d-1).
  const double zero[] = {0, 0, 0};
  CHECK(mvn(zero, 3) == Approx(-1.5 * std::log(2 * M_PI) - 0.5 * 2 * std::log(0.75)));
  const Banana banana(2);
  const double bx[] = {0.0, 3.0};
  CHECK(banana(bx, 2) == Approx(-std::log(2 * M_PI) - std::log(10.0)));
  const GaussianMixture gm({1.0, 3.0}, {-2.0, 2.0}, {1.0, 0.5}, 1);
  const double g0[] = {2.0};
  CHECK(gm(g0, 1) ==
        Approx(std::log(0.25 * std::exp(-8.0) / std::sqrt(2 * M_PI) + 0.75 / (0.5 * std::sqrt(2 * M_PI)))));
  const NealFunnel funnel(3);
  const double f0[] = {0.0, 0.0, 0.0};
  CHECK(funnel(f0, 3) == Approx(-std::log(3.0) - 1.5 * std::log(2 * M_PI)));
  const Rosenbrock rb(2);
  const double r1[] = {1.0, 1.0};
  CHECK(rb(r1, 2) == 0.0);
}

namespace {

/// Kernel options of herd-sample's defaults (the sampler schema's) for `toml` and `ndim`.
DramOptions options_from_specs(const std::string& toml, int ndim) {
  herd::io::Schema schema("test");
  declare_sampler_specs(schema);
  const herd::io::Settings st = schema.apply(herd::io::parse_toml(toml, "test.toml"), {});
  return to_dram_options(resolve_sampler_specs(st, ndim), ndim);
}

/// Acceptance rate and the mean over coordinates of the sample variance of the verbose
/// chain after its first `burn` proposals.
std::pair<double, double> run_and_measure(DramOptions o, std::int64_t proposals, std::int64_t burn) {
  o.max_proposals = proposals;
  o.chain_size = proposals + 1;
  DramSampler s(o, std_normal_2d);
  MemoryChainSink sink;
  const DramResult r = s.run(sink);
  const int d = static_cast<int>(o.start_point.size());
  const std::vector<double> v = sink.verbose(burn);
  const std::size_t n = v.size() / static_cast<std::size_t>(d);
  double mean_var = 0.0;
  for (int k = 0; k < d; ++k) {
    double m = 0.0, q = 0.0;
    for (std::size_t i = 0; i < n; ++i) m += v[i * d + k];
    m /= static_cast<double>(n);
    for (std::size_t i = 0; i < n; ++i) q += (v[i * d + k] - m) * (v[i * d + k] - m);
    mean_var += q / static_cast<double>(n - 1) / d;
  }
  return {r.acceptance_rate, mean_var};
}

}  // namespace

TEST_CASE("ParaDRAM's start proposal: the start covariance times scale_factor^2", "[mcmc][dram]") {
  // ParaMonte 1.x (ParaDRAMProposal_mod.inc.f90) multiplies proposalStartCovMat (given, from
  // proposalStartCorMat and proposalStartStdVec, or the identity) by scaleFactor^2.
  const double g2 = 2.38 * 2.38 / 4.0;
  DramOptions o = options_from_specs("", 4);
  REQUIRE(o.proposal_start_cov.empty());
  REQUIRE(o.proposal_start_std.size() == 4);
  CHECK(o.proposal_start_std[2] == Approx(std::sqrt(g2)));
  o = options_from_specs("proposal_std = [1, 2, 3, 4]\nscale_factor = \"0.5\"", 4);
  CHECK(o.proposal_start_std[3] == Approx(2.0));
  o = options_from_specs("proposal_cov = [4,1,0,0, 1,4,0,0, 0,0,4,0, 0,0,0,4]", 4);
  CHECK(o.proposal_start_cov[0] == Approx(4 * g2));
  CHECK(o.proposal_start_cov[1] == Approx(g2));
  o = options_from_specs("proposal_cor = [1,0.5,0,0, 0.5,1,0,0, 0,0,1,0, 0,0,0,1]\nproposal_std = [2, 2, 1, 1]", 4);
  CHECK(o.proposal_start_cov[1] == Approx(0.5 * 4 * g2));
}

TEST_CASE("100-D standard normal with the default proposal: sane acceptance, right variance", "[mcmc][dram]") {
  // Before the start covariance was scaled, the identity proposal of a 100-D target
  // accepted nothing (acceptance ~ exp(-d/4)). 20000 proposals from the mode: the chain's
  // integrated autocorrelation time of x^2 is a few hundred steps, so the mean over the
  // 100 coordinates of the sample variance has a standard error of about 0.03; the band
  // [0.85, 1.15] is 5 standard errors wide on each side (false failures < 1e-6 if the
  // coordinates' errors were independent; they are positively correlated through the
  // shared adaptation, so the design rate is about 1e-3). Seed fixed before looking.
  DramOptions o = options_from_specs("random_seed = 20261130", 100);
  const auto [acceptance, mean_var] = run_and_measure(o, 20000, 2000);
  INFO("acceptance " << acceptance << ", mean variance " << mean_var);
  CHECK(acceptance > 0.1);
  CHECK(acceptance < 0.5);
  CHECK(mean_var > 0.85);
  CHECK(mean_var < 1.15);
}

TEST_CASE("a start proposal far too wide: the chain shrinks it and moves", "[mcmc][dram]") {
  // proposal_std = 30 on a 10-D standard normal: acceptance ~ 1e-8 without the stuck rule
  // (an update period with acceptance below 1% halves the scale); with it the chain
  // reaches a normal acceptance within a few hundred proposals and samples the target.
  DramOptions o = options_from_specs("random_seed = 11\nproposal_std = [30,30,30,30,30,30,30,30,30,30]", 10);
  const auto [acceptance, mean_var] = run_and_measure(o, 20000, 2000);
  INFO("acceptance " << acceptance << ", mean variance " << mean_var);
  CHECK(acceptance > 0.1);
  CHECK(mean_var > 0.8);
  CHECK(mean_var < 1.2);
}

TEST_CASE("batched_options: processes x chains_per_rank past 2^32 chain ids names where chains_per_rank was set",
          "[mcmc]") {
  herd::io::Schema schema("test");
  declare_sampler_specs(schema);
  const SamplerSpecs s = resolve_sampler_specs(
      schema.apply(herd::io::parse_toml("device = \"cpu_batched\"\nchains_per_rank = 16777216\n", "test.toml"), {}), 1);
  // 257 processes of 2^24 chains: the last process's ids pass 2^32 (checked before anything is
  // allocated).
  CHECK_THROWS_WITH(herd::mcmc::batched_options(s, 1, 256, 257),
                    Catch::StartsWith("test.toml:2: key \"chains_per_rank\" is 16777216, but processes x "
                                      "chains_per_rank (257 x 16777216) must stay below 2^32"));
  CHECK_THROWS_AS(herd::mcmc::batched_options(s, 1, 256, 257), herd::InputError);
}

TEST_CASE("sampler specs: random_start_point_scope = superchain gives K starts, each shared by its M chains",
          "[mcmc]") {
  herd::io::Schema schema("test");
  declare_sampler_specs(schema);
  const std::string base =
      "random_seed = 9\nparallelization_model = \"multi_chain\"\nchains_per_rank = 6\n"
      "random_start_point = true\nrandom_start_point_domain_lower = [-1.0, -1.0]\n"
      "random_start_point_domain_upper = [1.0, 1.0]\n";
  const auto specs = [&](const std::string& extra) {
    return resolve_sampler_specs(schema.apply(herd::io::parse_toml(base + extra, "test.toml"), {}), 2);
  };
  const herd::mcmc::SamplerSpecs s = specs("superchains = 3\nrandom_start_point_scope = \"superchain\"\n");
  // 6 chains in 3 superchains of 2: chains {0, 1}, {2, 3}, {4, 5}.
  std::vector<std::vector<double>> start;
  for (std::uint32_t c = 0; c < 6; ++c) {
    CHECK(herd::mcmc::start_point_chain(s, c, 6) == c / 2 * 2);
    start.push_back(to_dram_options(s, 2, herd::mcmc::start_point_chain(s, c, 6)).start_point);
  }
  CHECK(start[0] == start[1]);
  CHECK(start[2] == start[3]);
  CHECK(start[4] == start[5]);
  CHECK(start[0] != start[2]);
  CHECK(start[2] != start[4]);
  // The superchain's start is its first chain's own random start.
  CHECK(start[2] == to_dram_options(s, 2, 2).start_point);
  // Scope "chain" (the default): every chain its own start.
  const herd::mcmc::SamplerSpecs own = specs("superchains = 3\n");
  CHECK(herd::mcmc::start_point_chain(own, 3, 6) == 3);
  // 6 chains do not split into 4 superchains; 3 do not make groups of 2.
  herd::mcmc::SamplerSpecs bad = s;
  bad.superchains = 4;
  CHECK_THROWS_WITH(herd::mcmc::check_superchains(bad, 1),
                    Catch::Contains("superchains") && Catch::Contains("6 chains"));
  // Set in the input: the message begins with where (it had no origin at all).
  CHECK_THROWS_WITH(herd::mcmc::check_superchains(specs("superchains = 4\n"), 1),
                    Catch::StartsWith("test.toml:7: key \"superchains\" is 4, but must divide the 6 chains"));
  bad.superchains = 3;
  bad.chains_per_rank = 3;
  CHECK_THROWS_AS(herd::mcmc::check_superchains(bad, 1), herd::InputError);
  CHECK_NOTHROW(herd::mcmc::check_superchains(bad, 2));  // 2 processes x 3 chains
  // The scope needs random starts and superchains.
  CHECK_THROWS_WITH(specs("random_start_point_scope = \"superchain\"\n"),
                    Catch::Contains("random_start_point_scope") && Catch::Contains("superchains >= 2"));
}

TEST_CASE("sampler specs: a namelist's partial arrays take ParaDRAM's element defaults; given start elements win",
          "[mcmc]") {
  herd::io::Schema schema("test");
  declare_sampler_specs(schema);
  const auto specs = [&](const std::string& body) {
    return resolve_sampler_specs(
        schema.apply(herd::io::parse_namelist("&ParaDRAM\nrandomSeed = 5\n" + body + "/\n", "p.nml"), {}), 4);
  };
  // ParaMonte's documented forms: x(3:4) = ..., x = 2*v (the rest unset), x(1) = v.
  SamplerSpecs s = specs(
      "domainLowerLimitVec(3:4) = -2.0, -3.0\ndomainUpperLimitVec = 2*10.0\nproposalStartStdVec(2) = 0.5\n"
      "startPointVec(3) = 1.5\n");
  const double inf = std::numeric_limits<double>::infinity();
  CHECK(s.domain_lower == std::vector<double>{-inf, -inf, -2.0, -3.0});
  CHECK(s.domain_upper == std::vector<double>{10.0, 10.0, inf, inf});
  CHECK(s.proposal_std == std::vector<double>{1.0, 0.5, 1.0, 1.0});
  // The unset start elements: the domain's centre rule, per element (as with no start_point).
  DramOptions o = to_dram_options(s, 4);
  CHECK(o.start_point == std::vector<double>{0.0, 0.0, 1.5, 0.0});
  s = specs("domainLowerLimitVec = 4*2.0\ndomainUpperLimitVec = 4*4.0\nstartPointVec(2) = 2.5\n");
  CHECK(to_dram_options(s, 4).start_point == std::vector<double>{3.0, 2.5, 3.0, 3.0});
  // random_start_point draws only the unset elements; the given one is kept, and each drawn
  // element is the one the all-random start draws (one uniform per dimension, in order).
  const std::string box =
      "randomStartPointRequested = true\nrandomStartPointDomainLowerLimitVec = 4*-1.0\n"
      "randomStartPointDomainUpperLimitVec = 4*1.0\n";
  const std::vector<double> all = to_dram_options(specs(box), 4).start_point;
  const std::vector<double> part = to_dram_options(specs(box + "startPointVec(2) = 0.25\n"), 4).start_point;
  CHECK(part == std::vector<double>{all[0], 0.25, all[2], all[3]});
  CHECK(all[1] != 0.25);
  // Every element given: random_start_point draws none, with a note.
  s = specs(box + "startPointVec = 0.1, 0.2, 0.3, 0.4\n");
  CHECK_FALSE(s.random_start_point);
  CHECK(to_dram_options(s, 4).start_point == std::vector<double>{0.1, 0.2, 0.3, 0.4});
  const auto note = std::find_if(s.notes.begin(), s.notes.end(),
                                 [](const std::string& n) { return n.find("draws no element") != std::string::npos; });
  REQUIRE(note != s.notes.end());
  CHECK_THAT(*note, Catch::StartsWith("p.nml:3: randomStartPointRequested = true draws no element of the start "
                                      "point: startPointVec (p.nml:6) gives every one"));
  // The random start box of a drawn element must be finite; a given element needs none.
  const std::string half_box =
      "randomStartPointRequested = true\nrandomStartPointDomainLowerLimitVec = 4*-1.0\n"
      "randomStartPointDomainUpperLimitVec(1:3) = 3*1.0\n";
  CHECK_THROWS_WITH(specs(half_box), Catch::Contains("the random start box's dimension 4 is [-1, inf]"));
  CHECK(to_dram_options(specs(half_box + "startPointVec(4) = 0.0\n"), 4).start_point[3] == 0.0);
  // Past ndim: refused with the element's index.
  CHECK_THROWS_WITH(specs("startPointVec(6) = 1.0\n"),
                    Catch::Contains("p.nml:3: key \"startPointVec\" sets element 6, but there are only 4 (ndim)"));
  // A name left unset takes ParaMonte's default name, as a short list's missing ones do.
  CHECK(specs("variableNameList(2) = 'bb'\n").variable_names ==
        std::vector<std::string>{"SampleVariable1", "bb", "SampleVariable3", "SampleVariable4"});
  // A TOML list stays whole: a short one is refused as before.
  CHECK_THROWS_WITH(resolve_sampler_specs(schema.apply(herd::io::parse_toml("start_point = [1.0]\n", "t.toml"), {}), 4),
                    Catch::Contains("key \"start_point\" has 1 value, but must have 4 (ndim)"));
}

TEST_CASE("sampler specs: a namelist's matrix elements (proposalStartCovMat(1,2) = ...) take the identity's elsewhere",
          "[mcmc]") {
  // Before, proposalStartCorMat(1,2) = 0.5 with (2,1) was refused as "a matrix whose rows have
  // 2, 1 elements", and (1,2) alone as "element 1 is not set"; ParaDRAM sets the element and
  // keeps its identity default for the others.
  herd::io::Schema schema("test");
  declare_sampler_specs(schema);
  const auto specs = [&](const std::string& body) {
    return resolve_sampler_specs(
        schema.apply(herd::io::parse_namelist("&ParaDRAM\nrandomSeed = 5\n" + body + "/\n", "p.nml"), {}), 3);
  };
  SamplerSpecs s = specs("proposalStartCorMat(1,2) = 0.5\nproposalStartCorMat(2,1) = 0.5\n");
  CHECK(s.proposal_cor == std::vector<double>{1, 0.5, 0, 0.5, 1, 0, 0, 0, 1});
  s = specs("proposalStartCovMat(3,3) = 4.0\nproposalStartCovMat(1:2,1:2) = 2.0, 0.3, 0.3, 2.0\n");
  CHECK(s.proposal_cov == std::vector<double>{2, 0.3, 0, 0.3, 2, 0, 0, 0, 4});
  // The report's layout: the given elements in place, NaN at the unset ones.
  REQUIRE(s.partial_layouts.size() == 1);
  CHECK(s.partial_layouts[0].first == "proposal_cov");
  CHECK(s.partial_layouts[0].second.size() == 9);
  CHECK(std::isnan(s.partial_layouts[0].second[2]));
  // A whole list with holes: the identity's elements there.
  CHECK(specs("proposalStartCovMat = 2.0, , , , 1.0, , , , 3.0\n").proposal_cov ==
        std::vector<double>{2, 0, 0, 0, 1, 0, 0, 0, 3});
  // Asymmetric elements and elements past ndim are refused, naming the element.
  CHECK_THROWS_WITH(specs("proposalStartCovMat(1,2) = 0.5\n"),
                    Catch::Contains("p.nml:3: key \"proposalStartCovMat\" is not symmetric: element (2,1) is 0"));
  CHECK_THROWS_WITH(specs("proposalStartCovMat(4,1) = 0.1\n"),
                    Catch::Contains("p.nml:3: key \"proposalStartCovMat\" sets element (4,1), but the matrix is 3 x 3 "
                                    "(ndim x ndim)"));
  CHECK_THROWS_WITH(specs("proposalStartCorMat(2,2) = 0.5\n"),
                    Catch::Contains("element (2,2) is 0.5, but a correlation matrix has 1 on its diagonal"));
  // TOML gives whole matrices, as before.
  CHECK_THROWS_WITH(
      resolve_sampler_specs(schema.apply(herd::io::parse_toml("proposal_cov = [1.0, 0.5]\n", "t.toml"), {}), 3),
      Catch::Contains("key \"proposal_cov\" has 2 values, but must have 9 (ndim x ndim)"));
}

TEST_CASE("sampler specs: a namelist's partial ball-domain keys take their defaults; a partial covariance is refused",
          "[mcmc]") {
  // Before, domainBallStdVec(2) = 10 or domainBallCorMat(1,2) = 0.5 was refused as "element 1
  // is not set and has no default (the input sets element 2 of 2)", a matrix element counted
  // as a list's.
  herd::io::Schema schema("test");
  declare_sampler_specs(schema);
  const auto specs = [&](const std::string& body) {
    return resolve_sampler_specs(
        schema.apply(herd::io::parse_namelist("&ParaDRAM\ndomain = 'ball'\n" + body + "/\n", "b.nml"), {}), 3);
  };
  const double inf = std::numeric_limits<double>::infinity();
  // Radius 2 in dimension 2 only (the others +inf, unbounded), centre 0 but in dimension 3.
  SamplerSpecs s = specs("domainBallStdVec(2) = 2.0\ndomainBallAvg(3) = 0.5\n");
  CHECK(s.domain_ball_center == std::vector<double>{0.0, 0.0, 0.5});
  CHECK(s.domain_ball_cov == std::vector<double>{inf, 0, 0, 0, 4, 0, 0, 0, inf});
  // The correlation's unset elements are the identity's.
  s = specs("domainBallCorMat(1,2) = 0.5\ndomainBallCorMat(2,1) = 0.5\ndomainBallStdVec = 3*2.0\n");
  CHECK(s.domain_ball_cov == std::vector<double>{4, 2, 0, 2, 4, 0, 0, 0, 4});
  // The covariance has no default: an unset element is refused, naming it and the way out.
  CHECK_THROWS_WITH(specs("domainBallCovMat(1,2) = 0.5\n"),
                    Catch::Equals("b.nml:3: key \"domainBallCovMat\" leaves element (1,1) unset, but the ball "
                                  "domain's covariance has no default: give all 3 x 3 (ndim x ndim) elements, or give "
                                  "domainBallCorMat (an unset element: the identity's) with domainBallStdVec"));
  // Past ndim: refused with the element's index, once.
  CHECK_THROWS_WITH(specs("domainBallCorMat(4,1) = 0.1\n"),
                    Catch::Equals("b.nml:3: key \"domainBallCorMat\" sets element (4,1), but the matrix is 3 x 3 "
                                  "(ndim x ndim)"));
  CHECK_THROWS_WITH(specs("domainBallStdVec(5) = 1.0\n"),
                    Catch::Equals("b.nml:3: key \"domainBallStdVec\" sets element 5, but there are only 3 (ndim)"));
}

TEST_CASE("sampler specs: spec_name names a key as the input does, ParaDRAM's name in a namelist that omits it",
          "[mcmc]") {
  herd::io::Schema schema("test");
  declare_sampler_specs(schema);
  const auto nml = schema.apply(herd::io::parse_namelist("&ParaDRAM\nOVERWRITEREQUESTED = true\n/\n", "p.nml"), {});
  CHECK(nml.namelist());
  CHECK(spec_name(nml, "overwrite", "overwriteRequested") == "OVERWRITEREQUESTED");
  CHECK(spec_name(nml, "delayed_rejection_count", "delayedRejectionCount") == "delayedRejectionCount");
  const auto toml = schema.apply(herd::io::parse_toml("overwrite = true\n", "t.toml"), {});
  CHECK_FALSE(toml.namelist());
  CHECK(spec_name(toml, "delayed_rejection_count", "delayedRejectionCount") == "delayed_rejection_count");
  const SamplerSpecs s = resolve_sampler_specs(nml, 2);
  CHECK(s.overwrite_name == "OVERWRITEREQUESTED");
  CHECK(s.output_prefix_name == "outputFileName");
  CHECK(resolve_sampler_specs(toml, 2).output_prefix_name == "output_prefix");
}

TEST_CASE("sampler specs: h5_posterior is verbose by default, compact on request, and leaves the input hash alone",
          "[mcmc]") {
  herd::io::Schema schema("test");
  declare_sampler_specs(schema);
  const auto settings = [&](const std::string& extra) {
    std::string text = "random_seed = 3\n";
    text += extra;
    return schema.apply(herd::io::parse_toml(text, "test.toml"), {});
  };
  CHECK(resolve_sampler_specs(settings(""), 2).h5_posterior == "verbose");
  CHECK(resolve_sampler_specs(settings("h5_posterior = \"compact\"\n"), 2).h5_posterior == "compact");
  CHECK_THROWS_WITH(settings("h5_posterior = \"foo\"\n"), Catch::Contains("test.toml:2") &&
                                                              Catch::Contains("\"h5_posterior\" is \"foo\"") &&
                                                              Catch::Contains("one of \"verbose\", \"compact\""));
  // Only the .h5's layout changes, not what the run computes: an interrupted run resumes
  // under either value (the restart record's input hash is the same).
  SampleTarget target;
  target.ndim = 2;
  SampleRunOptions verbose, compact;
  verbose.input_attributes = {{"random_seed", "3"}, {"h5_posterior", "\"verbose\""}};
  compact.input_attributes = {{"random_seed", "3"}, {"h5_posterior", "\"compact\""}};
  CHECK(sampler_input_hash(verbose, target) == sampler_input_hash(compact, target));
  SampleRunOptions other_seed = compact;
  other_seed.input_attributes.front() = {"random_seed", "4"};
  CHECK(sampler_input_hash(other_seed, target) != sampler_input_hash(compact, target));
}
