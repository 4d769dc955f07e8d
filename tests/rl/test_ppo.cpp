// PPO/A2C: loss gradients against finite differences, minibatches of one, GAE with time
// limits through the sampler, bit-identical resume.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <memory>
#include <numeric>
#include <vector>

#include "herd/io/toml_reader.hpp"
#include "herd/rl/a2c.hpp"
#include "herd/rl/agent.hpp"
#include "herd/rl/ppo.hpp"
#include "herd/rl/registry.hpp"
#include "herd/rl/sampler.hpp"
#include "herd/rl/trainer.hpp"

using namespace herd;
using namespace herd::rl;

namespace {

// A rollout of n = 6 samples with old log-probs offset from the current ones so that some
// ratios are clipped (offsets +-0.5) and others are not (0, 0.05).
RolloutBuffer make_buffer(ActorCriticAgent& agent, const Space& space, std::size_t obs_dim) {
  RolloutBuffer b;
  b.resize(2, 3, obs_dim, space.dim());
  RngCursor c = RngStream(7, 0).at(0);
  for (auto& x : b.obs) x = static_cast<float>(c.normal());
  for (std::size_t i = 0; i < b.size(); ++i)
    for (std::size_t j = 0; j < space.dim(); ++j)
      b.actions[i * space.dim() + j] = space.is_discrete() ? static_cast<double>(c.below(2)) : c.normal();
  agent.evaluate(b.obs.data(), b.actions.data(), b.size());
  const double offs[6] = {0.5, 0.0, 0.05, -0.5, 0.02, -0.03};
  for (std::size_t i = 0; i < b.size(); ++i) {
    b.log_probs[i] = agent.log_probs()[i] + static_cast<float>(offs[i]);
    b.values[i] = agent.values()[i] + static_cast<float>(i % 2 ? 0.3 : 0.01);
    b.advantages[i] = static_cast<float>(c.normal());
    b.returns[i] = static_cast<float>(c.normal());
  }
  return b;
}

void check_gradient(const std::string& env_id, double clip_vf, bool shared = false) {
  auto env = make_env(env_id);
  AgentOptions ao;
  ao.hidden = {8};
  ao.shared_trunk = shared;
  ao.seed = 3;
  ActorCriticAgent agent(env->obs_dim(), env->action_space(), ao);
  RolloutBuffer b = make_buffer(agent, env->action_space(), env->obs_dim());
  PpoOptions po;
  po.ent_coef = 0.05;
  po.clip_range_vf = clip_vf;
  Ppo ppo(agent, po);
  std::vector<std::uint32_t> idx(b.size());
  std::iota(idx.begin(), idx.end(), 0u);
  ppo.optimizer().zero_grad();
  ppo.minibatch_loss(b, idx, 0.2, true);
  int checked = 0;
  for (auto& p : agent.named_parameters()) {
    nn::Tensor& v = p.param->value;
    for (std::int64_t k = 0; k < v.numel(); k += 3) {
      const double x = v.item(k), h = 1e-2;
      v.set_item(k, x + h);
      const double lp = ppo.minibatch_loss(b, idx, 0.2, false).total;
      v.set_item(k, x - h);
      const double lm = ppo.minibatch_loss(b, idx, 0.2, false).total;
      v.set_item(k, x);
      const double fd = (lp - lm) / (2 * h);
      INFO(p.name << "[" << k << "]");
      CHECK(p.param->grad.item(k) == Approx(fd).margin(2e-3).epsilon(0.03));
      ++checked;
    }
  }
  CHECK(checked > 10);
}

}  // namespace

TEST_CASE("PPO loss gradient matches finite differences (categorical)", "[rl]") {
  check_gradient("CartPole-v1", 0.0);
  check_gradient("CartPole-v1", 0.1);
  check_gradient("CartPole-v1", 0.1, true);
}

TEST_CASE("PPO loss gradient matches finite differences (Gaussian)", "[rl]") {
  check_gradient("Pendulum-v1", 0.0);
  check_gradient("Pendulum-v1", 0.1);
  check_gradient("Pendulum-v1", 0.0, true);
}

