// Finite-difference gradient checks in float64 for every module, loss and head, at batch
// sizes 1 and odd.
#include <catch2/catch.hpp>

#include "gradcheck.hpp"
#include "herd/nn/activations.hpp"
#include "herd/nn/conv2d.hpp"
#include "herd/nn/distributions.hpp"
#include "herd/nn/layer_norm.hpp"
#include "herd/nn/linear.hpp"
#include "herd/nn/losses.hpp"
#include "herd/nn/mlp.hpp"

using namespace herd;
using namespace herd::nn;
using herd::nn::test::compare_numeric;
using herd::nn::test::gradcheck_module;
using herd::nn::test::randn;

namespace {
constexpr DType kF64 = DType::kFloat64;
const RngStream kInit(5, 0, RngPurpose::kInit);
}  // namespace

TEST_CASE("gradcheck: Linear", "[nn]") {
  for (std::int64_t b : {1, 3}) {
    Linear lin(4, 5, kF64, Device::cpu(), true, kInit, 1);
    gradcheck_module(lin, randn({b, 4}, 1), "Linear b=" + std::to_string(b));
    Linear nobias(3, 2, kF64, Device::cpu(), false, kInit, 2);
    gradcheck_module(nobias, randn({b, 3}, 2), "Linear(no bias)");
  }
}

TEST_CASE("gradcheck: activations", "[nn]") {
  for (std::int64_t b : {1, 5}) {
    // Inputs kept away from ReLU's and ELU's kink at 0.
    Tensor x = randn({b, 6}, 3);
    for (std::int64_t i = 0; i < x.numel(); ++i)
      if (std::abs(x.item(i)) < 0.05) x.set_item(i, 0.3);
    ReLU relu(kF64);
    gradcheck_module(relu, x, "ReLU");
    Tanh tanh_m(kF64);
    gradcheck_module(tanh_m, x, "Tanh");
    ELU elu(0.7, kF64);
    gradcheck_module(elu, x, "ELU");
    Softmax sm(kF64);
    gradcheck_module(sm, x, "Softmax");
    LogSoftmax lsm(kF64);
    gradcheck_module(lsm, x, "LogSoftmax");
  }
}

TEST_CASE("gradcheck: LayerNorm", "[nn]") {
  for (std::int64_t b : {1, 3}) {
    LayerNorm ln(5, 1e-5, true, kF64);
    // Non-trivial affine parameters.
    RngCursor c = RngStream(1, 1, RngPurpose::kUser).at(0);
    for (auto& p : ln.named_parameters())
      for (std::int64_t i = 0; i < p.param->value.numel(); ++i)
        p.param->value.set_item(i, p.param->value.item(i) + 0.3 * c.normal());
    gradcheck_module(ln, randn({b, 5}, 4), "LayerNorm");
    LayerNorm plain(4, 1e-5, false, kF64);
    gradcheck_module(plain, randn({b, 2, 4}, 5), "LayerNorm(no affine, 3-D)");
  }
}

TEST_CASE("gradcheck: Conv2d and Flatten", "[nn]") {
  for (std::int64_t b : {1, 3}) {
    Conv2d c1(2, 3, 3, 3, 1, 1, kF64, Device::cpu(), true, kInit, 3);
    gradcheck_module(c1, randn({b, 2, 5, 4}, 6), "Conv2d s1 p1");
    Conv2d c2(3, 2, 2, 3, 2, 0, kF64, Device::cpu(), true, kInit, 4);
    gradcheck_module(c2, randn({b, 3, 5, 7}, 7), "Conv2d s2 p0");
    Flatten f(kF64);
    gradcheck_module(f, randn({b, 2, 3, 2}, 8), "Flatten");
  }
}

TEST_CASE("gradcheck: Mlp and a small convnet (Sequential)", "[nn]") {
  MlpOptions o;
  o.sizes = {3, 7, 5, 2};
  o.dtype = kF64;
  o.activation = Activation::kTanh;
  for (std::int64_t b : {1, 5}) {
    Mlp mlp(o);
    gradcheck_module(mlp, randn({b, 3}, 9), "Mlp");
  }
  Sequential net(kF64);
  net.emplace<Conv2d>(1, 2, 3, 3, 2, 1, kF64, Device::cpu(), true, kInit, 10);
  net.emplace<ELU>(1.0, kF64);
  net.emplace<Flatten>(kF64);
  net.emplace<Linear>(2 * 3 * 3, 4, kF64, Device::cpu(), true, kInit, 11);
  net.emplace<LayerNorm>(4, 1e-5, true, kF64);
  gradcheck_module(net, randn({3, 1, 6, 5}, 10), "convnet");
}

