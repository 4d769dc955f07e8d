// ActorCriticAgent with convolutional encoders (AgentOptions::conv) on image observations:
// parameter names and shapes on MinAtar's observation space, PPO loss gradients through the
// convolutions against finite differences (separate networks and shared trunk, categorical
// and Gaussian), batch-independent inference, errors, and a short PPO run on MinAtar
// Breakout through the Trainer with a bit-identical resume.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <numeric>
#include <string>
#include <vector>

#include <unistd.h>

#include "herd/core/error.hpp"
#include "herd/nn/linear.hpp"
#include "herd/rl/agent.hpp"
#include "herd/rl/ppo.hpp"
#include "herd/rl/registry.hpp"
#include "herd/rl/rollout_buffer.hpp"
#include "herd/rl/train_config.hpp"
#include "herd/rl/trainer.hpp"
#include "herd/rl/training_run.hpp"

using namespace herd;
using namespace herd::rl;

namespace {

// A small image observation space {2, 5, 5} in [0, 1].
Space image_space() { return Space::box(std::vector<double>(50, 0.0), std::vector<double>(50, 1.0), {2, 5, 5}); }

AgentOptions conv_options(bool shared) {
  AgentOptions ao;
  ao.conv = {ConvLayerSpec{3, 3, 1, 1}, ConvLayerSpec{2, 2, 2, 0}};  // 5x5 -> 5x5 -> 2x2
  ao.hidden = {6};
  ao.activation = nn::Activation::kTanh;
  ao.shared_trunk = shared;
  ao.seed = 9;
  return ao;
}

std::vector<std::string> names(ActorCriticAgent& a) {
  std::vector<std::string> out;
  for (auto& p : a.named_parameters()) out.push_back(p.name);
  return out;
}

// dL/dtheta of the PPO loss (clipped policy term, value term with clipping, entropy bonus)
// against central differences, for every second parameter element.
void check_ppo_gradient(const Space& action_space, bool shared) {
  const Space obs_space = image_space();
  ActorCriticAgent agent(obs_space, action_space, conv_options(shared));
  const std::size_t n = 6, d = obs_space.dim(), ad = action_space.dim();
  RolloutBuffer b;
  b.resize(2, 3, d, ad);
  RngCursor c = RngStream(7, 0).at(0);
  for (auto& x : b.obs) x = static_cast<float>(c.uniform());
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < ad; ++j)
      b.actions[i * ad + j] = action_space.is_discrete() ? static_cast<double>(c.below(3)) : c.normal();
  agent.evaluate(b.obs.data(), b.actions.data(), n);
  const double offs[6] = {0.5, 0.0, 0.05, -0.5, 0.02, -0.03};
  for (std::size_t i = 0; i < n; ++i) {
    b.log_probs[i] = agent.log_probs()[i] + static_cast<float>(offs[i]);
    b.values[i] = agent.values()[i] + static_cast<float>(i % 2 ? 0.3 : 0.01);
    b.advantages[i] = static_cast<float>(c.normal());
    b.returns[i] = static_cast<float>(c.normal());
  }
  PpoOptions po;
  po.ent_coef = 0.05;
  po.clip_range_vf = 0.1;
  Ppo ppo(agent, po);
  std::vector<std::uint32_t> idx(n);
  std::iota(idx.begin(), idx.end(), 0u);
  ppo.optimizer().zero_grad();
  ppo.minibatch_loss(b, idx, 0.2, true);
  int checked = 0, conv_checked = 0;
  for (auto& p : agent.named_parameters()) {
    nn::Tensor& v = p.param->value;
    for (std::int64_t k = 0; k < v.numel(); k += 2) {
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
      if (p.name.find(".0.") != std::string::npos || p.name.find(".2.") != std::string::npos) ++conv_checked;
    }
  }
  CHECK(conv_checked > 20);
  CHECK(checked > 60);
}

}  // namespace