TEST_CASE("PPO loss: hand-computed case", "[rl]") {
  // One sample: ratio r = exp(logp - old), A = 2 (normalisation off), clip 0.2.
  auto env = make_env("CartPole-v1");
  AgentOptions ao;
  ao.hidden = {4};
  ActorCriticAgent agent(4, env->action_space(), ao);
  RolloutBuffer b;
  b.resize(1, 1, 4, 1);
  b.obs = {0.1f, -0.2f, 0.3f, 0.0f};
  b.actions = {1.0};
  agent.evaluate(b.obs.data(), b.actions.data(), 1);
  const double logp = agent.log_probs()[0], v = agent.values()[0];
  b.log_probs = {static_cast<float>(logp - 0.5)};  // r = e^0.5 > 1.2: clipped
  b.values = {static_cast<float>(v)};
  b.advantages = {2.0f};
  b.returns = {static_cast<float>(v + 1.0)};
  PpoOptions po;
  po.normalize_advantage = false;
  po.ent_coef = 0.0;
  Ppo ppo(agent, po);
  const std::uint32_t i0 = 0;
  const auto L = ppo.minibatch_loss(b, std::span<const std::uint32_t>(&i0, 1), 0.2, false);
  CHECK(L.policy == Approx(-1.2 * 2.0).epsilon(1e-5));
  CHECK(L.value == Approx(1.0).epsilon(1e-5));
  CHECK(L.total == Approx(-2.4 + 0.5).epsilon(1e-5));
  CHECK(L.clip_fraction == 1.0);
  CHECK(L.approx_kl == Approx(std::exp(0.5) - 1 - 0.5).epsilon(1e-4));
}

TEST_CASE("A PPO minibatch of one sample gives no NaN", "[rl]") {
  auto env = make_env("CartPole-v1");
  ActorCriticAgent agent(4, env->action_space(), AgentOptions{});
  SamplerOptions so;
  so.num_envs = 1;
  so.num_steps = 1;
  SerialSampler s(so);
  RolloutBuffer b;
  s.collect(agent, b);
  b.compute_advantages(0.99, 0.95);
  PpoOptions po;
  po.minibatch_size = 1;
  po.epochs = 3;
  Ppo ppo(agent, po);
  const UpdateStats st = ppo.update(b, 1.0, 0);
  CHECK(std::isfinite(st.policy_loss));
  CHECK(std::isfinite(st.value_loss));
  for (auto& t : agent.state_dict())
    for (double x : t.tensor.to_vector()) REQUIRE(std::isfinite(x));
}

// Stable-Baselines3 issue #325: normalising the advantage of a single sample gives 0, so a
// minibatch of one never moved the policy. PPO and A2C (normalize_advantage) now leave it as is.
TEST_CASE("A PPO or A2C update with a minibatch of one sample changes the policy", "[rl]") {
  for (const bool a2c : {false, true}) {
    INFO((a2c ? "A2C" : "PPO"));
    auto env = make_env("CartPole-v1");
    AgentOptions ao;
    ao.seed = 5;
    ActorCriticAgent agent(4, env->action_space(), ao);
    RolloutBuffer b;
    b.resize(1, 1, 4, 1);
    b.obs = {0.1f, -0.2f, 0.3f, 0.05f};
    b.actions = {1.0};
    agent.evaluate(b.obs.data(), b.actions.data(), 1);
    const double before = agent.log_probs()[0];
    b.log_probs = {static_cast<float>(before)};
    b.values = {agent.values()[0]};
    b.advantages = {1.5f};  // a good action: its probability must rise
    b.returns = {agent.values()[0] + 1.5f};
    std::unique_ptr<Ppo> algo;
    if (a2c) {
      A2cOptions o;
      o.normalize_advantage = true;
      o.ent_coef = 0.0;
      o.learning_rate = 1e-2;
      algo = std::make_unique<A2c>(agent, o);
    } else {
      PpoOptions po;
      po.normalize_advantage = true;
      po.minibatch_size = 1;
      po.epochs = 1;
      po.ent_coef = 0.0;
      po.learning_rate = 1e-2;
      algo = std::make_unique<Ppo>(agent, po);
    }
    algo->update(b, 1.0, 0);
    agent.evaluate(b.obs.data(), b.actions.data(), 1);
    CHECK(agent.log_probs()[0] > before + 1e-4);
  }
}

