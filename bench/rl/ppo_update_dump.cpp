// One PPO update of a herd-rl preset, recorded minibatch by minibatch, for
// bench/rl/ppo_update_compare.py, which runs Stable-Baselines3's update on the same inputs
// (never run in CI).
//
//   ppo_update_dump OUT.h5 [--preset TOML] [--seed S] [--input IN.h5]
//
// Without --input: builds the run `herd-rl train PRESET --set seed=S` builds (rl::Trainer:
// the same initial parameters, sampler and environments), collects its first rollout and
// runs its first update (rl::Ppo::learn: GAE, then epochs x minibatches at progress 1,
// iteration 0), exactly as the run's first iteration does. With --input: the initial
// parameters (`init/<name>`) and the rollout (`rollout/obs`, `actions`, `log_probs`,
// `values`, `rewards`, `terminated`, `last_values`, herd's layouts below) are read from
// IN.h5 (e.g. a Stable-Baselines3 rollout written by ppo_update_compare.py) instead, and
// herd's GAE and update run on them.
//
// OUT.h5 (float32 unless noted; T steps, B envs, rows t * B + b; parameter names and
// layouts as the agent's state dict: "pi.0.weight" [16, C, 3, 3] (out, in, kh, kw),
// "pi.3.weight" [128, 1024] (out, in; the conv output flattened in (channel, row, column)
// order), "pi.5.*" the logits, "vf.*" the critic alike):
//   init/<name>                 parameters before the update
//   rollout/obs [T, B, C, H, W], actions [T, B] (int64), log_probs, values, rewards,
//     terminated (uint8), truncated (uint8) [T, B], last_values [B], advantages and
//     returns [T, B] (herd's GAE)
//   update/perm [E, T * B] (uint32)     every epoch's permutation of the rows
//   update/policy_loss, value_loss, entropy, approx_kl, clip_fraction, grad_norm,
//     learning_rate [E * M] (float64)   per minibatch, in order (grad_norm before clipping)
//   update/params/<name> [E * M, ...]   parameters after each minibatch step
//   update/grad0/<name>                 the first minibatch's gradient (before clipping)
//   attributes: preset, seed, gamma, gae_lambda, clip_range, approx_kl_mean (as the
//     progress CSV's approx_kl of the first iteration)
//
// Exit status 0; 1 on an error (message on stderr); 2 on a usage error.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <utility>
#include <vector>

#include "herd/io/hdf5.hpp"
#include "herd/nn/module.hpp"
#include "herd/rl/ppo.hpp"
#include "herd/rl/registry.hpp"
#include "herd/rl/rollout_buffer.hpp"
#include "herd/rl/trainer.hpp"
#include "update_dump_h5.hpp"

