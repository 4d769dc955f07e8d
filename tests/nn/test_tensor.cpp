// Tensor, init, optimizers, state save/load.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include <unistd.h>

#include "gradcheck.hpp"
#include "herd/core/config.hpp"
#include "herd/core/device.hpp"
#include "herd/nn/activations.hpp"
#include "herd/nn/conv2d.hpp"
#include "herd/nn/distributions.hpp"
#include "herd/nn/hdf5_state.hpp"
#include "herd/nn/init.hpp"
#include "herd/nn/layer_norm.hpp"
#include "herd/nn/linear.hpp"
#include "herd/nn/losses.hpp"
#include "herd/nn/mlp.hpp"
#include "herd/nn/optimizer.hpp"
#include "herd/nn/serialize.hpp"

using namespace herd;
using namespace herd::nn;
using Catch::Matchers::Contains;
using herd::nn::test::randn;

TEST_CASE("Tensor: shapes, views, dtypes", "[nn]") {
  Tensor t({4, 3}, DType::kFloat32);
  CHECK(t.numel() == 12);
  CHECK(t.ndim() == 2);
  CHECK(t.item(5) == 0.0);
  for (int i = 0; i < 12; ++i) t.set_item(i, i);
  // braced lists, as torch.tensor([...])
  const Tensor b = Tensor::from_vector({2, 2}, {1, 2.5, 3, 4}, DType::kFloat32);
  CHECK(b.dtype() == DType::kFloat32);
  CHECK(b.to_vector() == std::vector<double>{1, 2.5, 3, 4});
  CHECK(Tensor::from_vector({1}, {0.1}).item(0) == 0.1);  // float64 by default
  const Tensor k = Tensor::from_indices({3}, {2, 0, 1});
  CHECK((k.dtype() == DType::kInt64 && k.item(0) == 2 && k.item(2) == 1));
  CHECK_THROWS_WITH(Tensor::from_vector({2, 2}, {1, 2, 3}), Contains("3 values given for shape [2, 2]"));
  CHECK_THROWS_WITH(Tensor::from_indices({2}, {1}), Contains("1 values given for shape [2]"));
  Tensor s = t.slice(1, 3);
  CHECK(s.shape() == Shape{2, 3});
  CHECK(s.item(0) == 3.0);
  s.set_item(0, 42);  // a view: writes through
  CHECK(t.item(3) == 42.0);
  Tensor r = t.reshape({2, 6});
  CHECK(r.item(3) == 42.0);
  Tensor c = t.clone();
  c.set_item(0, -1);
  CHECK(t.item(0) == 0.0);
  Tensor d = t.to(DType::kFloat64);
  CHECK(d.dtype() == DType::kFloat64);
  CHECK(d.item(11) == 11.0);
  CHECK_THROWS_AS(t.data<double>(), Error);
  CHECK_THROWS_AS(t.slice(2, 5), InputError);
  CHECK_THROWS_AS(t.reshape({5}), InputError);
  CHECK_THROWS_AS(Shape({1, 2, 3, 4, 5}), InputError);
  CHECK(t.str() == "Tensor[float32, [4, 3], cpu]");
  // Modules run on CUDA only in CUDA builds (tests/nn/test_nn_device_gpu.cpp).
#if !HERD_HAVE_CUDA
  CHECK_THROWS_AS(Conv2d(1, 2, 3, 3, 1, 0, DType::kFloat32, Device::cuda(0)), InputError);
  CHECK_THROWS_AS(Linear(2, 2, DType::kFloat32, Device::cuda(0)), InputError);
  // A CUDA tensor needs a CUDA build (device tensors: tests/nn/test_cuda_kernels_gpu.cpp).
  CHECK_THROWS_WITH(Tensor({2}, DType::kFloat32, Device::cuda(0)), Contains("cuda:0"));
  CHECK_THROWS_AS(t.to(Device::cuda(0)), InputError);
#endif
  Tensor u({4, 3}, DType::kFloat64);
  CHECK_THROWS_AS(u.copy_from_async(t, nullptr), InputError);  // dtype differs
  CHECK(t.to(Device::cpu()).item(11) == 11.0);
  // Host to host copy_from_async copies at once.
  Tensor w({4, 3}, DType::kFloat32);
  w.copy_from_async(t, nullptr);
  CHECK(w.item(11) == 11.0);
}

