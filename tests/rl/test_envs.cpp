// Environments against Gymnasium 1.4.0: every step of the reference trajectories, exactly
// (tests/rl/data, from shared/validation/gym, seed 0 of each env: resets, terminations and
// truncations), MountainCarContinuous by hand-made cases, spaces, resets and the registry.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <memory>
#include <numbers>
#include <string>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "herd/core/error.hpp"
#include "herd/rl/envs.hpp"
#include "herd/rl/registry.hpp"
#include "sincos_hard_cases.hpp"

using herd::rl::Env;
using herd::rl::StepResult;
using json = nlohmann::json;

namespace {

json load(const std::string& name) {
  std::ifstream in(std::string(HERD_RL_TEST_DATA_DIR) + "/" + name);
  REQUIRE(in.good());
  return json::parse(in);
}

bool same_bits(double a, double b) { return std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b); }
bool same_bits(float a, float b) { return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b); }

/// Replays a reference file: start each episode from its recorded reset state, step with the
/// recorded actions, compare everything bit for bit.
void replay(const std::string& file) {
  const json d = load(file);
  const std::string id = d["env_id"];
  auto env = herd::rl::make_env(id);
  REQUIRE(env->max_episode_steps() == d["max_episode_steps"].get<std::int64_t>());
  const std::size_t od = env->obs_dim();
  std::vector<float> obs(od);
  std::size_t next_reset = 0;
  const auto& resets = d["resets"];
  const std::size_t steps = d["actions"].size();
  std::size_t checked = 0, terminations = 0, truncations = 0;
  for (std::size_t t = 0; t < steps; ++t) {
    if (next_reset < resets.size() && resets[next_reset]["step"].get<std::size_t>() == t) {
      const auto& r = resets[next_reset++];
      env->set_state(r["state"].get<std::vector<double>>());
      env->set_elapsed_steps(0);
      env->observe(obs.data());
      for (std::size_t i = 0; i < od; ++i) {
        INFO(id << " reset at step " << t << " obs[" << i << "]");
        REQUIRE(same_bits(obs[i], static_cast<float>(r["obs"][i].get<double>())));
      }
    }
    StepResult res;
    if (env->action_space().is_discrete()) {
      res = env->step(d["actions"][t].get<std::int64_t>(), obs.data());
    } else {
      const json& a = d["actions"][t];
      const std::vector<double> av = a.is_array() ? a.get<std::vector<double>>() : std::vector<double>{a.get<double>()};
      res = env->step(av, obs.data());
    }
    INFO(id << " step " << t);
    const auto state = env->get_state();
    const auto ref_state = d["state"][t].get<std::vector<double>>();
    REQUIRE(state.size() == ref_state.size());
    for (std::size_t i = 0; i < state.size(); ++i) {
      INFO("state[" << i << "] " << state[i] << " vs " << ref_state[i]);
      REQUIRE(same_bits(state[i], ref_state[i]));
    }
    for (std::size_t i = 0; i < od; ++i) {
      INFO("obs[" << i << "]");
      REQUIRE(same_bits(obs[i], static_cast<float>(d["obs"][t][i].get<double>())));
    }
    REQUIRE(same_bits(res.reward, d["reward"][t].get<double>()));
    REQUIRE(res.terminated == d["terminated"][t].get<bool>());
    REQUIRE(res.truncated == d["truncated"][t].get<bool>());
    terminations += res.terminated;
    truncations += res.truncated;
    ++checked;
  }
  CHECK(checked == steps);
  CHECK(next_reset == resets.size());
  INFO(id << ": " << terminations << " terminations, " << truncations << " truncations");
  const std::size_t ends = terminations + truncations;  // each end but a final one is reset
  CHECK((ends + 1 == resets.size() || ends == resets.size()));
}

}  // namespace