TEST_CASE("PPO's minibatch observer sees every step after it is taken, and changes nothing", "[rl]") {
  auto env = make_env("CartPole-v1");
  AgentOptions ao;
  ao.seed = 11;
  ActorCriticAgent observed(4, env->action_space(), ao), plain(4, env->action_space(), ao);
  SamplerOptions so;
  so.num_envs = 4;
  so.num_steps = 16;
  SerialSampler s(so);
  RolloutBuffer b;
  s.collect(observed, b);
  b.compute_advantages(0.99, 0.95);
  PpoOptions po;
  po.minibatch_size = 16;  // 64 samples: 4 minibatches per epoch
  po.epochs = 3;
  po.max_grad_norm = 0.05;  // small enough that some steps are clipped
  po.learning_rate = 1e-3;
  Ppo with(observed, po), without(plain, po);
  std::vector<MinibatchRecord> seen;
  std::vector<std::uint32_t> rows;
  std::vector<std::vector<double>> after;
  int clipped = 0;
  with.set_minibatch_observer([&](const MinibatchRecord& m) {
    seen.push_back(m);
    rows.insert(rows.end(), m.samples.begin(), m.samples.end());
    std::vector<double> p;
    double g2 = 0;
    for (auto& np : observed.named_parameters()) {
      for (double x : np.param->value.to_vector()) p.push_back(x);
      for (double g : np.param->grad.to_vector()) g2 += g * g;
    }
    after.push_back(p);
    // The gradient left in the parameters is the clipped one: norm min(grad_norm, 0.05).
    CHECK(std::sqrt(g2) == Approx(std::min(m.grad_norm, 0.05)).epsilon(1e-4));
    clipped += m.grad_norm > 0.05 ? 1 : 0;
  });
  const UpdateStats st = with.update(b, 1.0, 2);
  const UpdateStats st_plain = without.update(b, 1.0, 2);
  REQUIRE(seen.size() == 12u);
  double kl = 0, policy = 0, clip_fraction = 0;
  for (std::size_t k = 0; k < seen.size(); ++k) {
    CHECK(seen[k].iteration == 2);
    CHECK(seen[k].epoch == static_cast<int>(k / 4));
    CHECK(seen[k].index == k % 4);
    CHECK(seen[k].learning_rate == st.learning_rate);
    CHECK(std::isfinite(seen[k].grad_norm));
    kl += seen[k].loss.approx_kl;
    policy += seen[k].loss.policy;
    clip_fraction += seen[k].loss.clip_fraction;
    if (k > 0) CHECK(after[k] != after[k - 1]);  // seen after the step
  }
  CHECK(clipped > 0);
  // The update's statistics are the means of the minibatches' terms, in the same order.
  CHECK(kl / 12.0 == st.approx_kl);
  CHECK(policy / 12.0 == st.policy_loss);
  CHECK(clip_fraction / 12.0 == st.clip_fraction);
  // Every epoch's minibatches are consecutive slices of one permutation of the rows.
  for (int e = 0; e < 3; ++e) {
    std::vector<std::uint32_t> epoch(rows.begin() + e * 64, rows.begin() + (e + 1) * 64);
    std::sort(epoch.begin(), epoch.end());
    for (std::uint32_t i = 0; i < 64; ++i) REQUIRE(epoch[i] == i);
  }
  // Observing changes nothing: the same statistics and parameters as without an observer.
  CHECK(st.approx_kl == st_plain.approx_kl);
  CHECK(st.value_loss == st_plain.value_loss);
  std::vector<double> last;
  for (auto& np : plain.named_parameters())
    for (double x : np.param->value.to_vector()) last.push_back(x);
  CHECK(after.back() == last);
}

TEST_CASE("Sampler: truncated steps bootstrap from V(final obs), terminated ones do not", "[rl]") {
  auto env = make_env("CartPole-v1");
  ActorCriticAgent agent(4, env->action_space(), AgentOptions{});
  SamplerOptions so;
  so.num_envs = 2;
  so.num_steps = 64;
  so.max_episode_steps = 5;
  SerialSampler s(so);
  RolloutBuffer b;
  s.collect(agent, b);
  b.compute_advantages(0.9, 0.7);
  int truncs = 0;
  for (std::size_t i = 0; i < b.size(); ++i) {
    if (b.truncated[i] && !b.terminated[i]) {
      ++truncs;
      CHECK(b.final_values[i] != 0.0f);
      // The trace is cut: R_t = r_t + gamma V(final obs).
      CHECK(b.returns[i] == Approx(b.rewards[i] + 0.9 * b.final_values[i]).epsilon(1e-5));
    } else if (b.terminated[i]) {
      CHECK(b.returns[i] == Approx(b.rewards[i]).epsilon(1e-6));
    } else {
      CHECK(b.final_values[i] == 0.0f);
    }
  }
  CHECK(truncs >= 10);
  CHECK(s.episodes().size() >= 10u);
}

