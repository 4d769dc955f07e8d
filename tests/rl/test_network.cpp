// rl::make_encoder: layer layout and output shapes, the C-order reading of flat image rows
// (a hand-computed convolution), orthogonal and PyTorch-default initialisation, equality
// with nn::Mlp for
// vector observations, finite-difference gradients through convolutions and dense layers
// (float32), and the errors for bad shapes and layer specs.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <tuple>
#include <vector>

#include "herd/core/error.hpp"
#include "herd/nn/conv2d.hpp"
#include "herd/nn/linear.hpp"
#include "herd/nn/tensor.hpp"
#include "herd/rl/network.hpp"

using namespace herd;
using namespace herd::rl;

namespace {

const RngStream kRng(5, 3, RngPurpose::kInit);

nn::Tensor random_input(std::int64_t n, std::int64_t d, std::uint64_t seed, double scale = 1.0) {
  nn::Tensor x({n, d}, nn::DType::kFloat32);
  RngCursor c = RngStream(seed, 0).at(0);
  for (std::int64_t i = 0; i < x.numel(); ++i) x.set_item(i, scale * c.normal());
  return x;
}

const nn::Parameter* find_param(nn::Sequential& net, const std::string& name) {
  for (auto& p : net.named_parameters())
    if (p.name == name) return p.param;
  return nullptr;
}

EncoderSpec minatar_spec() {
  EncoderSpec s;
  s.conv = {ConvLayerSpec{16, 3, 1, 0}};
  s.hidden = {128};
  s.activation = nn::Activation::kReLU;
  return s;
}

}  // namespace

TEST_CASE("make_encoder: the MinAtar network's layers and shapes", "[rl][network]") {
  std::int64_t out = 0;
  auto net = make_encoder({4, 10, 10}, minatar_spec(), Device::cpu(), kRng, 0, &out);
  CHECK(out == 128);
  // 0 Conv2d, 1 ReLU, 2 Flatten, 3 Linear, 4 ReLU.
  REQUIRE(net->size() == 5);
  CHECK((*net)[0].type_name() == "Conv2d");
  CHECK((*net)[1].type_name() == "ReLU");
  CHECK((*net)[2].type_name() == "Flatten");
  CHECK((*net)[3].type_name() == "Linear");
  CHECK((*net)[4].type_name() == "ReLU");
  const auto params = net->named_parameters();
  REQUIRE(params.size() == 4);
  CHECK(params[0].name == "0.weight");
  CHECK(params[0].param->value.shape() == nn::Shape{16, 4, 3, 3});
  CHECK(params[1].name == "0.bias");
  CHECK(params[2].name == "3.weight");
  CHECK(params[2].param->value.shape() == nn::Shape{128, 16 * 8 * 8});
  CHECK(params[3].name == "3.bias");

  const nn::Tensor x = random_input(5, 400, 1);
  const nn::Tensor& y = net->forward(x);
  CHECK(y.shape() == nn::Shape{5, 128});
  for (std::int64_t i = 0; i < y.numel(); ++i) CHECK(y.item(i) >= 0.0);  // ReLU output
  // The same rows given as [N, C, H, W] give the same output.
  const std::vector<double> flat_out = y.to_vector();
  CHECK(net->forward(x.reshape({5, 4, 10, 10})).to_vector() == flat_out);
}

TEST_CASE("make_encoder: strides, padding, several convolutions, no dense layers", "[rl][network]") {
  EncoderSpec s;
  s.conv = {ConvLayerSpec{8, 3, 2, 1}, ConvLayerSpec{4, 2, 1, 0}};
  s.hidden = {};
  std::int64_t out = 0;
  auto net = make_encoder({3, 10, 10}, s, Device::cpu(), kRng, 0, &out);
  // (10 + 2 - 3) / 2 + 1 = 5, then 5 - 2 + 1 = 4: 4 channels x 4 x 4.
  CHECK(out == 64);
  CHECK(net->forward(random_input(2, 300, 2)).shape() == nn::Shape{2, 64});
  // Non-square images: (7 - 3) / 1 + 1 = 5 by (12 - 3) + 1 = 10.
  s.conv = {ConvLayerSpec{2, 3, 1, 0}};
  s.hidden = {6, 5};
  net = make_encoder({1, 7, 12}, s, Device::cpu(), kRng, 0, &out);
  CHECK(out == 5);
  CHECK(find_param(*net, "3.weight")->value.shape() == nn::Shape{6, 2 * 5 * 10});
  CHECK(net->forward(random_input(3, 84, 3)).shape() == nn::Shape{3, 5});
}