TEST_CASE("a CUDA device this machine does not have is refused with an InputError naming it", "[nn]") {
  // cuda:<device count> is past the last device on every machine: cuda:0 here without a
  // GPU or driver (or in a CPU-only build), cuda:1 on a one-GPU machine. The message names
  // the device and what the runtime found, not a CUDA runtime call and a source line.
  const Device d = Device::cuda(cuda_device_count());
  const auto refused = [&](const std::function<void()>& f) {
    try {
      f();
      FAIL("no exception for " << d.str());
    } catch (const InputError& e) {
      const std::string m = e.what();
      INFO(m);
      CHECK(m.find(d.str()) != std::string::npos);
      CHECK(m.find(".cpp") == std::string::npos);
#if HERD_HAVE_CUDA
      CHECK(m.find("is not available on this machine") != std::string::npos);
#endif
    }
  };
  refused([&] { Tensor({2, 3}, DType::kFloat32, d); });
  refused([&] { Linear(2, 2, DType::kFloat32, d); });
  refused([&] {
    MlpOptions o;
    o.sizes = {4, 8, 2};
    o.device = d;
    Mlp m(o);
  });
  refused([&] { Tensor({2, 3}, DType::kFloat32).to(d); });
  refused([&] { synchronize(d); });
  refused([&] { compute_stream(d); });
}

TEST_CASE("Tensor: resize reuses storage", "[nn]") {
  Tensor t;
  t.resize({8, 4}, DType::kFloat32);
  const void* p = t.raw();
  t.resize({2, 4}, DType::kFloat32);
  CHECK(t.raw() == p);
  t.resize({4, 4}, DType::kFloat64);  // same bytes
  CHECK(t.raw() == p);
  // An output argument that is a view (a rollout-buffer row) is written in place.
  Tensor buf({10, 3}, DType::kFloat64);
  Tensor row = buf.slice(4, 6);
  row.resize({2, 3}, DType::kFloat64);
  CHECK(row.raw() == buf.slice(4, 6).raw());
  Tensor logits({2, 3}, DType::kFloat64);
  nn::Categorical cat;
  cat.set_logits(logits);
  Tensor acts({10}, DType::kInt64);
  Tensor part = acts.slice(6, 8);
  cat.sample(RngStream(1, 0, RngPurpose::kPolicy), 0, part);
  CHECK(part.raw() == acts.slice(6, 8).raw());
  // Too small for the new shape: fresh storage, the original untouched.
  row.resize({8, 3}, DType::kFloat64);
  CHECK(row.raw() != buf.slice(4, 6).raw());
}

TEST_CASE("Modules do not reallocate after the first call", "[nn]") {
  MlpOptions o;
  o.sizes = {5, 16, 16, 3};
  Mlp mlp(o);
  MseLoss mse;
  Adam adam(mlp.named_parameters());
  const Tensor x = randn({32, 5}, 1).to(DType::kFloat32);
  const Tensor y = randn({32, 3}, 2).to(DType::kFloat32);
  auto step = [&] {
    adam.zero_grad();
    const Tensor& out = mlp.forward(x);
    mse.forward(out, y);
    return std::pair{out.raw(), mlp.backward(mse.backward()).raw()};
  };
  const auto first = step();
  adam.step();
  const auto second = step();
  CHECK(first == second);
  // Smaller batches reuse the buffers too.
  mlp.forward(x.slice(0, 7));
  CHECK(mlp.forward(x.slice(0, 7)).raw() == first.first);
}

