// DqnTrainer: checkpoint and resume bit-identical (replay buffer, RNG counters, networks,
// optimizer, envs), config validation, resume conflicts, outputs.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "herd/core/config.hpp"
#include "herd/core/device.hpp"
#include "herd/core/error.hpp"
#include "herd/io/config.hpp"
#include "herd/io/hdf5.hpp"
#include "herd/io/toml_reader.hpp"
#include "herd/rl/agent.hpp"
#include "herd/rl/dqn_trainer.hpp"
#include "herd/rl/env.hpp"
#include "herd/rl/registry.hpp"
#include "herd/rl/train_config.hpp"
#include "herd/rl/training_report.hpp"
#include "herd/rl/wrappers.hpp"

using namespace herd;
using namespace herd::rl;

namespace {

TrainConfig dqn_config(std::vector<std::string> extra, std::string* text) {
  std::vector<std::string> sets = {"algorithm=dqn",
                                   "sampler.num_envs=2",
                                   "sampler.num_steps=50",
                                   "total_steps=600",
                                   "network.hidden=[16, 16]",
                                   "network.activation=relu",
                                   "dqn.learning_starts=60",
                                   "dqn.train_freq=2",
                                   "dqn.gradient_steps=2",
                                   "dqn.batch_size=8",
                                   "dqn.target_update_interval=40",
                                   "dqn.learning_rate=1e-3",
                                   "progress_period=0",
                                   "checkpoint_period_seconds=0"};
  sets.insert(sets.end(), extra.begin(), extra.end());
  return resolve_train_config(io::Config("<test>"), sets, text);
}

bool same(double x, double y) { return (std::isnan(x) && std::isnan(y)) || x == y; }

void check_bit_identical(const std::vector<std::string>& extra, int max_episode_steps, const std::string& tag) {
  std::string text;
  TrainConfig c = dqn_config(extra, &text);
  c.sampler_options.max_episode_steps = max_episode_steps;
  REQUIRE(c.num_iterations() == 6);
  DqnTrainer full(c, text);
  while (!full.done()) full.iterate();
  DqnTrainer first(c, text);
  for (int i = 0; i < 3; ++i) first.iterate();
  const std::string path = "test_rl_dqn_resume_" + tag + ".ckpt";
  first.save_checkpoint(path);
  DqnTrainer second(c, text);
  second.load_checkpoint(path);
  CHECK(second.iteration() == 3);
  CHECK(second.gradient_steps() == first.gradient_steps());
  CHECK(second.replay().size() == first.replay().size());
  while (!second.done()) second.iterate();
  INFO(tag);
  CHECK(full.gradient_steps() > 100);
  for (auto [a, b] : {std::pair{&full.q_network(), &second.q_network()},
                      std::pair{&full.target_network(), &second.target_network()}}) {
    const auto p1 = a->state_dict(), p2 = b->state_dict();
    REQUIRE(p1.size() == p2.size());
    for (std::size_t i = 0; i < p1.size(); ++i) CHECK(p1[i].tensor.to_vector() == p2[i].tensor.to_vector());
  }
  REQUIRE(full.curve().size() == second.curve().size());
  for (std::size_t r = 0; r < full.curve().size(); ++r)
    for (std::size_t k = 0; k < kDqnCurveColumns.size(); ++k) {
      const std::string col = kDqnCurveColumns[k];
      if (is_wall_clock_column(col)) continue;
      INFO("row " << r << " " << col);
      CHECK(same(full.curve()[r][k], second.curve()[r][k]));
    }
  // The replay buffers hold the same transitions and priorities.
  ReplaySample s1, s2;
  auto c1 = RngStream(9, 0, RngPurpose::kShuffle).at(0), c2 = c1;
  full.replay().sample(64, c1, 0.7, s1);
  second.replay().sample(64, c2, 0.7, s2);
  CHECK(s1.indices == s2.indices);
  CHECK(s1.obs == s2.obs);
  CHECK(s1.weights == s2.weights);
  std::filesystem::remove(path);
}

}  // namespace