TEST_CASE("make_encoder: flat rows are read as [C, H, W] in C order (hand-computed convolution)", "[rl][network]") {
  // obs {2, 3, 3}, one 2x2 convolution to 1 channel, no dense layers, tanh:
  // y[n, i*2+j] = tanh(b + sum_{c,u,v} W[0,c,u,v] x[n, c*9 + (i+u)*3 + (j+v)]).
  EncoderSpec s;
  s.conv = {ConvLayerSpec{1, 2, 1, 0}};
  s.hidden = {};
  s.activation = nn::Activation::kTanh;
  std::int64_t out = 0;
  auto net = make_encoder({2, 3, 3}, s, Device::cpu(), kRng, 0, &out);
  REQUIRE(out == 4);
  nn::Parameter& w = *net->named_parameters()[0].param;
  nn::Parameter& b = *net->named_parameters()[1].param;
  b.value.set_item(0, 0.25);  // a non-zero bias too
  const nn::Tensor x = random_input(2, 18, 4);
  const nn::Tensor& y = net->forward(x);
  REQUIRE(y.shape() == nn::Shape{2, 4});
  for (std::int64_t n = 0; n < 2; ++n)
    for (std::int64_t i = 0; i < 2; ++i)
      for (std::int64_t j = 0; j < 2; ++j) {
        double z = b.value.item(0);
        for (std::int64_t c = 0; c < 2; ++c)
          for (std::int64_t u = 0; u < 2; ++u)
            for (std::int64_t v = 0; v < 2; ++v)
              z += w.value.item(c * 4 + u * 2 + v) * x.item(n * 18 + c * 9 + (i + u) * 3 + (j + v));
        CHECK(y.item(n * 4 + i * 2 + j) == Approx(std::tanh(z)).epsilon(1e-5));
      }
}

TEST_CASE("make_encoder: orthogonal initialisation with gain sqrt(2), zero biases, draws by layer index",
          "[rl][network]") {
  auto net = make_encoder({4, 10, 10}, minatar_spec(), Device::cpu(), kRng, 0, nullptr);
  // The conv weight viewed as [16, 36] has orthogonal rows of norm sqrt(2): W W^T = 2 I.
  const nn::Tensor& w = find_param(*net, "0.weight")->value;
  for (int r = 0; r < 16; ++r)
    for (int q = 0; q < 16; ++q) {
      double dot = 0;
      for (int k = 0; k < 36; ++k) dot += w.item(r * 36 + k) * w.item(q * 36 + k);
      CHECK(dot == Approx(r == q ? 2.0 : 0.0).margin(1e-5));
    }
  // The dense weight [128, 1024] too (rows fewer than columns).
  const nn::Tensor& l = find_param(*net, "3.weight")->value;
  for (int r : {0, 5, 127})
    for (int q : {0, 77, 127}) {
      double dot = 0;
      for (int k = 0; k < 1024; ++k) dot += l.item(r * 1024 + k) * l.item(q * 1024 + k);
      CHECK(dot == Approx(r == q ? 2.0 : 0.0).margin(1e-4));
    }
  for (const char* name : {"0.bias", "3.bias"}) {
    const nn::Tensor& bias = find_param(*net, name)->value;
    for (std::int64_t i = 0; i < bias.numel(); ++i) CHECK(bias.item(i) == 0.0);
  }
  // Deterministic; layer k draws from rng.at(init_index + k).
  auto same = make_encoder({4, 10, 10}, minatar_spec(), Device::cpu(), kRng, 0, nullptr);
  CHECK(find_param(*same, "0.weight")->value.to_vector() == w.to_vector());
  CHECK(find_param(*same, "3.weight")->value.to_vector() == l.to_vector());
  auto shifted = make_encoder({4, 10, 10}, minatar_spec(), Device::cpu(), kRng, 1, nullptr);
  CHECK(find_param(*shifted, "0.weight")->value.to_vector() != w.to_vector());
  // With init_index 1 the conv draws what layer 1 drew with init_index 0 (checked on a
  // square case: an encoder whose layer 1 has the conv's weight shape).
  EncoderSpec two;
  two.conv = {ConvLayerSpec{4, 1, 1, 0}, ConvLayerSpec{16, 3, 1, 0}};
  two.hidden = {};
  auto a = make_encoder({4, 10, 10}, two, Device::cpu(), kRng, 0, nullptr);
  EncoderSpec one;
  one.conv = {ConvLayerSpec{16, 3, 1, 0}};
  one.hidden = {};
  auto b = make_encoder({4, 10, 10}, one, Device::cpu(), kRng, 1, nullptr);
  CHECK(find_param(*a, "2.weight")->value.to_vector() == find_param(*b, "0.weight")->value.to_vector());
}

