// DQN learning results, judged on k of n seeds fixed in advance (DESIGN.md §5), from the
// mean return of the last 100 training episodes (epsilon-greedy with the final epsilon).
// Label rl-slow (CI): about 25 s of one core in all. Also prints training frames/s.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "herd/rl/dqn_trainer.hpp"
#include "herd/rl/train_config.hpp"

using namespace herd::rl;

namespace {

int passes(const std::string& preset, const std::vector<std::string>& extra, int seeds, double threshold) {
  int ok = 0;
  for (int seed = 0; seed < seeds; ++seed) {
    std::vector<std::string> sets = extra;
    sets.push_back("seed=" + std::to_string(seed));
    sets.push_back("output_prefix=test_dqn_learning_" + std::to_string(seed));
    std::string text;
    const TrainConfig c = load_train_config(std::string(HERD_EXAMPLES_DIR) + "/" + preset + ".toml", sets, &text);
    DqnTrainer t(c, text);
    const auto t0 = std::chrono::steady_clock::now();
    while (!t.done()) t.iterate();
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double ret = t.recent_mean_return();
    std::printf(
        "%s seed %d: %lld env steps, %llu gradient steps, %.1f s (%.0f frames/s), last-100 training return "
        "%.2f\n",
        preset.c_str(), seed, static_cast<long long>(t.env_steps()),
        static_cast<unsigned long long>(t.gradient_steps()), secs, static_cast<double>(t.env_steps()) / secs, ret);
    std::fflush(stdout);
    if (ret >= threshold) ++ok;
  }
  std::printf("%s: %d of %d seeds >= %g\n", preset.c_str(), ok, seeds, threshold);
  return ok;
}

}  // namespace

// A uniformly random policy returns about 22 on CartPole-v1.
TEST_CASE("DQN learns CartPole-v1 (2 of 3 seeds: last-100 training return >= 150)", "[rl][slow][ci]") {
  CHECK(passes("cartpole_dqn", {}, 3, 150.0) >= 2);
}

// The MinAtar paper's network (one 3x3 convolution, 16 channels, 128 ReLU units) on a short
// budget: 15000 frames, training from frame 2000, every 4 frames, Adam 1e-3, epsilon 1 ->
// 0.05 over 5000 frames. A uniformly random policy returns about 0.5 per episode.
TEST_CASE("DQN with the conv network beats random on MinAtar Breakout (2 of 3 seeds >= 1.5)", "[rl][slow][ci]") {
  CHECK(passes("minatar_breakout_dqn",
               {"total_steps=15000", "sampler.num_steps=1000", "dqn.buffer_size=15000", "dqn.learning_starts=2000",
                "dqn.train_freq=4", "dqn.target_update_interval=500", "dqn.exploration_fraction=0.33",
                "dqn.exploration_final_eps=0.05", "dqn.optimizer=adam", "dqn.optimizer_eps=1e-8",
                "dqn.learning_rate=1e-3"},
               3, 1.5) >= 2);
}