TEST_CASE("Sampler: results do not depend on the thread count", "[rl]") {
  auto env = make_env("CartPole-v1");
  AgentOptions ao;
  ActorCriticAgent a1(4, env->action_space(), ao), a2(4, env->action_space(), ao);
  SamplerOptions so;
  so.num_envs = 8;
  so.num_steps = 50;
  so.normalize_obs = true;
  SerialSampler s1(so);
  so.num_threads = 2;
  ParallelSampler s2(so);
  RolloutBuffer b1, b2;
  s1.collect(a1, b1);
  s2.collect(a2, b2);
  CHECK(b1.obs == b2.obs);
  CHECK(b1.actions == b2.actions);
  CHECK(b1.rewards == b2.rewards);
}

namespace {
TrainConfig small_config(const std::string& algo) {
  std::string text;
  std::vector<std::string> sets = {"algorithm=" + algo,
                                   "sampler.num_envs=4",
                                   "sampler.num_steps=16",
                                   "total_steps=384",
                                   "normalize.obs=true",
                                   "normalize.reward=true",
                                   "seed=5",
                                   "output_prefix=test_rl_resume_" + algo};
  if (algo == "ppo") sets.insert(sets.end(), {"algo.epochs=2", "algo.minibatch_size=32"});  // PPO's keys only
  TrainConfig c = resolve_train_config(io::Config("<test>"), sets, &text);
  return c;
}
}  // namespace

TEST_CASE("Trainer: a resumed run is bit-identical to an uninterrupted one", "[rl]") {
  for (std::string algo : {"ppo", "a2c"}) {
    const TrainConfig c = small_config(algo);
    REQUIRE(c.num_iterations() == 6);
    Trainer full(c, "x");
    while (!full.done()) full.iterate();
    Trainer first(c, "x");
    for (int i = 0; i < 3; ++i) first.iterate();
    const std::string path = "test_rl_resume_" + algo + ".ckpt";
    first.save_checkpoint(path);
    Trainer second(c, "x");
    second.load_checkpoint(path);
    CHECK(second.iteration() == 3);
    while (!second.done()) second.iterate();
    const auto p1 = full.agent().state_dict(), p2 = second.agent().state_dict();
    REQUIRE(p1.size() == p2.size());
    for (std::size_t i = 0; i < p1.size(); ++i) CHECK(p1[i].tensor.to_vector() == p2[i].tensor.to_vector());
    REQUIRE(full.curve().size() == second.curve().size());
    for (std::size_t r = 0; r < full.curve().size(); ++r)
      for (std::size_t k = 0; k < kCurveColumns.size(); ++k) {
        const std::string col = kCurveColumns[k];
        if (is_wall_clock_column(col)) continue;
        const double x = full.curve()[r][k], y = second.curve()[r][k];
        INFO(algo << " row " << r << " " << col);
        CHECK(((std::isnan(x) && std::isnan(y)) || x == y));
      }
  }
}

TEST_CASE("Trainer: settings that fix the saved state's shapes cannot change on resume", "[rl]") {
  auto config = [](std::vector<std::string> extra, std::string* text) {
    // later overrides win: the test's changes come last
    extra.insert(extra.begin(), {"sampler.num_envs=4", "sampler.num_steps=16", "total_steps=128", "algo.epochs=1",
                                 "algo.minibatch_size=32"});
    return resolve_train_config(io::Config("<test>"), extra, text);
  };
  std::string text;
  const TrainConfig c = config({}, &text);
  const std::string path = "test_rl_resume_conflicts.ckpt";
  {
    Trainer t(c, text);
    t.iterate();
    t.save_checkpoint(path);
  }
  {
    Trainer same(c, text);
    CHECK(same.resume_conflicts(path).empty());
  }
  {  // a learning rate may change (a warning), the optimizer may not
    std::string t2;
    const TrainConfig c2 = config({"algo.learning_rate=0.01"}, &t2);
    Trainer other(c2, t2);
    CHECK(other.resume_conflicts(path).empty());
    other.load_checkpoint(path);
    CHECK(other.iteration() == 1);
  }
  {
    std::string t2;
    const TrainConfig c2 = config({"sampler.num_envs=8", "network.hidden=[32]", "algo.optimizer=rmsprop"}, &t2);
    Trainer other(c2, t2);
    const auto conflicts = other.resume_conflicts(path);
    REQUIRE(conflicts.size() == 3);
    CHECK(conflicts[0] == "sampler.num_envs = 8 (the checkpoint has 4)");
    CHECK(conflicts[1] == "network.hidden = [32] (the checkpoint has [64, 64])");
    CHECK(conflicts[2] == "algo.optimizer = \"rmsprop\" (the checkpoint has \"adam\")");
    CHECK_THROWS_WITH(other.load_checkpoint(path), Catch::Contains(path) && Catch::Contains("sampler.num_envs = 8") &&
                                                       Catch::Contains("cannot change on resume"));
  }
  {
    std::string t2;
    const TrainConfig c2 = config({"env=Acrobot-v1"}, &t2);
    Trainer other(c2, t2);
    CHECK_THROWS_WITH(other.load_checkpoint(path), Catch::Contains("env.id = \"Acrobot-v1\" (the checkpoint has "
                                                                   "\"CartPole-v1\")"));
  }
  {  // a wrapper switch that wraps the unwrapped env would change its saved state's size
    std::string t2;
    const TrainConfig c2 = config({"env.clip_reward=true"}, &t2);
    Trainer other(c2, t2);
    CHECK(other.resume_conflicts(path) ==
          std::vector<std::string>{"env.clip_reward = true (the checkpoint has false)"});
    CHECK_THROWS_WITH(other.load_checkpoint(path),
                      Catch::Contains("env.clip_reward = true (the checkpoint has false)") &&
                          Catch::Contains("cannot change on resume"));
  }
  std::remove(path.c_str());
}

