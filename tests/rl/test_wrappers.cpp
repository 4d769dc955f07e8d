// Environment wrappers (wrappers.hpp) with known answers: frame stack (vector and image,
// reset filling, auto-reset in the EnvPool), reward clipping, episodic life (a lost life
// ends the agent's episode, the next reset continues the game), time limit (truncated, not
// terminated, counted over the game's steps), errors, and state round trips.
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "herd/core/error.hpp"
#include "herd/rl/env_pool.hpp"
#include "herd/rl/minatar.hpp"
#include "herd/rl/registry.hpp"
#include "herd/rl/wrappers.hpp"

using herd::rl::Env;
using herd::rl::StepResult;
using herd::rl::WrapperOptions;

namespace {

/// A game with 3 lives whose observation names the game and the step: `[10 * games + t,
/// lives]` (games counts real resets, t the steps of the game). A life is lost every third
/// step; the game ends (terminated) when none is left. Reward t - 2 (-1, 0, 1, 2, ...).
class LivesEnv final : public Env {
 public:
  LivesEnv() : Env("Lives-test", herd::rl::Space::box({-1e9, -1e9}, {1e9, 1e9}), herd::rl::Space::discrete(2), 3, 0) {}
  bool has_lives() const override { return true; }
  std::int64_t lives() const override { return lives_; }
  std::vector<double> get_state() const override { return {double(games_), double(t_), double(lives_)}; }
  void observe(float* obs) const override {
    obs[0] = static_cast<float>(10 * games_ + t_);
    obs[1] = static_cast<float>(lives_);
  }
  static inline double last_action = -1;

 protected:
  void reset_impl(herd::RngCursor&, float* obs) override {
    ++games_;
    t_ = 0;
    lives_ = 3;
    observe(obs);
  }
  StepResult step_impl(const double* action, float* obs) override {
    last_action = action[0];
    ++t_;
    if (t_ % 3 == 0) --lives_;
    StepResult r;
    r.reward = static_cast<double>(t_) - 2.0;
    r.terminated = lives_ == 0;
    observe(obs);
    return r;
  }
  void set_state_impl(const double* s) override {
    games_ = static_cast<int>(s[0]);
    t_ = static_cast<int>(s[1]);
    lives_ = static_cast<int>(s[2]);
  }

 private:
  int games_ = 0, t_ = 0, lives_ = 3;
};

std::unique_ptr<Env> lives_env(const WrapperOptions& o) { return herd::rl::wrap_env(std::make_unique<LivesEnv>(), o); }

std::vector<float> obs_of(Env& e) {
  std::vector<float> o(e.obs_dim());
  e.observe(o.data());
  return o;
}

}  // namespace

TEST_CASE("frame stack: k last observations along the vector, reset fills with the first", "[rl][wrappers]") {
  WrapperOptions o;
  o.frame_stack = 3;
  auto env = lives_env(o);
  CHECK(env->obs_dim() == 6);
  CHECK(env->observation_space().shape() == std::vector<std::int64_t>{6});
  CHECK(env->observation_space().low() == std::vector<double>(6, -1e9));
  std::vector<float> obs(6);
  env->reset(0, obs.data());
  CHECK(obs == std::vector<float>{10, 3, 10, 3, 10, 3});
  env->step(1, obs.data());
  CHECK(obs == std::vector<float>{10, 3, 10, 3, 11, 3});
  env->step(1, obs.data());
  CHECK(obs == std::vector<float>{10, 3, 11, 3, 12, 3});
  env->step(1, obs.data());
  CHECK(obs == std::vector<float>{11, 3, 12, 3, 13, 2});
  CHECK(obs_of(*env) == obs);
  // A new episode fills every slot with its first observation again.
  env->reset(obs.data());
  CHECK(obs == std::vector<float>{20, 3, 20, 3, 20, 3});
}

TEST_CASE("frame stack on MinAtar Breakout: [4k, 10, 10], the unwrapped frames in order", "[rl][wrappers]") {
  WrapperOptions o;
  o.frame_stack = 2;
  auto env = herd::rl::wrap_env(herd::rl::make_env("MinAtar/Breakout-v1"), o);
  auto plain = herd::rl::make_env("MinAtar/Breakout-v1");
  CHECK(env->observation_space().shape() == std::vector<std::int64_t>{8, 10, 10});
  CHECK(env->obs_dim() == 800);
  env->set_global_id(5);
  plain->set_global_id(5);
  std::vector<float> w(800), p(400), prev(400);
  env->reset(7, w.data());
  plain->reset(7, p.data());
  CHECK(std::vector<float>(w.begin(), w.begin() + 400) == p);
  CHECK(std::vector<float>(w.begin() + 400, w.end()) == p);
  // The same actions: the wrapped env is the unwrapped one (same step randomness), stacked.
  for (int t = 0; t < 60; ++t) {
    prev = p;
    const std::int64_t a = t % 3;
    const StepResult rw = env->step(a, w.data());
    const StepResult rp = plain->step(a, p.data());
    REQUIRE(rw.reward == rp.reward);
    REQUIRE(rw.terminated == rp.terminated);
    REQUIRE(std::vector<float>(w.begin(), w.begin() + 400) == prev);
    REQUIRE(std::vector<float>(w.begin() + 400, w.end()) == p);
    if (rp.terminated) break;
  }
}