TEST_CASE("CartPole-v1 matches Gymnasium 1.4.0 bit for bit", "[rl][envs]") { replay("CartPole-v1_seed0.json"); }
TEST_CASE("Acrobot-v1 matches Gymnasium 1.4.0 bit for bit", "[rl][envs]") { replay("Acrobot-v1_seed0.json"); }
TEST_CASE("MountainCar-v0 matches Gymnasium 1.4.0 bit for bit", "[rl][envs]") { replay("MountainCar-v0_seed0.json"); }
TEST_CASE("Pendulum-v1 matches Gymnasium 1.4.0 bit for bit", "[rl][envs]") { replay("Pendulum-v1_seed0.json"); }

TEST_CASE("MountainCarContinuous-v0 follows its equations (hand-made cases)", "[rl][envs]") {
  // One step from a float64 state (as after reset) with a float64 action. Expected values:
  // Gymnasium 1.4.0's continuous_mountain_car.py run on the same inputs; each case is also
  // re-derived below from the equations
  //   force = clip(a, -1, 1); v' = v + force * 0.0015 - 0.0025 cos(3 p), clipped to
  //   [-0.07, 0.07]; p' = p + v', clipped to [-1.2, 0.6]; v' = 0 at the left wall when
  //   negative; done = p' >= 0.45 and v' >= 0; reward = 100 [done] - 0.1 a^2 (raw a);
  //   the state is stored as float32.
  struct Case {
    double p, v, a, p1, v1, reward;
    bool done;
  };
  const Case cases[] = {
      {-0.5, 0.0, 0.3, -0x1.ffb8640000000p-2, 0x1.1e6d060000000p-12, -0x1.26e978d4fdf3bp-7, false},
      {-0.5, 0.01, 5.0, -0x1.f467b40000000p-2, 0x1.7309860000000p-7, -0x1.4000000000000p+1, false},
      {-1.19, -0.02, -0.7, -0x1.3333340000000p+0, 0x0.0p+0, -0x1.916872b020c49p-5, false},
      {0.44, 0.02, 1.0, 0x1.d7f0d00000000p-2, 0x1.56173a0000000p-6, 0x1.8f9999999999ap+6, true},
      {0.3, 0.069, 2.0, 0x1.79ccfa0000000p-2, 0x1.1a67180000000p-4, -0x1.999999999999ap-2, false},
      {-0.2, -0.0695, -3.0, -0x1.147ae20000000p-2, -0x1.1eb8520000000p-4, -0x1.ccccccccccccdp-1, false},
      {0.0, 0.0, 0.0, -0x1.47ae140000000p-9, -0x1.47ae140000000p-9, 0x0.0p+0, false},
  };
  auto env = herd::rl::make_env("MountainCarContinuous-v0");
  CHECK(env->max_episode_steps() == 999);
  CHECK(env->action_space().is_box());
  float obs[2];
  for (const Case& c : cases) {
    INFO("p " << c.p << " v " << c.v << " a " << c.a);
    env->set_state(std::vector<double>{c.p, c.v});
    env->set_elapsed_steps(0);
    const StepResult r = env->step(std::vector<double>{c.a}, obs);
    const auto s = env->get_state();
    CHECK(same_bits(s[0], c.p1));
    CHECK(same_bits(s[1], c.v1));
    CHECK(same_bits(r.reward, c.reward));
    CHECK(r.terminated == c.done);
    CHECK_FALSE(r.truncated);
    CHECK(same_bits(obs[0], static_cast<float>(c.p1)));
    CHECK(same_bits(obs[1], static_cast<float>(c.v1)));
    // The equations, written out independently.
    const double force = std::min(std::max(c.a, -1.0), 1.0);
    double v = c.v + force * 0.0015 - 0.0025 * std::cos(3 * c.p);
    v = std::min(std::max(v, -0.07), 0.07);
    double p = std::min(std::max(c.p + v, -1.2), 0.6);
    if (p == -1.2 && v < 0) v = 0;
    const bool done = p >= 0.45 && v >= 0;
    CHECK(done == c.done);
    CHECK(s[0] == static_cast<float>(p));
    CHECK(s[1] == static_cast<float>(v));
    CHECK(r.reward == Approx((done ? 100.0 : 0.0) - 0.1 * c.a * c.a).margin(1e-15));
  }
  // Time limit: 999 steps.
  env->reset(7, obs);
  StepResult r;
  for (int t = 0; t < 999; ++t) {
    CHECK_FALSE(r.truncated);
    r = env->step(std::vector<double>{0.0}, obs);
  }
  CHECK(r.truncated);
}

