// Tests of the convergence diagnostics against R posterior 1.4.0, emcee and R's ks.test
// (tests/mcmc/data/diagnostics_reference.md), plus edge cases and identities.
#include <cmath>
#include <limits>
#include <vector>

#include <catch2/catch.hpp>

#include "diagnostics_vectors.hpp"
#include "herd/core/error.hpp"
#include "herd/mcmc/autocorrelation.hpp"
#include "herd/mcmc/diagnostics.hpp"
#include "herd/mcmc/ks_test.hpp"
#include "herd/mcmc/refinement.hpp"

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