TEST_CASE("Module: names, counts, train/eval, state dict errors", "[nn]") {
  MlpOptions o;
  o.sizes = {4, 8, 2};
  Mlp mlp(o);
  auto np = mlp.named_parameters();
  REQUIRE(np.size() == 4);
  CHECK(np[0].name == "0.weight");
  CHECK(np[1].name == "0.bias");
  CHECK(np[2].name == "2.weight");
  CHECK(np[3].name == "2.bias");
  CHECK(mlp.parameter_count() == 4 * 8 + 8 + 8 * 2 + 2);
  mlp.eval();
  CHECK_FALSE(mlp.is_training());
  CHECK_FALSE(mlp[0].is_training());
  mlp.train();
  CHECK(mlp[1].is_training());

  auto state = mlp.state_dict();
  Mlp other(o);
  other.load_state_dict(state);
  CHECK(other.named_parameters()[2].param->value.item(5) == np[2].param->value.item(5));

  auto wrong = state;
  wrong[2].tensor = Tensor({3, 8}, DType::kFloat32);
  CHECK_THROWS_WITH(other.load_state_dict(wrong),
                    Contains("'2.weight'") && Contains("[2, 8] in the model") && Contains("[3, 8] in the state"));
  auto missing = state;
  missing.erase(missing.begin() + 1);
  CHECK_THROWS_WITH(other.load_state_dict(missing), Contains("'0.bias'") && Contains("missing"));
  auto extra = state;
  extra.push_back({"9.weight", Tensor({1}, DType::kFloat32)});
  CHECK_THROWS_WITH(other.load_state_dict(extra), Contains("'9.weight'"));
  CHECK_NOTHROW(other.load_state_dict(extra, false));
  // strict = false still refuses a missing parameter (unlike PyTorch; docs/nn.md)
  CHECK_THROWS_WITH(other.load_state_dict(missing, false), Contains("'0.bias'") && Contains("missing"));
  auto ints = state;
  ints[1].tensor = Tensor({8}, DType::kInt64);
  CHECK_THROWS_WITH(other.load_state_dict(ints),
                    Contains("'0.bias' is int64 in the state, but must be float32 or float64"));
  // dtype conversion on load
  MlpOptions o64 = o;
  o64.dtype = DType::kFloat64;
  Mlp m64(o64);
  m64.load_state_dict(state);
  CHECK(m64.named_parameters()[0].param->value.item(3) == np[0].param->value.item(3));
  // wrong input dtype / shape are named
  CHECK_THROWS_WITH(mlp.forward(Tensor({2, 4}, DType::kFloat64)), Contains("float64"));
  CHECK_THROWS_WITH(mlp.forward(Tensor({2, 5}, DType::kFloat32)), Contains("in_features is 4"));
  // a wrong gradient is named as backward's argument, not as the input
  mlp.forward(Tensor({2, 4}, DType::kFloat32));
  CHECK_THROWS_WITH(mlp.backward(Tensor({2, 3}, DType::kFloat64)),
                    Contains("nn::Linear::backward: grad_output is float64, but the module is float32"));
  CHECK_THROWS_WITH(mlp.backward(Tensor({2}, DType::kFloat32)),
                    Contains("nn::Linear::backward: grad_output has shape [2], but must have 2 dimensions"));
  Conv2d conv(1, 2, 3, 3, 1, 0);
  conv.forward(Tensor({1, 1, 4, 4}, DType::kFloat32));
  CHECK_THROWS_WITH(conv.backward(Tensor({1, 2, 2, 2}, DType::kFloat64)),
                    Contains("nn::Conv2d::backward: grad_output is float64"));
}

TEST_CASE("init: deterministic, orthogonal, bounds", "[nn]") {
  const RngStream rng(11, 3, RngPurpose::kInit);
  Tensor a({6, 4}, DType::kFloat64), b({6, 4}, DType::kFloat64);
  RngCursor c1 = rng.at(0), c2 = rng.at(0);
  orthogonal_(a, 2.0, c1);
  orthogonal_(b, 2.0, c2);
  CHECK(a.to_vector() == b.to_vector());
  // Columns orthogonal with norm gain (6 >= 4): A^T A = 4 I.
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 4; ++j) {
      double s = 0;
      for (int k = 0; k < 6; ++k) s += a.item(k * 4 + i) * a.item(k * 4 + j);
      CHECK(s == Approx(i == j ? 4.0 : 0.0).margin(1e-12));
    }
  Tensor w({3, 7}, DType::kFloat32);  // wide: rows orthonormal
  RngCursor c3 = rng.at(1);
  orthogonal_(w, 1.0, c3);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j) {
      double s = 0;
      for (int k = 0; k < 7; ++k) s += w.item(i * 7 + k) * w.item(j * 7 + k);
      CHECK(s == Approx(i == j ? 1.0 : 0.0).margin(1e-6));
    }
  Tensor x({50, 20}, DType::kFloat64);
  RngCursor c4 = rng.at(2);
  xavier_uniform_(x, 1.0, c4);
  const double bound = std::sqrt(6.0 / 70.0);
  for (double v : x.to_vector()) CHECK(std::abs(v) <= bound);
  RngCursor c5 = rng.at(3);
  kaiming_uniform_(x, std::sqrt(2.0), c5);
  for (double v : x.to_vector()) CHECK(std::abs(v) <= std::sqrt(6.0 / 20.0));
  CHECK(calculate_gain("tanh") == Approx(5.0 / 3.0));
  CHECK_THROWS_AS(calculate_gain("swish"), InputError);
  // Different streams give different Mlp parameters; equal streams equal ones.
  MlpOptions o;
  o.sizes = {3, 4, 2};
  o.init = MlpInit::kOrthogonal;
  Mlp m1(o), m2(o);
  o.rng = RngStream(0, 1, RngPurpose::kInit);
  Mlp m3(o);
  CHECK(m1.state_dict()[0].tensor.to_vector() == m2.state_dict()[0].tensor.to_vector());
  CHECK(m1.state_dict()[0].tensor.to_vector() != m3.state_dict()[0].tensor.to_vector());
  CHECK(m1.state_dict()[1].tensor.item(0) == 0.0);  // zero bias
}

