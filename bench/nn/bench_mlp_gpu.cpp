// MLP 64-256-256-16 (tanh, float32) train step on one CUDA GPU through the module API
// (an `Mlp` on Device::cuda(0), `MseLoss`, `Adam`): zero_grad, forward, MSE, backward
// (cuBLAS + nn CUDA kernels) and the Adam update, at batch 32 to 65536, each with plain
// launches ("launch": `GraphedTrainStep` with use_graph = false, the eager step) and with
// the whole step captured as a CUDA graph and replayed ("graph": `GraphedTrainStep`). One
// benchmark iteration is 20 steps and a synchronisation of the nn stream;
// the "step_us" counter is microseconds per step. The CPU figures are bench_mlp's; the
// PyTorch GPU baseline is bench_mlp_gpu_torch.py (run it with the GPU machine's python3).
// Exits with 77 when no CUDA device is present (like the [gpu] tests).
#include <benchmark/benchmark.h>

#include <cstdio>
#include <vector>

#include "herd/core/device.hpp"
#include "herd/core/rng.hpp"
#include "herd/nn/graphed_train_step.hpp"
#include "herd/nn/losses.hpp"
#include "herd/nn/mlp.hpp"
#include "herd/nn/optimizer.hpp"

using namespace herd;
using namespace herd::nn;

namespace {

constexpr int kStepsPerIteration = 20;

void bm_train(benchmark::State& st, std::int64_t batch, bool graph) {
  const Device gpu = Device::cuda(0);
  MlpOptions o;
  o.sizes = {64, 256, 256, 16};
  o.activation = Activation::kTanh;
  o.device = gpu;
  Mlp net(o);
  Adam adam(net.named_parameters(), 1e-3);
  MseLoss mse;
  GraphedTrainStep step(net, mse, adam, graph);
  Tensor x({batch, 64}, DType::kFloat32), y({batch, 16}, DType::kFloat32);
  RngCursor c = RngStream(7, 1, RngPurpose::kUser).at(0);
  for (std::int64_t i = 0; i < x.numel(); ++i) x.set_item(i, c.normal());
  for (std::int64_t i = 0; i < y.numel(); ++i) y.set_item(i, c.normal());
  const Tensor xd = x.to(gpu), yd = y.to(gpu);
  // Warm-up: the eager first step, then (graph) the capture.
  LossValue loss = step.step(xd, yd);
  loss = step.step(xd, yd);
  synchronize(gpu);
  for (auto _ : st) {
    for (int i = 0; i < kStepsPerIteration; ++i) loss = step.step(xd, yd);
    synchronize(gpu);
  }
  st.counters["step_us"] = benchmark::Counter(
      kStepsPerIteration * 1e-6, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
  st.counters["loss"] = loss.value();
  if (!step.graph_error().empty()) st.SetLabel("graph capture failed: " + step.graph_error());
}

}  // namespace

int main(int argc, char** argv) {
  if (cuda_device_count() == 0) {
    std::printf("SKIPPED: no CUDA device: %s\n", describe_devices().c_str());
    return kSkipReturnCode;
  }
  std::printf("%s\n", describe_devices().c_str());
  for (std::int64_t batch : {32, 256, 1024, 4096, 16384, 65536})
    for (bool graph : {false, true})
      benchmark::RegisterBenchmark(
          (std::string("gpu_train/") + (graph ? "graph" : "launch") + "/batch:" + std::to_string(batch)).c_str(),
          [batch, graph](benchmark::State& st) { bm_train(st, batch, graph); })
          ->Unit(benchmark::kMicrosecond)
          ->UseRealTime();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