TEST_CASE("reset distributions are Gymnasium's, drawn from herd's streams", "[rl][envs]") {
  struct Range {
    std::string id;
    std::vector<double> lo, hi;
  };
  const double pi = 3.141592653589793;
  const std::vector<Range> ranges = {
      {"CartPole-v1", {-0.05, -0.05, -0.05, -0.05}, {0.05, 0.05, 0.05, 0.05}},
      {"Acrobot-v1", {-0.1, -0.1, -0.1, -0.1}, {0.1, 0.1, 0.1, 0.1}},
      {"MountainCar-v0", {-0.6, 0.0}, {-0.4, 0.0}},
      {"MountainCarContinuous-v0", {-0.6, 0.0}, {-0.4, 0.0}},
      {"Pendulum-v1", {-pi, -1.0}, {pi, 1.0}},
  };
  for (const auto& rg : ranges) {
    INFO(rg.id);
    auto a = herd::rl::make_env(rg.id);
    auto b = herd::rl::make_env(rg.id);
    std::vector<float> oa(a->obs_dim()), ob(b->obs_dim());
    std::vector<double> mean(rg.lo.size(), 0.0);
    const int n = 2000;
    a->set_global_id(3);
    a->reset(42, oa.data());
    for (int e = 0; e < n; ++e) {
      if (e > 0) a->reset(oa.data());
      CHECK(a->episode() == static_cast<std::uint64_t>(e));
      const auto s = a->get_state();
      for (std::size_t i = 0; i < s.size(); ++i) {
        REQUIRE(s[i] >= rg.lo[i]);
        REQUIRE(s[i] <= rg.hi[i]);
        if (rg.id == "Acrobot-v1") REQUIRE(s[i] == static_cast<float>(s[i]));
        mean[i] += s[i] / n;
      }
    }
    for (std::size_t i = 0; i < mean.size(); ++i) {
      // Uniform mean: within 5 standard errors (false-failure rate ~1e-6 per component).
      const double half = (rg.hi[i] - rg.lo[i]) / 2, sd = half / std::sqrt(3.0);
      CHECK(std::abs(mean[i] - (rg.lo[i] + half)) <= 5 * sd / std::sqrt(double(n)) + 1e-12);
    }
    // Same (seed, global id, episode) -> same start; another global id -> another start.
    b->set_global_id(3);
    b->reset(42, ob.data());
    a->reset(42, oa.data());
    CHECK(a->get_state() == b->get_state());
    CHECK(std::memcmp(oa.data(), ob.data(), oa.size() * sizeof(float)) == 0);
    b->set_global_id(4);
    b->reset(42, ob.data());
    CHECK(a->get_state() != b->get_state());
  }
}

