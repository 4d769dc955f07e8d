// The EnvPool's uint8 observation batches: the same trajectories as the float32 pool (sync
// and async, 1 and 2 threads, auto-reset rows and final observations), bounds checked, and
// the uint8 <-> float32 conversions with known answers.
#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "herd/core/error.hpp"
#include "herd/core/rng.hpp"
#include "herd/rl/agent.hpp"
#include "herd/rl/alternating_sampler.hpp"
#include "herd/rl/env_pool.hpp"
#include "herd/rl/rollout_buffer.hpp"
#include "herd/rl/sampler.hpp"

using herd::rl::EnvPool;
using herd::rl::EnvPoolOptions;
using herd::rl::ObsDtype;

namespace {

std::vector<std::int64_t> actions(std::size_t n, std::size_t t, std::int64_t num_actions) {
  const herd::RngStream rng(99, 0, herd::RngPurpose::kPolicy);
  std::vector<std::int64_t> a(n);
  for (std::size_t k = 0; k < n; ++k) a[k] = static_cast<std::int64_t>(rng.u32(t * n + k) % num_actions);
  return a;
}

std::vector<std::uint8_t> as_u8(std::span<const float> x) {
  std::vector<std::uint8_t> out(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) out[i] = static_cast<std::uint8_t>(x[i]);
  return out;
}

}  // namespace

TEST_CASE("obs_to_u8 rounds and saturates; obs_to_f32 scales", "[rl][env_pool]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> in = {-1.0f, 0.0f, 0.49f, 0.5f, 1.0f, 1.5f, 254.6f, 255.0f, 300.0f, nan};
  std::vector<std::uint8_t> out(in.size());
  herd::rl::obs_to_u8(in.data(), in.size(), out.data());
  CHECK(out == std::vector<std::uint8_t>{0, 0, 0, 1, 1, 2, 255, 255, 255, 0});
  // The float just below a half rounds down (x + 0.5f would round it up: 0.49999997f + 0.5f
  // is 1.0f in float arithmetic).
  const std::vector<float> below = {std::nextafter(0.5f, 0.0f), std::nextafter(1.5f, 0.0f),
                                    std::nextafter(254.5f, 0.0f), 254.5f};
  std::vector<std::uint8_t> out_below(below.size());
  herd::rl::obs_to_u8(below.data(), below.size(), out_below.data());
  CHECK(out_below == std::vector<std::uint8_t>{0, 1, 254, 255});
  const std::vector<std::uint8_t> b = {0, 1, 255};
  std::vector<float> f(3);
  herd::rl::obs_to_f32(b.data(), 3, f.data());
  CHECK(f == std::vector<float>{0.0f, 1.0f, 255.0f});
  herd::rl::obs_to_f32(b.data(), 3, f.data(), 1.0f / 255.0f);
  CHECK(f == std::vector<float>{0.0f, 1.0f / 255.0f, 1.0f});
}

TEST_CASE("a uint8 MinAtar pool steps the float32 pool's trajectories (sync)", "[rl][env_pool]") {
  const std::string id = GENERATE(std::string("MinAtar/Breakout-v1"), std::string("MinAtar/Freeway-v1"));
  const std::size_t threads = GENERATE(1u, 2u);
  INFO(id << " threads " << threads);
  EnvPoolOptions o;
  o.env_id = id;
  o.num_envs = 24;
  o.num_threads = threads;
  o.seed = 5;
  o.min_task_seconds = 0;  // every thread steps envs
  EnvPool f(o);
  o.obs_dtype = ObsDtype::kUint8;
  EnvPool u(o);
  CHECK(u.obs_dtype() == ObsDtype::kUint8);
  CHECK(f.obs_dtype() == ObsDtype::kFloat32);
  CHECK(u.obs().empty());
  CHECK(u.final_obs().empty());
  CHECK(f.obs_u8().empty());
  f.reset();
  u.reset();
  REQUIRE(u.obs_u8().size() == 24u * f.obs_dim());
  CHECK(std::vector<std::uint8_t>(u.obs_u8().begin(), u.obs_u8().end()) == as_u8(f.obs()));
  std::size_t ended = 0;
  const std::size_t od = f.obs_dim();
  for (std::size_t t = 0; t < 300; ++t) {
    const auto a = actions(24, t, f.action_space().n());
    f.step(a);
    u.step(a);
    REQUIRE(std::vector<std::uint8_t>(u.obs_u8().begin(), u.obs_u8().end()) == as_u8(f.obs()));
    for (std::size_t k = 0; k < 24; ++k) {
      REQUIRE(u.rewards()[k] == f.rewards()[k]);
      REQUIRE(u.terminated()[k] == f.terminated()[k]);
      REQUIRE(u.truncated()[k] == f.truncated()[k]);
      if (f.terminated()[k] || f.truncated()[k]) {
        ++ended;
        REQUIRE(std::vector<std::uint8_t>(u.final_obs_u8().begin() + k * od, u.final_obs_u8().begin() + (k + 1) * od) ==
                as_u8(f.final_obs().subspan(k * od, od)));
      }
    }
  }
  if (id == "MinAtar/Breakout-v1") CHECK(ended > 0);  // random Breakout episodes are short
  const herd::rl::EnvBatch b = u.batch();
  CHECK(b.obs.empty());
  CHECK(b.obs_u8.size() == 24u * od);
}

