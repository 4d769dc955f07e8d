// DQN: targets (plain and double), Huber loss and its gradients against hand-computed
// numbers on tiny networks with set weights, dueling aggregation, target updates, the
// epsilon schedule.
#include <cmath>
#include <vector>

#include <catch2/catch.hpp>

#include "herd/core/error.hpp"
#include "herd/nn/optimizer.hpp"
#include "herd/rl/dqn.hpp"

using herd::RngPurpose;
using herd::RngStream;
using namespace herd::rl;
namespace nn = herd::nn;

namespace {

void set(nn::Tensor& t, std::vector<float> v) {
  REQUIRE(static_cast<std::int64_t>(v.size()) == t.numel());
  std::copy(v.begin(), v.end(), t.data<float>());
}

// Encoder: one Linear(2, 2) set to the identity (features = observation).
std::unique_ptr<QNetwork> tiny(bool dueling) {
  auto enc = std::make_unique<nn::Sequential>();
  auto& lin = enc->emplace<nn::Linear>(2, 2);
  set(lin.weight().value, {1, 0, 0, 1});
  set(lin.bias().value, {0, 0});
  auto q = std::make_unique<QNetwork>(std::move(enc), 2, std::vector<std::int64_t>{2}, 3, dueling,
                                      RngStream(0, 0, RngPurpose::kInit), 0);
  // Q (or advantage) head: rows (1, 0), (0, 1), (1, 1), bias (0, 0.5, -1):
  // Q(x) = (x0, x1 + 0.5, x0 + x1 - 1).
  set(q->head().weight().value, {1, 0, 0, 1, 1, 1});
  set(q->head().bias().value, {0, 0.5f, -1});
  if (dueling) {
    set(q->value_head().weight().value, {1, 1});  // V(x) = x0 + x1 + 0.5
    set(q->value_head().bias().value, {0.5f});
  }
  return q;
}

ReplaySample batch() {
  ReplaySample b;
  b.obs = {1, 2, 0, -1};
  b.actions = {2, 0};
  b.returns = {1.0, 0.5};
  b.discounts = {0.9, 0.0};  // the second terminated
  b.next_obs = {0.5f, 0.25f, 3, 3};
  b.weights = {1.0, 1.0};
  b.indices = {0, 1};
  b.steps = {1, 1};
  return b;
}

}  // namespace

TEST_CASE("DQN targets: plain max over the target network, double DQN's online argmax", "[rl][dqn]") {
  auto online = tiny(false);
  auto target = tiny(false);
  // Target head: Q'(x) = (2 x0, 2 x1, 1).
  set(target->head().weight().value, {2, 0, 0, 2, 0, 0});
  set(target->head().bias().value, {0, 0, 1});
  DqnOptions o;
  o.max_grad_norm = 0;
  {
    Dqn dqn(*online, *target, o);
    // Q'(0.5, 0.25) = (1, 0.5, 1): max 1 -> 1 + 0.9; the terminated sample: its return.
    const auto y = dqn.targets(batch());
    CHECK(y[0] == Approx(1.9));
    CHECK(y[1] == 0.5);
  }
  o.double_q = true;
  Dqn dqn(*online, *target, o);
  // Online Q(0.5, 0.25) = (0.5, 0.75, -0.25): argmax 1, Q'[1] = 0.5 -> 1 + 0.45.
  const auto y = dqn.targets(batch());
  CHECK(y[0] == Approx(1.45));
  CHECK(y[1] == 0.5);
}

