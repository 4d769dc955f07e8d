// An Mlp on a CUDA device (the module API: eager calls and GraphedTrainStep) against the
// CPU Mlp + MseLoss + Adam ([gpu]; exit code 77 without a CUDA device; also linked with the
// host backend as test_nn_device_mlp_gpu_host_emu, label host-emu).
#include <catch2/catch.hpp>

#include <cstdint>
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

Tensor randn(std::int64_t rows, std::int64_t cols, std::uint32_t stream) {
  RngCursor c = RngStream(23, stream, RngPurpose::kUser).at(0);
  Tensor t({rows, cols}, DType::kFloat32);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.set_item(i, static_cast<float>(c.normal()));
  return t;
}

// Values (or gradients) of the device model's parameters against the CPU model's, with a
// relative and absolute tolerance `tol` (0: bit for bit).
void check_params(const std::vector<Parameter*>& got, const std::vector<Parameter*>& want, bool grads, double tol) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    const Tensor g = (grads ? got[i]->grad : got[i]->value).to(Device::cpu());
    const Tensor& w = grads ? want[i]->grad : want[i]->value;
    REQUIRE(g.numel() == w.numel());
    for (std::int64_t j = 0; j < g.numel(); ++j) {
      if (tol == 0) CHECK(g.item(j) == w.item(j));
      else CHECK(g.item(j) == Approx(w.item(j)).epsilon(tol).margin(tol));
    }
  }
}

}  // namespace

// A device module starts from the CPU module's values, and load_state_dict from a host
// model copies them exactly (what the batched sampler's device surrogate relies on).
TEST_CASE("Mlp on a CUDA device starts from the CPU Mlp's parameters; load_state_dict copies them exactly",
          "[gpu][nn]") {
  MlpOptions o;
  o.sizes = {6, 9, 2};
  o.activation = Activation::kTanh;
  o.rng = RngStream(5, 0, RngPurpose::kInit);
  Mlp host(o);
  MlpOptions og = o;
  og.device = Device::cuda(0);
  Mlp same_init(og);
  check_params(same_init.parameters(), host.parameters(), false, 0);
  og.rng = RngStream(6, 0, RngPurpose::kInit);
  Mlp other(og);
  other.load_state_dict(host.state_dict());
  check_params(other.parameters(), host.parameters(), false, 0);
}

TEST_CASE("Mlp on a CUDA device: loss, gradients and Adam steps equal the CPU path, eager and graphed", "[gpu][nn]") {
  for (Activation act : {Activation::kTanh, Activation::kReLU, Activation::kELU}) {
    for (bool graph : {false, true}) {
      CAPTURE(static_cast<int>(act), graph);
      MlpOptions o;
      o.sizes = {24, 40, 40, 5};
      o.activation = act;
      Mlp cpu(o);
      MlpOptions og = o;
      og.device = Device::cuda(0);
      Mlp dev(og);  // same initial values as on the CPU
      Adam adam(cpu.named_parameters(), 1e-2), dev_adam(dev.named_parameters(), 1e-2);
      MseLoss loss, dev_loss;
      GraphedTrainStep graphed(dev, dev_loss, dev_adam);
      const std::int64_t batch = 33;
      const Tensor x = randn(batch, 24, 1), y = randn(batch, 5, 2);
      const Tensor xd = x.to(og.device), yd = y.to(og.device);
      for (int step = 0; step < 4; ++step) {
        adam.zero_grad();
        const double l = loss.forward(cpu.forward(x), y);
        cpu.backward(loss.backward());
        double dl = 0;
        if (graph) {
          dl = graphed.step(xd, yd);  // zero_grad, forward, MSE, backward, Adam
        } else {
          dev_adam.zero_grad();
          dl = dev_loss.forward(dev.forward(xd), yd);
          dev.backward(dev_loss.backward());
        }
        CHECK(dl == Approx(l).epsilon(1e-5));
        check_params(dev.parameters(), cpu.parameters(), true, 1e-4);
        adam.step();
        if (!graph) dev_adam.step();
      }
      check_params(dev.parameters(), cpu.parameters(), false, 1e-4);
      if (graph) {
        // Step 1 runs eagerly (warm-up), step 2 captures and launches, steps 3 and 4 replay.
        CHECK(graphed.graph_error().empty());
        CHECK(graphed.graph_steps() == 3);
      }
    }
  }
}
