// GraphedTrainStep on Device::cuda(0) ([gpu]; exit code 77 without a CUDA device): the
// captured and replayed train step (zero_grad, Mlp forward, MSE, backward, Adam) against
// the same step run eagerly on an identical model, over several steps, shape changes,
// learning-rate changes, buffer reallocations and interleaved eager steps.
//
// Tolerances: the graph runs the same kernels in the same order as the eager step; only
// Adam's bias corrections come from the device's pow instead of the host's (the last bit
// of a double) and atomics in bias gradients may sum in another order. Float64: 1e-9
// relative + 1e-12 absolute; float32: 1e-4 relative + 1e-6 absolute after up to 12 steps.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "herd/core/rng.hpp"
#include "herd/nn/graphed_train_step.hpp"
#include "herd/nn/mlp.hpp"

using namespace herd;
using namespace herd::nn;

namespace {

const Device kGpu = Device::cuda(0);

Tensor rand_host(const Shape& s, DType dt, std::uint32_t stream) {
  RngCursor c = RngStream(6, stream, RngPurpose::kUser).at(0);
  Tensor t(s, dt);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.set_item(i, c.normal());
  return t;
}

bool close(double got, double want, DType dt) {
  const double rtol = dt == DType::kFloat64 ? 1e-9 : 1e-4, atol = dt == DType::kFloat64 ? 1e-12 : 1e-6;
  return std::abs(got - want) <= atol + rtol * std::abs(want);
}

void check_close(const Tensor& got, const Tensor& want, DType dt, const std::string& what) {
  INFO(what);
  const std::vector<double> g = got.to(Device::cpu()).to_vector(), w = want.to(Device::cpu()).to_vector();
  REQUIRE(g.size() == w.size());
  int bad = 0;
  for (std::size_t i = 0; i < g.size(); ++i)
    if (!close(g[i], w[i], dt) && bad++ < 5) {
      INFO("element " << i << ": graphed " << g[i] << " eager " << w[i]);
      CHECK(false);
    }
  CHECK(bad == 0);
}

// An eager model and a graphed one, identical at the start.
struct Pair {
  explicit Pair(DType dt, bool graph = true, double lr = 3e-3)
      : eager(opts(dt)),
        graphed(opts(dt)),
        oe(eager.named_parameters(), lr),
        og(graphed.named_parameters(), lr),
        step(graphed, lg, og, graph) {}
  static MlpOptions opts(DType dt) {
    MlpOptions o;
    o.sizes = {12, 32, 32, 4};
    o.dtype = dt;
    o.device = kGpu;
    o.activation = Activation::kTanh;
    o.rng = RngStream(21, 0, RngPurpose::kInit);
    return o;
  }
  // One step of each; returns {eager loss, graphed loss}.
  std::pair<double, double> run(const Tensor& x, const Tensor& y) {
    // The written-out step needs device tensors; the graphed one also takes host tensors.
    const Tensor xd = x.is_cpu() ? x.to(kGpu) : x, yd = y.is_cpu() ? y.to(kGpu) : y;
    oe.zero_grad();
    const double a = le.forward(eager.forward(xd), yd);
    eager.backward(le.backward());
    oe.step();
    const double b = step.step(x, y);
    return {a, b};
  }
  void compare(DType dt) {
    const auto pe = eager.named_parameters(), pg = graphed.named_parameters();
    for (std::size_t i = 0; i < pe.size(); ++i) {
      check_close(pg[i].param->value, pe[i].param->value, dt, pe[i].name);
      check_close(pg[i].param->grad, pe[i].param->grad, dt, pe[i].name + ".grad");
    }
    CHECK(og.steps() == oe.steps());
    const auto se = oe.state(), sg = og.state();
    REQUIRE(se.size() == sg.size());
    for (std::size_t i = 0; i < se.size(); ++i) check_close(sg[i].tensor, se[i].tensor, dt, "state " + se[i].name);
  }
  Mlp eager, graphed;
  Adam oe, og;
  MseLoss le, lg;
  GraphedTrainStep step;
};

#define BOTH_DTYPES                                            \
  const DType dt = GENERATE(DType::kFloat32, DType::kFloat64); \
  INFO(dtype_name(dt))

}  // namespace

TEST_CASE("graphed train step == eager train step over several steps", "[gpu][nn]") {
  BOTH_DTYPES;
  const std::int64_t batch = GENERATE(1, 32, 256);
  Pair p(dt);
  for (int s = 0; s < 10; ++s) {
    // New data every step (the same shapes): the static buffers must be refreshed.
    const Tensor x = rand_host({batch, 12}, dt, 100 + static_cast<std::uint32_t>(s)).to(kGpu);
    const Tensor y = rand_host({batch, 4}, dt, 200 + static_cast<std::uint32_t>(s)).to(kGpu);
    const auto [a, b] = p.run(x, y);
    INFO("step " << s);
    CHECK(close(b, a, dt));
  }
  p.compare(dt);
  CHECK(p.step.graph_error().empty());
  CHECK(p.step.captured());
  CHECK(p.step.captures() == 1);
  CHECK(p.step.eager_steps() == 1);  // the warm-up
  CHECK(p.step.graph_steps() == 9);
}

