// Differential tests of the nn modules, losses, heads and optimizers built for
// Device::cuda(0) against the same objects on the CPU ([gpu]; exit code 77 without a CUDA
// device: tests/support/gpu_main.cpp).
//
// Tolerances: float64 runs compare to 1e-9 relative + 1e-11 absolute (cuBLAS and our
// kernels only reorder sums; a wrong index, transpose or formula gives O(1) errors);
// float32 runs to 2e-4 relative + 2e-5 absolute (reordered float sums of up to a few
// hundred terms). Sampling is done on host copies on the GPU path and must match exactly.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "herd/core/communicator.hpp"
#include "herd/core/error.hpp"
#include "herd/core/launch.hpp"
#include "herd/core/rng.hpp"
#include "herd/nn/activations.hpp"
#include "herd/nn/conv2d.hpp"
#include "herd/nn/data_parallel.hpp"
#include "herd/nn/distributions.hpp"
#include "herd/nn/layer_norm.hpp"
#include "herd/nn/linear.hpp"
#include "herd/nn/losses.hpp"
#include "herd/nn/mlp.hpp"
#include "herd/nn/optimizer.hpp"
#include "herd/nn/sequential.hpp"
#include "herd/nn/serialize.hpp"

using namespace herd;
using namespace herd::nn;

namespace {

const Device kGpu = Device::cuda(0);

double rtol(DType t) { return t == DType::kFloat64 ? 1e-9 : 2e-4; }
double atol(DType t) { return t == DType::kFloat64 ? 1e-11 : 2e-5; }

// A host tensor of uniforms in [lo, hi) from a fixed stream.
Tensor rand_host(const Shape& s, DType dt, std::uint32_t stream, double lo = -1, double hi = 1) {
  RngCursor c = RngStream(77, stream, RngPurpose::kUser).at(0);
  Tensor t(s, dt);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.set_item(i, lo + (hi - lo) * c.uniform());
  return t;
}

// Compares a (device or host) tensor with a host reference element-wise.
void check_close(const Tensor& got, const Tensor& want, DType dt, const char* what) {
  INFO(what);
  REQUIRE(got.defined());
  REQUIRE(got.shape() == want.shape());
  const std::vector<double> g = got.to(Device::cpu()).to_vector();
  const std::vector<double> w = want.to(Device::cpu()).to_vector();
  int bad = 0;
  for (std::size_t i = 0; i < g.size(); ++i) {
    const bool ok = std::abs(g[i] - w[i]) <= atol(dt) + rtol(dt) * std::abs(w[i]);
    if (!ok && bad++ < 5) {
      INFO("element " << i << ": gpu " << g[i] << " cpu " << w[i]);
      CHECK(ok);
    }
  }
  CHECK(bad == 0);
}

void check_params(Module& gpu, Module& cpu, DType dt, bool grads) {
  auto a = gpu.named_parameters();
  auto b = cpu.named_parameters();
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    REQUIRE(a[i].name == b[i].name);
    CHECK(a[i].param->value.is_cuda());
    check_close(a[i].param->value, b[i].param->value, dt, a[i].name.c_str());
    if (grads) check_close(a[i].param->grad, b[i].param->grad, dt, (a[i].name + ".grad").c_str());
  }
}

// Runs forward and backward of the same module on both devices (parameters copied from
// the CPU one) and compares output, input gradient and parameter gradients.
void differential(Module& gpu, Module& cpu, const Shape& in, DType dt, std::uint32_t stream) {
  gpu.load_state_dict(cpu.state_dict());
  check_params(gpu, cpu, dt, false);
  const Tensor x = rand_host(in, dt, stream);
  const Tensor xd = x.to(kGpu);
  const Tensor& yc = cpu.forward(x);
  const Tensor& yg = gpu.forward(xd);
  CHECK(yg.is_cuda());
  check_close(yg, yc, dt, "output");
  const Tensor gy = rand_host(yc.shape(), dt, stream + 1000);
  const Tensor gyd = gy.to(kGpu);
  cpu.zero_grad();
  gpu.zero_grad();
  // Twice, so accumulation into parameter gradients is exercised.
  for (int rep = 0; rep < 2; ++rep) {
    const Tensor& gc = cpu.backward(gy);
    const Tensor& gg = gpu.backward(gyd);
    if (gc.defined()) check_close(gg, gc, dt, "grad_input");
  }
  check_params(gpu, cpu, dt, true);
}

#define BOTH_DTYPES                                            \
  const DType dt = GENERATE(DType::kFloat32, DType::kFloat64); \
  INFO(dtype_name(dt))

}  // namespace