TEST_CASE("optimizers: known updates, clipping, schedule", "[nn]") {
  Parameter p;
  p.value = Tensor::from_vector({2}, std::vector<double>{1.0, -2.0});
  p.grad = Tensor::from_vector({2}, std::vector<double>{0.5, -1.0});
  std::vector<NamedParameter> ps{{"p", &p}};
  SECTION("a learning rate must be finite and non-negative") {
    Adam adam(ps, 0.1);
    for (const double bad : {-1.0, std::numeric_limits<double>::infinity(), std::nan("")})
      CHECK_THROWS_WITH(adam.set_lr(bad), Catch::Contains("but must be finite and non-negative"));
    CHECK_THROWS_WITH(Adam(ps, std::numeric_limits<double>::infinity()), Catch::Contains("lr is inf"));
    CHECK(adam.lr() == 0.1);
    adam.set_lr(0.0);
    CHECK(adam.lr() == 0.0);
  }
  SECTION("Adam first step moves by lr * sign") {
    Adam adam(ps, 0.1);
    adam.step();
    CHECK(p.value.item(0) == Approx(0.9).epsilon(1e-6));
    CHECK(p.value.item(1) == Approx(-1.9).epsilon(1e-6));
  }
  SECTION("SGD with momentum") {
    Sgd sgd(ps, 0.1, 0.9);
    sgd.step();  // buf = g
    CHECK(p.value.item(0) == Approx(0.95));
    sgd.step();  // buf = 0.9 g + g
    CHECK(p.value.item(0) == Approx(0.95 - 0.1 * 1.9 * 0.5));
  }
  SECTION("SGD: Nesterov needs a momentum and no dampening (PyTorch's rule)") {
    CHECK_THROWS_WITH(Sgd(ps, 0.1, 0.0, 0.0, true),
                      Contains("momentum 0 and dampening 0") && Contains("positive momentum and zero dampening"));
    CHECK_THROWS_AS(Sgd(ps, 0.1, 0.9, 0.5, true), InputError);
    CHECK_NOTHROW(Sgd(ps, 0.1, 0.9, 0.0, true));
    CHECK_NOTHROW(Sgd(ps, 0.1, 0.9, 0.5, false));
  }
  SECTION("RMSprop") {
    RmsProp rms(ps, 0.01, 0.99, 0.0);
    rms.step();  // v = 0.01 g^2 -> step = lr g / (0.1 |g|) = 0.1 sign(g)
    CHECK(p.value.item(0) == Approx(0.9));
  }
  SECTION("RMSprop centred (PyTorch centered=True), two steps by hand") {
    // alpha 0.9, eps 0.01, lr 0.1; p = 1, gradients 0.5 then -1 (the second parameter
    // keeps gradient -1 twice).
    // Step 1: v = 0.1 * 0.25 = 0.025, m = 0.1 * 0.5 = 0.05, sqrt(v - m^2) = sqrt(0.0225) =
    //   0.15, p = 1 - 0.1 * 0.5 / 0.16 = 0.6875.
    // Step 2: v = 0.9 * 0.025 + 0.1 = 0.1225, m = 0.9 * 0.05 - 0.1 = -0.055,
    //   sqrt(0.1225 - 0.003025) = sqrt(0.119475) = 0.345651558...,
    //   p = 0.6875 + 0.1 / 0.355651558 = 0.968674080...
    // Second parameter (-2, g = -1, -1): step 1 v = 0.1, m = -0.1, sqrt(0.09) = 0.3,
    //   p = -2 + 0.1 / 0.31 = -1.677419355; step 2 v = 0.19, m = -0.19, sqrt(0.19 - 0.0361) =
    //   sqrt(0.1539) = 0.392300917, p = -1.677419355 + 0.1 / 0.402300917 = -1.428849196.
    p.value = Tensor::from_vector({2}, std::vector<double>{1.0, -2.0}, DType::kFloat64);
    p.grad = Tensor::from_vector({2}, std::vector<double>{0.5, -1.0}, DType::kFloat64);
    RmsProp rms(ps, 0.1, 0.9, 0.01, true);
    CHECK(rms.centered());
    rms.step();
    CHECK(p.value.item(0) == Approx(0.6875).epsilon(1e-14));
    CHECK(p.value.item(1) == Approx(-2.0 + 0.1 / 0.31).epsilon(1e-14));
    p.grad = Tensor::from_vector({2}, std::vector<double>{-1.0, -1.0}, DType::kFloat64);
    rms.step();
    CHECK(p.value.item(0) == Approx(0.6875 + 0.1 / (std::sqrt(0.119475) + 0.01)).epsilon(1e-14));
    CHECK(p.value.item(0) == Approx(0.968674080).epsilon(1e-9));
    CHECK(p.value.item(1) == Approx(-1.428849196).epsilon(1e-9));
    // The state names PyTorch's buffers; the non-centred optimizer has no "grad_avg".
    const auto st = rms.state();
    REQUIRE(st.size() == 4);
    CHECK(st[2].name == "p.square_avg");
    CHECK(st[3].name == "p.grad_avg");
    CHECK(st[3].tensor.item(0) == Approx(-0.055).epsilon(1e-14));
    CHECK(RmsProp(ps, 0.1, 0.9, 0.01).state().size() == 3);
  }
  SECTION("clip_grad_norm") {
    const double n = clip_grad_norm(ps, 0.5);
    CHECK(n == Approx(std::sqrt(1.25)));
    CHECK(std::hypot(p.grad.item(0), p.grad.item(1)) == Approx(0.5).epsilon(1e-5));
    CHECK(clip_grad_norm(ps, 10.0) == Approx(0.5).epsilon(1e-5));
  }
  SECTION("LinearSchedule") {
    LinearSchedule s(3e-4, 0.0, 100);
    CHECK(s.at(0) == 3e-4);
    CHECK(s.at(50) == Approx(1.5e-4));
    CHECK(s.at(1000) == 0.0);
    Adam adam(ps, 1.0);
    s.apply(adam, 25);
    CHECK(adam.lr() == Approx(2.25e-4));
  }
}

