// herd_surrogate_example: trains a neural surrogate of an expensive model's log likelihood
// with the nn layer, samples it with the batched DRAM sampler (draws streamed to HDF5), and
// compares with sampling the expensive model itself. See herd/examples/surrogate.hpp.
// Usage: herd_surrogate_example [out.h5=surrogate.h5] [chains=1000]
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "herd/core/timer.hpp"
#include "herd/examples/surrogate.hpp"

using namespace herd;

int main(int argc, char** argv) {
  const std::string out = argc > 1 ? argv[1] : "surrogate.h5";
  const std::int64_t chains = argc > 2 ? std::atoll(argv[2]) : 1000;
  const auto model = examples::LogisticModel::synthetic(10, 0.1, 1);
  Timer t;
  auto s = examples::train_surrogate(model, {0.3, 0.6}, {1.6, 2.0}, 3000, 3000, 2);
  std::printf("surrogate: %lld model runs, training RMSE %.3g (log-likelihood units), %.2f s\n",
              static_cast<long long>(s.model_runs), s.train_rmse, t.seconds());
  mcmc::BatchedDramOptions o;
  o.ndim = 2;
  o.num_chains = chains;
  o.start_points = {1.0, 1.0};
  o.domain_lower = {0.3, 0.6};
  o.domain_upper = {1.6, 2.0};
  o.warmup = 500;
  o.steps = 1000;
  o.thin = 10;
  mcmc::MemoryBatchedSink mem;
  const auto rs = examples::sample_surrogate(s, o, mem);
  {
    mcmc::Hdf5BatchedSink h5(out);
    h5.begin(mem.num_chains, mem.first_chain_id, mem.ndim, mem.draws);
    h5.write_block(0, mem.draws, mem.x.data(), mem.lp.data());
    h5.finish();
  }
  const auto ds = mcmc::batched_diagnostics(mem, 10);
  std::printf("%s", mcmc::batched_report(o, rs, ds).c_str());
  mcmc::MemoryBatchedSink exact;
  const auto re = mcmc::run_batched_dram(
      o, [&](const double* x, int) { return model.log_likelihood(x) + examples::LogisticModel::log_prior(x); }, exact);
  const auto de = mcmc::batched_diagnostics(exact, 10);
  std::printf("exact model: %.4g chain-steps/s; surrogate: %.4g chain-steps/s (%.1fx)\n", re.chain_steps_per_second,
              rs.chain_steps_per_second, rs.chain_steps_per_second / re.chain_steps_per_second);
  for (int j = 0; j < 2; ++j)
    std::printf("theta[%d]: surrogate mean %.4f sd %.4f | exact mean %.4f sd %.4f\n", j, ds[j].mean, ds[j].sd,
                de[j].mean, de[j].sd);
  std::printf("draws written to %s\n", out.c_str());
  return 0;
}