TEST_CASE("Config errors name the key and the value", "[rl]") {
  CHECK_THROWS_WITH(resolve_train_config(io::Config("<t>"), {"env=Nope-v0"}),
                    Catch::Contains("\"env\"") && Catch::Contains("Nope-v0"));
  CHECK_THROWS_WITH(resolve_train_config(io::Config("<t>"), {"algo.minibatch_size=1000"}),
                    Catch::Contains("algo.minibatch_size") && Catch::Contains("1000"));
  CHECK_THROWS_WITH(resolve_train_config(io::Config("<t>"), {"algo.gamma=1.5"}), Catch::Contains("algo.gamma"));
}

TEST_CASE("Config: keys that the other settings leave unread are refused, not ignored", "[rl]") {
  const io::Config none("<t>");
  // A2C takes one full-batch step per rollout: PPO's epochs, minibatches and clipping.
  for (const std::string key : {"algo.epochs=7", "algo.minibatch_size=64", "algo.num_minibatches=4",
                                "algo.clip_range=0.5", "algo.anneal_clip=false", "algo.clip_range_vf=0.2"})
    CHECK_THROWS_WITH(resolve_train_config(none, {"algorithm=a2c", key}),
                      Catch::StartsWith("--set " + key + ": key \"" + key.substr(0, key.find('=')) + "\" is set") &&
                          Catch::Contains("algorithm = \"a2c\" does not read it") &&
                          Catch::Contains("set algorithm = \"ppo\""));
  CHECK_THROWS_WITH(resolve_train_config(none, {"algorithm=a2c", "algo.epochs=7", "algo.clip_range=0.5"}),
                    Catch::StartsWith("--set algo.clip_range=0.5: key \"algo.clip_range\" is set") &&
                        Catch::EndsWith("nor does it read \"algo.epochs\" (--set algo.epochs=7), also set"));
  CHECK_NOTHROW(resolve_train_config(none, {"algorithm=a2c", "algo.learning_rate=7e-4", "algo.ent_coef=0.01"}));
  CHECK_NOTHROW(resolve_train_config(none, {"algorithm=ppo", "algo.epochs=7", "algo.clip_range=0.5"}));
  // minibatch_size beside num_minibatches: refused where they disagree (8 x 32 = 256 steps).
  CHECK_THROWS_WITH(resolve_train_config(none, {"algo.num_minibatches=2", "algo.minibatch_size=64"}),
                    Catch::StartsWith("--set algo.minibatch_size=64: key \"algo.minibatch_size\" is 64, but "
                                      "algo.num_minibatches = 2 (--set algo.num_minibatches=2) sets the minibatch "
                                      "size to 256 / 2 = 128"));
  CHECK(resolve_train_config(none, {"algo.num_minibatches=4", "algo.minibatch_size=64"}).ppo.minibatch_size == 64);
  CHECK(resolve_train_config(none, {"algo.num_minibatches=2"}).ppo.minibatch_size == 128);
  // env.symbol names a function of env.library: without a library it would be ignored.
  CHECK_THROWS_WITH(resolve_train_config(none, {"env.symbol=my_env"}),
                    Catch::StartsWith("--set env.symbol=my_env: key \"env.symbol\" is set, but env.library is not "
                                      "set"));
  // The serial sampler steps on the calling thread: more threads would be ignored.
  CHECK_THROWS_WITH(resolve_train_config(none, {"sampler.num_threads=4"}),
                    Catch::StartsWith("--set sampler.num_threads=4: key \"sampler.num_threads\" is set, but "
                                      "sampler.kind = \"serial\" does not read it"));
  CHECK_NOTHROW(resolve_train_config(none, {"sampler.num_threads=1"}));
  CHECK_NOTHROW(resolve_train_config(none, {"sampler.kind=parallel", "sampler.num_threads=4"}));
  // The resolved text comments such keys out, so that it runs again as an input file and a
  // checkpoint's text (every key written) resolves.
  const auto line_of = [](const std::string& text, const std::string& key) {
    std::size_t at = text.find("\n" + key + " = ");
    if (at == std::string::npos) at = text.find("\n# " + key + " = ");
    return at == std::string::npos ? std::string() : text.substr(at + 1, text.find('\n', at + 1) - at - 1);
  };
  std::string a2c, nmb;
  resolve_train_config(none, {"algorithm=a2c"}, &a2c);
  CHECK_THAT(line_of(a2c, "algo.epochs"), Catch::StartsWith("# algo.epochs = 20  # default; not read by algorithm"));
  CHECK_THAT(line_of(a2c, "algo.learning_rate"), !Catch::Contains("not read"));
  CHECK_THAT(line_of(a2c, "env.symbol"),
             Catch::StartsWith("# env.symbol = ") && Catch::Contains("without env.library"));
  CHECK_THAT(line_of(a2c, "sampler.num_threads"), Catch::StartsWith("# sampler.num_threads = 1"));
  const TrainConfig n = resolve_train_config(none, {"algo.num_minibatches=4"}, &nmb);
  CHECK_THAT(line_of(nmb, "algo.minibatch_size"),
             Catch::StartsWith("# algo.minibatch_size = 256  # default; not read: algo.num_minibatches"));
  for (const std::string& text : {a2c, nmb}) {
    CHECK_NOTHROW(resolve_train_config(io::parse_toml(text, "resolved.toml"), {}));
    CHECK_NOTHROW(parse_train_config(text));
  }
  CHECK(parse_train_config(nmb).ppo.minibatch_size == n.ppo.minibatch_size);
  // A checkpoint's text from before these were commented out still resolves (as eval reads it).
  std::string old = a2c;
  for (const std::string key : {"algo.epochs", "env.symbol", "sampler.num_threads"})
    old.replace(old.find("# " + key + " = "), 2, "");
  CHECK(parse_train_config(old).algorithm == "a2c");
}