TEST_CASE("Conv agent: the MinAtar network's parameters (separate and shared)", "[rl][conv]") {
  auto env = make_env("MinAtar/Breakout-v1");
  REQUIRE(env->observation_space().shape() == std::vector<std::int64_t>{4, 10, 10});
  AgentOptions ao;
  ao.conv = {ConvLayerSpec{16, 3, 1, 0}};
  ao.hidden = {128};
  ao.activation = nn::Activation::kReLU;
  ActorCriticAgent sep(env->observation_space(), env->action_space(), ao);
  CHECK(sep.obs_dim() == 400);
  CHECK(sep.obs_shape() == std::vector<std::int64_t>{4, 10, 10});
  // pi: 0 Conv2d, 1 ReLU, 2 Flatten, 3 Linear(1024, 128), 4 ReLU, 5 Linear(128, 3).
  CHECK(names(sep) == std::vector<std::string>{"pi.0.weight", "pi.0.bias", "pi.3.weight", "pi.3.bias", "pi.5.weight",
                                               "pi.5.bias", "vf.0.weight", "vf.0.bias", "vf.3.weight", "vf.3.bias",
                                               "vf.5.weight", "vf.5.bias"});
  const auto sd = sep.state_dict();
  CHECK(sd[0].tensor.shape() == nn::Shape{16, 4, 3, 3});
  CHECK(sd[2].tensor.shape() == nn::Shape{128, 1024});
  CHECK(sd[4].tensor.shape() == nn::Shape{3, 128});
  CHECK(sd[10].tensor.shape() == nn::Shape{1, 128});
  // Actor and critic are initialised from different streams.
  CHECK(sd[0].tensor.to_vector() != sd[6].tensor.to_vector());
  ao.shared_trunk = true;
  ActorCriticAgent shared(env->observation_space(), env->action_space(), ao);
  CHECK(names(shared) == std::vector<std::string>{"trunk.0.weight", "trunk.0.bias", "trunk.3.weight", "trunk.3.bias",
                                                  "pi.weight", "pi.bias", "vf.weight", "vf.bias"});
  // The trunk draws like the actor's encoder (stream 0): same initial conv weights.
  CHECK(shared.state_dict()[0].tensor.to_vector() == sd[0].tensor.to_vector());
  // The module view for data parallelism lists the same parameters.
  CHECK(shared.module().named_parameters().size() == 8);
}

TEST_CASE("Agent init: orthogonal (gains sqrt 2, 0.01, 1, zero biases) or PyTorch's default for every layer",
          "[rl][conv]") {
  auto env = make_env("MinAtar/Breakout-v1");
  AgentOptions ao;
  ao.conv = {ConvLayerSpec{16, 3, 1, 0}};
  ao.hidden = {128};
  ao.activation = nn::Activation::kReLU;
  ao.seed = 4;
  // Squared norm of row r of a [rows, cols] weight.
  const auto row_sq = [](const nn::Tensor& w, std::int64_t r) {
    double s = 0;
    for (std::int64_t k = 0; k < w.dim(1); ++k) s += w.item(r * w.dim(1) + k) * w.item(r * w.dim(1) + k);
    return s;
  };
  for (bool shared : {false, true}) {
    INFO("shared trunk " << shared);
    ao.shared_trunk = shared;
    ao.init = EncoderInit::kOrthogonal;
    ActorCriticAgent ortho(env->observation_space(), env->action_space(), ao);
    ao.init = EncoderInit::kPyTorch;
    ActorCriticAgent torch(env->observation_space(), env->action_space(), ao);
    const auto so = ortho.state_dict(), st = torch.state_dict();
    REQUIRE(so.size() == st.size());
    for (std::size_t i = 0; i < so.size(); ++i) {
      INFO(so[i].name);
      const nn::Tensor &o = so[i].tensor, &t = st[i].tensor;
      const bool bias = so[i].name.find("bias") != std::string::npos;
      const bool pi_head = so[i].name == (shared ? "pi.weight" : "pi.5.weight");
      const bool vf_head = so[i].name == (shared ? "vf.weight" : "vf.5.weight");
      const std::int64_t fan_in = bias ? 0 : o.numel() / o.dim(0);
      if (bias) {
        for (std::int64_t k = 0; k < o.numel(); ++k) CHECK(o.item(k) == 0.0);
      } else {
        // Orthogonal rows (fewer rows than columns here) of norm gain.
        const double gain2 = pi_head ? 1e-4 : vf_head ? 1.0 : 2.0;
        for (std::int64_t r : {std::int64_t{0}, o.dim(0) - 1})
          CHECK(row_sq(o.reshape({o.dim(0), fan_in}), r) == Approx(gain2).epsilon(1e-4));
        // PyTorch's bound 1/sqrt(fan_in), the bias from the same layer's fan-in.
        const double bound = 1.0 / std::sqrt(static_cast<double>(fan_in));
        for (std::int64_t k = 0; k < t.numel(); ++k) CHECK(std::abs(t.item(k)) <= bound);
        const nn::Tensor& tb = st[i + 1].tensor;
        int nonzero = 0;
        for (std::int64_t k = 0; k < tb.numel(); ++k) {
          CHECK(std::abs(tb.item(k)) <= bound);
          nonzero += tb.item(k) != 0.0;
        }
        CHECK(nonzero == tb.numel());
      }
    }
  }
  // PyTorch's default is the nn::Linear constructor's draws: the shared trunk's policy
  // head from stream 2, index 0.
  ao.shared_trunk = true;
  ActorCriticAgent torch(env->observation_space(), env->action_space(), ao);
  nn::Linear pi(128, 3, nn::DType::kFloat32, Device::cpu(), true, RngStream(4, 2, RngPurpose::kInit), 0);
  CHECK(torch.state_dict()[4].tensor.to_vector() == pi.weight().value.to_vector());
}