TEST_CASE("optimizer state errors name the entry", "[nn]") {
  MlpOptions o;
  o.sizes = {2, 3, 1};
  Mlp mlp(o);
  Adam adam(mlp.named_parameters());
  auto st = adam.state();
  REQUIRE(st.size() == 2 + 2 * 4);
  CHECK(st[2].name == "0.weight.exp_avg");
  auto bad = st;
  bad[3].tensor = Tensor({7}, DType::kFloat32);
  CHECK_THROWS_WITH(adam.load_state(bad),
                    Contains("'0.bias.exp_avg'") && Contains("[3] in the optimizer") && Contains("[7] in the state"));
  auto missing = st;
  missing.pop_back();
  CHECK_THROWS_WITH(adam.load_state(missing), Contains("'2.bias.exp_avg_sq'") && Contains("missing"));
  auto ints = st;
  ints[3].tensor = Tensor({3}, DType::kInt64);
  CHECK_THROWS_WITH(adam.load_state(ints),
                    Contains("'0.bias.exp_avg' is int64 in the state, but must be float32 or float64"));
  RmsProp rms(mlp.named_parameters());
  CHECK_THROWS_WITH(rms.load_state(st), Contains("exp_avg"));
  // two modules' parameters in one optimizer: the message says how to make names unique
  Mlp other(o);
  auto both = mlp.named_parameters();
  for (const auto& p : other.named_parameters()) both.push_back(p);
  CHECK_THROWS_WITH(Adam(both), Contains("'0.weight' appears twice") && Contains("prefix"));
  both.resize(4);
  for (const auto& p : other.named_parameters()) both.push_back({"critic." + p.name, p.param});
  CHECK_NOTHROW(Adam(both));
}