TEST_CASE("actions are validated with the env and value named", "[rl][envs]") {
  auto cp = herd::rl::make_env("CartPole-v1");
  float obs[6];
  CHECK_THROWS_AS(cp->step(std::int64_t{0}, obs), herd::InputError);  // before reset
  cp->reset(1, obs);
  CHECK_THROWS_WITH(cp->step(std::int64_t{2}, obs), Catch::Contains("CartPole-v1") && Catch::Contains("is 2"));
  CHECK_THROWS_AS(cp->step(std::vector<double>{0.5}, obs), herd::InputError);
  CHECK_THROWS_WITH(cp->step(std::vector<double>{NAN}, obs), Catch::Contains("nan"));
  CHECK_THROWS_WITH(cp->step(std::vector<double>{0, 1}, obs), Catch::Contains("2 components"));
  CHECK_NOTHROW(cp->step(std::vector<double>{1.0}, obs));
  auto pd = herd::rl::make_env("Pendulum-v1");
  pd->reset(1, obs);
  CHECK_THROWS_WITH(pd->step(std::vector<double>{NAN}, obs), Catch::Contains("Pendulum-v1") && Catch::Contains("NaN"));
  CHECK_THROWS_AS(pd->step(std::int64_t{1}, obs), herd::InputError);
  // Out-of-bounds torques are clipped as Gymnasium clips them: 7 acts as 2.
  auto p2 = herd::rl::make_env("Pendulum-v1");
  p2->reset(1, obs);
  pd->reset(1, obs);
  const auto r1 = pd->step(std::vector<double>{7.0}, obs);
  const auto r2 = p2->step(std::vector<double>{2.0}, obs);
  CHECK(r1.reward == r2.reward);
  CHECK(pd->get_state() == p2->get_state());
}

TEST_CASE("CartPole: reward after termination and the batched kernel", "[rl][envs]") {
  herd::rl::CartPole env;
  float obs[4];
  env.set_state(std::vector<double>{2.39, 1.0, 0.0, 0.0});
  auto r = env.step(std::int64_t{1}, obs);
  CHECK(r.terminated);
  CHECK(r.reward == 1.0);
  r = env.step(std::int64_t{1}, obs);  // stepping past the end: Gymnasium gives 0
  CHECK(r.terminated);
  CHECK(r.reward == 0.0);
  // step_batch (the pool's tight loop) is bit-identical with step_unchecked.
  const int n = 37;
  std::vector<std::unique_ptr<herd::rl::CartPole>> a(n), b(n);
  std::vector<herd::rl::Env*> pa(n);
  std::vector<float> oa(4 * n), ob(4 * n);
  for (int i = 0; i < n; ++i) {
    a[i] = std::make_unique<herd::rl::CartPole>();
    b[i] = std::make_unique<herd::rl::CartPole>();
    a[i]->set_global_id(i);
    b[i]->set_global_id(i);
    a[i]->reset(5, oa.data() + 4 * i);
    b[i]->reset(5, ob.data() + 4 * i);
    pa[i] = a[i].get();
  }
  std::vector<double> act(n), rew(n);
  std::vector<std::uint8_t> te(n), tr(n);
  herd::RngStream rng(9, 0);
  for (int t = 0; t < 300; ++t) {
    for (int i = 0; i < n; ++i) act[i] = rng.u32(t * n + i) & 1;
    a[0]->step_batch(pa.data(), n, act.data(), oa.data(), rew.data(), te.data(), tr.data());
    for (int i = 0; i < n; ++i) {
      const auto rb = b[i]->step_unchecked(&act[i], ob.data() + 4 * i);
      REQUIRE(rb.reward == rew[i]);
      REQUIRE(rb.terminated == bool(te[i]));
      REQUIRE(rb.truncated == bool(tr[i]));
      REQUIRE(a[i]->get_state() == b[i]->get_state());
      if (te[i] || tr[i]) {
        a[i]->reset(oa.data() + 4 * i);
        b[i]->reset(ob.data() + 4 * i);
      }
    }
    REQUIRE(std::memcmp(oa.data(), ob.data(), oa.size() * sizeof(float)) == 0);
  }
}