TEST_CASE("Conv agent: PPO loss gradients through the convolutions match finite differences", "[rl][conv]") {
  SECTION("categorical, separate networks") { check_ppo_gradient(Space::discrete(3), false); }
  SECTION("categorical, shared trunk") { check_ppo_gradient(Space::discrete(3), true); }
  SECTION("Gaussian, separate networks") { check_ppo_gradient(Space::box({-1, -1}, {1, 1}), false); }
  SECTION("Gaussian, shared trunk") { check_ppo_gradient(Space::box({-1, -1}, {1, 1}), true); }
}

TEST_CASE("Conv agent: a row's actions, log-probs and values do not depend on the batch", "[rl][conv]") {
  const Space obs_space = image_space();
  for (bool shared : {false, true}) {
    INFO((shared ? "shared trunk" : "separate networks"));
    // Hidden width 16: Eigen evaluates products with rows + cols + depth < 20 coefficient by
    // coefficient (another summation order than its GEMV/GEMM kernels), so a width-6 value
    // head would change path between a padded batch of 8 and one of 16 rows.
    AgentOptions ao = conv_options(shared);
    ao.hidden = {16};
    ActorCriticAgent agent(obs_space, Space::discrete(3), ao);
    const std::size_t n = 11, d = obs_space.dim();
    std::vector<float> obs(n * d);
    RngCursor c = RngStream(3, 0).at(0);
    for (auto& x : obs) x = static_cast<float>(c.below(2));
    const RngStream rng(4, 0, RngPurpose::kPolicy);
    std::vector<double> a(n);
    std::vector<float> lp(n), v(n);
    agent.act(obs.data(), n, &rng, 2, a.data(), lp.data(), v.data());
    // Rows 5.. alone, drawn from the same per-row streams.
    const RngStream rng5(4, 5, RngPurpose::kPolicy);
    std::vector<double> a5(n - 5);
    std::vector<float> lp5(n - 5), v5(n - 5);
    agent.act(obs.data() + 5 * d, n - 5, &rng5, 2, a5.data(), lp5.data(), v5.data());
    for (std::size_t i = 5; i < n; ++i) {
      CHECK(a[i] == a5[i - 5]);
      CHECK(lp[i] == lp5[i - 5]);
      CHECK(v[i] == v5[i - 5]);
    }
    std::vector<float> vv(n);
    agent.value(obs.data(), n, vv.data());
    CHECK(vv == v);
    // Different images give different values (the convolutions see the input).
    CHECK(v[0] != v[1]);
  }
}

TEST_CASE("Conv agent: bad observation spaces and layer specs are InputErrors", "[rl][conv]") {
  AgentOptions ao;
  ao.conv = {ConvLayerSpec{16, 3, 1, 0}};
  auto cartpole = make_env("CartPole-v1");
  CHECK_THROWS_WITH(ActorCriticAgent(cartpole->observation_space(), cartpole->action_space(), ao),
                    Catch::Contains("{channels, height, width}") && Catch::Contains("{4}"));
  CHECK_THROWS_WITH(ActorCriticAgent(400, Space::discrete(3), ao), Catch::Contains("{400}"));
  CHECK_THROWS_WITH(ActorCriticAgent(Space::discrete(4), Space::discrete(3), ao), Catch::Contains("must be a Box"));
  ao.conv = {ConvLayerSpec{16, 11, 1, 0}};
  auto breakout = make_env("MinAtar/Breakout-v1");
  CHECK_THROWS_WITH(ActorCriticAgent(breakout->observation_space(), breakout->action_space(), ao),
                    Catch::Contains("conv layer 0") && Catch::Contains("below 1"));
  // Convolutions straight into the heads (no dense layers) are allowed; no layers at all not.
  ao.conv = {ConvLayerSpec{4, 3, 1, 0}};
  ao.hidden = {};
  ActorCriticAgent direct(breakout->observation_space(), breakout->action_space(), ao);
  CHECK(direct.state_dict()[2].tensor.shape() == nn::Shape{3, 4 * 8 * 8});
  ao.conv = {};
  CHECK_THROWS_WITH(ActorCriticAgent(breakout->observation_space(), breakout->action_space(), ao),
                    Catch::Contains("hidden is empty"));
}