TEST_CASE("DQN loss and gradients match hand-computed Huber values", "[rl][dqn]") {
  auto online = tiny(false);
  auto target = tiny(false);
  set(target->head().weight().value, {2, 0, 0, 2, 0, 0});
  set(target->head().bias().value, {0, 0, 1});
  DqnOptions o;
  o.max_grad_norm = 0;  // no clipping: the raw gradients
  o.learning_rate = 1e-3;
  Dqn dqn(*online, *target, o);
  ReplaySample b = batch();
  b.weights = {0.5, 1.0};  // importance weights scale each sample's term
  std::vector<double> td;
  const DqnStepStats st = dqn.train_step(b, &td);
  // Q(1, 2) = (1, 2.5, 2), a = 2: d0 = 2 - 1.9 = 0.1; Q(0, -1) = (0, -0.5, -2), a = 0:
  // d1 = 0 - 0.5 = -0.5. Loss = (0.5 * 0.5 * 0.01 + 0.5 * 0.25) / 2 = 0.06375.
  CHECK(td[0] == Approx(0.1));
  CHECK(td[1] == Approx(-0.5));
  CHECK(st.loss == Approx(0.06375));
  CHECK(st.q_mean == Approx(1.0));
  CHECK(st.target_mean == Approx(1.2));
  // dL/dQ: (0.5 * 0.1 / 2) at (0, 2), (-0.5 / 2) at (1, 0). Head grads = dQ^T features.
  const auto gw = online->head().weight().grad.to_vector();
  const auto gb = online->head().bias().grad.to_vector();
  CHECK(gw[0] == Approx(0.0));
  CHECK(gw[1] == Approx(0.25));  // -0.25 * (-1)
  CHECK(gw[2] == 0.0);
  CHECK(gw[3] == 0.0);
  CHECK(gw[4] == Approx(0.025));  // 0.025 * 1
  CHECK(gw[5] == Approx(0.05));   // 0.025 * 2
  CHECK(gb[0] == Approx(-0.25));
  CHECK(gb[1] == 0.0);
  CHECK(gb[2] == Approx(0.025));
  // Errors beyond delta are clipped to +-delta in the gradient, linear in the loss.
  auto online2 = tiny(false);
  Dqn dqn2(*online2, *target, o);
  ReplaySample c = batch();
  c.returns = {-2.9, 0.5};  // y0 = -2.9 + 0.9 = -2: d0 = 4
  dqn2.train_step(c, &td);
  CHECK(td[0] == Approx(4.0));
  CHECK(online2->head().bias().grad.to_vector()[2] == Approx(0.5));  // 1 * clamp(4) / 2
  const DqnStepStats st2 = [&] {
    auto o3 = tiny(false);
    Dqn d3(*o3, *target, o);
    return d3.train_step(c, nullptr);
  }();
  CHECK(st2.loss == Approx(((4 - 0.5) + 0.125) / 2));
  // Gradient-norm clipping: the reported norm is the raw one, the gradients scaled to the cap.
  DqnOptions oc = o;
  oc.max_grad_norm = 0.1;
  auto online3 = tiny(false);
  Dqn dqn3(*online3, *target, oc);
  const DqnStepStats st3 = dqn3.train_step(batch(), nullptr);
  double sq = 0;
  for (auto* p : online3->parameters())
    for (double g : p->grad.to_vector()) sq += g * g;
  CHECK(st3.grad_norm > 0.1);
  CHECK(std::sqrt(sq) == Approx(0.1).epsilon(1e-4));
}

TEST_CASE("DQN's MSE loss: weighted mean squared TD error, gradient 2 w d / n", "[rl][dqn]") {
  auto online = tiny(false);
  auto target = tiny(false);
  set(target->head().weight().value, {2, 0, 0, 2, 0, 0});
  set(target->head().bias().value, {0, 0, 1});
  DqnOptions o;
  o.max_grad_norm = 0;
  o.loss = DqnLoss::kMse;
  Dqn dqn(*online, *target, o);
  ReplaySample b = batch();
  b.weights = {0.5, 1.0};
  b.returns = {-2.9, 0.5};  // d0 = 2 - (-2.9 + 0.9) = 4 (no clipping under MSE), d1 = -0.5
  std::vector<double> td;
  const DqnStepStats st = dqn.train_step(b, &td);
  CHECK(td[0] == Approx(4.0));
  CHECK(td[1] == Approx(-0.5));
  CHECK(st.loss == Approx((0.5 * 16 + 0.25) / 2));
  const auto gb = online->head().bias().grad.to_vector();
  CHECK(gb[2] == Approx(0.5 * 2 * 4 / 2.0));     // sample 0, action 2
  CHECK(gb[0] == Approx(1.0 * 2 * -0.5 / 2.0));  // sample 1, action 0
  CHECK(gb[1] == 0.0);
}

