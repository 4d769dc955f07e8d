// The neural-surrogate example: a surrogate trained on runs of the expensive
// model gives the exact model's posterior to within tolerances (fit error, not chance,
// dominates: the Monte Carlo error of the means here is below 0.01 posterior sd).
// Deterministic (fixed seeds).
#include <cmath>

#include <catch2/catch.hpp>

#include "herd/examples/surrogate.hpp"

using namespace herd;

TEST_CASE("surrogate example: trained MLP log likelihood samples the expensive model's posterior",
          "[examples][mcmc][nn]") {
  auto model = examples::LogisticModel::synthetic(10, 0.1, 1);
  model.rk4_steps = 40;  // cheaper "expensive" model for the test
  auto s = examples::train_surrogate(model, {0.3, 0.6}, {1.6, 2.0}, 2000, 2000, 2);
  INFO("training RMSE " << s.train_rmse);
  CHECK(s.model_runs == 2000);
  mcmc::BatchedDramOptions o;
  o.ndim = 2;
  o.num_chains = 400;
  o.start_points = {1.0, 1.0};
  o.domain_lower = {0.3, 0.6};
  o.domain_upper = {1.6, 2.0};
  o.warmup = 300;
  o.steps = 600;
  o.thin = 10;
  o.num_threads = 2;
  mcmc::MemoryBatchedSink sur, exact;
  examples::sample_surrogate(s, o, sur);
  mcmc::run_batched_dram(
      o, [&](const double* x, int) { return model.log_likelihood(x) + examples::LogisticModel::log_prior(x); }, exact);
  const auto ds = mcmc::batched_diagnostics(sur, 4), de = mcmc::batched_diagnostics(exact, 4);
  for (int j = 0; j < 2; ++j) {
    INFO("theta[" << j << "]: surrogate " << ds[j].mean << " +- " << ds[j].sd << ", exact " << de[j].mean << " +- "
                  << de[j].sd);
    CHECK(std::abs(ds[j].mean - de[j].mean) < 0.5 * de[j].sd);
    CHECK(std::abs(ds[j].sd / de[j].sd - 1.0) < 0.2);
    CHECK(ds[j].rhat < 1.05);
  }
}
