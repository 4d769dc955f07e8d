// Consecutive DQN gradient steps of a herd-rl preset, recorded step by step, for
// bench/rl/dqn_update_compare.py, which runs Stable-Baselines3's DQN update on the same
// inputs (never run in CI).
//
//   dqn_update_dump OUT.h5 [--preset TOML] [--seed S] [--start F] [--steps K]
//
// Builds the run `herd-rl train PRESET --set seed=S` builds (rl::DqnTrainer: the same
// initial networks, environment, exploration and replay streams), steps it frame by frame
// (sampler.num_steps = 1, which changes only where the curve's rows fall, not what is
// learnt) and records the K gradient steps taken at frames F, ..., F + K - 1 through
// `Dqn::set_step_observer` (the trainer trains at frame f after that frame's env step and
// target update). Defaults: the MinAtar Breakout DQN preset, seed 0, F = 5990, K = 50 (so
// the target copy at frame 6000 falls inside the window).
//
// OUT.h5 (float32 unless noted; parameter names and layouts as the Q-network's state dict:
// "encoder.0.weight" [16, C, 3, 3] (out, in, kh, kw), "encoder.3.weight" [128, 1024] (out,
// in; the conv output flattened in (channel, row, column) order), "q.*" the Q head):
//   init/online/<name>, init/target/<name>   the networks before the first recorded step
//   init/optimizer/<name>                    the optimizer state then (nn::Optimizer::state:
//                                            "step", "lr" and "<param>.square_avg",
//                                            "<param>.grad_avg" for centred RMSprop)
//   step/frame [K] (int64)                   frame (env steps) of each recorded step
//   step/gradient_step [K] (int64)           its 0-based gradient step
//   step/obs, step/next_obs [K, N, C, H, W]  the sampled minibatch (N = batch_size)
//   step/actions [K, N] (int64), step/returns, step/discounts, step/weights [K, N] (float64)
//   step/indices [K, N] (uint64)             replay slots
//   step/targets, step/td_errors [K, N] (float64)   TD targets y; Q(s, a) - y before the step
//   step/loss, step/q_mean, step/target_mean [K] (float64)
//   step/grad/<name> [K, ...]                the step's gradient (not clipped: the preset does not clip)
//   step/params/<name> [K, ...]              the online parameters after the step
//   step/target/<name> [K, ...]              the target parameters the step used
//   frame/epsilon [F + K - 1] (float64)      DqnTrainer::epsilon() before frame f's action (index f - 1)
//   frame/gradient_steps [F + K - 1] (int64) gradient steps done after frame f
//   frame/target_changed [F + K - 1] (uint8) whether frame f changed the target network
//   schedule/epsilon [total_steps + 1] (float64)  exploration_epsilon(t, ...) for t = 0..total_steps
//   attributes (scalar datasets): seed, gamma, total_steps, learning_starts,
//     target_update_interval, exploration_*; preset (string)
//
// Exit status 0; 1 on an error (message on stderr); 2 on a usage error.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "herd/io/hdf5.hpp"
#include "herd/rl/dqn.hpp"
#include "herd/rl/dqn_trainer.hpp"
#include "herd/rl/registry.hpp"
#include "update_dump_h5.hpp"

