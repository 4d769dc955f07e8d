// The nn benchmark's GPU table through the module API (issue #12): MLP 64-256-256-16
// (tanh, float32) built for Device::cuda(0), train step = zero_grad, forward, MseLoss,
// backward, Adam step, batch 32 to 65536. Baseline measured in the same run: the
// hand-written cuBLAS train step of nn::cuda::DeviceMlp (plain launches, no graph) on the
// same data. Prints one table: microseconds per step of both and their ratio
// (module / DeviceMlp; > 1 means the module API is slower). The module step synchronises
// once per step (MseLoss::forward returns the loss as a host double), DeviceMlp does not.
// Exits with 77 when no CUDA device is present (like the [gpu] tests). Command-line
// arguments (scripts/gpu-check passes Google Benchmark flags) are ignored.
#include <chrono>
#include <cstdio>
#include <vector>

#include <cuda_runtime.h>

#include "herd/core/cuda/cuda_check.hpp"
#include "herd/core/device.hpp"
#include "herd/core/rng.hpp"
#include "herd/nn/cuda/device_mlp.hpp"
#include "herd/nn/losses.hpp"
#include "herd/nn/mlp.hpp"
#include "herd/nn/optimizer.hpp"

using namespace herd;
using namespace herd::nn;

namespace {

// Steps per timing: enough for about 50 ms at the largest batch, at least 20.
int steps_for(std::int64_t batch) { return batch >= 16384 ? 20 : batch >= 4096 ? 50 : 200; }

template <class F>
double time_us(F&& step, int steps, Device d) {
  for (int i = 0; i < 3; ++i) step();  // warm-up (allocations, cuBLAS heuristics)
  synchronize(d);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < steps; ++i) step();
  synchronize(d);
  const auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::micro>(t1 - t0).count() / steps;
}

}  // namespace

int main() {
  if (cuda_device_count() == 0) {
    std::printf("SKIPPED: no CUDA device: %s\n", describe_devices().c_str());
    return kSkipReturnCode;
  }
  std::printf("%s\n", describe_devices().c_str());
  const Device gpu = Device::cuda(0);
  MlpOptions o;
  o.sizes = {64, 256, 256, 16};
  o.activation = Activation::kTanh;
  std::printf("%-8s %14s %14s %8s %12s\n", "batch", "module_us", "device_mlp_us", "ratio", "loss");
  for (std::int64_t batch : {32, 256, 1024, 4096, 16384, 65536}) {
    Tensor x({batch, 64}, DType::kFloat32), y({batch, 16}, DType::kFloat32);
    RngCursor c = RngStream(7, 1, RngPurpose::kUser).at(0);
    for (std::int64_t i = 0; i < x.numel(); ++i) x.set_item(i, c.normal());
    for (std::int64_t i = 0; i < y.numel(); ++i) y.set_item(i, c.normal());
    const Tensor xd = x.to(gpu), yd = y.to(gpu);

    MlpOptions og = o;
    og.device = gpu;
    Mlp net(og);
    Adam opt(net.named_parameters(), 1e-3);
    MseLoss loss;
    double last = 0;
    const double module_us = time_us(
        [&] {
          opt.zero_grad();
          last = loss.forward(net.forward(xd), yd);
          net.backward(loss.backward());
          opt.step();
        },
        steps_for(batch), gpu);

    Mlp cpu(o);
    cudaStream_t stream = static_cast<cudaStream_t>(compute_stream(gpu));
    cuda::DeviceMlp base(cpu, o, stream);
    const double base_us = time_us(
        [&] { base.train_step(xd.data<float>(), yd.data<float>(), batch); }, steps_for(batch), gpu);
    std::printf("%-8lld %14.1f %14.1f %8.2f %12.5f\n", static_cast<long long>(batch), module_us, base_us,
                module_us / base_us, last);
    std::fflush(stdout);
  }
  return 0;
}