TEST_CASE("frame stack in the EnvPool: the auto-reset row holds the new episode's first frame k times",
          "[rl][wrappers]") {
  herd::rl::register_env("Lives-test", [] { return std::make_unique<LivesEnv>(); });
  WrapperOptions o;
  o.frame_stack = 2;
  o.max_episode_steps = 4;
  const std::string id = herd::rl::register_wrapped_env("Lives-test", o);
  CHECK(id == "Lives-test[frame_stack=2,max_episode_steps=4]");
  herd::rl::EnvPoolOptions po;
  po.env_id = id;
  po.num_envs = 2;
  herd::rl::EnvPool pool(po);
  CHECK(pool.observation_space().shape() == std::vector<std::int64_t>{4});
  pool.reset();
  CHECK(std::vector<float>(pool.obs().begin(), pool.obs().begin() + 4) == std::vector<float>{10, 3, 10, 3});
  const std::vector<std::int64_t> a = {1, 1};
  for (int t = 1; t <= 3; ++t) {
    pool.step(a);
    CHECK(pool.truncated()[0] == 0);
    CHECK(pool.terminated()[0] == 0);  // a life lost at t = 3 ends nothing without episodic life
  }
  CHECK(std::vector<float>(pool.obs().begin(), pool.obs().begin() + 4) == std::vector<float>{12, 3, 13, 2});
  pool.step(a);  // t = 4: the time limit
  CHECK(pool.truncated()[0] == 1);
  CHECK(pool.terminated()[0] == 0);
  CHECK(std::vector<float>(pool.final_obs().begin(), pool.final_obs().begin() + 4) == std::vector<float>{13, 2, 14, 2});
  CHECK(std::vector<float>(pool.obs().begin(), pool.obs().begin() + 4) == std::vector<float>{20, 3, 20, 3});
  pool.step(a);
  CHECK(std::vector<float>(pool.obs().begin(), pool.obs().begin() + 4) == std::vector<float>{20, 3, 21, 3});
}

TEST_CASE("episodic life in the EnvPool: the auto-reset row continues the game after a lost life", "[rl][wrappers]") {
  herd::rl::register_env("Lives-test", [] { return std::make_unique<LivesEnv>(); });
  WrapperOptions o;
  o.episodic_life = true;
  herd::rl::EnvPoolOptions po;
  po.env_id = herd::rl::register_wrapped_env("Lives-test", o);
  po.num_envs = 1;
  herd::rl::EnvPool pool(po);
  pool.reset();
  const std::vector<std::int64_t> a = {1};
  pool.step(a);
  pool.step(a);
  pool.step(a);  // t = 3: a life lost
  CHECK(pool.terminated()[0] == 1);
  CHECK(pool.truncated()[0] == 0);
  CHECK(std::vector<float>(pool.final_obs().begin(), pool.final_obs().end()) == std::vector<float>{13, 2});
  CHECK(std::vector<float>(pool.obs().begin(), pool.obs().end()) == std::vector<float>{14, 2});  // the no-op step
  pool.step(a);                                                                                  // t = 5
  pool.step(a);  // t = 6: a life lost, the no-op step t = 7
  CHECK(pool.terminated()[0] == 1);
  CHECK(std::vector<float>(pool.obs().begin(), pool.obs().end()) == std::vector<float>{17, 1});
  pool.step(a);  // t = 8
  pool.step(a);  // t = 9: the game is over
  CHECK(pool.terminated()[0] == 1);
  CHECK(std::vector<float>(pool.final_obs().begin(), pool.final_obs().end()) == std::vector<float>{19, 0});
  CHECK(std::vector<float>(pool.obs().begin(), pool.obs().end()) == std::vector<float>{20, 3});  // a new game
}

TEST_CASE("reward clipping: sign of the reward", "[rl][wrappers]") {
  WrapperOptions o;
  o.clip_reward = true;
  auto env = lives_env(o);
  std::vector<float> obs(2);
  env->reset(0, obs.data());
  std::vector<double> r;
  r.reserve(5);
  for (int t = 0; t < 5; ++t) r.push_back(env->step(1, obs.data()).reward);
  CHECK(r == std::vector<double>{-1, 0, 1, 1, 1});  // the env's rewards: -1, 0, 1, 2, 3
}