TEST_CASE("Conv agent: PPO on MinAtar Breakout through the Trainer resumes bit for bit", "[rl][conv]") {
  std::string text;
  const TrainConfig c =
      resolve_train_config(io::Config("<test>"),
                           {"env=MinAtar/Breakout-v1", "network.conv_channels=[4]", "network.conv_kernels=[3]",
                            "network.hidden=[16]", "network.activation=relu", "sampler.num_envs=4",
                            "sampler.num_steps=16", "total_steps=256", "algo.epochs=2", "algo.minibatch_size=32"},
                           &text);
  REQUIRE(c.agent.conv.size() == 1);
  REQUIRE(c.num_iterations() == 4);
  Trainer full(c, text);
  CHECK(full.agent().obs_shape() == std::vector<std::int64_t>{4, 10, 10});
  const auto initial = full.agent().state_dict();
  while (!full.done()) full.iterate();
  Trainer first(c, text);
  for (int i = 0; i < 2; ++i) first.iterate();
  const std::string path = "test_rl_conv_resume.ckpt";
  first.save_checkpoint(path);
  Trainer second(c, text);
  second.load_checkpoint(path);
  CHECK(second.iteration() == 2);
  while (!second.done()) second.iterate();
  const auto p1 = full.agent().state_dict(), p2 = second.agent().state_dict();
  REQUIRE(p1.size() == p2.size());
  for (std::size_t i = 0; i < p1.size(); ++i) {
    INFO(p1[i].name);
    CHECK(p1[i].tensor.to_vector() == p2[i].tensor.to_vector());
  }
  // Training moved the convolution.
  CHECK(p1[0].name == "pi.0.weight");
  CHECK(p1[0].tensor.to_vector() != initial[0].tensor.to_vector());
  // A checkpoint with other convolutions is refused, naming the key.
  std::string t2;
  const TrainConfig c2 =
      resolve_train_config(io::Config("<test>"),
                           {"env=MinAtar/Breakout-v1", "network.conv_channels=[8]", "network.conv_kernels=[3]",
                            "network.hidden=[16]", "network.activation=relu", "sampler.num_envs=4",
                            "sampler.num_steps=16", "total_steps=256", "algo.epochs=2", "algo.minibatch_size=32"},
                           &t2);
  Trainer other(c2, t2);
  CHECK_THROWS_WITH(other.load_checkpoint(path),
                    Catch::Contains("network.conv_channels = [8] (the checkpoint has [4])"));
  std::remove(path.c_str());
}