TEST_CASE("DqnTrainer: a resumed run is bit-identical to an uninterrupted one", "[rl][dqn]") {
  // Plain DQN on CartPole with time limits (truncation bootstraps from final slots).
  check_bit_identical({}, 25, "plain");
  // Rainbow-style: prioritized, 3-step, double, dueling, Polyak, a buffer that wraps.
  check_bit_identical({"dqn.prioritized=true", "dqn.n_step=3", "dqn.double_q=true", "dqn.dueling=true", "dqn.tau=0.5",
                       "dqn.buffer_size=300", "dqn.gradient_steps=-1"},
                      30, "rainbow");
  // MinAtar Breakout: observations stored as uint8; the MinAtar paper's conv encoder (smaller).
  check_bit_identical({"env=MinAtar/Breakout-v1", "dqn.buffer_size=400", "dqn.n_step=2", "dqn.optimizer=rmsprop",
                       "network.conv_channels=[4]", "network.conv_kernels=[3]"},
                      0, "minatar");
  // The same with a 2-frame stack (each frame stored once), a 20-step time limit (final
  // slots), a prioritized buffer whose rings wrap (60 slots per env) and centred RMSprop
  // (its gradient averages in the checkpoint).
  check_bit_identical({"env=MinAtar/Breakout-v1", "env.frame_stack=2", "env.max_episode_steps=20",
                       "dqn.buffer_size=120", "dqn.prioritized=true", "network.conv_channels=[4]",
                       "network.conv_kernels=[3]", "dqn.optimizer=rmsprop", "dqn.rmsprop_centered=true"},
                      0, "minatar_stack");
}

TEST_CASE("DqnTrainer: the parallel sampler's threads do not change the run", "[rl][dqn]") {
  std::string t1, t2;
  const TrainConfig serial = dqn_config({"sampler.num_envs=4", "total_steps=800"}, &t1);
  const TrainConfig threads =
      dqn_config({"sampler.num_envs=4", "total_steps=800", "sampler.kind=parallel", "sampler.num_threads=2"}, &t2);
  DqnTrainer a(serial, t1), b(threads, t2);
  while (!a.done()) a.iterate();
  while (!b.done()) b.iterate();
  REQUIRE(a.curve().size() == b.curve().size());
  for (std::size_t r = 0; r < a.curve().size(); ++r)
    for (std::size_t k = 0; k < kDqnCurveColumns.size(); ++k)
      if (!is_wall_clock_column(kDqnCurveColumns[k])) CHECK(same(a.curve()[r][k], b.curve()[r][k]));
  const auto p1 = a.q_network().state_dict(), p2 = b.q_network().state_dict();
  for (std::size_t i = 0; i < p1.size(); ++i) CHECK(p1[i].tensor.to_vector() == p2[i].tensor.to_vector());
}

TEST_CASE("DqnTrainer: replay storage type, epsilon and target updates follow the configuration", "[rl][dqn]") {
  CHECK(replay_uint8(make_env("MinAtar/Breakout-v1")->observation_space()));
  CHECK_FALSE(replay_uint8(make_env("CartPole-v1")->observation_space()));
  std::string text;
  // Epsilon 1 -> 0.1 over the first half; hard target copies every 100 env steps; training
  // rounds every 3 vector steps (none at vector step 50, right after the copy).
  TrainConfig c = dqn_config({"dqn.exploration_fraction=0.5", "dqn.exploration_final_eps=0.1", "dqn.learning_starts=0",
                              "dqn.target_update_interval=100", "dqn.train_freq=3"},
                             &text);
  DqnTrainer t(c, text);
  CHECK(t.epsilon() == 1.0);
  t.iterate();  // 100 env steps: the target update at 100 copies the online network
  CHECK(t.epsilon() == Approx(1.0 - 0.9 * 100.0 / 300.0));
  const auto a = t.q_network().state_dict(), b = t.target_network().state_dict();
  for (std::size_t i = 0; i < a.size(); ++i) CHECK(a[i].tensor.to_vector() == b[i].tensor.to_vector());
  t.iterate();
  t.iterate();
  CHECK(t.epsilon() == Approx(0.1));
  // 150 vector steps, a round every 3 with 2 gradient steps.
  CHECK(t.gradient_steps() == 100);
  CHECK(t.curve().back()[14] == Approx(0.1));  // the epsilon column
  t.iterate();
  CHECK(t.epsilon() == 0.1);
}

