// The nn benchmark's GPU table through the module API: MLP 64-256-256-16
// (tanh, float32) built for Device::cuda(0), train step = zero_grad, forward, MseLoss,
// backward, Adam step, batch 32 to 65536, two ways on the same data:
// - module: the calls written out (eager launches; the loss stays on the device, no host
//   wait per step);
// - graphed: the same step through nn::GraphedTrainStep (captured once as a CUDA graph,
//   replayed).
// Prints one table: microseconds per step, the ratio graphed / module (< 1 means the graph
// is faster), and the last loss of each path (equal up to float rounding: a cross-check).
// Exits with 77 when no CUDA device is present (like the [gpu] tests). Command-line
// arguments (scripts/gpu-check passes Google Benchmark flags) are ignored.
#include <chrono>
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
  std::printf("%-8s %11s %11s %8s %11s %11s\n", "batch", "module_us", "graphed_us", "gr/mod", "loss", "loss_gr");
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
    LossValue last;
    const double module_us = time_us(
        [&] {
          opt.zero_grad();
          last = loss.forward(net.forward(xd), yd);
          net.backward(loss.backward());
          opt.step();
        },
        steps_for(batch), gpu);
    const double last_loss = last.value();

    Mlp gnet(og);
    Adam gopt(gnet.named_parameters(), 1e-3);
    MseLoss gloss;
    GraphedTrainStep graphed(gnet, gloss, gopt);
    LossValue glast;
    const double graphed_us = time_us([&] { glast = graphed.step(xd, yd); }, steps_for(batch), gpu);
    const double graphed_loss = glast.value();
    if (!graphed.graph_error().empty()) std::printf("graph capture failed: %s\n", graphed.graph_error().c_str());

    std::printf("%-8lld %11.1f %11.1f %8.2f %11.5f %11.5f\n", static_cast<long long>(batch), module_us, graphed_us,
                graphed_us / module_us, last_loss, graphed_loss);
    std::fflush(stdout);
  }
  return 0;
}