namespace {

using herd::io::H5Group;
using hsize = hsize_t;

using herd::bench::shape_of;
using herd::bench::to_float;
using herd::bench::write_state;

// Reads a float dataset of exactly `n` values.
std::vector<float> read_n(const H5Group& g, const std::string& name, std::size_t n) {
  auto v = g.read<float>(name);
  if (v.size() != n)
    throw herd::InputError("ppo_update_dump: " + name + " has " + std::to_string(v.size()) + " values, expected " +
                           std::to_string(n));
  return v;
}

int usage() {
  std::fprintf(stderr, "usage: ppo_update_dump OUT.h5 [--preset TOML] [--seed S] [--input IN.h5]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') return usage();
  const std::string out_path = argv[1];
  std::string preset = std::string(HERD_EXAMPLES_DIR) + "/minatar_breakout_ppo.toml", input;
  long long seed = 0;
  for (int i = 2; i < argc; ++i) {
    if (i + 1 >= argc) return usage();
    if (!std::strcmp(argv[i], "--preset")) preset = argv[++i];
    else if (!std::strcmp(argv[i], "--seed")) seed = std::atoll(argv[++i]);
    else if (!std::strcmp(argv[i], "--input")) input = argv[++i];
    else return usage();
  }
  try {
    std::string text;
    const auto c = herd::rl::load_train_config(
        preset, {"seed=" + std::to_string(seed), "output_prefix=/tmp/ppo_update_dump_unused"}, &text);
    if (c.algorithm != "ppo") throw herd::InputError("ppo_update_dump: the preset's algorithm must be ppo");
    herd::rl::Trainer trainer(c, text);
    herd::rl::ActorCriticAgent& agent = trainer.agent();
    herd::rl::RolloutBuffer buf;
    if (input.empty()) {
      trainer.sampler().collect(agent, buf);  // as Trainer::iterate's first rollout
    } else {
      const herd::io::H5File in = herd::io::H5File::open(input);
      auto state = agent.state_dict();
      for (auto& t : state) {
        const auto v = read_n(in.root(), "init/" + t.name, static_cast<std::size_t>(t.tensor.numel()));
        t.tensor =
            herd::nn::Tensor::from_vector(t.tensor.shape(), std::vector<double>(v.begin(), v.end()), t.tensor.dtype());
      }
      agent.load_state_dict(state);
      const auto probe = herd::rl::make_env(c.env);
      const int T = c.sampler_options.num_steps, B = c.sampler_options.num_envs;
      buf.resize(T, B, probe->obs_dim(), probe->action_dim());
      const std::size_t n = buf.size();
      const H5Group r = in.open_group("rollout");
      buf.obs = read_n(r, "obs", n * buf.obs_dim);
      const auto a = r.read<std::int64_t>("actions");
      if (a.size() != n) throw herd::InputError("ppo_update_dump: rollout/actions has the wrong size");
      buf.actions.assign(a.begin(), a.end());
      buf.log_probs = read_n(r, "log_probs", n);
      buf.values = read_n(r, "values", n);
      buf.rewards = read_n(r, "rewards", n);
      const auto term = r.read<std::uint8_t>("terminated");
      if (term.size() != n) throw herd::InputError("ppo_update_dump: rollout/terminated has the wrong size");
      buf.terminated = term;
      buf.truncated.assign(n, 0);
      buf.final_values.assign(n, 0.0f);
      buf.last_values = read_n(r, "last_values", static_cast<std::size_t>(B));
    }
    herd::io::H5File f = herd::io::H5File::create(out_path);
    H5Group root = f.root();
    write_state(root.create_group("init"), agent.state_dict());

    herd::rl::Ppo ppo(agent, c.ppo);
    const std::size_t E = static_cast<std::size_t>(c.ppo.epochs), n = buf.size();
    std::vector<std::uint32_t> perm;
    std::vector<double> cols[7];  // policy, value, entropy, kl, clip fraction, grad norm, lr
    std::vector<std::vector<float>> params;
    std::vector<herd::nn::NamedTensor> grad0;
    auto named = agent.named_parameters();
    params.resize(named.size());
    ppo.set_minibatch_observer([&](const herd::rl::MinibatchRecord& m) {
      perm.insert(perm.end(), m.samples.begin(), m.samples.end());  // minibatches are consecutive slices
      const double v[7] = {m.loss.policy,        m.loss.value, m.loss.entropy, m.loss.approx_kl,
                           m.loss.clip_fraction, m.grad_norm,  m.learning_rate};
      for (int k = 0; k < 7; ++k) cols[k].push_back(v[k]);
      const double clip = c.ppo.max_grad_norm, coef = clip > 0 ? clip / (m.grad_norm + 1e-6) : 1.0;
      for (std::size_t p = 0; p < named.size(); ++p) {
        const auto x = named[p].param->value.to_vector();
        params[p].insert(params[p].end(), x.begin(), x.end());
        if (m.epoch == 0 && m.index == 0) {
          auto g = named[p].param->grad.to_vector();
          if (coef < 1.0)
            for (auto& y : g) y /= coef;  // undo the clipping: the gradient the loss gave
          grad0.push_back({named[p].name, herd::nn::Tensor::from_vector(named[p].param->grad.shape(), g)});
        }
      }
    });
    const herd::rl::UpdateStats st = ppo.learn(buf, c.gamma, c.gae_lambda, 1.0, 0);

    const int T = buf.steps, B = buf.envs;
    H5Group r = root.create_group("rollout");
    const auto probe = herd::rl::make_env(c.env);
    std::vector<hsize> obs_shape = {static_cast<hsize>(T), static_cast<hsize>(B)};
    for (const auto d : probe->observation_space().shape()) obs_shape.push_back(static_cast<hsize>(d));
    const std::vector<hsize> tb = {static_cast<hsize>(T), static_cast<hsize>(B)};
    r.write("obs", buf.obs, obs_shape);
    r.write("actions", std::vector<std::int64_t>(buf.actions.begin(), buf.actions.end()), tb);
    r.write("log_probs", buf.log_probs, tb);
    r.write("values", buf.values, tb);
    r.write("rewards", buf.rewards, tb);
    r.write("terminated", buf.terminated, tb);
    r.write("truncated", buf.truncated, tb);
    r.write("last_values", buf.last_values);
    r.write("advantages", buf.advantages, tb);
    r.write("returns", buf.returns, tb);

    H5Group u = root.create_group("update");
    const std::size_t steps = cols[0].size();
    if (perm.size() != E * n) throw herd::Error("ppo_update_dump: the observer missed an epoch's permutation");
    u.write("perm", perm, {static_cast<hsize>(E), static_cast<hsize>(n)});
    const char* names[7] = {"policy_loss",   "value_loss", "entropy",      "approx_kl",
                            "clip_fraction", "grad_norm",  "learning_rate"};
    for (int k = 0; k < 7; ++k) u.write(names[k], cols[k]);
    H5Group pg = u.create_group("params");
    H5Group gg = u.create_group("grad0");
    for (std::size_t p = 0; p < named.size(); ++p) {
      std::vector<hsize> s = {static_cast<hsize>(steps)};
      for (const auto d : shape_of(named[p].param->value)) s.push_back(d);
      pg.write(named[p].name, params[p], s);
    }
    write_state(std::move(gg), grad0);
    root.write_scalar("seed", static_cast<std::int64_t>(seed));
    root.write_scalar("gamma", c.gamma);
    root.write_scalar("gae_lambda", c.gae_lambda);
    root.write_scalar("clip_range", c.ppo.clip_range);
    root.write_scalar("approx_kl_mean", st.approx_kl);
    root.write_scalar("clip_fraction_mean", st.clip_fraction);
    root.write_strings("preset", {preset});
    std::printf("ppo_update_dump: %s: %zu minibatch steps, approx_kl %.6g, clip_fraction %.6g, policy_loss %.6g\n",
                out_path.c_str(), steps, st.approx_kl, st.clip_fraction, st.policy_loss);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ppo_update_dump: %s\n", e.what());
    return 1;
  }
}