namespace {

using herd::io::H5Group;
using hsize = hsize_t;

using herd::bench::shape_of;
using herd::bench::to_float;
using herd::bench::write_state;

// The network's parameter values, concatenated in state-dict order.
std::vector<float> flat_values(herd::rl::QNetwork& q) {
  std::vector<float> out;
  for (const auto& p : q.named_parameters()) {
    const float* v = p.param->value.data<float>();
    out.insert(out.end(), v, v + p.param->value.numel());
  }
  return out;
}

// Per-parameter rows [K, shape...] recorded step by step.
struct Rows {
  std::vector<std::string> names;
  std::vector<std::vector<hsize>> shapes;
  std::vector<std::vector<float>> data;
  explicit Rows(herd::rl::QNetwork& q) {
    for (const auto& p : q.named_parameters()) {
      names.push_back(p.name);
      shapes.push_back(shape_of(p.param->value));
    }
    data.resize(names.size());
  }
  void write(H5Group&& g, std::size_t k) const {
    for (std::size_t i = 0; i < names.size(); ++i) {
      std::vector<hsize> s = {static_cast<hsize>(k)};
      s.insert(s.end(), shapes[i].begin(), shapes[i].end());
      g.write(names[i], data[i], s);
    }
  }
};

int usage() {
  std::fprintf(stderr, "usage: dqn_update_dump OUT.h5 [--preset TOML] [--seed S] [--start F] [--steps K]\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argv[1][0] == '-') return usage();
  const std::string out_path = argv[1];
  std::string preset = std::string(HERD_EXAMPLES_DIR) + "/minatar_breakout_dqn.toml";
  long long seed = 0, start = 5990, K = 50;
  for (int i = 2; i < argc; ++i) {
    if (i + 1 >= argc) return usage();
    if (!std::strcmp(argv[i], "--preset")) preset = argv[++i];
    else if (!std::strcmp(argv[i], "--seed")) seed = std::atoll(argv[++i]);
    else if (!std::strcmp(argv[i], "--start")) start = std::atoll(argv[++i]);
    else if (!std::strcmp(argv[i], "--steps")) K = std::atoll(argv[++i]);
    else return usage();
  }
  if (start < 1 || K < 1) return usage();
  try {
    std::string text;
    const auto c = herd::rl::load_train_config(
        preset, {"seed=" + std::to_string(seed), "sampler.num_steps=1", "output_prefix=/tmp/dqn_update_dump_unused"},
        &text);
    if (c.algorithm != "dqn") throw herd::InputError("dqn_update_dump: the preset's algorithm must be dqn");
    if (c.sampler_options.num_envs != 1) throw herd::InputError("dqn_update_dump: the preset must have one env");
    if (c.dqn.learning_starts > start || c.dqn.train_freq != 1 || c.dqn.gradient_steps != 1)
      throw herd::InputError("dqn_update_dump: needs train_freq = gradient_steps = 1 and --start >= learning_starts");
    if (start + K - 1 > c.total_steps) throw herd::InputError("dqn_update_dump: --start + --steps exceeds total_steps");
    herd::rl::DqnTrainer trainer(c, text);
    herd::rl::QNetwork& online = trainer.q_network();
    herd::rl::QNetwork& target = trainer.target_network();
    herd::rl::Dqn& dqn = trainer.dqn();
    const auto F = static_cast<std::size_t>(start + K - 1);

    std::vector<double> eps(F);
    std::vector<std::int64_t> gsteps(F);
    std::vector<std::uint8_t> changed(F);
    std::vector<float> prev_target = flat_values(target);
    auto frame = [&] {  // one frame (one iteration of one vector step), with its bookkeeping
      const auto f = static_cast<std::size_t>(trainer.env_steps());
      eps[f] = trainer.epsilon();
      trainer.iterate();
      gsteps[f] = static_cast<std::int64_t>(trainer.gradient_steps());
      std::vector<float> now = flat_values(target);
      changed[f] = now != prev_target ? 1 : 0;
      prev_target = std::move(now);
    };
    while (trainer.env_steps() < start - 1) frame();

    herd::io::H5File f = herd::io::H5File::create(out_path);
    H5Group root = f.root();
    write_state(root.create_group("init/online"), online.state_dict());
    write_state(root.create_group("init/target"), target.state_dict());
    write_state(root.create_group("init/optimizer"), dqn.optimizer().state());

    Rows grads(online), params(online), targets_used(target);
    std::vector<std::int64_t> frames, step_index, actions;
    std::vector<float> obs, next_obs;
    std::vector<double> returns, discounts, weights, y, td, loss, q_mean, target_mean;
    std::vector<std::uint64_t> indices;
    std::size_t N = 0;
    dqn.set_step_observer([&](const herd::rl::DqnStepRecord& r) {
      const herd::rl::ReplaySample& b = *r.batch;
      N = b.actions.size();
      frames.push_back(trainer.env_steps());
      step_index.push_back(static_cast<std::int64_t>(trainer.gradient_steps()));  // counted after the step: 0-based
      obs.insert(obs.end(), b.obs.begin(), b.obs.end());
      next_obs.insert(next_obs.end(), b.next_obs.begin(), b.next_obs.end());
      actions.insert(actions.end(), b.actions.begin(), b.actions.end());
      returns.insert(returns.end(), b.returns.begin(), b.returns.end());
      discounts.insert(discounts.end(), b.discounts.begin(), b.discounts.end());
      weights.insert(weights.end(), b.weights.begin(), b.weights.end());
      indices.insert(indices.end(), b.indices.begin(), b.indices.end());
      y.insert(y.end(), r.targets.begin(), r.targets.end());
      td.insert(td.end(), r.td_errors.begin(), r.td_errors.end());
      loss.push_back(r.stats.loss);
      q_mean.push_back(r.stats.q_mean);
      target_mean.push_back(r.stats.target_mean);
      const auto op = online.named_parameters();
      const auto tp = target.named_parameters();
      for (std::size_t i = 0; i < op.size(); ++i) {
        const auto& p = *op[i].param;
        grads.data[i].insert(grads.data[i].end(), p.grad.data<float>(), p.grad.data<float>() + p.grad.numel());
        params.data[i].insert(params.data[i].end(), p.value.data<float>(), p.value.data<float>() + p.value.numel());
        const auto& t = tp[i].param->value;
        targets_used.data[i].insert(targets_used.data[i].end(), t.data<float>(), t.data<float>() + t.numel());
      }
    });
    while (trainer.env_steps() < static_cast<std::int64_t>(F)) frame();
    dqn.set_step_observer({});
    if (frames.size() != static_cast<std::size_t>(K))
      throw herd::Error("dqn_update_dump: recorded " + std::to_string(frames.size()) + " steps, expected " +
                        std::to_string(K));

    const auto probe = herd::rl::make_env(c.env);
    H5Group s = root.create_group("step");
    const auto Kh = static_cast<hsize>(K), Nh = static_cast<hsize>(N);
    std::vector<hsize> obs_shape = {Kh, Nh};
    for (const auto d : probe->observation_space().shape()) obs_shape.push_back(static_cast<hsize>(d));
    s.write("frame", frames);
    s.write("gradient_step", step_index);
    s.write("obs", obs, obs_shape);
    s.write("next_obs", next_obs, obs_shape);
    s.write("actions", actions, {Kh, Nh});
    s.write("returns", returns, {Kh, Nh});
    s.write("discounts", discounts, {Kh, Nh});
    s.write("weights", weights, {Kh, Nh});
    s.write("indices", indices, {Kh, Nh});
    s.write("targets", y, {Kh, Nh});
    s.write("td_errors", td, {Kh, Nh});
    s.write("loss", loss);
    s.write("q_mean", q_mean);
    s.write("target_mean", target_mean);
    grads.write(s.create_group("grad"), static_cast<std::size_t>(K));
    params.write(s.create_group("params"), static_cast<std::size_t>(K));
    targets_used.write(s.create_group("target"), static_cast<std::size_t>(K));

    H5Group fr = root.create_group("frame");
    fr.write("epsilon", eps);
    fr.write("gradient_steps", gsteps);
    fr.write("target_changed", changed);
    const herd::rl::DqnOptions& q = c.dqn;
    std::vector<double> sched(static_cast<std::size_t>(c.total_steps) + 1);
    for (std::size_t t = 0; t < sched.size(); ++t)
      sched[t] = herd::rl::exploration_epsilon(static_cast<std::int64_t>(t), c.total_steps, q.exploration_initial_eps,
                                               q.exploration_final_eps, q.exploration_fraction);
    root.create_group("schedule").write("epsilon", sched);
    root.write_scalar("seed", static_cast<std::int64_t>(seed));
    root.write_scalar("gamma", q.gamma);
    root.write_scalar("total_steps", static_cast<std::int64_t>(c.total_steps));
    root.write_scalar("learning_starts", static_cast<std::int64_t>(q.learning_starts));
    root.write_scalar("target_update_interval", static_cast<std::int64_t>(q.target_update_interval));
    root.write_scalar("exploration_initial_eps", q.exploration_initial_eps);
    root.write_scalar("exploration_final_eps", q.exploration_final_eps);
    root.write_scalar("exploration_fraction", q.exploration_fraction);
    root.write_strings("preset", {preset});
    std::int64_t first_step = -1;
    for (std::size_t i = 0; i < F && first_step < 0; ++i)
      if (gsteps[i] > 0) first_step = static_cast<std::int64_t>(i) + 1;
    std::string copies;
    for (std::size_t i = 0; i < F; ++i)
      if (changed[i]) copies += " " + std::to_string(i + 1);
    std::printf(
        "dqn_update_dump: %s: %lld steps at frames %lld-%lld; first gradient step at frame %lld; "
        "target changed at frames%s\n",
        out_path.c_str(), K, start, start + K - 1, static_cast<long long>(first_step), copies.c_str());
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "dqn_update_dump: %s\n", e.what());
    return 1;
  }
}