TEST_CASE("gradcheck: losses", "[nn]") {
  for (std::int64_t b : {1, 3}) {
    Tensor pred = randn({b, 4}, 11), target = randn({b, 4}, 12);
    MseLoss mse;
    mse.forward(pred, target);
    Tensor g = mse.backward(2.5).clone();
    compare_numeric(
        pred, g, [&] { return 2.5 * mse.forward(pred, target); }, "MSE");

    HuberLoss huber(0.8);
    // Keep |pred - target| away from delta, where the second derivative jumps.
    for (std::int64_t i = 0; i < pred.numel(); ++i)
      if (std::abs(std::abs(pred.item(i) - target.item(i)) - 0.8) < 0.01) pred.set_item(i, target.item(i));
    huber.forward(pred, target);
    g = huber.backward().clone();
    compare_numeric(
        pred, g, [&] { return huber.forward(pred, target); }, "Huber");

    Tensor logits = randn({b, 5}, 13);
    std::vector<std::int64_t> t(static_cast<std::size_t>(b));
    for (std::int64_t i = 0; i < b; ++i) t[static_cast<std::size_t>(i)] = (3 * i + 1) % 5;
    Tensor targets = Tensor::from_indices({b}, t);
    CrossEntropyLoss ce;
    ce.forward(logits, targets);
    g = ce.backward(-0.5).clone();
    compare_numeric(
        logits, g, [&] { return -0.5 * ce.forward(logits, targets); }, "CrossEntropy");
  }
}

TEST_CASE("gradcheck: Categorical head", "[nn]") {
  for (std::int64_t b : {1, 3}) {
    Tensor logits = randn({b, 4}, 14);
    std::vector<std::int64_t> a(static_cast<std::size_t>(b));
    for (std::int64_t i = 0; i < b; ++i) a[static_cast<std::size_t>(i)] = (i * 2 + 3) % 4;
    const Tensor actions = Tensor::from_indices({b}, a);
    const Tensor w_lp = randn({b}, 15), w_h = randn({b}, 16);
    Categorical dist;
    // L = sum(w_lp * log_prob) + sum(w_h * entropy)
    auto loss = [&] {
      dist.set_logits(logits);
      const Tensor& lp = dist.log_prob(actions);
      double s = 0;
      for (std::int64_t i = 0; i < b; ++i) s += w_lp.item(i) * lp.item(i);
      const Tensor& h = dist.entropy();
      for (std::int64_t i = 0; i < b; ++i) s += w_h.item(i) * h.item(i);
      return s;
    };
    loss();
    dist.backward_log_prob(w_lp);
    dist.backward_entropy(w_h);
    const Tensor g = dist.grad_logits().clone();
    compare_numeric(logits, g, loss, "Categorical");
  }
}

TEST_CASE("gradcheck: Gaussian head", "[nn]") {
  for (std::int64_t b : {1, 3}) {
    Tensor mean = randn({b, 3}, 17);
    const Tensor actions = randn({b, 3}, 18);
    const Tensor w_lp = randn({b}, 19), w_h = randn({b}, 20);
    Gaussian dist(3, kF64, Device::cpu(), -0.3);
    dist.log_std().value.set_item(1, 0.4);
    const Tensor r = randn({b, 3}, 21);  // an extra downstream term sum(r * mean)
    auto loss = [&] {
      dist.forward(mean);
      const Tensor& lp = dist.log_prob(actions);
      double s = 0;
      for (std::int64_t i = 0; i < b; ++i) s += w_lp.item(i) * lp.item(i);
      const Tensor& h = dist.entropy();
      for (std::int64_t i = 0; i < b; ++i) s += w_h.item(i) * h.item(i);
      for (std::int64_t i = 0; i < mean.numel(); ++i) s += r.item(i) * mean.item(i);
      return s;
    };
    dist.zero_grad();
    loss();
    dist.backward_log_prob(w_lp);
    dist.backward_entropy(w_h);
    const Tensor gm = dist.backward(r).clone();
    const Tensor gls = dist.log_std().grad.clone();
    compare_numeric(mean, gm, loss, "Gaussian mean");
    compare_numeric(dist.log_std().value, gls, loss, "Gaussian log_std");
  }
}
