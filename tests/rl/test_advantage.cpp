// GAE with terminated/truncated handling, advantage normalisation, running statistics.
#include <cmath>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

#include "herd/core/error.hpp"
#include "herd/rl/advantage.hpp"
#include "herd/rl/running_mean_std.hpp"

using herd::rl::GaeInputs;

namespace {
// Reference: A_t = sum_{k>=0} (gamma lambda)^k delta_{t+k}, summed until the episode ends.
std::vector<double> reference_gae(const GaeInputs& in) {
  const int T = in.steps, B = in.envs;
  std::vector<double> adv(static_cast<std::size_t>(T) * B);
  for (int b = 0; b < B; ++b) {
    for (int t = 0; t < T; ++t) {
      double a = 0.0, w = 1.0;
      for (int k = t; k < T; ++k) {
        const int i = k * B + b;
        double next;
        if (in.terminated[i]) next = 0.0;
        else if (in.truncated[i]) next = in.final_values[i];
        else next = k + 1 < T ? in.values[i + B] : in.last_values[b];
        a += w * (in.rewards[i] + in.gamma * next - in.values[i]);
        if (in.terminated[i] || in.truncated[i]) break;
        w *= static_cast<double>(in.gamma) * in.lambda;
      }
      adv[static_cast<std::size_t>(t) * B + b] = a;
    }
  }
  return adv;
}
}  // namespace

TEST_CASE("GAE: a hand-computed example with a termination and a truncation", "[rl]") {
  // One env, 4 steps: step 1 terminates, step 3 is truncated with V(final obs) = 10.
  const std::vector<float> r{1, 2, 3, 4}, v{0.5f, 1.0f, 1.5f, 2.0f}, fv{0, 0, 0, 10}, last{100};
  const std::vector<std::uint8_t> term{0, 1, 0, 0}, trunc{0, 0, 0, 1};
  GaeInputs in;
  in.steps = 4;
  in.envs = 1;
  in.rewards = r.data();
  in.values = v.data();
  in.terminated = term.data();
  in.truncated = trunc.data();
  in.final_values = fv.data();
  in.last_values = last.data();
  in.gamma = 0.5f;
  in.lambda = 0.5f;
  std::vector<float> adv(4), ret(4);
  herd::rl::compute_gae(in, adv.data(), ret.data());
  // t=3: delta = 4 + 0.5*10 - 2 = 7 (bootstrapped from the final observation, not last_values).
  CHECK(adv[3] == Approx(7.0));
  // t=2: delta = 3 + 0.5*2 - 1.5 = 2.5; A = 2.5 + 0.25*7 = 4.25.
  CHECK(adv[2] == Approx(4.25));
  // t=1: terminated: delta = 2 - 1 = 1; no carry.
  CHECK(adv[1] == Approx(1.0));
  // t=0: delta = 1 + 0.5*1 - 0.5 = 1; A = 1 + 0.25*1 = 1.25.
  CHECK(adv[0] == Approx(1.25));
  for (int t = 0; t < 4; ++t) CHECK(ret[t] == Approx(adv[t] + v[t]));
}

TEST_CASE("GAE equals the explicit sum of discounted TD errors on random rollouts", "[rl]") {
  std::mt19937 g(3);
  std::uniform_real_distribution<float> u(-1, 1);
  std::bernoulli_distribution end(0.1);
  const int T = 37, B = 5;
  std::vector<float> r(T * B), v(T * B), fv(T * B), last(B);
  std::vector<std::uint8_t> term(T * B), trunc(T * B);
  for (int i = 0; i < T * B; ++i) {
    r[i] = u(g);
    v[i] = u(g);
    fv[i] = u(g);
    term[i] = end(g);
    trunc[i] = !term[i] && end(g);
  }
  for (auto& x : last) x = u(g);
  for (float lambda : {0.0f, 0.8f, 1.0f}) {
    GaeInputs in{T, B, r.data(), v.data(), term.data(), trunc.data(), fv.data(), last.data(), 0.97f, lambda};
    std::vector<float> adv(T * B), ret(T * B);
    herd::rl::compute_gae(in, adv.data(), ret.data());
    const auto ref = reference_gae(in);
    for (int i = 0; i < T * B; ++i) REQUIRE(adv[i] == Approx(ref[i]).margin(1e-5));
  }
}