TEST_CASE("make_encoder: PyTorch's default initialisation draws layer k as nn::Conv2d/nn::Linear from rng.at(k)",
          "[rl][network]") {
  EncoderSpec spec = minatar_spec();
  spec.init = EncoderInit::kPyTorch;
  auto net = make_encoder({4, 10, 10}, spec, Device::cpu(), kRng, 2, nullptr);
  // Known answer: the layers PyTorch's constructors would build from the same draws.
  nn::Conv2d conv(4, 16, 3, 3, 1, 0, nn::DType::kFloat32, Device::cpu(), true, kRng, 2);
  nn::Linear lin(16 * 8 * 8, 128, nn::DType::kFloat32, Device::cpu(), true, kRng, 3);
  CHECK(find_param(*net, "0.weight")->value.to_vector() == conv.weight().value.to_vector());
  CHECK(find_param(*net, "0.bias")->value.to_vector() == conv.bias().value.to_vector());
  CHECK(find_param(*net, "3.weight")->value.to_vector() == lin.weight().value.to_vector());
  CHECK(find_param(*net, "3.bias")->value.to_vector() == lin.bias().value.to_vector());
  // Uniform in +-b = 1/sqrt(fan_in), biases included, with mean square b^2/3: within 2 %
  // over the 131072 dense weights and 20 % over the 576 conv weights (the mean square's
  // relative sd is 0.89/sqrt(n): 0.25 % and 3.7 %, so 8 and 5 sigma), far from the
  // orthogonal init's 2/fan_in (6 times as large).
  for (auto [w, b, fan_in] : {std::tuple{"0.weight", "0.bias", 36.0}, std::tuple{"3.weight", "3.bias", 1024.0}}) {
    const double bound = 1.0 / std::sqrt(fan_in);
    const std::vector<double> wv = find_param(*net, w)->value.to_vector();
    double sq = 0;
    for (double x : wv) {
      CHECK(std::abs(x) <= bound);
      sq += x * x;
    }
    CHECK(sq / static_cast<double>(wv.size()) == Approx(bound * bound / 3).epsilon(fan_in > 100 ? 0.02 : 0.2));
    int nonzero = 0;
    for (double x : find_param(*net, b)->value.to_vector()) {
      CHECK(std::abs(x) <= bound);
      nonzero += x != 0.0;
    }
    CHECK(nonzero > 0);
  }
  // The orthogonal default draws from the same indices but gives other weights.
  auto ortho = make_encoder({4, 10, 10}, minatar_spec(), Device::cpu(), kRng, 2, nullptr);
  CHECK(find_param(*ortho, "3.weight")->value.to_vector() != lin.weight().value.to_vector());
}

