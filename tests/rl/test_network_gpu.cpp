// rl::make_encoder on a CUDA device against the same encoder on the CPU, [gpu]: identical
// initial parameters, forward outputs, input and parameter gradients within float32
// tolerance (cuBLAS/im2col kernels sum in another order than Eigen). Without a device the
// program prints "SKIPPED" and exits 77; the host-emu build runs the same kernels on the CPU.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "herd/core/device.hpp"
#include "herd/nn/tensor.hpp"
#include "herd/rl/network.hpp"

using namespace herd;
using namespace herd::rl;

namespace {

const Device kGpu = Device::cuda(0);

std::vector<double> host_values(const nn::Tensor& t) {
  return t.is_cuda() ? t.to(Device::cpu()).to_vector() : t.to_vector();
}

// max |a - b| <= rel * max |a| + abs.
void check_close(const std::vector<double>& a, const std::vector<double>& b, double rel, double abs,
                 const std::string& what) {
  REQUIRE(a.size() == b.size());
  double amax = 0, dmax = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    amax = std::max(amax, std::abs(a[i]));
    dmax = std::max(dmax, std::abs(a[i] - b[i]));
  }
  INFO(what << ": max |cpu - gpu| = " << dmax << ", max |cpu| = " << amax);
  CHECK(dmax <= rel * amax + abs);
}

nn::Tensor random_input(std::int64_t n, std::int64_t d, std::uint64_t seed) {
  nn::Tensor x({n, d}, nn::DType::kFloat32);
  RngCursor c = RngStream(seed, 0).at(0);
  for (std::int64_t i = 0; i < x.numel(); ++i) x.set_item(i, c.normal());
  return x;
}

}  // namespace

TEST_CASE("make_encoder on CUDA: parameters, outputs and gradients match the CPU encoder", "[gpu][rl]") {
  const RngStream rng(11, 0, RngPurpose::kInit);
  struct Case {
    std::vector<std::int64_t> shape;
    EncoderSpec spec;
  };
  std::vector<Case> cases(3);
  cases[0].shape = {4, 10, 10};  // the MinAtar network
  cases[0].spec.conv = {ConvLayerSpec{16, 3, 1, 0}};
  cases[0].spec.hidden = {128};
  cases[0].spec.activation = nn::Activation::kReLU;
  cases[1].shape = {3, 9, 7};  // strides, padding, two convolutions, no dense layers
  cases[1].spec.conv = {ConvLayerSpec{8, 3, 2, 1}, ConvLayerSpec{4, 2, 1, 0}};
  cases[1].spec.hidden = {};
  cases[2].shape = {5};  // vector observations
  cases[2].spec.hidden = {16, 8};
  for (const Case& c : cases) {
    std::int64_t out_cpu = 0, out_gpu = 0;
    auto cpu = make_encoder(c.shape, c.spec, Device::cpu(), rng, 2, &out_cpu);
    auto gpu = make_encoder(c.shape, c.spec, kGpu, rng, 2, &out_gpu);
    REQUIRE(out_cpu == out_gpu);
    auto pc = cpu->named_parameters(), pg = gpu->named_parameters();
    REQUIRE(pc.size() == pg.size());
    for (std::size_t i = 0; i < pc.size(); ++i) {
      CHECK(pc[i].name == pg[i].name);
      CHECK(pg[i].param->value.is_cuda());
      CHECK(pc[i].param->value.to_vector() == host_values(pg[i].param->value));
    }
    std::int64_t d = 1;
    for (auto s : c.shape) d *= s;
    const nn::Tensor x = random_input(6, d, 3);
    const nn::Tensor xg = x.to(kGpu);
    const nn::Tensor r = random_input(6, out_cpu, 4);
    const nn::Tensor rg = r.to(kGpu);
    const std::string what = "encoder of shape " + std::to_string(c.shape.size()) + "-D, " +
                             std::to_string(c.spec.conv.size()) + " conv";
    check_close(cpu->forward(x).to_vector(), host_values(gpu->forward(xg)), 2e-4, 1e-6, what + " output");
    cpu->zero_grad();
    gpu->zero_grad();
    const nn::Tensor gx_cpu = cpu->backward(r).clone();
    const nn::Tensor gx_gpu = gpu->backward(rg).clone();
    CHECK(gx_gpu.shape() == x.shape());
    check_close(gx_cpu.to_vector(), host_values(gx_gpu), 2e-4, 1e-6, what + " input gradient");
    for (std::size_t i = 0; i < pc.size(); ++i)
      check_close(pc[i].param->grad.to_vector(), host_values(pg[i].param->grad), 2e-4, 1e-6,
                  what + " " + pc[i].name + " gradient");
  }
}
