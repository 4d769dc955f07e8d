// Batched DRAM benchmark, host path. Workload of the issue: 10-D Gaussian with
// AR(1) correlation 0.5, one delayed-rejection stage, adaptation pooled during the warm-up
// and then frozen, draws thinned by 10. Reports, as one JSON object (medians of `repeats`):
//   - serial_steps_per_s: the serial kernel (DramSampler, same log-density functor, one DR
//     stage, its own adaptation), one thread: the same-run baseline;
//   - batched_steps_per_s_per_core: the host path with one thread (M chains in lock-step),
//     and ratio_batched_vs_serial;
//   - batched_steps_per_s_all / threads: all hardware threads, per core;
//   - hdf5_steps_per_s: one thread, the thinned draws streamed to an HDF5 file;
//   - surrogate_steps_per_s: an MLP 10-64-64-1 (tanh, float32) as the target (0.1 * output on
//     the box [-3, 3]^10) through the staged path (one batched forward per stage round over
//     all chains), one thread for the sampler and for the network.
// The log density is the same GaussianLogDensity functor everywhere, so the ratio isolates
// the samplers' own cost. On a loaded machine quote the ratio, not absolute figures.
//
// Usage: bench_batched_dram [chains=2000] [steps=2000] [repeats=3]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "herd/core/timer.hpp"
#include "herd/mcmc/batched_dram.hpp"
#include "herd/mcmc/batched_targets.hpp"
#include "herd/mcmc/chain_sink.hpp"
#include "herd/mcmc/dram.hpp"
#include "herd/nn/mlp.hpp"
#include "herd/nn/module.hpp"

using namespace herd::mcmc;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Discards the draws (measures the sampler alone).
class NullSink final : public BatchedDrawSink {
 public:
  void begin(std::int64_t, std::uint32_t, int, std::int64_t) override {}
  void write_block(std::int64_t, std::int64_t, const double*, const double*) override {}
  void finish() override {}
};

}  // namespace

int main(int argc, char** argv) {
  const std::int64_t chains = argc > 1 ? std::atoll(argv[1]) : 2000;
  const std::int64_t steps = argc > 2 ? std::atoll(argv[2]) : 2000;
  const int repeats = argc > 3 ? std::atoi(argv[3]) : 3;
  const int d = 10;
  const GaussianTarget g = GaussianTarget::ar1(d, 0.5);
  const auto gv = g.view();
  const int hw = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));

  BatchedDramOptions o;
  o.ndim = d;
  o.num_chains = chains;
  o.seed = 11;
  o.start_points.assign(d, 0.0);
  o.warmup = steps / 5;
  o.steps = steps - o.warmup;
  o.thin = 10;
  o.delayed_rejection_count = 1;
  o.adaptation = BatchedAdaptation::kPooled;
  o.block_draws = 100;

  std::vector<double> serial, b1, ball, h5, sur, acc;
  const std::int64_t serial_steps = chains * steps / 4;
  const auto h5path = (std::filesystem::temp_directory_path() / "herd_bench_batched.h5").string();

  herd::nn::MlpOptions mo;
  mo.sizes = {d, 64, 64, 1};
  mo.activation = herd::nn::Activation::kTanh;
  mo.dtype = herd::nn::DType::kFloat32;
  herd::nn::Mlp net(mo);
  // Target 0.1 * mlp(x) on the box [-3, 3]^10 (a proper density), as the GPU benchmark.
  MlpLogDensity surrogate(net, d, {}, {}, 0.1, 0.0);
  herd::nn::set_num_threads(1);  // per-core figure: the network's GEMMs on this thread only
  const std::int64_t sur_chains = std::min<std::int64_t>(chains, 1000);

  for (int r = 0; r < repeats; ++r) {
    {
      DramOptions so;
      so.start_point.assign(d, 0.0);
      so.seed = 11 + r;
      so.chain_size = std::int64_t{1} << 40;
      so.max_proposals = serial_steps;
      so.delayed_rejection_count = 1;
      DramSampler s(so, [&](const double* x, int dd) { return gv(x, dd); });
      NullChainSink sink;
      herd::Timer t;
      s.run(sink);
      serial.push_back(static_cast<double>(serial_steps) / t.seconds());
    }
    NullSink null;
    o.num_threads = 1;
    const auto r1 = run_batched_dram(o, gv, null);
    b1.push_back(r1.chain_steps_per_second);
    acc.push_back(r1.acceptance_rate);
    o.num_threads = hw;
    ball.push_back(run_batched_dram(o, gv, null).chain_steps_per_second / hw);
    o.num_threads = 1;
    {
      Hdf5BatchedSink hs(h5path);
      h5.push_back(run_batched_dram(o, gv, hs).chain_steps_per_second);
    }
    BatchedDramOptions so = o;
    so.num_chains = sur_chains;
    so.steps = std::min<std::int64_t>(o.steps, 200);
    so.warmup = 50;
    so.start_points.assign(d, 0.0);
    so.domain_lower.assign(d, -3.0);
    so.domain_upper.assign(d, 3.0);
    sur.push_back(
        run_batched_dram(
            so, BatchedLogDensity([&](const double* x, int n, int dd, double* out) { surrogate(x, n, dd, out); }), null)
            .chain_steps_per_second);
  }
  std::filesystem::remove(h5path);
  std::printf(
      "{\"workload\": \"10-D Gaussian AR(1) 0.5, 1 DR stage, pooled-then-frozen, thin 10\", \"chains\": %lld, "
      "\"steps_per_chain\": %lld, \"repeats\": %d, \"serial_steps_per_s\": %.4g, "
      "\"batched_steps_per_s_per_core\": %.4g, \"ratio_batched_vs_serial\": %.3f, \"threads\": %d, "
      "\"batched_steps_per_s_all_per_core\": %.4g, \"hdf5_steps_per_s\": %.4g, \"ratio_hdf5_vs_null\": %.3f, "
      "\"surrogate_chains\": %lld, \"surrogate_steps_per_s\": %.4g, \"acceptance\": %.3f}\n",
      static_cast<long long>(chains), static_cast<long long>(steps), repeats, median(serial), median(b1),
      median(b1) / median(serial), hw, median(ball), median(h5), median(h5) / median(b1),
      static_cast<long long>(sur_chains), median(sur), median(acc));
  return 0;
}
