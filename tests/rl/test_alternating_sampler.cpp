// AlternatingSampler: the same [T, B] buffers, episodes and checkpoints as the
// parallel sampler for fixed agent parameters; rlpyt's even-envs precondition.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include <unistd.h>

#include "herd/rl/alternating_sampler.hpp"
#include "herd/rl/registry.hpp"
#include "herd/rl/sampler.hpp"
#include "herd/rl/trainer.hpp"

using namespace herd;
using namespace herd::rl;

namespace {

void check_same(const RolloutBuffer& a, const RolloutBuffer& b) {
  CHECK(a.obs == b.obs);
  CHECK(a.actions == b.actions);
  CHECK(a.log_probs == b.log_probs);
  CHECK(a.values == b.values);
  CHECK(a.rewards == b.rewards);
  CHECK(a.terminated == b.terminated);
  CHECK(a.truncated == b.truncated);
  CHECK(a.final_values == b.final_values);
  CHECK(a.last_values == b.last_values);
}

void check_same(const std::vector<EpisodeInfo>& a, const std::vector<EpisodeInfo>& b) {
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i].ret == b[i].ret);
    CHECK(a[i].length == b[i].length);
  }
}

}  // namespace

TEST_CASE("AlternatingSampler fills the same buffer as the parallel sampler", "[rl]") {
  for (const std::string env_id : {"CartPole-v1", "Pendulum-v1", "Acrobot-v1"}) {
    for (int B : {2, 6, 16, 40, 48}) {
      INFO(env_id << " B = " << B);
      auto env = make_env(env_id);
      AgentOptions ao;
      ao.seed = 11;
      ActorCriticAgent agent(env->obs_dim(), env->action_space(), ao);
      SamplerOptions so;
      so.env_id = env_id;
      so.num_envs = B;
      so.num_steps = 40;
      so.seed = 3;
      so.first_global_id = 5;
      so.normalize_reward = true;  // exact: rewards are scaled once both groups are in
      so.max_episode_steps = 17;   // truncations: bootstrap values of final observations
      so.num_threads = 2;
      ParallelSampler par(so);
      AlternatingSampler alt(so);
      RolloutBuffer bp, ba;
      for (int rep = 0; rep < 3; ++rep) {  // consecutive collects continue the same streams
        par.collect(agent, bp);
        alt.collect(agent, ba);
        check_same(bp, ba);
        check_same(par.episodes(), alt.episodes());
      }
      int truncs = 0;
      for (auto t : ba.truncated) truncs += t;
      CHECK(truncs > 0);
      CHECK(!par.episodes().empty());
    }
  }
}

TEST_CASE("AlternatingSampler checkpoints are interchangeable with the parallel sampler's", "[rl]") {
  auto env = make_env("CartPole-v1");
  ActorCriticAgent agent(env->obs_dim(), env->action_space(), AgentOptions{});
  SamplerOptions so;
  so.num_envs = 8;
  so.num_steps = 25;
  so.normalize_obs = true;
  so.normalize_reward = true;
  AlternatingSampler alt(so);
  RolloutBuffer b1, b2, b3;
  alt.collect(agent, b1);
  io::CheckpointWriter w("test", 1);
  alt.save(w, "s/");
  const auto bytes = w.serialize();
  const io::CheckpointReader r(bytes, "<memory>");
  // Restored into a fresh alternating sampler: the next collect is the same.
  AlternatingSampler again(so);
  again.load(r, "s/");
  alt.collect(agent, b2);
  again.collect(agent, b3);
  check_same(b2, b3);
  // The parallel sampler reads the same sections (and continues the same env streams).
  ParallelSampler par(so);
  par.load(r, "s/");
  io::CheckpointWriter w2("test", 1);
  par.save(w2, "s/");
  CHECK(w2.serialize() == bytes);
}

TEST_CASE("AlternatingSampler: an odd number of envs is refused, naming the value", "[rl]") {
  SamplerOptions so;
  so.num_envs = 7;
  CHECK_THROWS_AS(AlternatingSampler(so), InputError);
  CHECK_THROWS_WITH(make_sampler("alternating", so), Catch::Contains("7") && Catch::Contains("even"));
  CHECK_THROWS_WITH(make_sampler("nope", so), Catch::Contains("alternating") && Catch::Contains("nope"));
}

namespace {
TrainConfig config_with(const std::string& sampler, const std::string& algo) {
  std::vector<std::string> sets = {"algorithm=" + algo,
                                   "sampler.kind=" + sampler,
                                   "sampler.num_envs=4",
                                   "sampler.num_steps=16",
                                   "sampler.num_threads=2",
                                   "total_steps=384",
                                   "normalize.reward=true",
                                   "seed=5",
                                   "output_prefix=test_rl_alt_" + algo};
  if (algo == "ppo") sets.insert(sets.end(), {"algo.epochs=2", "algo.minibatch_size=32"});  // PPO's keys only
  return resolve_train_config(io::Config("<test>"), sets);
}
}  // namespace

TEST_CASE("Trainer with the alternating sampler equals the parallel one and resumes bit-identically", "[rl]") {
  for (std::string algo : {"ppo", "a2c"}) {
    INFO(algo);
    Trainer par(config_with("parallel", algo), "x");
    Trainer alt(config_with("alternating", algo), "x");
    while (!par.done()) par.iterate();
    for (int i = 0; i < 3; ++i) alt.iterate();
    const std::string path = (std::filesystem::temp_directory_path() /
                              ("herd_test_rl_alt_" + algo + "_" + std::to_string(::getpid()) + ".ckpt"))
                                 .string();
    alt.save_checkpoint(path);
    Trainer resumed(config_with("alternating", algo), "x");
    resumed.load_checkpoint(path);
    std::filesystem::remove(path);
    while (!resumed.done()) resumed.iterate();
    const auto p1 = par.agent().state_dict(), p2 = resumed.agent().state_dict();
    REQUIRE(p1.size() == p2.size());
    for (std::size_t i = 0; i < p1.size(); ++i) CHECK(p1[i].tensor.to_vector() == p2[i].tensor.to_vector());
    REQUIRE(par.curve().size() == resumed.curve().size());
    for (std::size_t r = 0; r < par.curve().size(); ++r)
      for (std::size_t k = 0; k < kCurveColumns.size(); ++k) {
        const std::string col = kCurveColumns[k];
        if (is_wall_clock_column(col)) continue;
        const double x = par.curve()[r][k], y = resumed.curve()[r][k];
        INFO("row " << r << " " << col);
        CHECK(((std::isnan(x) && std::isnan(y)) || x == y));
      }
  }
}