TEST_CASE("DqnTrainer: network.init reaches the Q-network's encoder; the Q head keeps PyTorch's default", "[rl][dqn]") {
  std::string text;
  for (const char* init : {"orthogonal", "pytorch"}) {
    INFO(init);
    DqnTrainer t(dqn_config({std::string("network.init=") + init}, &text), text);
    const auto sd = t.q_network().state_dict();
    // encoder.0: Linear(4, 16), encoder.2: Linear(16, 16), then the Q head Linear(16, 2).
    REQUIRE(sd.size() == 6);
    CHECK(sd[0].name == "encoder.0.weight");
    CHECK(sd[4].name == "q.weight");
    const std::vector<double> w = sd[2].tensor.to_vector(), b = sd[3].tensor.to_vector();
    double row0 = 0;
    for (int k = 0; k < 16; ++k) row0 += w[static_cast<std::size_t>(k)] * w[static_cast<std::size_t>(k)];
    const bool orthogonal = std::string(init) == "orthogonal";
    if (orthogonal) {
      CHECK(row0 == Approx(2.0).epsilon(1e-5));  // square orthogonal times sqrt(2)
      for (double x : b) CHECK(x == 0.0);
    } else {
      for (double x : w) CHECK(std::abs(x) <= 0.25);  // 1/sqrt(16)
      CHECK(row0 < 1.0);                              // at most 16 / 16
      CHECK(std::count(b.begin(), b.end(), 0.0) == 0);
    }
    for (double x : sd[4].tensor.to_vector()) CHECK(std::abs(x) <= 0.25);
  }
}

TEST_CASE("DQN config errors name the key, the value and what was expected", "[rl][dqn]") {
  const io::Config none("<t>");
  CHECK_THROWS_WITH(resolve_train_config(none, {"algorithm=dqn", "env=Pendulum-v1"}),
                    Catch::Contains("\"algorithm\" is \"dqn\"") && Catch::Contains("discrete action space"));
  CHECK_THROWS_WITH(
      resolve_train_config(none, {"algorithm=dqn", "sampler.num_envs=8", "dqn.buffer_size=20", "dqn.n_step=3"}),
      Catch::Contains("\"dqn.buffer_size\" is 20") && Catch::Contains(">= 40"));
  // With a frame stack a ring also holds the frames of a stack: n_step + frame_stack + 1 slots.
  CHECK_THROWS_WITH(resolve_train_config(none, {"algorithm=dqn", "sampler.num_envs=8", "dqn.buffer_size=40",
                                                "dqn.n_step=3", "env.frame_stack=4"}),
                    Catch::Contains("\"dqn.buffer_size\" is 40") &&
                        Catch::Contains("at least dqn.n_step + env.frame_stack + 1 = 8 slots (>= 64)"));
  CHECK_THROWS_WITH(resolve_train_config(none, {"algorithm=dqn", "normalize.obs=true"}),
                    Catch::Contains("normalize.obs"));
  CHECK_THROWS_WITH(resolve_train_config(none, {"algorithm=dqn", "sampler.kind=alternating"}),
                    Catch::Contains("sampler.kind"));
  CHECK_THROWS_WITH(resolve_train_config(none, {"algorithm=dqn", "dqn.tau=0"}), Catch::Contains("dqn.tau"));
  CHECK_THROWS_WITH(resolve_train_config(none, {"algorithm=dqn", "dqn.exploration_final_eps=2"}),
                    Catch::Contains("dqn.exploration_final_eps"));
  CHECK_THROWS_WITH(resolve_train_config(none, {"algorithm=dqn", "dqn.gradient_steps=-2"}),
                    Catch::Contains("dqn.gradient_steps"));
  CHECK_THROWS_WITH(resolve_train_config(none, {"algorithm=dqn", "dqn.optimizer=sgd"}),
                    Catch::Contains("dqn.optimizer"));
  CHECK(resolve_train_config(none, {"algorithm=dqn"}).dqn.loss == DqnLoss::kHuber);
  CHECK(resolve_train_config(none, {"algorithm=dqn", "dqn.loss=mse"}).dqn.loss == DqnLoss::kMse);
  CHECK_THROWS_WITH(resolve_train_config(none, {"algorithm=dqn", "dqn.loss=l1"}),
                    Catch::Contains("dqn.loss") && Catch::Contains("l1"));
  // Data-parallel DQN over MPI ranks, on the CPU or (NCCL builds) on GPUs: a checkpoint's
  // configuration of a multi-GPU run resolves anywhere (its device is not checked); a
  // user's is refused without NCCL ("Data-parallel placement on GPUs" below).
  CHECK(resolve_train_config(none, {"algorithm=dqn"}, nullptr, 2).ranks == 2);
  CHECK(resolve_train_config(none, {"algorithm=dqn", "device=cuda"}, nullptr, 2, false).agent.device.is_cuda());
  // Learning-rate scaling with the minibatch (Stooke & Abbeel 2018).
  const TrainConfig s = resolve_train_config(none, {"algorithm=dqn", "dqn.batch_size=512", "algo.lr_scaling=sqrt",
                                                    "algo.lr_reference_batch=32", "dqn.learning_rate=1e-4"});
  CHECK(s.dqn.learning_rate == Approx(4e-4));
  // A replay buffer above max_memory is refused before it is allocated.
  const TrainConfig big =
      resolve_train_config(none, {"algorithm=dqn", "dqn.buffer_size=100000000", "max_memory=100MB"});
  CHECK_THROWS_WITH(DqnTrainer(big, ""), Catch::StartsWith("--set max_memory=100MB: DQN with a replay buffer of "
                                                           "100000000 transitions (dqn.buffer_size) needs about") &&
                                             Catch::EndsWith("; lower dqn.buffer_size"));
  // The message names the settings that need most of the memory, here the batches.
  const TrainConfig batches = resolve_train_config(
      none, {"algorithm=dqn", "dqn.buffer_size=1000000", "dqn.batch_size=1000000", "max_memory=200MB"});
  CHECK_THROWS_WITH(
      DqnTrainer(batches, ""),
      Catch::StartsWith("--set max_memory=200MB: DQN with batches of 1000000 transitions (dqn.batch_size) "
                        "needs about") &&
          Catch::EndsWith("; lower dqn.batch_size"));
  // Each batch is drawn from the replay buffer: a larger batch is refused, naming both keys
  // (the one set, by its origin).
  CHECK_THROWS_WITH(resolve_train_config(none, {"algorithm=dqn", "dqn.buffer_size=1000", "dqn.batch_size=1001"}),
                    "--set dqn.batch_size=1001: key \"dqn.batch_size\" is 1001, but must be <= dqn.buffer_size = 1000 "
                    "(each batch is drawn from the replay buffer): lower dqn.batch_size or raise dqn.buffer_size");
  CHECK_THROWS_WITH(resolve_train_config(none, {"algorithm=dqn", "sampler.num_envs=1", "dqn.buffer_size=16"}),
                    Catch::StartsWith("--set dqn.buffer_size=16: key \"dqn.buffer_size\" is 16, but must be >= "
                                      "dqn.batch_size = 32"));
  CHECK(resolve_train_config(none, {"algorithm=dqn", "dqn.buffer_size=32"}).dqn.batch_size == 32);
}

