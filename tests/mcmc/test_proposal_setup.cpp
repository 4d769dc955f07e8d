// The pieces the serial DRAM kernel (dram.cpp) and the batched one (batched_dram.cpp) share:
// the Cholesky factorisation with its singularity rule, the option checks and the start
// proposal. The same input must give the same factor, the same refusal and the same error
// on both paths.
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "herd/core/error.hpp"
#include "herd/mcmc/analytic_targets.hpp"
#include "herd/mcmc/batched_dram.hpp"
#include "herd/mcmc/batched_dram_kernel.hpp"
#include "herd/mcmc/chain_sink.hpp"
#include "herd/mcmc/dram.hpp"
#include "herd/mcmc/proposal_setup.hpp"

using namespace herd::mcmc;

namespace {

// A flat log density: these tests only construct the samplers.
double flat(const double*, int) { return 0.0; }

// The message of what `f` throws, less the caller's name ("dram: ", "batched_dram: ").
std::string error_of(const std::function<void()>& f, const std::string& who) {
  try {
    f();
  } catch (const herd::InputError& e) {
    const std::string m = e.what();
    return m.rfind(who + ": ", 0) == 0 ? m.substr(who.size() + 2) : "(no '" + who + ": ' prefix) " + m;
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("shared Cholesky: a known factor, in place or not", "[mcmc][dram][batched]") {
  // A = L L^T with L = [[2, 0, 0], [1, 3, 0], [-1, 1, sqrt(3)]].
  const double a[9] = {4, 2, -2, 2, 10, 2, -2, 2, 5};
  double l[9];
  for (double& v : l) v = 99.0;  // the upper triangle must be zeroed
  REQUIRE(batched::cholesky(a, 3, l));
  const double want[9] = {2, 0, 0, 1, 3, 0, -1, 1, std::sqrt(3.0)};
  for (int q = 0; q < 9; ++q) {
    INFO("entry " << q);
    CHECK(l[q] == Approx(want[q]).margin(1e-15));
  }
  double inplace[9];
  for (int q = 0; q < 9; ++q) inplace[q] = a[q];
  REQUIRE(batched::cholesky(inplace, 3, inplace));
  for (int q = 0; q < 9; ++q) CHECK(inplace[q] == l[q]);
}

TEST_CASE("shared Cholesky: the singularity rule refuses numerically singular matrices", "[mcmc][dram][batched]") {
  double l[4];
  auto factor = [&](double a00, double a01, double a11) {
    const double a[4] = {a00, a01, a01, a11};
    return batched::cholesky(a, 2, l);
  };
  CHECK_FALSE(factor(1.0, 1.0, 1.0));   // rank 1
  CHECK_FALSE(factor(0.0, 0.0, 1.0));   // zero pivot
  CHECK_FALSE(factor(-1.0, 0.0, 1.0));  // negative pivot
  CHECK_FALSE(factor(std::numeric_limits<double>::infinity(), 0.0, 1.0));
  CHECK_FALSE(factor(std::nan(""), 0.0, 1.0));
  // Correlation rho: the conditional variance 1 - rho^2 against kSingularRatio = 1e-12.
  CHECK(batched::kSingularRatio == 1e-12);
  CHECK_FALSE(factor(1.0, 1.0 - 1e-13, 1.0));  // 1 - rho^2 ~ 2e-13: refused
  CHECK(factor(1.0, 1.0 - 1e-10, 1.0));        // ~ 2e-10: accepted
  CHECK(l[3] == Approx(std::sqrt(1.0 - (1.0 - 1e-10) * (1.0 - 1e-10))).epsilon(1e-5));
  // The rule is relative to the marginal variance: scale-free.
  CHECK(factor(1e-30, 0.0, 1e30));
}

TEST_CASE("shared Cholesky: a singular adaptive update keeps the previous factor (batched path)", "[mcmc][batched]") {
  // Three warm-up states on the line x1 = x2 about the reference 0: scatter [[2, 2], [2, 2]].
  const int d = 2;
  const double s1[2] = {6, 6};
  const double s2[4] = {14, 0, 14, 14};  // lower triangle read
  const double ref[2] = {0, 0};
  double run_n = 0, run_mean[2] = {0, 0}, run_m2[4] = {0, 0, 0, 0};
  double chol[4] = {0.5, 0, 0.1, 0.5}, work[4];
  CHECK(batched::merge_and_factor(d, 3.0, s1, s2, ref, run_n, run_mean, run_m2, 1.0, chol, work) == -1);
  CHECK(run_n == 3.0);  // the estimate is merged all the same
  CHECK(run_m2[0] == Approx(2.0));
  CHECK(run_m2[1] == Approx(2.0));
  const double before[4] = {0.5, 0, 0.1, 0.5};
  for (int q = 0; q < 4; ++q) CHECK(chol[q] == before[q]);

  // In a run: chains that never move give zero scatter; every update fails and is counted,
  // and the start proposal stays.
  BatchedDramOptions o;
  o.ndim = d;
  o.num_chains = 3;
  o.start_points = {0.25, -0.5};
  o.proposal_start_std = {0.5, 2.0};
  o.warmup = 40;
  o.steps = 8;
  o.adaptive_update_period = 8;
  o.adaptation = BatchedAdaptation::kPerChain;
  o.num_threads = 1;
  MemoryBatchedSink sink;
  const auto r = run_batched_dram(
      o,
      [](const double* x, int) {
        return x[0] == 0.25 && x[1] == -0.5 ? 0.0 : -std::numeric_limits<double>::infinity();
      },
      sink);
  CHECK(r.adaptive_updates == 0);
  CHECK(r.chol_failures == 3 * 5);  // 3 chains x 5 updates
  CHECK(r.proposal_cov == std::vector<double>{0.25, 0.0, 0.0, 4.0});
}

TEST_CASE("shared Cholesky: a singular adaptive update keeps the previous factor (serial path)", "[mcmc][dram]") {
  // A running estimate of weight 1e20 on the line x1 = x2: the shrinkage towards the start
  // guess (weight 3 d^2 = 12) leaves a conditional variance ~1e-19 of the marginal one,
  // below the rule's 1e-12, so the update fails, is counted, and the proposal stays.
  DramOptions o;
  o.start_point = {0.5, 0.5};
  o.seed = 42;
  o.chain_size = 1000;
  o.adaptive_update_period = 10;
  auto reject = [](const double* x, int) { return x[0] == 0.5 && x[1] == 0.5 ? 0.0 : -INFINITY; };
  DramSampler s(o, reject);
  DramState st = s.state();
  st.mean = {0, 0};
  st.m2 = {1e20, 1e20, 1e20, 1e20};
  st.cov_weight = 1e20;
  st.cov_unique = 50;
  st.weight = 1;
  st.current_counted = 1;
  s.set_state(st);
  const auto chol_before = s.state().chol;
  NullChainSink sink;
  for (int k = 0; k < 10; ++k) s.step(sink);
  CHECK(s.state().updates_done == 1);
  CHECK(s.state().chol_failures == 1);
  CHECK(s.state().chol == chol_before);
  // The same estimate off the line factors: the failure was the singularity rule's.
  DramSampler t(o, reject);
  st.m2 = {1e20, 0.5e20, 0.5e20, 1e20};
  t.set_state(st);
  for (int k = 0; k < 10; ++k) t.step(sink);
  CHECK(t.state().chol_failures == 0);
  CHECK(t.state().chol != chol_before);
}

TEST_CASE("proposal setup: the start proposal is the same factor on both paths, with known answers",
          "[mcmc][dram][batched]") {
  SECTION("known answers") {
    const auto c = detail::start_proposal({4, 2, 2, 10}, {}, 2, "t");
    CHECK(c.cov == std::vector<double>{4, 2, 2, 10});
    CHECK(c.chol == std::vector<double>{2, 0, 1, 3});
    CHECK(detail::start_proposal({}, {2, 3}, 2, "t").chol == std::vector<double>{2, 0, 0, 3});
    CHECK(detail::start_proposal({}, {}, 2, "t").chol == std::vector<double>{1, 0, 0, 1});
    // The start covariance alone (what the HTML reports of both engines show) is the one the
    // factor is of: the given one, diag(std^2), or the identity.
    CHECK(detail::start_covariance({4, 2, 2, 10}, {}, 2) == std::vector<double>{4, 2, 2, 10});
    CHECK(detail::start_covariance({}, {2, 3}, 2) == std::vector<double>{4, 0, 0, 9});
    CHECK(detail::start_covariance({}, {}, 2) == std::vector<double>{1, 0, 0, 1});
    CHECK(detail::start_proposal({}, {2, 3}, 2, "t").cov == detail::start_covariance({}, {2, 3}, 2));
    CHECK(detail::start_proposal({}, {}, 2, "t").cov == detail::start_covariance({}, {}, 2));
    CHECK(detail::stage_scales(2, {}, 4, 5, "t") ==
          std::vector<double>{1.0, std::pow(0.5, 0.25), std::pow(0.5, 0.25) * std::pow(0.5, 0.25)});
    CHECK(detail::stage_scales(2, {0.5, 0.2}, 4, 5, "t") == std::vector<double>{1.0, 0.5, 0.5 * 0.2});
    CHECK(detail::adaptive_update_period(0, 3, "t") == 12);
    CHECK(detail::adaptive_update_period(7, 3, "t") == 7);
  }
  SECTION("serial and batched kernels start from the same bits") {
    const int d = 3;
    const std::vector<double> cov = {1.3, 0.4, -0.2, 0.4, 0.9, 0.1, -0.2, 0.1, 2.1};
    for (bool by_std : {false, true}) {
      INFO("by_std = " << by_std);
      DramOptions so;
      so.start_point = {0.1, 0.2, 0.3};
      BatchedDramOptions bo;
      bo.ndim = d;
      bo.num_chains = 2;
      bo.start_points = so.start_point;
      if (by_std) {
        so.proposal_start_std = bo.proposal_start_std = {0.3, 1.7, 0.05};
      } else {
        so.proposal_start_cov = bo.proposal_start_cov = cov;
      }
      const DramSampler serial(so, flat);
      const detail::BatchedEngine engine(bo);
      const double* l = engine.arrays().chol;
      CHECK(std::vector<double>(l, l + d * d) == serial.state().chol);
    }
  }
}

TEST_CASE("proposal setup: the serial and batched kernels refuse the same options with the same message",
          "[mcmc][dram][batched]") {
  struct Case {
    const char* name;
    std::function<void(std::vector<double>& cov, std::vector<double>& sd, std::vector<double>& lo,
                       std::vector<double>& hi, int& dr, std::vector<double>& drf, std::int64_t& period)>
        edit;
    const char* needle;
  };
  const std::vector<Case> cases = {
      {"cov size",
       [](auto& c, auto&, auto&, auto&, auto&, auto&, auto&) {
         c = {1, 0, 1};
       },
       "proposal_start_cov has 3 values, but must have d*d = 4"},
      {"cov and std",
       [](auto& c, auto& s, auto&, auto&, auto&, auto&, auto&) {
         c = {1, 0, 0, 1};
         s = {1, 1};
       },
       "give proposal_start_cov or proposal_start_std, not both"},
      {"asymmetric",
       [](auto& c, auto&, auto&, auto&, auto&, auto&, auto&) {
         c = {1, 0.5, 0.4, 1};
       },
       "proposal_start_cov is not symmetric"},
      {"indefinite",
       [](auto& c, auto&, auto&, auto&, auto&, auto&, auto&) {
         c = {1, 2, 2, 1};
       },
       "proposal_start_cov is not positive definite"},
      {"std size", [](auto&, auto& s, auto&, auto&, auto&, auto&, auto&) { s = {1}; },
       "proposal_start_std has 1 values, but must have d = 2"},
      {"std value",
       [](auto&, auto& s, auto&, auto&, auto&, auto&, auto&) {
         s = {1, -2};
       },
       "proposal_start_std[1] is -2, but must be positive and finite"},
      {"dr factors size",
       [](auto&, auto&, auto&, auto&, auto& dr, auto& f, auto&) {
         dr = 2;
         f = {0.5, 0.5, 0.5};
       },
       "delayed_rejection_scale_factors has 3 values"},
      {"dr factor value",
       [](auto&, auto&, auto&, auto&, auto& dr, auto& f, auto&) {
         dr = 1;
         f = {0.0};
       },
       "delayed_rejection_scale_factors[0] is 0, but must be positive and finite"},
      {"lower size", [](auto&, auto&, auto& lo, auto&, auto&, auto&, auto&) { lo = {-1}; },
       "domain_lower has 1 values, but must have d = 2"},
      {"upper size",
       [](auto&, auto&, auto&, auto& hi, auto&, auto&, auto&) {
         hi = {1, 1, 1};
       },
       "domain_upper has 3 values, but must have d = 2"},
      {"empty box",
       [](auto&, auto&, auto& lo, auto& hi, auto&, auto&, auto&) {
         lo = {-1, 1};
         hi = {1, 1};
       },
       "domain_lower[1] = 1 and domain_upper[1] = 1, but lower must be < upper"},
      {"NaN bound",
       [](auto&, auto&, auto& lo, auto&, auto&, auto&, auto&) {
         lo = {std::nan(""), -1};
       },
       "domain_lower[0] = nan and domain_upper[0] = inf, but lower must be < upper"},
      {"period", [](auto&, auto&, auto&, auto&, auto&, auto&, auto& p) { p = -3; },
       "adaptive_update_period is -3, but must be >= 0 (0: 4*d)"},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    DramOptions so;
    so.start_point = {0.0, 0.0};
    BatchedDramOptions bo;
    bo.ndim = 2;
    bo.num_chains = 2;
    bo.start_points = {0.0, 0.0};
    c.edit(so.proposal_start_cov, so.proposal_start_std, so.domain_lower, so.domain_upper, so.delayed_rejection_count,
           so.delayed_rejection_scale_factors, so.adaptive_update_period);
    c.edit(bo.proposal_start_cov, bo.proposal_start_std, bo.domain_lower, bo.domain_upper, bo.delayed_rejection_count,
           bo.delayed_rejection_scale_factors, bo.adaptive_update_period);
    const std::string serial = error_of([&] { DramSampler s(so, flat); }, "dram");
    const std::string batched = error_of([&] { detail::BatchedEngine e(bo); }, "batched_dram");
    CHECK(serial == batched);
    CHECK_THAT(serial, Catch::Contains(c.needle));
  }
}