TEST_CASE("device Tensor: copies, zero, fill, views, streams", "[gpu][nn]") {
  const Tensor h = rand_host({5, 3}, DType::kFloat32, 1);
  Tensor d = h.to(kGpu);
  CHECK(d.is_cuda());
  CHECK(d.device() == kGpu);
  check_close(d, h, DType::kFloat32, "round trip");
  check_close(d.clone(), h, DType::kFloat32, "clone");
  check_close(d.slice(1, 4), h.slice(1, 4), DType::kFloat32, "slice");
  Tensor e(h.shape(), DType::kFloat32, kGpu);
  e.copy_from(d);
  check_close(e, h, DType::kFloat32, "device to device");
  e.fill(2.5);
  check_close(e, Tensor::from_vector({5, 3}, std::vector<double>(15, 2.5), DType::kFloat32), DType::kFloat32, "fill");
  e.zero();
  check_close(e, Tensor({5, 3}, DType::kFloat32), DType::kFloat32, "zero");
  CHECK(compute_stream(kGpu) != nullptr);
  CHECK(compute_stream(Device::cpu()) == nullptr);
  synchronize(kGpu);
  CHECK_THROWS_AS(d.item(0), Error);
}

TEST_CASE("device Linear matches the CPU", "[gpu][nn]") {
  BOTH_DTYPES;
  const std::int64_t B = GENERATE(1, 7, 300);
  Linear cpu(13, 9, dt, Device::cpu(), true, RngStream(5, 0, RngPurpose::kInit));
  Linear gpu(13, 9, dt, kGpu, true, RngStream(5, 0, RngPurpose::kInit));
  // Same initial values from the host RNG streams, without load_state_dict.
  check_params(gpu, cpu, dt, false);
  differential(gpu, cpu, {B, 13}, dt, 2);
  Linear nb_cpu(4, 6, dt, Device::cpu(), false);
  Linear nb_gpu(4, 6, dt, kGpu, false);
  differential(nb_gpu, nb_cpu, {B, 4}, dt, 3);
  // Without the input gradient both return an undefined tensor.
  gpu.set_input_grad(false);
  gpu.forward(rand_host({B, 13}, dt, 4).to(kGpu));
  CHECK_FALSE(gpu.backward(rand_host({B, 9}, dt, 5).to(kGpu)).defined());
  // A host input to a GPU module is an InputError naming both devices.
  CHECK_THROWS_WITH(gpu.forward(rand_host({B, 13}, dt, 4)), Catch::Contains("cuda:0") && Catch::Contains("cpu"));
}

TEST_CASE("device Conv2d matches the CPU: forward, input, weight and bias gradients", "[gpu][nn]") {
  BOTH_DTYPES;
  struct Case {
    std::int64_t cin, cout, kh, kw, stride, pad, h, w;
  };
  // Square and non-square kernels and images, stride 1 to 3 (stride 3 > kernel 2 leaves
  // input positions no output reads: their gradient must be exactly zero), padding 0 to 2,
  // 1x1 kernels, a kernel as large as the padded image (one output position).
  const Case c = GENERATE(Case{3, 8, 3, 3, 1, 1, 7, 6}, Case{2, 5, 3, 2, 2, 0, 9, 8}, Case{1, 4, 5, 5, 3, 2, 11, 13},
                          Case{4, 3, 1, 1, 1, 0, 5, 5}, Case{3, 2, 2, 2, 3, 1, 10, 7}, Case{2, 3, 4, 3, 1, 0, 4, 3});
  const std::int64_t batch = GENERATE(1, 17);
  const bool bias = GENERATE(true, false);
  INFO("cin " << c.cin << " cout " << c.cout << " kernel " << c.kh << "x" << c.kw << " stride " << c.stride << " pad "
              << c.pad << " image " << c.h << "x" << c.w << " batch " << batch << " bias " << bias);
  const RngStream init(11, 3, RngPurpose::kInit);
  Conv2d cpu(c.cin, c.cout, c.kh, c.kw, c.stride, c.pad, dt, Device::cpu(), bias, init, 2);
  Conv2d gpu(c.cin, c.cout, c.kh, c.kw, c.stride, c.pad, dt, kGpu, bias, init, 2);
  check_params(gpu, cpu, dt, false);  // same initial values from the host streams
  differential(gpu, cpu, {batch, c.cin, c.h, c.w}, dt, 400 + static_cast<std::uint32_t>(c.h));
  // A second forward/backward at another batch size reuses (and regrows) the buffers.
  differential(gpu, cpu, {batch + 2, c.cin, c.h, c.w}, dt, 500 + static_cast<std::uint32_t>(c.w));
  if (c.stride > c.kh) {
    // Rows that no output reads get an exactly zero input gradient.
    const Tensor x = rand_host({batch, c.cin, c.h, c.w}, dt, 9).to(kGpu);
    const Tensor& y = gpu.forward(x);
    const Tensor& gx = gpu.backward(rand_host(y.shape(), dt, 10).to(kGpu));
    const std::vector<double> v = gx.to(Device::cpu()).to_vector();
    // Stride 3, kernel 2, padding 1 reads input rows 3y - 1 and 3y: row 1 never (nor column 1).
    const std::int64_t row = 1;
    for (std::int64_t q = 0; q < c.w; ++q) CHECK(v[static_cast<std::size_t>(row * c.w + q)] == 0.0);
    for (std::int64_t r = 0; r < c.h; ++r) CHECK(v[static_cast<std::size_t>(r * c.w + 1)] == 0.0);
    CHECK(v[0] != 0.0);  // ... while a row and column that are read get a gradient
  }
  // Without the input gradient the weight and bias gradients are unchanged.
  Conv2d cpu2(c.cin, c.cout, c.kh, c.kw, c.stride, c.pad, dt, Device::cpu(), bias, init, 2);
  Conv2d gpu2(c.cin, c.cout, c.kh, c.kw, c.stride, c.pad, dt, kGpu, bias, init, 2);
  cpu2.set_input_grad(false);
  gpu2.set_input_grad(false);
  differential(gpu2, cpu2, {batch, c.cin, c.h, c.w}, dt, 600);
  CHECK_FALSE(gpu2.backward(gpu2.forward(rand_host({batch, c.cin, c.h, c.w}, dt, 1).to(kGpu))).defined());
  // A host input is rejected by the device module.
  CHECK_THROWS_AS(gpu.forward(rand_host({batch, c.cin, c.h, c.w}, dt, 1)), InputError);
}