TEST_CASE("graphed train step: host inputs, shape changes, lr changes, reallocations, eager steps between",
          "[gpu][nn]") {
  BOTH_DTYPES;
  Pair p(dt);
  std::uint32_t seed = 300;
  auto data = [&](std::int64_t batch, bool host) {
    Tensor x = rand_host({batch, 12}, dt, seed++), y = rand_host({batch, 4}, dt, seed++);
    if (!host) {
      x = x.to(kGpu);
      y = y.to(kGpu);
    }
    return std::make_pair(x, y);
  };
  auto steps = [&](int n, std::int64_t batch, bool host) {
    for (int s = 0; s < n; ++s) {
      const auto [x, y] = data(batch, host);
      const auto [a, b] = p.run(x, y);
      CHECK(close(b, a, dt));
    }
  };
  steps(4, 16, true);  // host tensors are copied into the static buffers
  CHECK(p.step.captures() == 1);
  steps(3, 7, false);  // a new shape: eager, capture, replay
  CHECK(p.step.captures() == 2);
  steps(3, 16, false);  // back: captured again
  CHECK(p.step.captures() == 3);
  CHECK(p.step.graph_steps() == 3 + 2 + 2);
  p.compare(dt);

  // A learning-rate change (a schedule) reaches the replayed graph.
  p.oe.set_lr(1e-2);
  p.og.set_lr(1e-2);
  steps(2, 16, false);
  p.compare(dt);

  // Eager optimizer steps between graphed steps: the device step count follows.
  {
    const auto [x, y] = data(16, false);
    for (auto* m : {&p.eager, &p.graphed}) {
      Adam& o = m == &p.eager ? p.oe : p.og;
      MseLoss& l = m == &p.eager ? p.le : p.lg;
      o.zero_grad();
      l.forward(m->forward(x), y).value();
      m->backward(l.backward());
      o.step();
    }
  }
  const std::int64_t captures = p.step.captures();
  steps(2, 16, false);
  CHECK(p.step.captures() == captures);  // same shapes, no reallocation: no new capture
  p.compare(dt);

  // The model evaluated on a larger batch between steps reallocates its buffers: the
  // graph (which holds their old addresses) is dropped and captured again.
  {
    const auto [x, y] = data(400, false);
    p.graphed.forward(x);
    p.eager.forward(x);
  }
  steps(3, 16, false);
  CHECK(p.step.captures() == captures + 1);
  p.compare(dt);

  // Evaluating on a smaller batch reuses the buffers: the graph stays.
  {
    const auto [x, y] = data(5, false);
    p.graphed.forward(x);
  }
  steps(2, 16, false);
  CHECK(p.step.captures() == captures + 1);
  p.compare(dt);
  CHECK(p.step.graph_error().empty());
}

TEST_CASE("graphed train step: the returned loss is a device value, stale after the next step", "[gpu][nn]") {
  Pair p(DType::kFloat32);
  const Tensor x = rand_host({8, 12}, DType::kFloat32, 1).to(kGpu), y = rand_host({8, 4}, DType::kFloat32, 2).to(kGpu);
  std::vector<double> eager_losses;
  for (int s = 0; s < 4; ++s) {
    p.oe.zero_grad();
    eager_losses.push_back(p.le.forward(p.eager.forward(x), y));
    p.eager.backward(p.le.backward());
    p.oe.step();
  }
  LossValue first = p.step.step(x, y);
  CHECK(close(first.value(), eager_losses[0], DType::kFloat32));
  p.step.step(x, y);
  LossValue third = p.step.step(x, y);  // a graph launch
  CHECK(p.step.graph_steps() >= 1);
  CHECK_FALSE(third.ready());
  LossValue fourth = p.step.step(x, y);
  CHECK_THROWS_AS(third.value(), Error);  // overwritten by the next replay: refused, not wrong
  CHECK(close(fourth.value(), eager_losses[3], DType::kFloat32));
}

TEST_CASE("graphed train step with use_graph = false is the eager step", "[gpu][nn]") {
  Pair p(DType::kFloat64, false);
  for (int s = 0; s < 4; ++s) {
    const Tensor x = rand_host({9, 12}, DType::kFloat64, 40 + static_cast<std::uint32_t>(s)).to(kGpu);
    const Tensor y = rand_host({9, 4}, DType::kFloat64, 50 + static_cast<std::uint32_t>(s)).to(kGpu);
    const auto [a, b] = p.run(x, y);
    CHECK(close(b, a, DType::kFloat64));
  }
  CHECK(p.step.captures() == 0);
  CHECK(p.step.eager_steps() == 4);
  p.compare(DType::kFloat64);
}