TEST_CASE("DqnTrainer: resume conflicts, outputs, evaluation", "[rl][dqn]") {
  namespace fs = std::filesystem;
  const std::string prefix = "test_rl_dqn_out";
  for (const char* ext : {".ckpt", ".h5", "_progress.csv"}) fs::remove(prefix + ext);
  std::string text;
  const TrainConfig c = dqn_config({"output_prefix=" + prefix}, &text);
  DqnTrainer t(c, text);
  CHECK(t.run(nullptr, 2) == RunEnd::kStopped);
  CHECK(t.iteration() == 2);
  std::string text2;
  const TrainConfig c2 = dqn_config({"output_prefix=" + prefix, "dqn.n_step=2", "dqn.learning_rate=5e-4"}, &text2);
  DqnTrainer t2(c2, text2);
  const auto conflicts = t2.resume_conflicts(t.checkpoint_path());
  REQUIRE(conflicts.size() == 1);
  CHECK(conflicts[0] == "dqn.n_step = 2 (the checkpoint has 1)");
  CHECK_THROWS_AS(t2.load_checkpoint(t.checkpoint_path()), InputError);
  // env.clip_reward wraps the env (its state gains the wrapper's values): refused by name.
  std::string text_clip;
  const TrainConfig c_clip = dqn_config({"output_prefix=" + prefix, "env.clip_reward=true"}, &text_clip);
  DqnTrainer t_clip(c_clip, text_clip);
  CHECK(t_clip.resume_conflicts(t.checkpoint_path()) ==
        std::vector<std::string>{"env.clip_reward = true (the checkpoint has false)"});
  CHECK_THROWS_WITH(t_clip.load_checkpoint(t.checkpoint_path()),
                    Catch::Contains("env.clip_reward = true") && !Catch::Contains("values per environment"));
  // Resumed with a changed learning rate: reported; the run completes and writes its files.
  std::string text3;
  const TrainConfig c3 =
      dqn_config({"output_prefix=" + prefix, "dqn.learning_rate=5e-4", "logging.tensorboard=true"}, &text3);
  DqnTrainer t3(c3, text3);
  t3.load_checkpoint(t.checkpoint_path());
  REQUIRE(t3.changed_on_resume().size() == 1);
  CHECK(t.config().dqn.learning_rate != 5e-4);
  CHECK(t3.run(nullptr) == RunEnd::kDone);
  CHECK(std::string(kDqnCurveColumns[16]) == "learning_rate");
  CHECK(t3.curve().back()[16] == 5e-4);  // the optimizer runs with the new rate, not the checkpoint's
  REQUIRE(fs::is_directory(t3.tensorboard_dir()));
  CHECK(fs::directory_iterator(t3.tensorboard_dir()) != fs::directory_iterator());
  fs::remove_all(t3.tensorboard_dir());
  const TrainingCurve csv = read_progress_csv(t3.progress_path());
  CHECK(csv.rows() == 6);
  for (const char* col : {"loss", "q_mean", "epsilon", "return_mean", "replay_size"}) CHECK(csv.column(col) != nullptr);
  const TrainingCurve h5 = read_curve_h5(t3.output_path());
  CHECK(h5.rows() == 6);
  CHECK((*h5.column("env_steps"))[5] == 600);
  // Greedy evaluation of the checkpoint through herd-rl's entry point.
  const EvalResult e = evaluate_checkpoint(t3.checkpoint_path(), 3, false);
  CHECK(e.returns.size() == 3);
  CHECK(e.mean > 0);
  // A PPO run cannot resume a DQN checkpoint's outputs as its own, and the other way round.
  std::string tp;
  const TrainConfig ppo = resolve_train_config(io::Config("<t>"), {"output_prefix=" + prefix}, &tp);
  DqnTrainer as_dqn(c, text);
  CHECK_FALSE(as_dqn.resume_conflicts(t.checkpoint_path()).size());
  auto run = make_training_run(ppo, tp);
  CHECK(run->resume_conflicts(t.checkpoint_path()) ==
        std::vector<std::string>{"algorithm = \"ppo\" (the checkpoint has \"dqn\")"});
  run->save_checkpoint(prefix + "_ppo.ckpt");
  CHECK(as_dqn.resume_conflicts(prefix + "_ppo.ckpt") ==
        std::vector<std::string>{"algorithm = \"dqn\" (the checkpoint has \"ppo\")"});
  fs::remove(prefix + "_ppo.ckpt");
  for (const char* ext : {".ckpt", ".h5", "_progress.csv"}) fs::remove(prefix + ext);
}

