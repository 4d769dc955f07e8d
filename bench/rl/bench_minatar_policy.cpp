// herd's side of bench/rl/minatar_crosseval.py, which runs a herd-rl policy in PyPI's
// `minatar` games (never run in CI). Three commands:
//
//   bench_minatar_policy episodes CHECKPOINT N [--stochastic]
//       N evaluation episodes of the checkpoint's policy in herd's game, exactly as
//       `herd-rl eval` runs them (rl::evaluate_checkpoint); one "return,length" line each.
//   bench_minatar_policy forward CHECKPOINT OBS_FILE
//       The network's outputs on observation rows read from OBS_FILE (raw float32,
//       `[n, obs_dim]`): per row, a PPO policy's log pi(a|obs) for every action a then its
//       value V(obs), or a DQN Q-network's Q(obs, a) for every action; one line of
//       space-separated %.9g values per row.
//   bench_minatar_policy replay ENV_ID SCRIPT_FILE
//       Plays given episodes in herd's game with sticky actions off. SCRIPT_FILE holds two
//       lines per episode: the episode's first observation (obs_dim characters '0'/'1', the
//       env's [channel, row, column] order), then its actions (indices of the env's action
//       set, space-separated). herd resets the env (seed 0, successive episodes) until its
//       first observation equals the given one (at most 4096 resets; Freeway: its state is
//       set from that observation instead), then steps the actions; per step one line "reward terminated observation"
//       (observation as above), and "end" after each episode. Stops an episode early at termination.
//
// Exit status 0; 1 on an error (message on stderr); 2 on a usage error.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <fstream>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "herd/core/error.hpp"
#include "herd/io/checkpoint.hpp"
#include "herd/rl/agent.hpp"
#include "herd/rl/dqn.hpp"
#include "herd/rl/minatar.hpp"
#include "herd/rl/network.hpp"
#include "herd/rl/registry.hpp"
#include "herd/rl/train_config.hpp"
#include "herd/rl/trainer.hpp"

namespace {

using herd::rl::Env;

// The checkpoint's tensors named prefix + name, in the shapes of `like`.
std::vector<herd::nn::NamedTensor> load(const herd::io::CheckpointReader& r, const std::string& prefix,
                                        std::vector<herd::nn::NamedTensor> like) {
  for (auto& t : like) {
    const auto v = r.get<double>(prefix + t.name);
    if (static_cast<std::int64_t>(v.size()) != t.tensor.numel())
      throw herd::InputError("checkpoint tensor " + prefix + t.name + " has the wrong size");
    t.tensor = herd::nn::Tensor::from_vector(t.tensor.shape(), v, t.tensor.dtype());
  }
  return like;
}

std::vector<float> read_rows(const std::string& path, std::size_t dim) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw herd::InputError("cannot open " + path);
  std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  if (bytes.size() % (dim * sizeof(float)) != 0)
    throw herd::InputError(path + ": size is not a multiple of obs_dim float32 values");
  std::vector<float> rows(bytes.size() / sizeof(float));
  std::memcpy(rows.data(), bytes.data(), bytes.size());
  return rows;
}

int forward(const std::string& ckpt, const std::string& obs_path) {
  herd::io::CheckpointReader r(ckpt);
  const herd::rl::TrainConfig c = herd::rl::parse_train_config(r.string("config"));
  auto env = herd::rl::make_env(c.env);
  const std::size_t D = env->obs_dim();
  const auto rows = read_rows(obs_path, D);
  const std::size_t n = rows.size() / D;
  const auto A = env->action_space().n();
  if (c.algorithm == "dqn") {
    const herd::rl::EncoderSpec spec = c.agent.encoder();
    const auto& shape = env->observation_space().shape();
    std::int64_t features = 0;
    auto enc = herd::rl::make_encoder(shape, spec, herd::Device::cpu(),
                                      herd::RngStream(c.seed, 0, herd::RngPurpose::kInit), 0, &features);
    const std::vector<std::int64_t> in_shape =
        spec.conv.empty() ? std::vector<std::int64_t>{static_cast<std::int64_t>(D)} : shape;
    herd::rl::QNetwork q(std::move(enc), features, in_shape, A, c.dqn.dueling,
                         herd::RngStream(c.seed, 100, herd::RngPurpose::kInit), 0);
    q.load_state_dict(load(r, "online/", q.state_dict()));
    herd::nn::Tensor x(herd::nn::Shape{static_cast<std::int64_t>(n), static_cast<std::int64_t>(D)},
                       herd::nn::DType::kFloat32);
    std::memcpy(x.data<float>(), rows.data(), rows.size() * sizeof(float));
    const herd::nn::Tensor& out = q.forward(x);
    const float* v = out.data<float>();
    for (std::size_t i = 0; i < n; ++i) {
      for (std::int64_t a = 0; a < A; ++a)
        std::printf("%s%.9g", a ? " " : "", static_cast<double>(v[i * static_cast<std::size_t>(A) + a]));
      std::printf("\n");
    }
    return 0;
  }
  if (c.sampler_options.normalize_obs)
    throw herd::InputError("forward: the run normalises observations (not supported here)");
  herd::rl::AgentOptions ao = c.agent;
  ao.device = herd::Device::cpu();
  herd::rl::ActorCriticAgent agent(env->observation_space(), env->action_space(), ao);
  agent.load_state_dict(load(r, "params/", agent.state_dict()));
  std::vector<std::vector<float>> logp(static_cast<std::size_t>(A));
  std::vector<float> values;
  for (std::int64_t a = 0; a < A; ++a) {
    const std::vector<double> acts(n, static_cast<double>(a));
    agent.evaluate(rows.data(), acts.data(), n);
    logp[static_cast<std::size_t>(a)] = agent.log_probs();
    values = agent.values();
  }
  for (std::size_t i = 0; i < n; ++i) {
    for (std::int64_t a = 0; a < A; ++a)
      std::printf("%.9g ", static_cast<double>(logp[static_cast<std::size_t>(a)][i]));
    std::printf("%.9g\n", static_cast<double>(values[i]));
  }
  return 0;
}