TEST_CASE("GAE rejects bad arguments", "[rl]") {
  const std::vector<float> r{1}, v{0}, last{0};
  const std::vector<std::uint8_t> term{0}, trunc{1};
  std::vector<float> a(1), ret(1);
  GaeInputs in{1, 1, r.data(), v.data(), term.data(), trunc.data(), nullptr, last.data(), 0.99f, 0.95f};
  CHECK_THROWS_WITH(herd::rl::compute_gae(in, a.data(), ret.data()),
                    Catch::Contains("truncated, but final_values is null"));
  in.gamma = 1.5f;
  CHECK_THROWS_WITH(herd::rl::compute_gae(in, a.data(), ret.data()), Catch::Contains("gamma is 1.5"));
  in.gamma = 0.9f;
  in.steps = 0;
  CHECK_THROWS_AS(herd::rl::compute_gae(in, a.data(), ret.data()), herd::InputError);
}

TEST_CASE("advantage normalisation: mean 0, sd 1, and a single sample is not NaN", "[rl]") {
  std::vector<float> x{1, 2, 3, 4, 10};
  herd::rl::normalize_advantages(x.data(), x.size());
  double m = 0, s = 0;
  for (float v : x) m += v;
  for (float v : x) s += v * v;
  CHECK(m / 5 == Approx(0).margin(1e-6));
  CHECK(s / 5 == Approx(1).epsilon(1e-5));
  std::vector<float> one{3.5f};
  herd::rl::normalize_advantages(one.data(), 1);
  CHECK(one[0] == 0.0f);
  std::vector<float> same{2, 2, 2};
  herd::rl::normalize_advantages(same.data(), 3);
  for (float v : same) CHECK(v == 0.0f);
}

TEST_CASE("RunningMeanStd: batches, merges and state round trips are exact", "[rl]") {
  std::mt19937 g(11);
  std::normal_distribution<float> n(3.0f, 2.0f);
  const std::size_t d = 3, rows = 1000;
  std::vector<float> x(rows * d);
  for (auto& v : x) v = n(g);
  herd::rl::RunningMeanStd all(d), a(d), b(d);
  all.update(x.data(), rows);
  a.update(x.data(), 300);
  a.update(x.data() + 300 * d, 100);
  b.update(x.data() + 400 * d, rows - 400);
  a.merge(b);
  for (std::size_t j = 0; j < d; ++j) {
    double m = 0, s = 0;
    for (std::size_t r = 0; r < rows; ++r) m += x[r * d + j];
    m /= rows;
    for (std::size_t r = 0; r < rows; ++r) s += (x[r * d + j] - m) * (x[r * d + j] - m);
    CHECK(all.mean()[j] == Approx(m).epsilon(1e-12));
    CHECK(all.var()[j] == Approx(s / rows).epsilon(1e-12));
    CHECK(a.mean()[j] == Approx(m).epsilon(1e-12));
    CHECK(a.var()[j] == Approx(s / rows).epsilon(1e-12));
  }
  CHECK(a.count() == rows);
  herd::rl::RunningMeanStd c(d);
  c.set_state(a.state());
  CHECK(c.state() == a.state());
  std::vector<float> z(d);
  c.normalize(x.data(), z.data(), 1);
  CHECK(z[0] == Approx((x[0] - a.mean()[0]) / std::sqrt(a.var()[0] + 1e-8)).epsilon(1e-6));
  CHECK_THROWS_AS(c.set_state({1.0}), herd::InputError);
  CHECK_THROWS_AS(c.merge(herd::rl::RunningMeanStd(2)), herd::InputError);
  std::vector<float> bad{1, NAN, 2};
  CHECK_THROWS_WITH(c.update(bad.data(), 1), Catch::Contains("row 0 column 1 is nan"));
}

TEST_CASE("RewardNormalizer scales by the sd of the discounted return and resets on done", "[rl]") {
  herd::rl::RewardNormalizer rn(2, 0.5);
  const std::vector<float> r{1.0f, 2.0f};
  const std::vector<std::uint8_t> d0{0, 1}, d1{0, 0};
  std::vector<float> out(2);
  rn.step(r.data(), d0.data(), out.data());
  CHECK(rn.returns()[0] == 1.0);
  CHECK(rn.returns()[1] == 0.0);  // reset after done
  rn.step(r.data(), d1.data(), out.data());
  CHECK(rn.returns()[0] == 1.5);  // 0.5 * 1 + 1
  CHECK(rn.returns()[1] == 2.0);
  // Returns seen: {1, 2, 1.5, 2}: population variance 0.171875.
  CHECK(rn.stats().var()[0] == Approx(0.171875));
  CHECK(out[1] == Approx(2.0 / std::sqrt(0.171875 + 1e-8)).epsilon(1e-6));
}