TEST_CASE("make_encoder: without convolutions it is the orthogonal Mlp torso, bit for bit", "[rl][network]") {
  for (auto act : {nn::Activation::kTanh, nn::Activation::kReLU}) {
    EncoderSpec s;
    s.hidden = {32, 24};
    s.activation = act;
    std::int64_t out = 0;
    auto net = make_encoder({6}, s, Device::cpu(), kRng, 0, &out);
    CHECK(out == 24);
    nn::MlpOptions o;
    o.sizes = {6, 32, 24};
    o.activation = act;
    o.activate_output = true;
    o.init = nn::MlpInit::kOrthogonal;
    o.hidden_gain = std::sqrt(2.0);
    o.output_gain = std::sqrt(2.0);
    o.rng = kRng;
    nn::Mlp mlp(o);
    const auto pa = net->named_parameters(), pb = mlp.named_parameters();
    REQUIRE(pa.size() == pb.size());
    for (std::size_t i = 0; i < pa.size(); ++i) {
      CHECK(pa[i].name == pb[i].name);
      CHECK(pa[i].param->value.to_vector() == pb[i].param->value.to_vector());
    }
    const nn::Tensor x = random_input(9, 6, 5);
    CHECK(net->forward(x).to_vector() == mlp.forward(x).to_vector());
  }
}

TEST_CASE("make_encoder: finite-difference gradients through convolutions and dense layers (float32)",
          "[rl][network]") {
  // Smooth activations (tanh, ELU) so central differences are exact up to rounding. In
  // float32 with step h = 1e-2 the rounding error of the loss difference is ~1e-5 and the
  // truncation error ~1e-5 (observed differences ~1e-6).
  for (auto act : {nn::Activation::kTanh, nn::Activation::kELU}) {
    EncoderSpec s;
    s.conv = {ConvLayerSpec{3, 3, 1, 1}, ConvLayerSpec{2, 3, 2, 0}};
    s.hidden = {5, 4};
    s.activation = act;
    std::int64_t out = 0;
    auto net = make_encoder({2, 6, 5}, s, Device::cpu(), kRng, 0, &out);
    REQUIRE(out == 4);
    nn::Tensor x = random_input(3, 60, 6, 0.5);
    const nn::Tensor r = random_input(3, 4, 7);
    auto loss = [&]() {
      const nn::Tensor& y = net->forward(x);
      double l = 0;
      for (std::int64_t i = 0; i < y.numel(); ++i) l += y.item(i) * r.item(i);
      return l;
    };
    net->zero_grad();
    net->forward(x);
    const nn::Tensor gx = net->backward(r).clone();
    REQUIRE(gx.shape() == x.shape());
    std::vector<nn::Tensor> grads;
    auto params = net->named_parameters();
    REQUIRE(params.size() == 8);  // two convolutions, two Linear layers
    grads.reserve(params.size());
    for (auto& p : params) grads.push_back(p.param->grad.clone());
    auto compare = [&](nn::Tensor& v, const nn::Tensor& g, const std::string& what) {
      const double h = 1e-2;
      for (std::int64_t i = 0; i < v.numel(); ++i) {
        const double v0 = v.item(i);
        v.set_item(i, v0 + h);
        const double lp = loss();
        v.set_item(i, v0 - h);
        const double lm = loss();
        v.set_item(i, v0);
        const double num = (lp - lm) / (2 * h);
        INFO(what << "[" << i << "]: analytic " << g.item(i) << " numeric " << num);
        CHECK(std::abs(g.item(i) - num) <= 2e-4 + 2e-3 * std::abs(num));
      }
    };
    compare(x, gx, "input");
    for (std::size_t k = 0; k < params.size(); ++k) compare(params[k].param->value, grads[k], params[k].name);
  }
}

TEST_CASE("make_encoder: input gradients can be turned off for observation inputs", "[rl][network]") {
  auto net = make_encoder({4, 10, 10}, minatar_spec(), Device::cpu(), kRng, 0, nullptr);
  net->set_input_grad(false);
  net->forward(random_input(2, 400, 8));
  const nn::Tensor g = net->backward(random_input(2, 128, 9));
  CHECK_FALSE(g.defined());
  CHECK(find_param(*net, "0.weight")->grad.to_vector() != std::vector<double>(16 * 36, 0.0));
}