namespace {

struct Trainer {
  explicit Trainer(std::int64_t seed_stream) {
    MlpOptions o;
    o.sizes = {3, 16, 16, 2};
    o.init = MlpInit::kOrthogonal;
    o.rng = RngStream(1, static_cast<std::uint32_t>(seed_stream), RngPurpose::kInit);
    mlp = std::make_unique<Mlp>(o);
    adam = std::make_unique<Adam>(mlp->named_parameters(), 1e-2);
  }
  void step(int k) {
    const Tensor x = randn({17, 3}, static_cast<std::uint32_t>(100 + k)).to(DType::kFloat32);
    const Tensor y = randn({17, 2}, static_cast<std::uint32_t>(200 + k)).to(DType::kFloat32);
    adam->zero_grad();
    mse.forward(mlp->forward(x), y);
    mlp->backward(mse.backward());
    clip_grad_norm(mlp->named_parameters(), 0.5);
    LinearSchedule(1e-2, 1e-3, 10).apply(*adam, k);
    adam->step();
  }
  std::unique_ptr<Mlp> mlp;
  std::unique_ptr<Adam> adam;
  MseLoss mse;
};

}  // namespace

TEST_CASE("save, load, continue training is identical to training without the break", "[nn]") {
  Trainer straight(0);
  for (int k = 0; k < 10; ++k) straight.step(k);

  const auto dir = std::filesystem::temp_directory_path();
  const std::string model_path = (dir / "herd_nn_test_model.bin").string();
  const std::string opt_path = (dir / "herd_nn_test_opt.bin").string();
  {
    Trainer first(0);
    for (int k = 0; k < 4; ++k) first.step(k);
    save_binary(model_path, first.mlp->state_dict());
    save_binary(opt_path, first.adam->state());
  }
  Trainer resumed(7);  // different init: everything must come from the files
  resumed.mlp->load_state_dict(load_binary(model_path));
  resumed.adam->load_state(load_binary(opt_path));
  CHECK(resumed.adam->steps() == 4);
  for (int k = 4; k < 10; ++k) resumed.step(k);

  const auto a = straight.mlp->state_dict(), b = resumed.mlp->state_dict();
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    INFO(a[i].name);
    CHECK(a[i].tensor.to_vector() == b[i].tensor.to_vector());  // bit-identical
  }
  std::filesystem::remove(model_path);
  std::filesystem::remove(opt_path);
  CHECK_THROWS_AS(load_binary(model_path), IoError);
}

TEST_CASE("HDF5: save, load, continue training is identical; load errors name both sides", "[nn][io]") {
  Trainer straight(0);
  for (int k = 0; k < 10; ++k) straight.step(k);
  const std::string path = (std::filesystem::temp_directory_path() / "herd_nn_test_state.h5").string();
  {
    Trainer first(0);
    for (int k = 0; k < 4; ++k) first.step(k);
    save_hdf5(path, first.mlp->state_dict(), first.adam->state());
  }
  const Hdf5State st = load_hdf5(path);
  Trainer resumed(7);
  resumed.mlp->load_state_dict(st.parameters);
  resumed.adam->load_state(st.optimizer);
  CHECK(resumed.adam->steps() == 4);
  for (int k = 4; k < 10; ++k) resumed.step(k);
  const auto a = straight.mlp->state_dict(), b = resumed.mlp->state_dict();
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    INFO(a[i].name);
    CHECK(a[i].tensor.dtype() == b[i].tensor.dtype());
    CHECK(a[i].tensor.to_vector() == b[i].tensor.to_vector());  // bit-identical
  }
  // Names, shapes and dtypes in the file; a model of another shape cannot load it.
  {
    auto f = herd::io::H5File::open(path);
    CHECK(f.open_dataset("parameters/0.weight").shape() == std::vector<hsize_t>{16, 3});
    CHECK(f.open_dataset("parameters/0.weight").attribute_string("dtype") == "float32");
  }
  MlpOptions o;
  o.sizes = {3, 8, 16, 2};
  Mlp other(o);
  CHECK_THROWS_WITH(other.load_state_dict(st.parameters),
                    Contains("0.weight") && Contains("[8, 3]") && Contains("[16, 3]"));
  auto missing = st.parameters;
  missing.erase(missing.begin());
  CHECK_THROWS_WITH(straight.mlp->load_state_dict(missing), Contains("0.weight") && Contains("missing"));
  std::filesystem::remove(path);
  CHECK_THROWS_AS(load_hdf5(path), IoError);
}