TEST_CASE("episodic life: a lost life ends the episode, the next reset continues the game", "[rl][wrappers]") {
  WrapperOptions o;
  o.episodic_life = true;
  auto env = lives_env(o);
  std::vector<float> obs(2);
  env->reset(0, obs.data());
  CHECK(obs == std::vector<float>{10, 3});
  CHECK(!env->step(1, obs.data()).terminated);
  CHECK(!env->step(1, obs.data()).terminated);
  StepResult r = env->step(1, obs.data());  // t = 3: 2 lives left
  CHECK(r.terminated);
  CHECK(!r.truncated);
  CHECK(obs == std::vector<float>{13, 2});
  // Not a new game: one no-op step (action 0) continues it.
  LivesEnv::last_action = -1;
  env->reset(obs.data());
  CHECK(LivesEnv::last_action == 0);
  CHECK(obs == std::vector<float>{14, 2});
  CHECK(env->elapsed_steps() == 4);  // the game's steps, for the time limit
  CHECK(!env->step(1, obs.data()).terminated);
  CHECK(env->step(1, obs.data()).terminated);  // t = 6: 1 life left
  env->reset(obs.data());
  CHECK(obs == std::vector<float>{17, 1});
  CHECK(!env->step(1, obs.data()).terminated);
  r = env->step(1, obs.data());  // t = 9: no life left, the game is over
  CHECK(r.terminated);
  CHECK(obs == std::vector<float>{19, 0});
  env->reset(obs.data());  // a new game
  CHECK(obs == std::vector<float>{20, 3});
  // A seeded reset always starts a new game.
  env->step(1, obs.data());
  env->step(1, obs.data());
  CHECK(env->step(1, obs.data()).terminated);
  env->reset(3, obs.data());
  CHECK(obs == std::vector<float>{30, 3});
}

TEST_CASE("time limit: truncated (not terminated) after max_episode_steps game steps", "[rl][wrappers]") {
  WrapperOptions o;
  o.max_episode_steps = 5;
  {
    auto env = herd::rl::wrap_env(herd::rl::make_env("CartPole-v1"), o);
    CHECK(env->max_episode_steps() == 5);
    std::vector<float> obs(4);
    env->reset(0, obs.data());
    for (int t = 1; t <= 4; ++t) CHECK(!env->step(t % 2, obs.data()).truncated);
    const StepResult r = env->step(1, obs.data());
    CHECK(r.truncated);
    CHECK(!r.terminated);
  }
  // With episodic life the limit counts the game's steps over its lives (and the no-op).
  o.episodic_life = true;
  auto env = lives_env(o);
  std::vector<float> obs(2);
  env->reset(0, obs.data());
  env->step(1, obs.data());
  env->step(1, obs.data());
  CHECK(env->step(1, obs.data()).terminated);     // life lost at t = 3
  env->reset(obs.data());                         // no-op: t = 4
  const StepResult r = env->step(1, obs.data());  // t = 5
  CHECK(r.truncated);
  CHECK(!r.terminated);
  env->reset(obs.data());  // truncation ends the game: a new one
  CHECK(obs == std::vector<float>{20, 3});
}

TEST_CASE("wrappers: state round trip continues identically; errors name env and value", "[rl][wrappers]") {
  WrapperOptions o;
  o.frame_stack = 2;
  o.episodic_life = true;
  o.clip_reward = true;
  auto a = lives_env(o), b = lives_env(o);
  CHECK(a->state_dim() == 3 + 4 + 4);
  std::vector<float> oa(4), ob(4);
  a->reset(0, oa.data());
  for (int t = 0; t < 3; ++t) a->step(1, oa.data());  // a life lost: the next reset continues
  b->restore_stream(a->seed(), a->episode());
  b->set_state(a->get_state());
  b->set_elapsed_steps(a->elapsed_steps());
  CHECK(obs_of(*b) == oa);
  a->reset(oa.data());
  b->reset(ob.data());
  CHECK(oa == ob);
  CHECK(oa == std::vector<float>{14, 2, 14, 2});
  for (int t = 0; t < 4; ++t) {
    const StepResult ra = a->step(1, oa.data()), rb = b->step(1, ob.data());
    CHECK(ra.reward == rb.reward);
    CHECK(ra.terminated == rb.terminated);
    CHECK(oa == ob);
  }

  WrapperOptions life;
  life.episodic_life = true;
  CHECK_THROWS_AS(herd::rl::wrap_env(herd::rl::make_env("MinAtar/Breakout-v1"), life), herd::InputError);
  CHECK_THROWS_WITH(herd::rl::wrap_env(herd::rl::make_env("MinAtar/Breakout-v1"), life),
                    Catch::Contains("MinAtar/Breakout-v1: episodic_life is true, but this environment has no lives"));
  WrapperOptions k0;
  k0.frame_stack = 0;
  CHECK_THROWS_WITH(herd::rl::wrap_env(herd::rl::make_env("CartPole-v1"), k0),
                    Catch::Contains("CartPole-v1: frame_stack is 0, but must be in [1, 64]"));
  CHECK(herd::rl::wrapped_env_id("CartPole-v1", WrapperOptions{}) == "CartPole-v1");
}