TEST_CASE("device convnet (Conv2d, ReLU, Conv2d, Flatten, Linear) trained with Adam matches the CPU", "[gpu][nn]") {
  BOTH_DTYPES;
  auto build = [&](Device d) {
    auto net = std::make_unique<Sequential>(dt, d);
    const RngStream init(12, 0, RngPurpose::kInit);
    net->emplace<Conv2d>(2, 4, 3, 3, 1, 1, dt, d, true, init, 0);
    net->emplace<ReLU>(dt, d);
    net->emplace<Conv2d>(4, 3, 3, 3, 2, 1, dt, d, true, init, 1);
    net->emplace<Tanh>(dt, d);
    net->emplace<Flatten>(dt, d);
    net->emplace<Linear>(3 * 4 * 3, 5, dt, d, true, init, 2);
    return net;
  };
  auto cpu = build(Device::cpu());
  auto gpu = build(kGpu);
  check_params(*gpu, *cpu, dt, false);
  Adam oc(cpu->named_parameters(), 1e-2), og(gpu->named_parameters(), 1e-2);
  CrossEntropyLoss lc, lg;
  std::vector<std::int64_t> labels(17);
  for (std::size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<std::int64_t>((i * 3) % 5);
  const Tensor t = Tensor::from_indices({17}, labels);
  const Tensor td = t.to(kGpu);
  for (int s = 0; s < 4; ++s) {
    const Tensor x = rand_host({17, 2, 8, 6}, dt, 700 + static_cast<std::uint32_t>(s));
    oc.zero_grad();
    og.zero_grad();
    const double a = lc.forward(cpu->forward(x), t);
    const double b = lg.forward(gpu->forward(x.to(kGpu)), td);
    CHECK(b == Approx(a).epsilon(dt == DType::kFloat64 ? 1e-9 : 1e-4));
    cpu->backward(lc.backward());
    gpu->backward(lg.backward());
    check_params(*gpu, *cpu, dt, true);
    oc.step();
    og.step();
  }
  check_params(*gpu, *cpu, dt, false);
}

TEST_CASE("device activations, softmax and LayerNorm match the CPU", "[gpu][nn]") {
  BOTH_DTYPES;
  {
    ReLU c(dt), g(dt, kGpu);
    differential(g, c, {7, 11}, dt, 10);
  }
  {
    Tanh c(dt), g(dt, kGpu);
    differential(g, c, {7, 11}, dt, 11);
  }
  {
    ELU c(0.7, dt), g(0.7, dt, kGpu);
    differential(g, c, {7, 11}, dt, 12);
  }
  {
    Softmax c(dt), g(dt, kGpu);
    differential(g, c, {7, 11}, dt, 13);
  }
  {
    LogSoftmax c(dt), g(dt, kGpu);
    differential(g, c, {7, 11}, dt, 14);
  }
  {
    LayerNorm c(11, 1e-5, true, dt), g(11, 1e-5, true, dt, kGpu);
    // Non-trivial affine parameters.
    c.named_parameters()[0].param->value.copy_from(rand_host({11}, dt, 15, 0.5, 1.5));
    c.named_parameters()[1].param->value.copy_from(rand_host({11}, dt, 16));
    differential(g, c, {9, 11}, dt, 17);
  }
  {
    LayerNorm c(11, 1e-5, false, dt), g(11, 1e-5, false, dt, kGpu);
    differential(g, c, {3, 5, 11}, dt, 18);
  }
  {
    Flatten c(dt), g(dt, kGpu);
    differential(g, c, {3, 2, 4}, dt, 19);
  }
}

TEST_CASE("device losses match the CPU", "[gpu][nn]") {
  BOTH_DTYPES;
  const Tensor p = rand_host({33, 5}, dt, 20, -3, 3), t = rand_host({33, 5}, dt, 21, -3, 3);
  const Tensor pd = p.to(kGpu), td = t.to(kGpu);
  const double tol = dt == DType::kFloat64 ? 1e-12 : 1e-5;
  {
    MseLoss c, g;
    CHECK(g.forward(pd, td) == Approx(c.forward(p, t)).epsilon(tol));
    check_close(g.backward(0.7), c.backward(0.7), dt, "mse grad");
  }
  {
    HuberLoss c(0.8), g(0.8);
    CHECK(g.forward(pd, td) == Approx(c.forward(p, t)).epsilon(tol));
    check_close(g.backward(1.3), c.backward(1.3), dt, "huber grad");
  }
  {
    std::vector<std::int64_t> idx(33);
    for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<std::int64_t>((i * 7) % 5);
    const Tensor tg = Tensor::from_indices({33}, idx);
    CrossEntropyLoss c, g;
    CHECK(g.forward(pd, tg.to(kGpu)) == Approx(c.forward(p, tg)).epsilon(tol));
    check_close(g.backward(0.9), c.backward(0.9), dt, "cross-entropy grad");
    idx[4] = 5;
    // Checked on the device: reported when the value is read.
    CHECK_THROWS_WITH(g.forward(pd, Tensor::from_indices({33}, idx).to(kGpu)).value(),
                      Catch::Contains("targets[4] is 5"));
    // Mixed devices are an InputError.
    CHECK_THROWS_AS(MseLoss().forward(pd, t), InputError);
  }
}

TEST_CASE("device losses and Categorical: no host wait in forward, input errors reported at the next sync",
          "[gpu][nn]") {
  BOTH_DTYPES;
  const std::int64_t B = 29, C = 4;
  const Tensor logits = rand_host({B, C}, dt, 80, -2, 2);
  const Tensor ld = logits.to(kGpu);
  std::vector<std::int64_t> idx(static_cast<std::size_t>(B));
  for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<std::int64_t>((i * 5) % 4);
  const Tensor good = Tensor::from_indices({B}, idx);
  const Tensor good_d = good.to(kGpu);
  std::vector<std::int64_t> bad_idx = idx;
  bad_idx[11] = 4;  // == classes
  const Tensor bad_hi = Tensor::from_indices({B}, bad_idx).to(kGpu);
  bad_idx[11] = idx[11];
  bad_idx[3] = -1;
  const Tensor bad_lo = Tensor::from_indices({B}, bad_idx).to(kGpu);
  synchronize(kGpu);  // a clean start

  CrossEntropyLoss ce_cpu, ce;
  const double want = ce_cpu.forward(logits, good);
  SECTION("the loss value stays on the device until read") {
    const LossValue v = ce.forward(ld, good_d);
    CHECK_FALSE(v.ready());
    REQUIRE(v.tensor().defined());
    CHECK(v.tensor().is_cuda());
    CHECK(v.tensor().dtype() == DType::kFloat64);
    CHECK(v.tensor().to(Device::cpu()).item(0) == Approx(want).epsilon(1e-6));
    CHECK(v.value() == Approx(want).epsilon(dt == DType::kFloat64 ? 1e-12 : 1e-6));
    CHECK(v.ready());
    const double as_double = v;  // the implicit conversion of the old API
    CHECK(as_double == v.value());
    // Host losses are ready at once and have no device tensor.
    const LossValue h = ce_cpu.forward(logits, good);
    CHECK(h.ready());
    CHECK_FALSE(h.tensor().defined());
    CHECK(h.value() == want);
  }
  SECTION("a device value read after the loss's next forward is an error, not a silently newer value") {
    const LossValue a = ce.forward(ld, good_d);
    const LossValue b = ce.forward(ld, good_d);
    CHECK_THROWS_AS(a.value(), Error);
    CHECK(b.value() == Approx(want).epsilon(1e-6));
    // MSE and Huber: the same protocol.
    MseLoss mse;
    HuberLoss huber;
    const Tensor t = rand_host({B, C}, dt, 81).to(kGpu);
    const LossValue m = mse.forward(ld, t);
    const LossValue hv = huber.forward(ld, t);
    CHECK_FALSE(m.ready());
    MseLoss mse_cpu;
    HuberLoss huber_cpu;
    CHECK(m.value() == Approx(mse_cpu.forward(logits, t.to(Device::cpu()))).epsilon(1e-6));
    CHECK(hv.value() == Approx(huber_cpu.forward(logits, t.to(Device::cpu()))).epsilon(1e-6));
  }
  SECTION("a target out of range is an InputError when the value is read") {
    const LossValue v = ce.forward(ld, bad_hi);  // no throw, no wait
    CHECK_THROWS_WITH(v.value(), Catch::Contains("nn::CrossEntropyLoss::forward") &&
                                     Catch::Contains("targets[11] is 4") && Catch::Contains("[0, 4)"));
    // Reported once: the next call with good targets is fine.
    CHECK(ce.forward(ld, good_d).value() == Approx(want).epsilon(1e-6));
    CHECK_THROWS_WITH(ce.forward(ld, bad_lo).value(), Catch::Contains("targets[3] is -1"));
  }
  SECTION("... or at nn::synchronize, or at a copy from the device, when the value is never read") {
    ce.forward(ld, bad_hi);
    ce.backward();  // the gradient kernel reads no out-of-range memory
    CHECK_THROWS_AS(synchronize(kGpu), InputError);
    synchronize(kGpu);  // cleared once reported
    ce.forward(ld, bad_lo);
    CHECK_THROWS_WITH(ld.to(Device::cpu()), Catch::Contains("targets[3] is -1"));
    CHECK(ld.to(Device::cpu()).to_vector() == logits.to(Device::cpu()).to_vector());
  }
  SECTION("Categorical::log_prob checks actions on the device") {
    Categorical cat_cpu, cat;
    cat_cpu.set_logits(logits);
    cat.set_logits(ld);
    const Tensor& lp = cat.log_prob(bad_hi);  // no throw, no wait
    CHECK_THROWS_WITH(synchronize(kGpu), Catch::Contains("nn::Categorical::log_prob") &&
                                             Catch::Contains("actions[11] is 4") && Catch::Contains("[0, 4)"));
    // The bad row is NaN, the others are right.
    const std::vector<double> got = lp.to(Device::cpu()).to_vector();
    const std::vector<double> ref = cat_cpu.log_prob(good).to_vector();
    for (std::size_t i = 0; i < got.size(); ++i) {
      if (i == 11) CHECK(std::isnan(got[i]));
      else CHECK(got[i] == Approx(ref[i]).epsilon(1e-6));
    }
    cat.log_prob(bad_lo);
    CHECK_THROWS_WITH(cat.entropy().to(Device::cpu()), Catch::Contains("actions[3] is -1"));
    // Good actions: no error.
    check_close(cat.log_prob(good_d), cat_cpu.log_prob(good), dt, "log_prob");
    synchronize(kGpu);
    // The CPU path still throws at once.
    CHECK_THROWS_WITH(cat_cpu.log_prob(bad_hi.to(Device::cpu())), Catch::Contains("actions[11] is 4"));
  }
  SECTION("Categorical::mode on the device: first index on ties, as the CPU") {
    std::vector<double> v(static_cast<std::size_t>(B * C), 0.0);
    for (std::int64_t r = 0; r < B; ++r) {
      v[static_cast<std::size_t>(r * C + (r % C))] = 1.0;
      v[static_cast<std::size_t>(r * C + ((r + 2) % C))] = 1.0;  // a tie: the smaller index wins
    }
    const Tensor tie = Tensor::from_vector({B, C}, v, dt);
    Categorical cat_cpu, cat;
    cat_cpu.set_logits(tie);
    cat.set_logits(tie.to(kGpu));
    Tensor mc, mg;
    cat_cpu.mode(mc);
    cat.mode(mg);
    CHECK(mg.is_cuda());
    CHECK(mg.to(Device::cpu()).to_vector() == mc.to_vector());
  }
}

TEST_CASE("device Categorical head matches the CPU", "[gpu][nn]") {
  BOTH_DTYPES;
  const std::int64_t B = 37, C = 6;
  const Tensor logits = rand_host({B, C}, dt, 30, -2, 2);
  Categorical c, g;
  c.set_logits(logits);
  g.set_logits(logits.to(kGpu));
  check_close(g.probs(), c.probs(), dt, "probs");
  check_close(g.log_probs(), c.log_probs(), dt, "log_probs");
  Tensor ac, ag;
  const RngStream rng(9, 100, RngPurpose::kUser);
  c.sample(rng, 3, ac);
  g.sample(rng, 3, ag);
  CHECK(ag.is_cuda());
  // Exact: the device draws the same Philox uniforms. (A row could differ only if its
  // uniform fell within the float rounding of the probabilities, about 1e-7 apart on the
  // two devices: false-failure rate about 37 rows * 1e-7 for float32, ~1e-14 for float64.)
  CHECK(ag.to(Device::cpu()).to_vector() == ac.to_vector());
  Tensor mc, mg;
  c.mode(mc);
  g.mode(mg);
  CHECK(mg.to(Device::cpu()).to_vector() == mc.to_vector());
  check_close(g.log_prob(ag), c.log_prob(ac), dt, "log_prob");
  check_close(g.entropy(), c.entropy(), dt, "entropy");
  const Tensor w1 = rand_host({B}, dt, 31), w2 = rand_host({B}, dt, 32);
  c.backward_log_prob(w1);
  g.backward_log_prob(w1.to(kGpu));
  c.backward_entropy(w2);
  g.backward_entropy(w2.to(kGpu));
  check_close(g.grad_logits(), c.grad_logits(), dt, "grad_logits");
}

TEST_CASE("device Gaussian head and a PPO-style loss backward match the CPU", "[gpu][nn]") {
  BOTH_DTYPES;
  const std::int64_t B = 41, obs = 6, act = 3;
  auto build = [&](Device d) {
    MlpOptions o;
    o.sizes = {obs, 32, 32, act};
    o.dtype = dt;
    o.device = d;
    o.init = MlpInit::kOrthogonal;
    o.rng = RngStream(4, 0, RngPurpose::kInit);
    auto s = std::make_unique<Sequential>(dt, d);
    s->emplace<Mlp>(o);
    s->emplace<Gaussian>(act, dt, d, -0.3);
    return s;
  };
  auto cpu = build(Device::cpu());
  auto gpu = build(kGpu);
  check_params(*gpu, *cpu, dt, false);  // same orthogonal init on both
  const Tensor x = rand_host({B, obs}, dt, 40);
  const Tensor adv = rand_host({B}, dt, 41);
  const Tensor old_lp = rand_host({B}, dt, 42, -4, -2);
  const double clip = 0.2, ent_coef = 0.01;
  Tensor a_cpu, a_gpu;
  // The head is the container's last layer.
  auto head_of = [](Sequential& s) -> Gaussian& { return static_cast<Gaussian&>(s[s.size() - 1]); };
  auto step = [&](Sequential& net, Device d, Tensor& actions) {
    net.zero_grad();
    net.forward(d.is_cpu() ? x : x.to(d));
    Gaussian& head = head_of(net);
    head.sample(RngStream(3, 0, RngPurpose::kUser), 7, actions);
    // Both devices continue from the CPU's actions (device normals may differ from the
    // host's in the last bits; compared below).
    if (!d.is_cpu()) actions = a_cpu.to(d);
    const Tensor lp = head.log_prob(actions).to(Device::cpu());
    // PPO clipped surrogate -mean(min(r A, clip(r) A)) - c_e mean(H): per-sample weights
    // dL/d log_prob on the host, as the RL engine computes them.
    Tensor w({B}, dt), we({B}, dt);
    double l = 0;
    for (std::int64_t i = 0; i < B; ++i) {
      const double r = std::exp(lp.item(i) - old_lp.item(i)), a = adv.item(i);
      const double rc = std::min(std::max(r, 1 - clip), 1 + clip);
      const bool unclipped = r * a <= rc * a;
      l -= std::min(r * a, rc * a) / static_cast<double>(B);
      w.set_item(i, unclipped ? -r * a / static_cast<double>(B) : 0.0);
      we.set_item(i, -ent_coef / static_cast<double>(B));
    }
    head.backward_log_prob(d.is_cpu() ? w : w.to(d));
    head.entropy();
    head.backward_entropy(d.is_cpu() ? we : we.to(d));
    net.backward(Tensor({B, act}, dt, d));
    return l;
  };
  const double lc = step(*cpu, Device::cpu(), a_cpu);
  Tensor a_dev;
  {
    // Sampling on the device: the same Philox counters as the host.
    gpu->forward(x.to(kGpu));
    head_of(*gpu).sample(RngStream(3, 0, RngPurpose::kUser), 7, a_dev);
    CHECK(a_dev.is_cuda());
    check_close(a_dev, a_cpu, dt, "device samples");
  }
  const double lg = step(*gpu, kGpu, a_gpu);
  CHECK(lg == Approx(lc).epsilon(dt == DType::kFloat64 ? 1e-9 : 1e-4));
  check_close(head_of(*gpu).entropy(), head_of(*cpu).entropy(), dt, "entropy");
  check_params(*gpu, *cpu, dt, true);
  // Clipping by global norm: same norm, same clipped gradients.
  const double nc = clip_grad_norm(cpu->parameters(), 0.05);
  const double ng = clip_grad_norm(gpu->parameters(), 0.05);
  CHECK(ng == Approx(nc).epsilon(dt == DType::kFloat64 ? 1e-10 : 1e-5));
  check_params(*gpu, *cpu, dt, true);
}

TEST_CASE("device Mlp trained with Adam, SGD and RMSprop (plain and centred) matches the CPU", "[gpu][nn]") {
  BOTH_DTYPES;
  const int which = GENERATE(0, 1, 2, 3, 4);
  INFO("optimizer " << which);
  auto build = [&](Device d) {
    MlpOptions o;
    o.sizes = {5, 32, 32, 3};
    o.dtype = dt;
    o.device = d;
    o.activation = Activation::kTanh;
    o.rng = RngStream(6, 0, RngPurpose::kInit);
    return std::make_unique<Mlp>(o);
  };
  auto make_opt = [&](Module& m) -> std::unique_ptr<Optimizer> {
    switch (which) {
      case 0:
        return std::make_unique<Adam>(m.named_parameters(), 1e-2);
      case 1:
        return std::make_unique<Sgd>(m.named_parameters(), 5e-2, 0.9);
      case 2:
        return std::make_unique<Sgd>(m.named_parameters(), 5e-2, 0.9, 0.0, true);
      case 3:
        return std::make_unique<RmsProp>(m.named_parameters(), 1e-2);
      default:
        return std::make_unique<RmsProp>(m.named_parameters(), 1e-2, 0.95, 0.01, true);
    }
  };
  auto cpu = build(Device::cpu());
  auto gpu = build(kGpu);
  auto oc = make_opt(*cpu);
  auto og = make_opt(*gpu);
  MseLoss lc, lg;
  for (int s = 0; s < 5; ++s) {
    const Tensor x = rand_host({64, 5}, dt, 50 + static_cast<std::uint32_t>(s));
    const Tensor y = rand_host({64, 3}, dt, 60 + static_cast<std::uint32_t>(s));
    oc->zero_grad();
    og->zero_grad();
    const double a = lc.forward(cpu->forward(x), y);
    const double b = lg.forward(gpu->forward(x.to(kGpu)), y.to(kGpu));
    CHECK(b == Approx(a).epsilon(dt == DType::kFloat64 ? 1e-9 : 1e-4));
    cpu->backward(lc.backward());
    gpu->backward(lg.backward());
    oc->step();
    og->step();
  }
  // Float32 drifts apart a little over steps: a looser bound for it.
  check_params(*gpu, *cpu, dt, true);
  // Optimizer state saved from the GPU equals the CPU's and loads back.
  const auto sc = oc->state();
  const auto sg = og->state();
  REQUIRE(sc.size() == sg.size());
  for (std::size_t i = 0; i < sc.size(); ++i) check_close(sg[i].tensor, sc[i].tensor, dt, sg[i].name.c_str());
  og->load_state(sc);
  for (std::size_t i = 0; i < sc.size(); ++i) check_close(og->state()[i].tensor, sc[i].tensor, dt, "reloaded");
}

TEST_CASE("clip_grad_norm_on_device equals clip_grad_norm without a host wait; a skip flag vetoes steps", "[gpu][nn]") {
  BOTH_DTYPES;
  auto build = [&] {
    MlpOptions o;
    o.sizes = {5, 16, 3};
    o.dtype = dt;
    o.device = kGpu;
    o.rng = RngStream(9, 0, RngPurpose::kInit);
    return std::make_unique<Mlp>(o);
  };
  auto a = build(), b = build();
  const Tensor x = rand_host({32, 5}, dt, 70).to(kGpu);
  const Tensor gy = rand_host({32, 3}, dt, 71).to(kGpu);
  for (Mlp* m : {a.get(), b.get()}) {
    m->zero_grad();
    m->forward(x);
    m->backward(gy);
  }
  Tensor sum_sq({1}, DType::kFloat64, kGpu);
  // Both max norms: one below the gradient norm (scaled), one above it (left as is).
  for (double max_norm : {1e-3, 1e6}) {
    INFO("max_norm " << max_norm);
    const double norm = clip_grad_norm(a->named_parameters(), max_norm);
    const gpu::CounterScope scope;
    clip_grad_norm_on_device(b->named_parameters(), max_norm, sum_sq.data<double>());
    const gpu::LaunchCounters c = scope.delta();
    if (gpu::active_backend() == gpu::Backend::kHost) {
      CHECK(c.host_waits == 0);
      CHECK(c.transfers() == 0);
    }
    CHECK(std::sqrt(sum_sq.to(Device::cpu()).item(0)) == norm);
    const auto pa = a->named_parameters(), pb = b->named_parameters();
    for (std::size_t i = 0; i < pa.size(); ++i)
      CHECK(pa[i].param->grad.to(Device::cpu()).to_vector() == pb[i].param->grad.to(Device::cpu()).to_vector());
  }
  CHECK_THROWS_AS(clip_grad_norm_on_device(b->named_parameters(), 0.0, sum_sq.data<double>()), InputError);

  // A set skip flag leaves parameters and buffers of Adam, SGD (momentum) and RMSprop
  // unchanged; a cleared one lets the step through.
  Tensor flag({1}, DType::kInt64, kGpu);  // the first int32 of it is the flag
  for (int which = 0; which < 3; ++which) {
    INFO("optimizer " << which);
    std::unique_ptr<Optimizer> opt;
    if (which == 0) opt = std::make_unique<Adam>(b->named_parameters(), 1e-2);
    else if (which == 1) opt = std::make_unique<Sgd>(b->named_parameters(), 1e-2, 0.9);
    else opt = std::make_unique<RmsProp>(b->named_parameters(), 1e-2);
    const auto before = b->state_dict();
    const auto state_before = opt->state();
    auto* f = reinterpret_cast<std::int32_t*>(flag.data<std::int64_t>());
    opt->set_skip_flag(f);
    flag.fill(1.0);
    opt->step();
    const auto after = b->state_dict();
    for (std::size_t i = 0; i < before.size(); ++i)
      CHECK(after[i].tensor.to(Device::cpu()).to_vector() == before[i].tensor.to(Device::cpu()).to_vector());
    const auto state_after = opt->state();
    for (std::size_t i = 2; i < state_after.size(); ++i)  // buffers (after "step" and "lr")
      CHECK(state_after[i].tensor.to(Device::cpu()).to_vector() ==
            state_before[i].tensor.to(Device::cpu()).to_vector());
    flag.fill(0.0);
    opt->step();
    CHECK(b->state_dict()[0].tensor.to(Device::cpu()).to_vector() != before[0].tensor.to(Device::cpu()).to_vector());
    opt->set_skip_flag(nullptr);
  }
  // Host parameters cannot take a device flag.
  MlpOptions ho;
  ho.sizes = {2, 2};
  Mlp host(ho);
  Adam host_opt(host.named_parameters(), 1e-2);
  std::int32_t dummy = 0;
  CHECK_THROWS_AS(host_opt.set_skip_flag(&dummy), InputError);
}

TEST_CASE("DataParallel on a device module (one rank) leaves the gradients of a plain backward", "[gpu][nn]") {
  // The device path (device flat buffer, copies on the nn stream, an event per bucket,
  // scale and copy back) with a communicator of size 1; odd bucket sizes so that
  // parameters span buckets. The NCCL all-reduce itself needs 2 GPUs and is not run here.
  BOTH_DTYPES;
  const std::size_t bucket = GENERATE(std::size_t{1}, std::size_t{13}, std::size_t{25} << 20);
  auto build = [&] {
    MlpOptions o;
    o.sizes = {7, 16, 5};
    o.dtype = dt;
    o.device = kGpu;
    return std::make_unique<Mlp>(o);
  };
  auto plain = build();
  auto wrapped = build();
  SelfCommunicator comm;
  DataParallel dp(*wrapped, comm, {.bucket_bytes = bucket * dtype_size(dt)});
  const Tensor x = rand_host({9, 7}, dt, 70).to(kGpu);
  const Tensor g = rand_host({9, 5}, dt, 71).to(kGpu);
  for (int pass = 0; pass < 2; ++pass) {
    plain->zero_grad();
    wrapped->zero_grad();
    plain->forward(x);
    plain->backward(g);
    dp.forward(x);
    dp.backward(g);
    check_params(*wrapped, *plain, dt, true);
  }
}

TEST_CASE("device modules save, convert and load state", "[gpu][nn]") {
  MlpOptions o;
  o.sizes = {4, 8, 2};
  o.device = kGpu;
  Mlp gpu(o);
  // Saved from the device (host copies are written), loaded into a CPU model.
  const std::string path = (std::filesystem::temp_directory_path() / "herd_nn_device_state.bin").string();
  save_binary(path, gpu.state_dict());
  MlpOptions oc = o;
  oc.device = Device::cpu();
  oc.rng = RngStream(99, 0, RngPurpose::kInit);  // different initial values
  Mlp cpu(oc);
  cpu.load_state_dict(load_binary(path));
  std::filesystem::remove(path);
  check_params(gpu, cpu, DType::kFloat32, false);
  // A float64 host state loads into the float32 device model (converted on the host).
  std::vector<NamedTensor> st = cpu.state_dict();
  for (auto& t : st) t.tensor = t.tensor.to(DType::kFloat64);
  Mlp gpu2(o);
  gpu2.load_state_dict(st);
  check_params(gpu2, cpu, DType::kFloat32, false);
}