namespace {

// An environment that never ends an episode (no termination, no time limit): observation
// the step count mod 7, two actions, reward 1 per step.
class NeverEnds final : public Env {
 public:
  NeverEnds() : Env("test/NeverEnds-v0", Space::box({0.0}, {6.0}), Space::discrete(2), 1, 0) {}
  std::vector<double> get_state() const override { return {static_cast<double>(t_)}; }
  void observe(float* obs) const override { obs[0] = static_cast<float>(t_ % 7); }

 protected:
  void reset_impl(RngCursor& /*rng*/, float* obs) override {
    t_ = 0;
    observe(obs);
  }
  StepResult step_impl(const double* /*action*/, float* obs) override {
    ++t_;
    observe(obs);
    StepResult r;
    r.reward = 1.0;
    return r;
  }
  void set_state_impl(const double* s) override { t_ = static_cast<std::int64_t>(s[0]); }

 private:
  std::int64_t t_ = 0;
};

/// A Box(0, 1) of real values (a normalised position, 0.1 per step), ending after 10 steps.
class UnitInterval final : public Env {
 public:
  UnitInterval() : Env("test/UnitInterval-v0", Space::box({0.0}, {1.0}), Space::discrete(2), 1, 0) {}
  std::vector<double> get_state() const override { return {static_cast<double>(t_)}; }
  void observe(float* obs) const override { obs[0] = static_cast<float>(t_) / 10.0f; }

 protected:
  void reset_impl(RngCursor& /*rng*/, float* obs) override {
    t_ = 0;
    observe(obs);
  }
  StepResult step_impl(const double* action, float* obs) override {
    ++t_;
    observe(obs);
    StepResult r;
    r.reward = action[0];
    r.terminated = t_ == 10;
    return r;
  }
  void set_state_impl(const double* s) override { t_ = static_cast<std::int64_t>(s[0]); }

 private:
  std::int64_t t_ = 0;
};

}  // namespace