TEST_CASE("Dueling heads aggregate V + A - mean(A) and split the gradient", "[rl][dqn]") {
  auto q = tiny(true);
  nn::Tensor x = nn::Tensor::from_vector(nn::Shape{1, 2}, std::vector<double>{1, 2}, nn::DType::kFloat32);
  const nn::Tensor& out = q->forward(x);
  // V = 3.5; A = (1, 2.5, 2), mean 11/6.
  const double m = 11.0 / 6.0;
  CHECK(out.item(0) == Approx(3.5 + 1 - m));
  CHECK(out.item(1) == Approx(3.5 + 2.5 - m));
  CHECK(out.item(2) == Approx(3.5 + 2 - m));
  // dL/dQ = (0, 0, 1): dV = 1, dA = (-1/3, -1/3, 2/3).
  q->zero_grad();
  nn::Tensor g = nn::Tensor::from_vector(nn::Shape{1, 3}, std::vector<double>{0, 0, 1}, nn::DType::kFloat32);
  q->backward(g);
  CHECK(q->value_head().bias().grad.item(0) == Approx(1.0));
  CHECK(q->value_head().weight().grad.item(1) == Approx(2.0));
  CHECK(q->head().bias().grad.item(0) == Approx(-1.0 / 3));
  CHECK(q->head().bias().grad.item(2) == Approx(2.0 / 3));
  CHECK(q->head().weight().grad.item(5) == Approx(4.0 / 3));
  // The encoder's gradient sums both heads: dh = Wv^T dV + Wa^T dA = (1, 1) + (1/3, 1/3).
  auto& enc = static_cast<nn::Linear&>(static_cast<nn::Sequential&>(q->encoder())[0]);
  CHECK(enc.bias().grad.item(0) == Approx(4.0 / 3));
  CHECK(enc.bias().grad.item(1) == Approx(4.0 / 3));
  // Parameter names.
  std::vector<std::string> names;
  for (const auto& p : q->named_parameters()) names.push_back(p.name);
  CHECK(names == std::vector<std::string>{"encoder.0.weight", "encoder.0.bias", "value.weight", "value.bias",
                                          "advantage.weight", "advantage.bias"});
}

TEST_CASE("Target networks: hard copies and Polyak averages", "[rl][dqn]") {
  auto online = tiny(false);
  auto target = tiny(false);
  set(target->head().bias().value, {4, 4, 4});
  target->update_from(*online, 0.25);
  // 4 * 0.75 + 0.25 * (0, 0.5, -1)
  CHECK(target->head().bias().value.item(0) == Approx(3.0));
  CHECK(target->head().bias().value.item(1) == Approx(3.125));
  CHECK(target->head().bias().value.item(2) == Approx(2.75));
  target->update_from(*online, 1.0);
  for (std::size_t k = 0; k < online->parameters().size(); ++k)
    CHECK(target->parameters()[k]->value.to_vector() == online->parameters()[k]->value.to_vector());
  CHECK_THROWS_AS(target->update_from(*online, 0.0), herd::InputError);
  auto dueling = tiny(true);
  CHECK_THROWS_AS(target->update_from(*dueling, 1.0), herd::InputError);
}

TEST_CASE("Epsilon decays linearly over the exploration fraction", "[rl][dqn]") {
  CHECK(exploration_epsilon(0, 1000, 1.0, 0.05, 0.1) == 1.0);
  CHECK(exploration_epsilon(50, 1000, 1.0, 0.05, 0.1) == Approx(0.525));
  CHECK(exploration_epsilon(100, 1000, 1.0, 0.05, 0.1) == Approx(0.05));
  CHECK(exploration_epsilon(101, 1000, 1.0, 0.05, 0.1) == 0.05);
  CHECK(exploration_epsilon(5000, 1000, 1.0, 0.05, 0.1) == 0.05);
  CHECK(exploration_epsilon(0, 1000, 1.0, 0.1, 0.0) == 0.1);
}

