// MLP 64-256-256-16 (tanh, float32) train step on one CUDA GPU: zero_grad,
// forward, MSE, backward (cuBLAS + nn CUDA kernels) and one fused Adam launch, at batch 32
// to 65536, each with plain launches ("launch") and with forward/backward captured as a
// CUDA graph ("graph"). One benchmark iteration is 20 steps and a stream synchronisation;
// the "step_us" counter is microseconds per step. The CPU figures are bench_mlp's; the
// PyTorch GPU baseline is bench_mlp_gpu_torch.py (run it with the GPU machine's python3).
// Exits with 77 when no CUDA device is present (like the [gpu] tests).
#include <benchmark/benchmark.h>

#include <cstdio>
#include <vector>

#include <cuda_runtime.h>

#include "herd/core/cuda/cuda_check.hpp"
#include "herd/core/device.hpp"
#include "herd/core/rng.hpp"
#include "herd/nn/cuda/device_mlp.hpp"

using namespace herd;
using namespace herd::nn;

namespace {

constexpr int kStepsPerIteration = 20;

void bm_train(benchmark::State& st, std::int64_t batch, bool graph) {
  MlpOptions o;
  o.sizes = {64, 256, 256, 16};
  o.activation = Activation::kTanh;
  Mlp cpu(o);
  cudaStream_t stream = nullptr;
  HERD_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  {
    cuda::DeviceMlp gpu(cpu, o, stream);
    std::vector<float> x(static_cast<std::size_t>(batch * 64)), y(static_cast<std::size_t>(batch * 16));
    RngCursor c = RngStream(7, 1, RngPurpose::kUser).at(0);
    for (auto& v : x) v = static_cast<float>(c.normal());
    for (auto& v : y) v = static_cast<float>(c.normal());
    float *dx = nullptr, *dy = nullptr;
    HERD_CUDA_CHECK(cudaMalloc(&dx, x.size() * sizeof(float)));
    HERD_CUDA_CHECK(cudaMalloc(&dy, y.size() * sizeof(float)));
    HERD_CUDA_CHECK(cudaMemcpyAsync(dx, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice, stream));
    HERD_CUDA_CHECK(cudaMemcpyAsync(dy, y.data(), y.size() * sizeof(float), cudaMemcpyHostToDevice, stream));
    if (graph) gpu.capture(dx, dy, batch);
    gpu.train_step(dx, dy, batch);
    HERD_CUDA_CHECK(cudaStreamSynchronize(stream));
    for (auto _ : st) {
      for (int i = 0; i < kStepsPerIteration; ++i) gpu.train_step(dx, dy, batch);
      HERD_CUDA_CHECK(cudaStreamSynchronize(stream));
    }
    st.counters["step_us"] = benchmark::Counter(
        kStepsPerIteration * 1e-6, benchmark::Counter::kIsIterationInvariantRate | benchmark::Counter::kInvert);
    st.counters["loss"] = gpu.loss();
    cudaFree(dx);
    cudaFree(dy);
  }
  HERD_CUDA_CHECK(cudaStreamDestroy(stream));
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