TEST_CASE("registry: ids, time limits, user environments", "[rl][envs]") {
  const auto ids = herd::rl::registered_env_ids();
  for (const char* id : {"CartPole-v1", "Acrobot-v1", "MountainCar-v0", "MountainCarContinuous-v0", "Pendulum-v1"}) {
    CHECK(herd::rl::is_registered(id));
  }
  CHECK(herd::rl::make_env("CartPole-v1")->max_episode_steps() == 500);
  CHECK(herd::rl::make_env("Acrobot-v1")->max_episode_steps() == 500);
  CHECK(herd::rl::make_env("MountainCar-v0")->max_episode_steps() == 200);
  CHECK(herd::rl::make_env("Pendulum-v1")->max_episode_steps() == 200);
  CHECK(herd::rl::make_env("Acrobot-v1")->obs_dim() == 6);
  CHECK_THROWS_WITH(herd::rl::make_env("CartPole-v9"),
                    Catch::Contains("CartPole-v9") && Catch::Contains("CartPole-v1"));
  herd::rl::register_env("MyCartPole-v0", [] {
    auto e = std::make_unique<herd::rl::CartPole>();
    e->set_max_episode_steps(10);
    return e;
  });
  CHECK(herd::rl::make_env("MyCartPole-v0")->max_episode_steps() == 10);
}

namespace {

// Steps `n` envs of `id` for `steps` random-action steps twice: one by one with
// step_unchecked (the scalar reference) and with step_batch at SIMD level `level`, and
// requires identical bits of observations, states, rewards and flags at every step.
// Envs with i % 7 == 3 are not reset on termination (CartPole then steps past its end and
// its angle grows beyond the range of the usual trajectories) but on truncation; envs with
// i % 11 == 5 start from far-out states (per env, below); time limits of 60 steps make truncations common.
void check_batched_equals_scalar(const char* id, std::size_t n, herd::rl::EnvSimd level, int steps) {
  INFO(id << ", " << n << " envs, level " << herd::rl::env_simd_name(level));
  std::vector<std::unique_ptr<Env>> ref(n), bat(n);
  std::vector<Env*> pb(n);
  const std::size_t od = herd::rl::make_env(id)->obs_dim();
  std::vector<float> oref(od * n), obat(od * n);
  for (std::size_t i = 0; i < n; ++i) {
    for (auto* v : {&ref, &bat}) {
      (*v)[i] = herd::rl::make_env(id);
      (*v)[i]->set_global_id(static_cast<std::uint32_t>(i));
      (*v)[i]->set_max_episode_steps(60);
    }
    ref[i]->reset(11, oref.data() + od * i);
    bat[i]->reset(11, obat.data() + od * i);
    if (i % 11 == 5) {
      // CartPole: a huge angle (glibc's slow sincos path); Acrobot: angles near +-pi and
      // velocities near their bounds (a huge angle would make its wrap loop run for hours).
      const double d = 0.25 * static_cast<double>(i);
      const std::vector<double> far = std::string(id) == "CartPole-v1" ? std::vector<double>{0.3, -40.0, 1e6 + d, 35.0}
                                      : i % 2 ? std::vector<double>{3.1, -3.14, 12.0 + d, -28.0}
                                              : std::vector<double>{3.0, 0.1, 0.5, d};  // about to terminate
      ref[i]->set_state(far);
      bat[i]->set_state(far);
    }
    pb[i] = bat[i].get();
  }
  const std::size_t na = bat[0]->action_space().n();
  std::vector<double> act(n), rew(n);
  std::vector<std::uint8_t> te(n), tr(n);
  const herd::RngStream rng(77, 1);
  std::size_t terminations = 0, truncations = 0;
  // The level is process-wide: restored on every exit, a failed REQUIRE included.
  struct Restore {
    ~Restore() { herd::rl::set_env_simd(herd::rl::env_simd_supported()); }
  } restore;
  herd::rl::set_env_simd(level);
  for (int t = 0; t < steps; ++t) {
    for (std::size_t i = 0; i < n; ++i) act[i] = static_cast<double>(rng.u32(t * n + i) % na);
    bat[0]->step_batch(pb.data(), n, act.data(), obat.data(), rew.data(), te.data(), tr.data());
    for (std::size_t i = 0; i < n; ++i) {
      const StepResult r = ref[i]->step_unchecked(&act[i], oref.data() + od * i);
      INFO("step " << t << ", env " << i);
      REQUIRE(same_bits(r.reward, rew[i]));
      REQUIRE(r.terminated == (te[i] != 0));
      REQUIRE(r.truncated == (tr[i] != 0));
      const auto sr = ref[i]->get_state(), sb = bat[i]->get_state();
      REQUIRE(std::memcmp(sr.data(), sb.data(), sr.size() * sizeof(double)) == 0);
      terminations += te[i];
      truncations += tr[i];
      if (tr[i] || (te[i] && i % 7 != 3)) {
        ref[i]->reset(oref.data() + od * i);
        bat[i]->reset(obat.data() + od * i);
      }
    }
    REQUIRE(std::memcmp(oref.data(), obat.data(), oref.size() * sizeof(float)) == 0);
  }
  // The run exercised both ends of an episode (random actions rarely end an Acrobot
  // episode early: there the far-out states provide the terminations).
  if (n > 5) CHECK(terminations > (std::string(id) == "CartPole-v1" ? n : 0));
  CHECK(truncations > 0);
}

}  // namespace