TEST_CASE("DqnTrainer: a Box of real values with integer bounds is stored as float32, not refused", "[rl][dqn]") {
  // Box(0, 1) holds 0.1, 0.2, ...: its bounds are integers in [0, 255], its values are not.
  CHECK_FALSE(replay_uint8(Space::box({0.0}, {1.0})));
  CHECK_FALSE(replay_uint8(Space::box({0.0, 0.0}, {1.0, 1.0}, {2})));
  CHECK(replay_uint8(Space::box({0.0, 0.0}, {1.0, 255.0}, {2}, BoxValues::kInteger)));
  CHECK_FALSE(replay_uint8(Space::box({0.0, 0.0}, {1.0, 256.0}, {2}, BoxValues::kInteger)));
  CHECK_FALSE(replay_uint8(Space::discrete(3)));
  // A frame stack keeps the kind of values (MinAtar's grids stay bytes in the replay).
  WrapperOptions w;
  w.frame_stack = 2;
  const auto stacked = wrap_env(make_env("MinAtar/Breakout-v1"), w);
  CHECK(stacked->observation_space().values() == BoxValues::kInteger);
  CHECK(replay_uint8(stacked->observation_space()));
  CHECK(make_env("CartPole-v1")->observation_space().values() == BoxValues::kReal);

  register_env("test/UnitInterval-v0", [] { return std::make_unique<UnitInterval>(); });
  std::string text;
  const TrainConfig c = dqn_config({"env=test/UnitInterval-v0", "total_steps=200", "sampler.num_steps=25",
                                    "dqn.learning_starts=20", "output_prefix=test_rl_dqn_unit_interval"},
                                   &text);
  DqnTrainer t(c, text);
  // uint8 storage refused the first transition ("observation component 0 is 0.1, but uint8
  // replay storage needs integers in [0, 255]").
  while (!t.done()) REQUIRE_NOTHROW(t.iterate());
  CHECK(t.curve().size() == 4u);
}

TEST_CASE("Evaluation cuts off episodes that never end at the step cap and reports them truncated", "[rl][dqn]") {
  register_env("test/NeverEnds-v0", [] { return std::make_unique<NeverEnds>(); });
  // Without a cap these evaluations would never return.
  AgentOptions ao;
  ao.hidden = {4};
  auto env = make_env("test/NeverEnds-v0");
  ActorCriticAgent agent(env->observation_space(), env->action_space(), ao);
  const EvalResult p = evaluate_policy(agent, "test/NeverEnds-v0", nullptr, 3, true, 1, 40);
  CHECK(p.lengths == std::vector<std::int64_t>{40, 40, 40});
  CHECK(p.returns == std::vector<double>{40, 40, 40});
  CHECK(p.truncated == 3);
  CHECK(p.capped == 3);
  CHECK_THROWS_WITH(evaluate_policy(agent, "test/NeverEnds-v0", nullptr, 1, true, 1, -1),
                    Catch::Contains("max_episode_steps is -1, but must be >= 0"));
  // A DQN run's checkpoint: the run's eval.max_episode_steps, or the caller's cap.
  std::string text;
  const TrainConfig c = dqn_config({"env=test/NeverEnds-v0", "eval.max_episode_steps=25", "total_steps=200",
                                    "sampler.num_steps=25", "output_prefix=test_rl_dqn_never_ends"},
                                   &text);
  DqnTrainer t(c, text);
  t.iterate();
  const std::string path = "test_rl_dqn_never_ends.ckpt";
  t.save_checkpoint(path);
  const EvalResult d = evaluate_checkpoint(path, 2, false);
  CHECK(d.lengths == std::vector<std::int64_t>{25, 25});
  CHECK(d.truncated == 2);
  CHECK(d.capped == 2);
  const EvalResult d2 = evaluate_checkpoint(path, 2, true, 7);
  CHECK(d2.lengths == std::vector<std::int64_t>{7, 7});
  CHECK(d2.mean == 7.0);
  CHECK(d2.capped == 2);
  std::filesystem::remove(path);
  // Episodes that end by themselves are not cut off: CartPole's terminate, Pendulum's are
  // truncated by its own 200-step time limit (truncated, not capped).
  auto cart = make_env("CartPole-v1");
  ActorCriticAgent a2(cart->observation_space(), cart->action_space(), ao);
  const EvalResult e = evaluate_policy(a2, "CartPole-v1", nullptr, 3, false, 2);
  CHECK(e.truncated == 0);
  CHECK(e.capped == 0);
  auto pend = make_env("Pendulum-v1");
  ActorCriticAgent a3(pend->observation_space(), pend->action_space(), ao);
  const EvalResult q = evaluate_policy(a3, "Pendulum-v1", nullptr, 2, false, 2);
  CHECK(q.lengths == std::vector<std::int64_t>{200, 200});
  CHECK(q.truncated == 2);
  CHECK(q.capped == 0);
}