TEST_CASE("DQN's RMSprop is centred when asked (the MinAtar paper's optimizer)", "[rl][dqn]") {
  for (const bool centred : {false, true}) {
    auto online = tiny(false);
    auto target = tiny(false);
    DqnOptions o;
    o.optimizer = OptimizerKind::kRmsProp;
    o.rmsprop_centered = centred;
    o.learning_rate = 2.5e-4;
    o.optimizer_eps = 0.01;
    Dqn dqn(*online, *target, o);
    auto* rms = dynamic_cast<herd::nn::RmsProp*>(&dqn.optimizer());
    REQUIRE(rms != nullptr);
    CHECK(rms->centered() == centred);
    // Centred: a "grad_avg" buffer per parameter besides "square_avg" (saved in checkpoints).
    const auto n = online->parameters().size();
    CHECK(rms->state().size() == 2 + (centred ? 2 : 1) * n);
  }
}

TEST_CASE("DQN's step observer sees every step after it is taken, and changes nothing", "[rl][dqn]") {
  auto online = tiny(false), target = tiny(false);
  auto plain_online = tiny(false), plain_target = tiny(false);
  set(target->head().weight().value, {2, 0, 0, 2, 0, 0});
  set(plain_target->head().weight().value, {2, 0, 0, 2, 0, 0});
  DqnOptions o;
  o.optimizer = OptimizerKind::kRmsProp;
  o.rmsprop_centered = true;
  o.learning_rate = 1e-2;
  o.optimizer_eps = 0.01;
  o.max_grad_norm = 0;
  Dqn with(*online, *target, o), without(*plain_online, *plain_target, o);
  std::vector<DqnStepRecord> seen;
  std::vector<std::vector<double>> returns, targets, td, params, grads;
  with.set_step_observer([&](const DqnStepRecord& r) {
    seen.push_back(r);
    returns.push_back(r.batch->returns);
    targets.emplace_back(r.targets.begin(), r.targets.end());
    td.emplace_back(r.td_errors.begin(), r.td_errors.end());
    std::vector<double> p, g;
    for (auto& np : online->named_parameters()) {
      for (double x : np.param->value.to_vector()) p.push_back(x);
      for (double x : np.param->grad.to_vector()) g.push_back(x);
    }
    params.push_back(p);
    grads.push_back(g);
  });
  std::vector<DqnStepStats> stats, plain_stats;
  for (int k = 0; k < 3; ++k) {
    ReplaySample b = batch();
    b.returns = {1.0 + 0.25 * k, 0.5 - 0.5 * k};
    // The targets and the Q values before the step, from the networks themselves.
    const std::vector<double> y = with.targets(b);
    std::vector<double> step_td;
    stats.push_back(with.train_step(b, &step_td));
    plain_stats.push_back(without.train_step(b, nullptr));
    REQUIRE(seen.size() == static_cast<std::size_t>(k + 1));
    CHECK(returns.back() == b.returns);  // the step's own batch
    CHECK(targets.back() == y);
    CHECK(td.back() == step_td);
    CHECK(seen.back().stats.loss == stats.back().loss);
    CHECK(seen.back().stats.q_mean == stats.back().q_mean);
    if (k > 0) CHECK(params[k] != params[k - 1]);  // seen after the step
  }
  // Observing changes nothing: the same statistics and parameters as without an observer.
  for (int k = 0; k < 3; ++k) CHECK(stats[k].loss == plain_stats[k].loss);
  std::vector<double> last, last_grad;
  for (auto& np : plain_online->named_parameters()) {
    for (double x : np.param->value.to_vector()) last.push_back(x);
    for (double x : np.param->grad.to_vector()) last_grad.push_back(x);
  }
  CHECK(params.back() == last);
  CHECK(grads.back() == last_grad);
  // An empty observer removes it.
  with.set_step_observer({});
  with.train_step(batch(), nullptr);
  CHECK(seen.size() == 3u);
}