TEST_CASE("CartPole: SIMD batched steps are bit-identical with scalar steps", "[rl][envs][simd]") {
  using herd::rl::EnvSimd;
  INFO("this CPU supports " << herd::rl::env_simd_name(herd::rl::env_simd_supported()));
  for (const EnvSimd level : {EnvSimd::kScalar, EnvSimd::kAvx2, EnvSimd::kAvx512}) {
    if (static_cast<int>(level) > static_cast<int>(herd::rl::env_simd_supported())) {
      CHECK_THROWS_AS(herd::rl::set_env_simd(level), herd::InputError);
      continue;
    }
    // Sizes around the vector widths (4, 8) and the 256-env chunks.
    for (const std::size_t n : {1u, 3u, 7u, 9u, 37u, 263u, 600u})
      check_batched_equals_scalar("CartPole-v1", n, level, n > 100 ? 400 : 1500);
  }
}

TEST_CASE("Acrobot: SIMD batched steps are bit-identical with scalar steps", "[rl][envs][simd]") {
  using herd::rl::EnvSimd;
  for (const EnvSimd level : {EnvSimd::kScalar, EnvSimd::kAvx2, EnvSimd::kAvx512}) {
    if (static_cast<int>(level) > static_cast<int>(herd::rl::env_simd_supported())) continue;
    for (const std::size_t n : {1u, 3u, 7u, 9u, 37u, 263u})
      check_batched_equals_scalar("Acrobot-v1", n, level, n > 100 ? 150 : 400);
  }
}

namespace {

// env_sincos at `level` on `xs` against glibc's sincos, bit for bit; returns the number of
// lanes it computed with glibc and collects those arguments into `fell`.
std::size_t check_sincos_bits(const std::vector<double>& xs, herd::rl::EnvSimd level, std::vector<double>* fell) {
  void (*volatile glibc_sincos)(double, double*, double*) = &::sincos;  // never folded or vectorized
  const std::size_t n = xs.size();
  std::vector<double> s(n), c(n);
  std::vector<std::uint8_t> fb(n);
  const std::size_t count = herd::rl::env_sincos(xs.data(), s.data(), c.data(), n, level, fb.data());
  std::size_t bad = 0, flagged = 0;
  for (std::size_t i = 0; i < n; ++i) {
    double gs, gc;
    glibc_sincos(xs[i], &gs, &gc);
    if (!same_bits(gs, s[i]) || !same_bits(gc, c[i])) {
      if (++bad <= 5)
        UNSCOPED_INFO("x = " << std::hexfloat << xs[i] << ": sin " << s[i] << " (glibc " << gs << "), cos " << c[i]
                             << " (glibc " << gc << ")" << std::defaultfloat);
    }
    flagged += fb[i];
    if (fb[i] && fell) fell->push_back(xs[i]);
  }
  CHECK(bad == 0);
  CHECK(flagged == count);
  return count;
}

}  // namespace