TEST_CASE("make_encoder: bad shapes and layer specs are InputErrors naming the problem", "[rl][network]") {
  auto message = [](const std::vector<std::int64_t>& shape, const EncoderSpec& s) -> std::string {
    try {
      make_encoder(shape, s, Device::cpu(), kRng, 0, nullptr);
    } catch (const InputError& e) {
      return e.what();
    }
    return "no error";
  };
  using Catch::Matchers::Contains;
  const EncoderSpec conv = minatar_spec();
  CHECK_THAT(message({400}, conv), Contains("{channels, height, width}") && Contains("{400}"));
  CHECK_THAT(message({4, 100}, conv), Contains("{4, 100}"));
  CHECK_THAT(message({}, conv), Contains("empty"));
  CHECK_THAT(message({4, 0, 10}, conv), Contains("{4, 0, 10}"));
  EncoderSpec big = conv;
  big.conv = {ConvLayerSpec{16, 3, 1, 0}, ConvLayerSpec{16, 9, 1, 0}};  // 10 -> 8, then 9 > 8
  CHECK_THAT(message({4, 10, 10}, big), Contains("conv layer 1") && Contains("8x8") && Contains("below 1"));
  big.conv = {ConvLayerSpec{16, 9, 1, 1}, ConvLayerSpec{16, 9, 1, 1}};  // 10 -> 4, then 6 < 9
  CHECK_THAT(message({4, 10, 10}, big), Contains("conv layer 1") && Contains("4x4"));
  big.conv = {ConvLayerSpec{16, 11, 1, 0}};
  CHECK_THAT(message({4, 10, 10}, big), Contains("conv layer 0"));
  for (ConvLayerSpec bad : {ConvLayerSpec{0, 3, 1, 0}, ConvLayerSpec{16, 0, 1, 0}, ConvLayerSpec{16, 3, 0, 0},
                            ConvLayerSpec{16, 3, 1, -1}}) {
    EncoderSpec s = conv;
    s.conv = {bad};
    CHECK_THAT(message({4, 10, 10}, s), Contains("conv layer 0") && Contains("channels"));
  }
  EncoderSpec zero_width;
  zero_width.hidden = {64, 0};
  CHECK_THAT(message({4}, zero_width), Contains("hidden[1] is 0"));
  EncoderSpec nothing;
  nothing.hidden = {};
  CHECK_THAT(message({4}, nothing), Contains("at least one layer"));
  // A conv-less encoder of a 3-D observation flattens it (not an error).
  EncoderSpec dense;
  dense.hidden = {8};
  std::int64_t out = 0;
  auto net = make_encoder({2, 3, 3}, dense, Device::cpu(), kRng, 0, &out);
  CHECK(out == 8);
  // Inputs of the wrong width are rejected at forward with the expected shapes.
  auto image = make_encoder({4, 10, 10}, conv, Device::cpu(), kRng, 0, nullptr);
  try {
    image->forward(random_input(2, 399, 1));
    FAIL("no error");
  } catch (const InputError& e) {
    CHECK_THAT(std::string(e.what()), Contains("[N, 400]") && Contains("[N, 4, 10, 10]"));
  }
}

TEST_CASE("encoder_output_features: the width make_encoder gives, and the same errors", "[rl][network]") {
  EncoderSpec s;
  s.conv = {ConvLayerSpec{8, 3, 2, 1}, ConvLayerSpec{4, 2, 1, 0}};
  s.hidden = {};
  CHECK(encoder_output_features({3, 10, 10}, s) == 64);
  s.hidden = {7};
  CHECK(encoder_output_features({3, 10, 10}, s) == 7);
  CHECK(encoder_output_features({4, 10, 10}, minatar_spec()) == 128);
  EncoderSpec dense;
  dense.hidden = {};
  dense.conv = {ConvLayerSpec{5, 10, 1, 0}};
  CHECK(encoder_output_features({2, 10, 10}, dense) == 5);
  dense.conv = {ConvLayerSpec{5, 11, 1, 0}};
  CHECK_THROWS_WITH(encoder_output_features({2, 10, 10}, dense), Catch::Contains("conv layer 0"));
  CHECK_THROWS_WITH(encoder_output_features({200}, minatar_spec()), Catch::Contains("{200}"));
}