TEST_CASE("A key of another algorithm is refused, not ignored", "[rl][dqn]") {
  const herd::io::Config none("<defaults>");
  // DQN reads gamma and the learning-rate scaling keys of [algo], nothing else there.
  CHECK_NOTHROW(resolve_train_config(none, {"algorithm=dqn", "algo.gamma=0.9", "algo.lr_scaling=sqrt"}));
  CHECK_THROWS_WITH(
      resolve_train_config(none, {"algorithm=dqn", "algo.learning_rate=0.5"}),
      Catch::Contains("--set algo.learning_rate=0.5") && Catch::Contains("key \"algo.learning_rate\" is set") &&
          Catch::Contains("algorithm = \"dqn\" does not read it") && Catch::Contains("dqn.learning_rate"));
  CHECK_THROWS_WITH(resolve_train_config(none, {"algorithm=dqn", "algo.epochs=7"}), Catch::Contains("algo.epochs"));
  // Several such keys: one line names them all (in the schema's order), the first with its
  // reason.
  CHECK_THROWS_WITH(
      resolve_train_config(none,
                           {"algorithm=dqn", "algo.learning_rate=0.5", "algo.epochs=7", "network.init_log_std=1"}),
      Catch::StartsWith("--set network.init_log_std=1: key \"network.init_log_std\" is set, but algorithm = \"dqn\" "
                        "does not read it (its Q-network") &&
          Catch::EndsWith("; nor does it read \"algo.learning_rate\" (--set algo.learning_rate=0.5), \"algo.epochs\" "
                          "(--set algo.epochs=7), also set"));
  // PPO and A2C read nothing of [dqn].
  CHECK_THROWS_WITH(
      resolve_train_config(none, {"algorithm=ppo", "dqn.buffer_size=20"}),
      Catch::Contains("key \"dqn.buffer_size\" is set") && Catch::Contains("algorithm = \"ppo\" does not read [dqn]"));
  CHECK_THROWS_WITH(resolve_train_config(none, {"algorithm=a2c", "dqn.n_step=3"}), Catch::Contains("dqn.n_step"));
  CHECK_NOTHROW(resolve_train_config(none, {"algorithm=ppo", "algo.epochs=7"}));
  // Nor does DQN read the policy's shared trunk or Gaussian log std.
  CHECK_THROWS_WITH(resolve_train_config(none, {"algorithm=dqn", "network.shared_trunk=true"}),
                    Catch::Contains("key \"network.shared_trunk\" is set") &&
                        Catch::Contains("algorithm = \"dqn\" does not read it"));
  CHECK_THROWS_WITH(resolve_train_config(none, {"algorithm=dqn", "network.init_log_std=0.5"}),
                    Catch::Contains("network.init_log_std"));
  CHECK_NOTHROW(resolve_train_config(none, {"algorithm=dqn", "network.hidden=[32]", "network.init=pytorch"}));
}

TEST_CASE("The resolved configuration marks the keys the algorithm does not read", "[rl][dqn]") {
  const herd::io::Config none("<defaults>");
  // A key's line, commented out or not.
  const auto line_of = [](const std::string& text, const std::string& key) {
    std::size_t at = text.find("\n" + key + " = ");
    if (at == std::string::npos) at = text.find("\n# " + key + " = ");
    return at == std::string::npos ? std::string() : text.substr(at + 1, text.find('\n', at + 1) - at - 1);
  };
  std::string dqn, ppo;
  resolve_train_config(none, {"algorithm=dqn"}, &dqn);
  resolve_train_config(none, {"algorithm=ppo"}, &ppo);
  const std::string unread_dqn = "# default; not read by algorithm = \"dqn\"; ";
  CHECK(line_of(dqn, "algo.learning_rate") == "# algo.learning_rate = 0.001  " + unread_dqn + "initial learning rate");
  CHECK_THAT(line_of(dqn, "network.shared_trunk"), Catch::StartsWith("# network.shared_trunk = false  " + unread_dqn));
  CHECK_THAT(line_of(dqn, "algo.epochs"), Catch::Contains(unread_dqn));
  for (const char* key : {"algo.gamma", "algo.lr_scaling", "dqn.learning_rate", "env.id", "seed"})
    CHECK_THAT(line_of(dqn, key), !Catch::Contains("not read"));
  CHECK_THAT(line_of(ppo, "dqn.buffer_size"), Catch::Contains("# default; not read by algorithm = \"ppo\"; "));
  CHECK_THAT(line_of(ppo, "algo.learning_rate"), !Catch::Contains("not read"));
  // The text reads back (as a checkpoint's does): the mark is in the comment only.
  std::string again;
  const TrainConfig c = parse_train_config(dqn, &again);
  CHECK(c.algorithm == "dqn");
  CHECK(c.dqn.learning_rate == 1e-4);
  CHECK_THAT(line_of(again, "algo.learning_rate"),
             Catch::StartsWith("# algo.learning_rate = 0.001  # default; not read by algorithm = \"dqn\"; "));
  // ... and runs again as a user's input file (the unread keys are commented out, not set).
  std::string rerun;
  const TrainConfig d = resolve_train_config(herd::io::parse_toml(dqn, "resolved.toml"), {}, &rerun);
  CHECK(d.algorithm == "dqn");
  CHECK_THAT(line_of(rerun, "dqn.learning_rate"), Catch::StartsWith("dqn.learning_rate = 0.0001  # resolved.toml:"));
}