TEST_CASE("env_sincos returns glibc's sincos bits", "[rl][envs][simd]") {
  using herd::rl::EnvSimd;
  const double b = herd::rl::kEnvSincosBound;
  // Edges: 0, -0, the range's ends and their neighbours, the small-argument cut (2^-26),
  // subnormals and other tiny values, values outside the range, NaN and infinities.
  std::vector<double> edges = {0.0,
                               -0.0,
                               b,
                               -b,
                               std::nextafter(b, 0.0),
                               std::nextafter(b, 1.0),
                               std::nextafter(-b, 0.0),
                               std::nextafter(-b, -1.0),
                               0x1p-26,
                               -0x1p-26,
                               std::nextafter(0x1p-26, 0.0),
                               std::nextafter(0x1p-26, 1.0),
                               0x1p-27,
                               0x1.8p-26,
                               0x1p-1074,
                               -0x1p-1074,
                               0x1p-1060,
                               0x0.fffffffffffffp-1022,
                               0x1p-1022,
                               -0x1p-1022,
                               1e-300,
                               1e-100,
                               1e-20,
                               -1e-12,
                               1e-9,
                               3e-8,
                               1e-6,
                               1e-3,
                               0.2094395102393195,
                               std::numbers::pi / 4,
                               1.0,
                               -2.5,
                               1e6,
                               1e300,
                               HUGE_VAL,
                               -HUGE_VAL,
                               std::nan("")};
  // Hard cases for rounding sin below 0.5 (tests/support/sincos_hard_cases.hpp), both signs.
  for (const double h : herd_test::kSinHardCases) edges.push_back(h), edges.push_back(-h);
  // Random arguments on the range: 9 in 10 uniform, 1 in 10 with log-uniform magnitude.
  const herd::RngStream rng(2026, 3);
  constexpr std::size_t kN = 10'000'000;
  std::vector<double> xs(kN);
  for (std::size_t i = 0; i < kN; ++i) {
    const double u = rng.uniform(i);
    xs[i] = i % 10 == 9 ? std::copysign(b * std::exp2(-30.0 * u), rng.uniform(kN + i) - 0.5) : b * (2.0 * u - 1.0);
  }
  for (const EnvSimd level : {EnvSimd::kScalar, EnvSimd::kAvx2, EnvSimd::kAvx512}) {
    if (static_cast<int>(level) > static_cast<int>(herd::rl::env_simd_supported())) {
      std::vector<double> s(1), c(1);
      CHECK_THROWS_AS(herd::rl::env_sincos(xs.data(), s.data(), c.data(), 1, level), herd::InputError);
      continue;
    }
    INFO("level " << herd::rl::env_simd_name(level));
    check_sincos_bits(edges, level, nullptr);
    if (level == EnvSimd::kScalar) continue;
    // Every length of a partial last vector.
    for (std::size_t n = 1; n <= 9; ++n)
      check_sincos_bits(std::vector<double>(xs.begin(), xs.begin() + n), level, nullptr);
    std::vector<double> fell;
    const std::size_t count = check_sincos_bits(xs, level, &fell);
    // The vector path ran (glibc took the ambiguous lanes only), where the CPU has FMA.
    __builtin_cpu_init();
    if (level == EnvSimd::kAvx512 || __builtin_cpu_supports("fma")) CHECK(count < kN / 4);
    // Near the fallback boundary: the neighbours (up to 4 ulp away) of lanes glibc took.
    std::vector<double> near;
    for (std::size_t i = 0; i < fell.size() && near.size() < 800'000; ++i) {
      double lo = fell[i], hi = fell[i];
      for (int k = 0; k < 4; ++k) {
        lo = std::nextafter(lo, -HUGE_VAL);
        hi = std::nextafter(hi, HUGE_VAL);
        near.push_back(lo);
        near.push_back(hi);
      }
    }
    check_sincos_bits(near, level, nullptr);
  }
}
