// rl::make_encoder and a convolutional ActorCriticAgent on a CUDA device against the same
// on the CPU, [gpu]: identical initial parameters; forward outputs, actions, log-probs,
// values, input and parameter gradients within float32 tolerance (cuBLAS/im2col kernels sum
// in another order than Eigen). Without a device the program prints "SKIPPED" and exits 77;
// the host-emu build runs the same kernels on the CPU.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "gpu_compare.hpp"
#include "herd/core/device.hpp"
#include "herd/nn/tensor.hpp"
#include "herd/rl/agent.hpp"
#include "herd/rl/network.hpp"
#include "herd/rl/registry.hpp"

using namespace herd;
using namespace herd::rl;
using herd::rl::testing::check_close;
using herd::rl::testing::host_values;

namespace {

const Device kGpu = Device::cuda(0);

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
    const std::string what =
        "encoder of shape " + std::to_string(c.shape.size()) + "-D, " + std::to_string(c.spec.conv.size()) + " conv";
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

TEST_CASE("Conv agent on CUDA: act, evaluate and backward match the CPU agent", "[gpu][rl]") {
  auto env = make_env("MinAtar/Breakout-v1");
  for (bool shared : {false, true}) {
    INFO((shared ? "shared trunk" : "separate networks"));
    AgentOptions o;
    o.conv = {ConvLayerSpec{8, 3, 1, 0}};
    o.hidden = {32};
    o.activation = nn::Activation::kReLU;
    o.shared_trunk = shared;
    o.seed = 21;
    ActorCriticAgent cpu(env->observation_space(), env->action_space(), o);
    o.device = kGpu;
    ActorCriticAgent gpu(env->observation_space(), env->action_space(), o);
    const auto s1 = cpu.state_dict(), s2 = gpu.state_dict();
    REQUIRE(s1.size() == s2.size());
    for (std::size_t i = 0; i < s1.size(); ++i) CHECK(s1[i].tensor.to_vector() == host_values(s2[i].tensor));
    // Binary images as MinAtar gives them.
    const std::size_t n = 13, D = cpu.obs_dim();
    std::vector<float> obs(n * D);
    RngCursor c = RngStream(6, 0).at(0);
    for (auto& x : obs) x = c.uniform() < 0.1 ? 1.0f : 0.0f;
    const RngStream rng(5, 100, RngPurpose::kPolicy);
    std::vector<double> a1(n), a2(n);
    std::vector<float> l1(n), l2(n), v1(n), v2(n);
    cpu.act(obs.data(), n, &rng, 3, a1.data(), l1.data(), v1.data());
    gpu.act(obs.data(), n, &rng, 3, a2.data(), l2.data(), v2.data());
    CHECK(a1 == a2);
    check_close(std::vector<double>(l1.begin(), l1.end()), std::vector<double>(l2.begin(), l2.end()), 2e-4, 2e-5,
                "log-probs");
    check_close(std::vector<double>(v1.begin(), v1.end()), std::vector<double>(v2.begin(), v2.end()), 2e-4, 2e-5,
                "values");
    std::vector<float> gl(n), ge(n), gv(n);
    for (std::size_t i = 0; i < n; ++i) {
      gl[i] = static_cast<float>(c.normal() / n);
      ge[i] = static_cast<float>(-0.01 / n);
      gv[i] = static_cast<float>(c.normal() / n);
    }
    for (auto* ag : {&cpu, &gpu}) {
      for (auto& q : ag->named_parameters()) q.param->grad.zero();
      ag->evaluate(obs.data(), a1.data(), n);
      ag->backward(gl.data(), ge.data(), gv.data());
    }
    check_close(std::vector<double>(cpu.values().begin(), cpu.values().end()),
                std::vector<double>(gpu.values().begin(), gpu.values().end()), 2e-4, 2e-5, "evaluate values");
    const auto q1 = cpu.named_parameters(), q2 = gpu.named_parameters();
    REQUIRE(q1.size() == q2.size());
    for (std::size_t i = 0; i < q1.size(); ++i)
      check_close(q1[i].param->grad.to_vector(), host_values(q2[i].param->grad), 2e-4, 1e-7, "grad " + q1[i].name);
  }
}