TEST_CASE("Config: sizes checked before narrowing, max_memory, and a warning for one-sample minibatches", "[rl]") {
  const io::Config none("<t>");
  // 3e9 narrowed to int was -1294967296, which passed the "<= steps per iteration" check.
  CHECK_THROWS_WITH(resolve_train_config(none, {"algo.minibatch_size=3e9"}),
                    Catch::Contains("algo.minibatch_size") && Catch::Contains("2147483647"));
  CHECK_THROWS_WITH(resolve_train_config(none, {"sampler.num_envs=65536", "sampler.num_steps=1048576"}),
                    Catch::Contains("65536 x 1048576") && Catch::Contains("2^32 - 1"));
  CHECK_THROWS_WITH(resolve_train_config(none, {"max_memory=lots"}), Catch::Contains("max_memory"));
  CHECK(resolve_train_config(none, {"max_memory=2GiB"}).max_memory == (std::uint64_t{2} << 30));
  CHECK(resolve_train_config(none, {}).warnings.empty());
  const TrainConfig one = resolve_train_config(none, {"algo.minibatch_size=1"});
  REQUIRE(one.warnings.size() == 1);
  CHECK_THAT(one.warnings[0], Catch::Contains("algo.minibatch_size is 1"));
  CHECK(resolve_train_config(none, {"algo.minibatch_size=1", "algo.normalize_advantage=false"}).warnings.empty());
  // A minibatch size that leaves a remainder (here 256 = 2 x 100 + 56) warns, as SB3 does;
  // a divisor does not.
  const TrainConfig rest = resolve_train_config(none, {"algo.minibatch_size=100"});
  REQUIRE(rest.warnings.size() == 1);
  CHECK_THAT(rest.warnings[0], Catch::Contains("algo.minibatch_size is 100, which does not divide") &&
                                   Catch::Contains("= 256") && Catch::Contains("a minibatch of 56 samples"));
  CHECK(resolve_train_config(none, {"algo.minibatch_size=64"}).warnings.empty());
  // The Trainer refuses a run above max_memory before it allocates the rollout.
  const TrainConfig big =
      resolve_train_config(none, {"sampler.num_envs=4096", "sampler.num_steps=4096", "max_memory=100MB"});
  CHECK_THROWS_WITH(Trainer(big, ""),
                    Catch::StartsWith("--set max_memory=100MB: training with 4096 envs x 4096 steps") &&
                        Catch::Contains("max_memory is"));
  CHECK(training_memory_need(big, 4, 1) > 1e9);
}

