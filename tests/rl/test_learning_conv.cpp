// PPO with the MinAtar paper's convolutional network learns MinAtar Breakout: a short run
// (32768 frames, about 5 s of one core per seed) from the preset minatar_breakout_ppo.toml
// with a smaller batch (16 envs x 64 steps, 4 minibatches, learning rate 1e-3), judged on k
// of n seeds fixed in advance (DESIGN.md §5): at least 2 of seeds 0-2 must reach twice the
// mean return of a uniformly random policy over the same 100 evaluation episodes (same env
// seeds and ids, sampled actions for both). CTest label rl-slow (about 18 s of CPU).
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "herd/rl/registry.hpp"
#include "herd/rl/trainer.hpp"

using namespace herd;
using namespace herd::rl;

namespace {

constexpr int kEpisodes = 100;
constexpr std::uint64_t kEvalSeed = 12345;

// The mean return of uniformly random actions over the episodes `evaluate_policy` plays
// (env global id 1 << 20, reset stream kEvalSeed).
double random_policy_mean(const std::string& env_id) {
  auto env = make_env(env_id);
  const std::uint32_t gid = 1u << 20;
  env->set_global_id(gid);
  std::vector<float> obs(env->obs_dim());
  const RngStream rng(kEvalSeed, gid, RngPurpose::kPolicy);
  const auto n = static_cast<std::uint32_t>(env->action_space().n());
  std::uint64_t draw = 0;
  double total = 0;
  for (int e = 0; e < kEpisodes; ++e) {
    if (e == 0) env->reset(kEvalSeed, obs.data());
    else env->reset(obs.data());
    for (;;) {
      RngCursor c = rng.at(draw++);
      const StepResult s = env->step(env->action_space().start() + c.below(n), obs.data());
      total += s.reward;
      if (s.terminated || s.truncated) break;
    }
  }
  return total / kEpisodes;
}

}  // namespace

TEST_CASE("PPO with the MinAtar network learns MinAtar Breakout in 32768 frames (2 of 3 seeds >= 2x random)",
          "[rl][slow][ci]") {
  const std::string env_id = "MinAtar/Breakout-v1";
  const double random_mean = random_policy_mean(env_id);
  std::printf("%s: random policy mean return %.2f over %d episodes\n", env_id.c_str(), random_mean, kEpisodes);
  REQUIRE(random_mean > 0.0);
  int doubled = 0;
  for (int seed = 0; seed < 3; ++seed) {
    std::string text;
    const TrainConfig c = load_train_config(
        std::string(HERD_EXAMPLES_DIR) + "/minatar_breakout_ppo.toml",
        {"seed=" + std::to_string(seed), "total_steps=32768", "sampler.num_envs=16", "sampler.num_steps=64",
         "algo.num_minibatches=4", "algo.learning_rate=1e-3", "output_prefix=test_learning_conv"},
        &text);
    REQUIRE(c.env == env_id);
    REQUIRE(c.agent.conv.size() == 1);
    Trainer t(c, text);
    const auto t0 = std::chrono::steady_clock::now();
    while (!t.done()) t.iterate();
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const EvalResult r = evaluate_policy(t.agent(), env_id, nullptr, kEpisodes, true, kEvalSeed);
    std::printf("%s seed %d: %lld frames, %.1f s, eval mean %.2f (std %.2f)\n", env_id.c_str(), seed,
                static_cast<long long>(t.env_steps()), secs, r.mean, r.std);
    std::fflush(stdout);
    if (r.mean >= 2.0 * random_mean) ++doubled;
  }
  CHECK(doubled >= 2);
}