std::string bits(const float* obs, std::size_t n) {
  std::string s(n, '0');
  for (std::size_t i = 0; i < n; ++i) s[i] = obs[i] != 0.0f ? '1' : '0';
  return s;
}

// herd's Freeway state (see MinAtarFreeway::get_state) at the start of an episode whose first
// observation is `first` ('0'/'1' per cell, [channel, row, column]): the chicken's row, the
// move cooldown and frame count of a reset, per lane the car's column, its speed class (the
// trail's channel), its direction (the trail is one cell behind the car) and a reset's timer
// (period + 1 frames to the first move); then last action 0 and step count 0.
std::vector<double> freeway_start(const std::string& first) {
  const auto lit = [&](int c, int r, int x) { return first[static_cast<std::size_t>((c * 10 + r) * 10 + x)] == '1'; };
  std::vector<double> s;
  int chicken = -1;
  for (int r = 0; r < 10; ++r)
    if (lit(0, r, 4)) chicken = r;
  s = {static_cast<double>(chicken), static_cast<double>(herd::rl::MinAtarFreeway::kMoveEvery), 0.0};
  for (int lane = 1; lane <= 8; ++lane) {
    int x = -1, period = -1, trail = -1;
    for (int c = 0; c < 10; ++c) {
      if (lit(1, lane, c)) x = c;
      for (int p = 1; p <= 5; ++p)
        if (lit(1 + p, lane, c)) period = p, trail = c;
    }
    if (x < 0 || period < 0) throw herd::InputError("replay: a Freeway lane without a car or trail");
    const int dir = (x - 1 + 10) % 10 == trail ? 1 : -1;
    s.insert(s.end(), {static_cast<double>(x), static_cast<double>(period), static_cast<double>(dir),
                       static_cast<double>(period + 1)});
  }
  s.insert(s.end(), {0.0, 0.0});
  return s;
}

int replay(const std::string& id, const std::string& script) {
  auto env = herd::rl::make_env(id);
  auto* m = dynamic_cast<herd::rl::MinAtarEnv*>(env.get());
  if (m == nullptr) throw herd::InputError(id + " is not a MinAtar game");
  m->set_sticky_action_prob(0.0);
  const std::size_t D = env->obs_dim();
  std::vector<float> obs(D);
  std::ifstream f(script);
  if (!f) throw herd::InputError("cannot open " + script);
  std::string first, actions;
  bool seeded = false;
  while (std::getline(f, first) && std::getline(f, actions)) {
    if (first.size() != D) throw herd::InputError("replay: a first observation has the wrong length");
    bool found = false;
    if (id.starts_with("MinAtar/Freeway")) {
      // Too many starts to meet by resetting: the start state from the observation.
      if (!seeded) env->reset(0, obs.data());
      seeded = true;
      env->set_state(freeway_start(first));
      env->set_elapsed_steps(0);
      m->observe(obs.data());
      found = bits(obs.data(), D) == first;
    }
    for (int k = 0; k < 4096 && !found; ++k) {
      if (seeded) env->reset(obs.data());
      else env->reset(0, obs.data());
      seeded = true;
      found = bits(obs.data(), D) == first;
    }
    if (!found) throw herd::InputError("replay: no reset of herd's game gives the episode's first observation");
    std::istringstream in(actions);
    std::int64_t a = 0;
    while (in >> a) {
      const auto s = env->step(a, obs.data());
      std::printf("%g %d %s\n", s.reward, s.terminated ? 1 : 0, bits(obs.data(), D).c_str());
      if (s.terminated) break;
    }
    std::printf("end\n");
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  try {
    if (args.size() >= 3 && args[0] == "episodes") {
      const bool stochastic = args.size() == 4 && args[3] == "--stochastic";
      if (args.size() == 4 && !stochastic) throw herd::InputError("episodes: unknown option " + args[3]);
      const auto r = herd::rl::evaluate_checkpoint(args[1], std::stoi(args[2]), stochastic, -1);
      std::printf("return,length\n");
      for (std::size_t i = 0; i < r.returns.size(); ++i)
        std::printf("%.17g,%lld\n", r.returns[i], static_cast<long long>(r.lengths[i]));
      return 0;
    }
    if (args.size() == 3 && args[0] == "forward") return forward(args[1], args[2]);
    if (args.size() == 3 && args[0] == "replay") return replay(args[1], args[2]);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_minatar_policy: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr,
               "usage: %s episodes CHECKPOINT N [--stochastic] | forward CHECKPOINT OBS_FILE | "
               "replay ENV_ID SCRIPT_FILE\n",
               argv[0]);
  return 2;
}