TEST_CASE("distribution heads: sampling", "[nn]") {
  // Categorical: frequencies follow the probabilities; rows draw from their own streams.
  const int B = 4000;
  Tensor logits({B, 3}, DType::kFloat64);
  for (int i = 0; i < B; ++i) {
    logits.set_item(i * 3 + 0, std::log(0.2));
    logits.set_item(i * 3 + 1, std::log(0.5));
    logits.set_item(i * 3 + 2, std::log(0.3));
  }
  Categorical cat;
  cat.set_logits(logits);
  const RngStream rng(3, 1000, RngPurpose::kPolicy);
  Tensor a;
  cat.sample(rng, 5, a);
  int counts[3] = {0, 0, 0};
  for (int i = 0; i < B; ++i) ++counts[static_cast<int>(a.item(i))];
  // 5 sigma bounds (false-failure rate < 1e-6 per class).
  CHECK(std::abs(counts[1] - 2000) < 5 * std::sqrt(B * 0.25));
  CHECK(std::abs(counts[0] - 800) < 5 * std::sqrt(B * 0.16));
  // Row 7 of the batch equals row 0 of a batch starting at stream 1007.
  Categorical one;
  one.set_logits(logits.slice(7, 8));
  Tensor a1;
  one.sample(RngStream(3, 1007, RngPurpose::kPolicy), 5, a1);
  CHECK(a1.item(0) == a.item(7));
  cat.mode(a1);
  CHECK(a1.item(0) == 1.0);

  Gaussian g(2, DType::kFloat64, Device::cpu(), std::log(0.5));
  Tensor mean({B, 2}, DType::kFloat64);
  mean.fill(1.0);
  g.forward(mean);
  Tensor s;
  g.sample(rng, 9, s);
  double m = 0, v = 0;
  for (int i = 0; i < B; ++i) m += s.item(2 * i + 1);
  m /= B;
  for (int i = 0; i < B; ++i) v += (s.item(2 * i + 1) - m) * (s.item(2 * i + 1) - m);
  v /= B - 1;
  CHECK(std::abs(m - 1.0) < 5 * 0.5 / std::sqrt(B));
  CHECK(std::abs(v - 0.25) < 5 * 0.25 * std::sqrt(2.0 / B));
  // Entropy of N(mu, 0.5^2) per dim: 0.5 log(2 pi e 0.25)
  CHECK(g.entropy().item(0) == Approx(2 * 0.5 * std::log(2 * M_PI * M_E * 0.25)));
}

TEST_CASE("set_input_grad(false) skips the input gradient only", "[nn]") {
  MlpOptions o;
  o.sizes = {3, 5, 2};
  o.dtype = DType::kFloat64;
  Mlp a(o), b(o);
  b.set_input_grad(false);
  CHECK_FALSE(b[0].input_grad());
  CHECK(b[2].input_grad());
  const Tensor x = randn({4, 3}, 1), g = randn({4, 2}, 2);
  a.forward(x);
  CHECK(a.backward(g).defined());
  b.forward(x);
  CHECK_FALSE(b.backward(g).defined());
  auto pa = a.named_parameters(), pb = b.named_parameters();
  for (std::size_t i = 0; i < pa.size(); ++i) CHECK(pa[i].param->grad.to_vector() == pb[i].param->grad.to_vector());
}