TEST_CASE("Config key device: cpu, cuda, cuda:<index>; bad values and unusable devices named", "[rl]") {
  const TrainConfig c = resolve_train_config(io::Config("<t>"), {});
  CHECK(c.device == "cpu");
  CHECK(c.agent.device == Device::cpu());
  CHECK(resolve_train_config(io::Config("<t>"), {"device=cpu"}).agent.device.is_cpu());
  for (const std::string bad : {"gpu", "cuda:", "cuda:x", "CUDA", "cuda:-1"})
    CHECK_THROWS_WITH(resolve_train_config(io::Config("<t>"), {"device=" + bad}),
                      Catch::Contains("key \"device\" is \"" + bad + "\"") && Catch::Contains("cuda:<index>"));
  // A near miss gets the nearest valid form.
  CHECK_THROWS_WITH(resolve_train_config(io::Config("<t>"), {"device=cdua"}),
                    Catch::Contains("did you mean \"cuda\"?"));
  CHECK_THROWS_WITH(resolve_train_config(io::Config("<t>"), {"device=CPU"}), Catch::Contains("did you mean \"cpu\"?"));
  CHECK_THROWS_WITH(resolve_train_config(io::Config("<t>"), {"device=cuda:x"}),
                    Catch::Contains("did you mean \"cuda:<index>\"?"));
  CHECK_THROWS_WITH(resolve_train_config(io::Config("<t>"), {"device=xyz"}), !Catch::Contains("did you mean"));
  // Without the availability check (a checkpoint's configuration) any well-formed device parses.
  {
    std::string text;
    const TrainConfig r = resolve_train_config(io::Config("<t>"), {"device=cuda:3"}, &text, 1, false);
    CHECK(r.agent.device == Device::cuda(3));
    CHECK(text.find("device = \"cuda:3\"") != std::string::npos);
  }
  const int n = cuda_device_count();
  if (n == 0) {  // CPU-only build or no GPU: one-line errors naming the key and the value
    CHECK_THROWS_WITH(resolve_train_config(io::Config("<t>"), {"device=cuda"}),
                      Catch::Contains("key \"device\" is \"cuda\"") &&
                          (Catch::Contains("no CUDA support") || Catch::Contains("no CUDA device is usable")));
    CHECK_THROWS_AS(resolve_train_config(io::Config("<t>"), {"device=cuda:0"}), InputError);
    // The agent refuses a CUDA device too.
    auto env = make_env("CartPole-v1");
    AgentOptions ao;
    ao.device = Device::cuda(0);
    CHECK_THROWS_AS(ActorCriticAgent(env->obs_dim(), env->action_space(), ao), InputError);
  } else {
    CHECK(resolve_train_config(io::Config("<t>"), {"device=cuda"}).agent.device == Device::cuda(0));
    CHECK_THROWS_WITH(resolve_train_config(io::Config("<t>"), {"device=cuda:" + std::to_string(n)}),
                      Catch::Contains("CUDA device(s) are usable"));
  }
}