TEST_CASE("Config network.conv_*: layers read, mismatches named with key, value and expectation", "[rl][conv]") {
  auto resolve = [](const std::vector<std::string>& sets) { return resolve_train_config(io::Config("<t>"), sets); };
  auto error = [&](const std::vector<std::string>& sets) -> std::string {
    try {
      resolve(sets);
    } catch (const InputError& e) {
      return e.what();
    }
    return "no error";
  };
  const TrainConfig two =
      resolve({"env=MinAtar/Freeway-v1", "network.conv_channels=[16, 32]", "network.conv_kernels=[3, 2]",
               "network.conv_strides=[1, 2]", "network.conv_padding=[1, 0]"});
  REQUIRE(two.agent.conv.size() == 2);
  CHECK(two.agent.conv[1].channels == 32);
  CHECK(two.agent.conv[1].kernel == 2);
  CHECK(two.agent.conv[1].stride == 2);
  CHECK(two.agent.conv[0].padding == 1);
  // Strides and padding may be left empty (1 and 0); none by default.
  const TrainConfig one = resolve({"env=MinAtar/Breakout-v1", "network.conv_channels=16", "network.conv_kernels=3"});
  REQUIRE(one.agent.conv.size() == 1);
  CHECK(one.agent.conv[0].stride == 1);
  CHECK(one.agent.conv[0].padding == 0);
  CHECK(resolve({}).agent.conv.empty());
  // network.init: orthogonal by default, or PyTorch's default; anything else is refused.
  CHECK(resolve({}).agent.init == EncoderInit::kOrthogonal);
  CHECK(resolve({"network.init=pytorch"}).agent.init == EncoderInit::kPyTorch);
  CHECK(resolve({"network.init=orthogonal"}).agent.init == EncoderInit::kOrthogonal);
  using Catch::Matchers::Contains;
  CHECK_THAT(error({"network.init=xavier"}),
             Contains("\"network.init\" is \"xavier\"") && Contains("\"orthogonal\", \"pytorch\""));
  CHECK_THAT(error({"network.conv_channels=[16]", "network.conv_kernels=[3]"}),
             Contains("--set network.conv_channels=[16]") && Contains("\"network.conv_channels\" is [16]") &&
                 Contains("\"CartPole-v1\"") && Contains("{4}") && Contains("{channels, height, width}"));
  CHECK_THAT(error({"env=MinAtar/Breakout-v1", "network.conv_channels=[16]", "network.conv_kernels=[3, 3]"}),
             Contains("\"network.conv_kernels\" is [3, 3]") && Contains("one entry per convolution"));
  // Kernels left at their default are wrong because of the channels: named by where those were set.
  CHECK(error({"env=MinAtar/Breakout-v1", "network.conv_channels=16"}) ==
        "--set network.conv_channels=16: key \"network.conv_kernels\" is [] (its default), but must have one entry "
        "per convolution (network.conv_channels is [16], 1 layer)");
  CHECK_THAT(error({"env=MinAtar/Breakout-v1", "network.conv_kernels=[3]"}),
             Contains("--set network.conv_kernels=[3]: key \"network.conv_kernels\" is [3], but"));
  CHECK_THAT(error({"env=MinAtar/Breakout-v1", "network.conv_channels=[16]", "network.conv_kernels=[3]",
                    "network.conv_strides=[1, 1]"}),
             Contains("\"network.conv_strides\" is [1, 1]") && Contains("or be empty"));
  CHECK_THAT(error({"env=MinAtar/Breakout-v1", "network.conv_channels=[16, 16]", "network.conv_kernels=[5, 7]"}),
             Contains("--set network.conv_kernels=[5, 7]") && Contains("MinAtar/Breakout-v1") &&
                 Contains("{4, 10, 10}") && Contains("conv layer 1") && Contains("below 1"));
  CHECK_THAT(error({"env=MinAtar/Breakout-v1", "network.conv_channels=[0]", "network.conv_kernels=[3]"}),
             Contains("network.conv_channels"));
  CHECK_THAT(error({"env=MinAtar/Breakout-v1", "network.conv_channels=[4]", "network.conv_kernels=[3]",
                    "network.conv_padding=[-1]"}),
             Contains("network.conv_padding"));
}

TEST_CASE("Config network.hidden = []: with convolutions the heads read the flattened maps; else refused",
          "[rl][conv]") {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("herd_test_rl_no_hidden_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const std::string algo : {"ppo", "dqn"}) {
    INFO(algo);
    std::vector<std::string> sets = {"env=MinAtar/Breakout-v1",   "algorithm=" + algo,
                                     "network.conv_channels=[4]", "network.conv_kernels=[3]",
                                     "network.hidden=[]",         "network.activation=relu",
                                     "sampler.num_envs=4",        "sampler.num_steps=16",
                                     "total_steps=128",           "output_prefix=" + (dir / algo).string()};
    if (algo == "ppo") sets.insert(sets.end(), {"algo.epochs=1", "algo.minibatch_size=32"});
    else sets.insert(sets.end(), {"dqn.learning_starts=16", "dqn.batch_size=8", "dqn.buffer_size=256"});
    std::string text;
    const TrainConfig c = resolve_train_config(io::Config("<test>"), sets, &text);
    CHECK(c.agent.hidden.empty());
    CHECK(text.find("\nnetwork.hidden = []  # --set network.hidden=[];") != std::string::npos);
    const auto run = make_training_run(c, text);
    CHECK(run->run(nullptr) == RunEnd::kDone);
    CHECK(fs::exists(run->output_path()));
    // The checkpoint's text (hidden = []) resolves again, as eval and --resume read it.
    CHECK(parse_train_config(text).agent.hidden.empty());
  }
  fs::remove_all(dir);
  // Without convolutions the dense layers are the whole network: refused, naming the key.
  CHECK_THROWS_WITH(resolve_train_config(io::Config("<test>"), {"network.hidden=[]"}),
                    Catch::StartsWith("--set network.hidden=[]: key \"network.hidden\" is [], but the network needs "
                                      "at least one layer"));
}