TEST_CASE("a uint8 pool in async mode returns the float32 pool's results", "[rl][env_pool]") {
  EnvPoolOptions o;
  o.env_id = "MinAtar/Breakout-v1";
  o.num_envs = 8;
  o.batch_size = 4;
  o.num_threads = 2;
  o.seed = 3;
  EnvPool f(o);
  o.obs_dtype = ObsDtype::kUint8;
  EnvPool u(o);
  // Results keyed by env and step: completion order differs between pools.
  std::map<std::pair<int, int>, std::vector<std::uint8_t>> fo, uo, ff, uf;
  std::vector<int> steps(8, 0);
  auto drive = [&](EnvPool& p, auto& obs, auto& fin, bool u8) {
    std::vector<int> n(8, 0);
    p.async_reset();
    for (int round = 0; round < 200; ++round) {
      const herd::rl::EnvBatch b = p.recv();
      std::vector<std::int64_t> a;
      std::vector<std::int32_t> ids;
      for (std::size_t j = 0; j < b.size(); ++j) {
        const int k = b.env_ids[j];
        const std::size_t od = p.obs_dim();
        obs[{k, n[k]}] = u8 ? std::vector<std::uint8_t>(b.obs_u8.begin() + j * od, b.obs_u8.begin() + (j + 1) * od)
                            : as_u8(b.obs.subspan(j * od, od));
        if (b.terminated[j] || b.truncated[j])
          fin[{k, n[k]}] =
              u8 ? std::vector<std::uint8_t>(b.final_obs_u8.begin() + j * od, b.final_obs_u8.begin() + (j + 1) * od)
                 : as_u8(b.final_obs.subspan(j * od, od));
        a.push_back(actions(1, static_cast<std::size_t>(k) * 1000 + static_cast<std::size_t>(n[k]), 3)[0]);
        ids.push_back(k);
        ++n[k];
      }
      p.send(a, ids);
    }
    while (p.in_flight() >= p.batch_size()) (void)p.recv();
  };
  drive(f, fo, ff, false);
  drive(u, uo, uf, true);
  // Each env's trajectory depends only on its own actions: compare the steps both reached.
  std::size_t compared = 0;
  for (const auto& [key, v] : fo)
    if (uo.count(key)) {
      REQUIRE(uo.at(key) == v);
      ++compared;
    }
  for (const auto& [key, v] : ff)
    if (uf.count(key)) REQUIRE(uf.at(key) == v);
  CHECK(compared > 600);
  CHECK(!uf.empty());
}

TEST_CASE("a uint8 pool refuses observations outside [0, 255]", "[rl][env_pool]") {
  EnvPoolOptions o;
  o.env_id = "CartPole-v1";
  o.obs_dtype = ObsDtype::kUint8;
  CHECK_THROWS_AS(EnvPool(o), herd::InputError);
  CHECK_THROWS_WITH(EnvPool(o), Catch::Contains("obs_dtype is uint8, but CartPole-v1 has observation bounds"));
}

namespace {

/// Real-valued observations in [0, 1] (a Box of reals): a position, not pixels.
class RealUnitEnv final : public herd::rl::Env {
 public:
  explicit RealUnitEnv(herd::rl::BoxValues values)
      : Env("RealUnit", herd::rl::Space::box({0.0, 0.0}, {1.0, 1.0}, {2}, values), herd::rl::Space::discrete(2), 0,
            10) {}
  std::vector<double> get_state() const override { return {}; }
  void observe(float* obs) const override { obs[0] = obs[1] = 0.25f; }

 protected:
  void reset_impl(herd::RngCursor& /*rng*/, float* obs) override { observe(obs); }
  herd::rl::StepResult step_impl(const double* /*action*/, float* obs) override {
    observe(obs);
    return {};
  }
  void set_state_impl(const double* /*state*/) override {}
};

}  // namespace

TEST_CASE("a uint8 pool refuses real-valued observations, which it would round", "[rl][env_pool]") {
  // Bounds within [0, 255] alone were accepted, and 0.25 reached the network as 0.
  std::vector<std::unique_ptr<herd::rl::Env>> envs;
  envs.push_back(std::make_unique<RealUnitEnv>(herd::rl::BoxValues::kReal));
  EnvPoolOptions o;
  o.obs_dtype = ObsDtype::kUint8;
  CHECK_THROWS_WITH(EnvPool(std::move(envs), o),
                    Catch::Contains("obs_dtype is uint8, but RealUnit declares real-valued observations"));
  std::vector<std::unique_ptr<herd::rl::Env>> ints;
  ints.push_back(std::make_unique<RealUnitEnv>(herd::rl::BoxValues::kInteger));
  CHECK_NOTHROW(EnvPool(std::move(ints), o));
}

TEST_CASE("samplers over uint8 pools fill the float32 samplers' rollouts", "[rl][env_pool]") {
  const std::string kind = GENERATE(std::string("parallel"), std::string("alternating"));
  INFO(kind);
  herd::rl::SamplerOptions so;
  so.env_id = "MinAtar/Breakout-v1";
  so.num_envs = 8;
  so.num_steps = 40;
  so.num_threads = 2;
  so.seed = 11;
  so.normalize_obs = true;
  auto f = herd::rl::make_sampler(kind, so);
  so.obs_dtype = ObsDtype::kUint8;
  auto u = herd::rl::make_sampler(kind, so);
  herd::rl::AgentOptions ao;
  ao.hidden = {16};
  herd::rl::ActorCriticAgent agent(400, herd::rl::Space::discrete(3), ao);
  herd::rl::RolloutBuffer bf, bu;
  for (int i = 0; i < 3; ++i) {
    f->collect(agent, bf);
    u->collect(agent, bu);
    REQUIRE(bu.obs == bf.obs);
    REQUIRE(bu.actions == bf.actions);
    REQUIRE(bu.rewards == bf.rewards);
    REQUIRE(bu.terminated == bf.terminated);
    REQUIRE(bu.final_values == bf.final_values);
  }
  CHECK(u->episodes().size() == f->episodes().size());
  CHECK(!f->episodes().empty());
}
