// Batched DRAM on the GPU, Google Benchmark; run by scripts/gpu-check. Workload
// of the issue: 10-D Gaussian, AR(1) correlation 0.5, one delayed-rejection stage,
// adaptation pooled during the warm-up (200 proposals) and then frozen, 1000 proposals per
// chain after it. Counter `chain_steps_per_s` = chains * 1200 / wall time (goal 1e10 with
// 1M chains on one H200; `vs_goal` is the ratio). Variants: draws thinned by 10 copied back
// to the host in blocks (the sink discards them: the device-to-host copy is measured, the
// file system is not), and thin = 1000 (one draw per chain: the kernel alone). Also the
// neural-surrogate target (BM_BatchedSurrogate10). Prints
// "SKIPPED" and exits 0 without a CUDA device.
#include <cstdio>

#include <benchmark/benchmark.h>

#include "herd/core/device.hpp"
#include "herd/mcmc/batched_dram.hpp"
#include "herd/mcmc/batched_targets.hpp"
#include "herd/mcmc/cuda/batched_dram_cuda.hpp"
#include "herd/mcmc/cuda/batched_surrogate_cuda.hpp"
#include "herd/nn/mlp.hpp"

using namespace herd::mcmc;

namespace {

class NullSink final : public BatchedDrawSink {
 public:
  void begin(std::int64_t, std::uint32_t, int, std::int64_t) override {}
  void write_block(std::int64_t, std::int64_t, const double*, const double*) override {}
  void finish() override {}
};

void BM_BatchedGaussian10(benchmark::State& state) {
  const auto chains = static_cast<std::int64_t>(state.range(0));
  const auto thin = static_cast<std::int64_t>(state.range(1));
  const GaussianTarget g = GaussianTarget::ar1(10, 0.5);
  BatchedDramOptions o;
  o.ndim = 10;
  o.num_chains = chains;
  o.seed = 5;
  o.start_points.assign(10, 0.0);
  o.warmup = 200;
  o.steps = 1000;
  o.thin = thin;
  o.delayed_rejection_count = 1;
  o.adaptation = BatchedAdaptation::kPooled;
  o.block_draws = 10;
  NullSink sink;
  double steps_per_s = 0.0, acc = 0.0;
  for (auto _ : state) {
    const auto r = cuda::run_batched_gaussian(o, g, sink);
    steps_per_s = r.chain_steps_per_second;
    acc = r.acceptance_rate;
  }
  state.counters["chain_steps_per_s"] = steps_per_s;
  state.counters["vs_goal"] = steps_per_s / 1e10;
  state.counters["acceptance"] = acc;
}
BENCHMARK(BM_BatchedGaussian10)
    ->Args({1 << 16, 10})
    ->Args({1 << 20, 10})
    ->Args({1 << 20, 1000})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(2);

// The neural-surrogate target (MLP 10-64-64-1, tanh, float32; goal 1e9 chain-steps/s with
// 1M chains): one forward of the nn Mlp on the device over all chains per stage round, 2
// rounds per proposal.
void BM_BatchedSurrogate10(benchmark::State& state) {
  const auto chains = static_cast<std::int64_t>(state.range(0));
  herd::nn::MlpOptions mo;
  mo.sizes = {10, 64, 64, 1};
  mo.activation = herd::nn::Activation::kTanh;
  mo.dtype = herd::nn::DType::kFloat32;
  herd::nn::Mlp net(mo);
  BatchedDramOptions o;
  o.ndim = 10;
  o.num_chains = chains;
  o.seed = 6;
  o.start_points.assign(10, 0.0);
  o.domain_lower.assign(10, -3.0);
  o.domain_upper.assign(10, 3.0);
  o.warmup = 40;
  o.steps = 160;
  o.thin = 10;
  o.delayed_rejection_count = 1;
  o.block_draws = 16;
  NullSink sink;
  double steps_per_s = 0.0;
  for (auto _ : state)
    steps_per_s = cuda::run_batched_surrogate(o, net, mo, {}, {}, 0.1, 0.0, sink).chain_steps_per_second;
  state.counters["chain_steps_per_s"] = steps_per_s;
  state.counters["vs_goal"] = steps_per_s / 1e9;
}
BENCHMARK(BM_BatchedSurrogate10)->Arg(1 << 16)->Arg(1 << 20)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace

int main(int argc, char** argv) {
  if (herd::cuda_device_count() == 0) {
    std::printf("SKIPPED: no CUDA device\n");
    return 0;
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