TEST_CASE("training_memory_need counts the convolution outputs", "[rl][conv]") {
  auto resolve = [](std::vector<std::string> sets) {
    sets.insert(sets.begin(), {"env=MinAtar/Breakout-v1", "sampler.num_envs=4", "sampler.num_steps=16",
                               "algo.minibatch_size=32", "network.hidden=[128]"});
    return resolve_train_config(io::Config("<t>"), sets);
  };
  const TrainConfig dense = resolve({});
  const TrainConfig conv = resolve({"network.conv_channels=[16]", "network.conv_kernels=[3]"});
  // One 16 x 8 x 8 output per sample of a 32-sample minibatch, 4-byte floats, 8 copies
  // (activations and gradients of actor and critic, as for hidden widths).
  CHECK(training_memory_need(conv, 400, 1) - training_memory_need(dense, 400, 1) == 32.0 * 16 * 8 * 8 * 4 * 8);
}

TEST_CASE("MinAtar PPO presets: the paper's network, and they resolve against their envs", "[rl][conv]") {
  for (const char* game : {"breakout", "freeway", "asterix", "seaquest", "space_invaders"}) {
    INFO(game);
    std::string text;
    const TrainConfig c =
        load_train_config(std::string(HERD_EXAMPLES_DIR) + "/minatar_" + game + "_ppo.toml", {}, &text);
    CHECK(c.env.rfind("MinAtar/", 0) == 0);
    REQUIRE(c.agent.conv.size() == 1);
    CHECK(c.agent.conv[0].channels == 16);
    CHECK(c.agent.conv[0].kernel == 3);
    CHECK(c.agent.conv[0].stride == 1);
    CHECK(c.agent.conv[0].padding == 0);
    CHECK(c.agent.hidden == std::vector<std::int64_t>{128});
    CHECK(c.agent.activation == nn::Activation::kReLU);
    CHECK(c.total_steps == 5000000);
  }
}

TEST_CASE("MinAtar DQN presets: the paper's network and replay settings, and they resolve against their envs",
          "[rl][conv]") {
  for (const char* game : {"breakout", "freeway", "asterix", "seaquest", "space_invaders"}) {
    INFO(game);
    std::string text;
    const TrainConfig c =
        load_train_config(std::string(HERD_EXAMPLES_DIR) + "/minatar_" + game + "_dqn.toml", {}, &text);
    CHECK(c.algorithm == "dqn");
    CHECK(c.env.rfind("MinAtar/", 0) == 0);
    REQUIRE(c.agent.conv.size() == 1);
    CHECK(c.agent.conv[0].channels == 16);
    CHECK(c.agent.hidden == std::vector<std::int64_t>{128});
    CHECK(c.agent.init == EncoderInit::kPyTorch);  // the paper's code and SB3's DQN
    CHECK(c.dqn.buffer_size == 100000);
    CHECK(c.dqn.batch_size == 32);
    CHECK(c.dqn.target_update_interval == 1000);
    // The paper's optimizer: centred RMSprop, lr 2.5e-4, decay 0.95, eps 0.01.
    CHECK(c.dqn.optimizer == OptimizerKind::kRmsProp);
    CHECK(c.dqn.rmsprop_centered);
    CHECK(c.dqn.learning_rate == 2.5e-4);
    CHECK(c.dqn.rmsprop_alpha == 0.95);
    CHECK(c.dqn.optimizer_eps == 0.01);
  }
}

TEST_CASE("Conv agent: the alternating sampler trains bit for bit as the parallel sampler", "[rl][conv]") {
  auto params_after = [](const std::string& sampler) {
    std::string text;
    const TrainConfig c = resolve_train_config(
        io::Config("<test>"),
        {"env=MinAtar/Breakout-v1", "network.conv_channels=[4]", "network.conv_kernels=[3]", "network.hidden=[16]",
         "sampler.kind=" + sampler, "sampler.num_threads=2", "sampler.num_envs=8", "sampler.num_steps=16",
         "total_steps=256", "algo.epochs=1", "algo.minibatch_size=64"},
        &text);
    Trainer t(c, text);
    while (!t.done()) t.iterate();
    std::vector<std::vector<double>> out;
    for (auto& p : t.agent().state_dict()) out.push_back(p.tensor.to_vector());
    return out;
  };
  CHECK(params_after("alternating") == params_after("parallel"));
}