TEST_CASE("a module fed its own last output computes as if given a copy", "[nn]") {
  // y = m.forward(m.forward(x)) with the inner result passed by reference (it is m's own
  // output buffer): the forward must not overwrite its input while reading it, and
  // backward must see that input as it was.
  const auto check = [](Module& m, const Tensor& x, const char* what) {
    INFO(what);
    const Tensor y1 = m.forward(x).clone();
    m.zero_grad();
    const Tensor want = m.forward(y1).clone();
    const Tensor g = randn(want.shape(), 5).to(m.dtype());
    const Tensor want_gx = m.backward(g).clone();
    std::vector<std::vector<double>> want_grads;
    for (auto* p : m.parameters()) want_grads.push_back(p->grad.to_vector());

    const Tensor alias = m.forward(x);  // a handle on m's output buffer
    m.zero_grad();
    const Tensor& got = m.forward(alias);
    CHECK(got.to_vector() == want.to_vector());
    CHECK(m.backward(g).to_vector() == want_gx.to_vector());
    const auto params = m.parameters();
    for (std::size_t k = 0; k < params.size(); ++k) CHECK(params[k]->grad.to_vector() == want_grads[k]);
    // a view of the output (a slice) is an alias too
    const Tensor want_part = m.forward(y1.slice(0, 2).clone()).clone();
    const Tensor part = m.forward(x).slice(0, 2);
    CHECK(m.forward(part).to_vector() == want_part.to_vector());
  };
  const Tensor x = randn({3, 6}, 1).to(DType::kFloat32);
  Linear lin(6, 6);
  check(lin, x, "Linear");
  ReLU relu;
  check(relu, x, "ReLU");
  Tanh tanh_layer;
  check(tanh_layer, x, "Tanh");
  ELU elu(0.5);
  check(elu, x, "ELU");
  Softmax softmax;
  check(softmax, x, "Softmax");
  LogSoftmax log_softmax;
  check(log_softmax, x, "LogSoftmax");
  LayerNorm ln(6);
  check(ln, x, "LayerNorm");
  Conv2d conv(2, 2, 3, 3, 1, 1);
  check(conv, randn({3, 2, 5, 5}, 2).to(DType::kFloat32), "Conv2d");
  MlpOptions o;
  o.sizes = {6, 8, 6};
  Mlp mlp(o);
  check(mlp, x, "Mlp (Sequential)");
  MlpOptions o64 = o;
  o64.dtype = DType::kFloat64;
  Mlp mlp64(o64);
  check(mlp64, randn({3, 6}, 1), "Mlp float64");
}

TEST_CASE("two threads give the same results as one", "[nn]") {
  MlpOptions o;
  o.sizes = {64, 256, 256, 16};
  Mlp mlp(o);
  const Tensor x = randn({300, 64}, 3).to(DType::kFloat32), g = randn({300, 16}, 4).to(DType::kFloat32);
  auto run = [&](int threads) {
    set_num_threads(threads);
    CHECK(num_threads() == threads);
    mlp.zero_grad();
    std::vector<std::vector<double>> out{mlp.forward(x).to_vector(), mlp.backward(g).to_vector()};
    for (auto& p : mlp.parameters()) out.push_back(p->grad.to_vector());
    set_num_threads(1);
    return out;
  };
  const auto one = run(1), two = run(2);
  REQUIRE(one.size() == two.size());
  for (std::size_t k = 0; k < one.size(); ++k)
    for (std::size_t i = 0; i < one[k].size(); ++i)
      REQUIRE(std::abs(one[k][i] - two[k][i]) <= 1e-5 * (1 + std::abs(one[k][i])));
  CHECK_THROWS_AS(set_num_threads(0), InputError);
}

TEST_CASE("save_binary writes atomically and never through a symbolic link", "[nn][files]") {
  namespace fs = std::filesystem;
  const fs::path d = fs::temp_directory_path() / ("herd_nn_links_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  {
    std::FILE* v = std::fopen((d / "victim").string().c_str(), "w");
    std::fputs("precious", v);
    std::fclose(v);
  }
  // Links at the file and at the fixed temporary name an earlier version used.
  fs::create_symlink("victim", d / "state.bin");
  fs::create_symlink("victim", d / "state.bin.tmp");
  const std::vector<NamedTensor> ts = {{"w", Tensor::from_vector({3}, std::vector<double>{1.0, 2.0, 3.0})}};
  save_binary((d / "state.bin").string(), ts);
  std::FILE* v = std::fopen((d / "victim").string().c_str(), "r");
  char buf[16] = {};
  const std::size_t n = std::fread(buf, 1, sizeof buf - 1, v);
  std::fclose(v);
  CHECK(std::string(buf, n) == "precious");
  CHECK_FALSE(fs::is_symlink(d / "state.bin"));
  const auto back = load_binary((d / "state.bin").string());
  REQUIRE(back.size() == 1);
  CHECK(back[0].tensor.to_vector() == std::vector<double>{1.0, 2.0, 3.0});
  fs::remove_all(d);
}