TEST_CASE("Learning-rate scaling with the batch, num_minibatches, warm-up", "[rl]") {
  // 16 envs x 32 steps = 512 steps per iteration, reference batch 128: k = 4.
  const std::vector<std::string> base = {"sampler.num_envs=16", "sampler.num_steps=32", "algo.learning_rate=1e-3",
                                         "algo.lr_reference_batch=128", "algo.minibatch_size=64"};
  auto with = [&](std::vector<std::string> extra, int ranks = 1) {
    std::vector<std::string> s = base;
    s.insert(s.end(), extra.begin(), extra.end());
    return resolve_train_config(io::Config("<t>"), s, nullptr, ranks);
  };
  CHECK(with({}).ppo.learning_rate == 1e-3);
  CHECK(with({}).lr_scale == 1.0);
  CHECK(with({"algo.lr_scaling=linear"}).ppo.learning_rate == Approx(4e-3).epsilon(1e-12));
  CHECK(with({"algo.lr_scaling=sqrt"}).ppo.learning_rate == Approx(2e-3).epsilon(1e-12));
  // Under MPI the batch counts every rank: 2 ranks double it.
  CHECK(with({"algo.lr_scaling=linear"}, 2).ppo.learning_rate == Approx(8e-3).epsilon(1e-12));
  // A smaller batch than the reference scales down.
  CHECK(with({"algo.lr_scaling=linear", "algo.lr_reference_batch=1024"}).ppo.learning_rate ==
        Approx(5e-4).epsilon(1e-12));
  // The settings without base's algo.minibatch_size (which A2C does not read, and which
  // algo.num_minibatches replaces).
  auto without_minibatch_size = [&](std::vector<std::string> extra, int ranks = 1) {
    std::copy_if(base.begin(), base.end(), std::back_inserter(extra),
                 [](const std::string& kv) { return kv.rfind("algo.minibatch_size", 0) != 0; });
    return resolve_train_config(io::Config("<t>"), extra, nullptr, ranks);
  };
  // A2C gets the scaled rate and the warm-up too.
  const TrainConfig a =
      without_minibatch_size({"algorithm=a2c", "algo.lr_scaling=linear", "algo.lr_warmup_iterations=4"});
  CHECK(a.a2c().learning_rate == Approx(4e-3).epsilon(1e-12));
  CHECK(a.a2c().lr_warmup_iterations == 4);
  CHECK(a.a2c().lr_warmup_start == Approx(0.25).epsilon(1e-12));
  // num_minibatches sets the minibatch size from the batch (Stooke & Abbeel's PPO).
  CHECK(without_minibatch_size({"algo.num_minibatches=4"}).ppo.minibatch_size == 128);
  CHECK(without_minibatch_size({"algo.num_minibatches=4"}, 2).ppo.minibatch_size == 256);
  CHECK_THROWS_WITH(without_minibatch_size({"algo.num_minibatches=3"}),
                    Catch::Contains("algo.num_minibatches") && Catch::Contains("is 3") && Catch::Contains("512"));
  CHECK_THROWS_WITH(with({"algo.lr_scaling=cubic"}), Catch::Contains("algo.lr_scaling") && Catch::Contains("cubic"));
  // Warm-up: from the unscaled rate (factor 1/k) linearly to the scaled one at iteration W.
  const TrainConfig w = with({"algo.lr_scaling=linear", "algo.lr_warmup_iterations=4", "algo.anneal_lr=false"});
  CHECK(lr_warmup_factor(w.ppo, 0) == Approx(0.25).epsilon(1e-12));
  CHECK(lr_warmup_factor(w.ppo, 2) == Approx(0.625).epsilon(1e-12));
  CHECK(lr_warmup_factor(w.ppo, 4) == 1.0);
  CHECK(lr_warmup_factor(w.ppo, 100) == 1.0);
  // ... as the learning rate the update reports (curve column learning_rate).
  const TrainConfig t = with({"algo.lr_scaling=linear", "algo.lr_warmup_iterations=2", "algo.anneal_lr=false",
                              "total_steps=1536", "algo.epochs=1", "output_prefix=test_rl_lr_scaling"});
  Trainer tr(t, "x");
  while (!tr.done()) tr.iterate();
  const std::size_t lr_col = static_cast<std::size_t>(
      std::find(kCurveColumns.begin(), kCurveColumns.end(), std::string("learning_rate")) - kCurveColumns.begin());
  REQUIRE(tr.curve().size() == 3u);
  CHECK(tr.curve()[0][lr_col] == Approx(1e-3).epsilon(1e-12));
  CHECK(tr.curve()[1][lr_col] == Approx(2.5e-3).epsilon(1e-12));
  CHECK(tr.curve()[2][lr_col] == Approx(4e-3).epsilon(1e-12));
  // Without scaling the warm-up does nothing (it starts at the unscaled rate).
  CHECK(lr_warmup_factor(with({"algo.lr_warmup_iterations=4"}).ppo, 0) == 1.0);
}