TEST_CASE("Data-parallel placement on GPUs: one GPU per rank; refused only without NCCL", "[rl][dqn][ppo]") {
  // A plain "cuda" under several ranks: rank r takes GPU (node-local rank mod device count).
  const Device cuda = Device::cuda(0);
  CHECK(data_parallel_device(cuda, "cuda", 4, 3, 3, 2, "t") == Device::cuda(1));
  CHECK(data_parallel_device(cuda, "cuda", 4, 2, 0, 2, "t") == Device::cuda(0));  // rank 2, first on its node
  CHECK(data_parallel_device(cuda, "cuda", 2, 1, 1, 8, "t") == Device::cuda(1));
  // "cuda:<index>" pins every rank; the CPU and one rank keep the configured device.
  CHECK(data_parallel_device(Device::cuda(1), "cuda:1", 4, 3, 3, 2, "t") == Device::cuda(1));
  CHECK(data_parallel_device(Device::cpu(), "cpu", 4, 3, 3, 2, "t") == Device::cpu());
  CHECK(data_parallel_device(cuda, "cuda", 1, 0, 0, 0, "t") == cuda);  // one process: checked by the config
  CHECK_THROWS_WITH(data_parallel_device(cuda, "cuda", 2, 1, 1, 0, "rl::DqnTrainer"),
                    Catch::StartsWith("rl::DqnTrainer: device is \"cuda\", but no CUDA device is usable on rank 1"));
  // Gradients of GPU networks under several ranks are averaged over NCCL: refused only in
  // a build without it (both answers, whichever this build is).
  CHECK(multi_gpu_refusal(cuda, 2, true).empty());
  CHECK(multi_gpu_refusal(Device::cpu(), 2, false).empty());
  CHECK(multi_gpu_refusal(cuda, 1, false).empty());
  CHECK(multi_gpu_refusal(cuda, 2, false) ==
        "this build of herd has no NCCL (gradients of GPU agents are averaged over NCCL); run one rank, or device = "
        "\"cpu\"");
  CHECK(multi_gpu_refusal(cuda, 3).empty() == (HERD_HAVE_NCCL != 0));
}

TEST_CASE("docs/rl.md names DQN's /curve datasets as the .h5 writes them, in order", "[rl][dqn]") {
  std::ifstream in(HERD_RL_DOC);
  REQUIRE(in);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string doc = ss.str();
  const std::string head = "the curve as the\ndatasets `/curve/<name>`";
  const auto from = doc.find(head);
  REQUIRE(from != std::string::npos);
  const auto to = doc.find("`kDqnCurveColumns`", from);
  REQUIRE(to != std::string::npos);
  const std::string list = doc.substr(from, to - from);
  // Each column as a whole word (episode_length is not episode_length_min), after the last.
  auto is_word = [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_'; };
  std::size_t at = list.find("exactly:");
  REQUIRE(at != std::string::npos);
  for (const char* column : kDqnCurveColumns) {
    INFO(column);
    const std::string name = column;
    std::size_t p = list.find(name, at);
    while (p != std::string::npos &&
           ((p > 0 && is_word(list[p - 1])) || (p + name.size() < list.size() && is_word(list[p + name.size()]))))
      p = list.find(name, p + 1);
    REQUIRE(p != std::string::npos);
    at = p + name.size();
  }
}
