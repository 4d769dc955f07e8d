#include "sampler_state.hpp"

#include <algorithm>
#include <span>

#include "herd/core/error.hpp"

namespace herd::rl::detail {

void save_sampler_state(io::CheckpointWriter& w, const std::string& p, const SamplerStateRefs& s) {
  std::vector<double> states;
  std::vector<std::uint64_t> streams;  // per env: seed, episode, elapsed
  for (std::size_t k = 0; k < s.num_envs; ++k) {
    Env& e = s.env(k);
    auto st = e.get_state();
    states.insert(states.end(), st.begin(), st.end());
    streams.push_back(e.seed());
    streams.push_back(e.episode());
    streams.push_back(static_cast<std::uint64_t>(e.elapsed_steps()));
  }
  w.add(p + "env_states", states);
  w.add(p + "env_streams", streams);
  w.add(p + "raw_obs", s.raw_obs);
  w.add(p + "obs_rms", s.obs_rms.state());
  w.add(p + "rew_rms", s.rew_norm.stats().state());
  w.add(p + "rew_returns", s.rew_norm.returns());
  w.add(p + "ep_ret", s.ep_ret);
  w.add(p + "ep_len", s.ep_len);
  w.add_value(p + "step_count", s.step_count);
}

void require_env_state_size(const std::string& where, const Env& env, std::size_t values, std::size_t num_envs) {
  const std::size_t S = env.state_dim();
  if (values != num_envs * S)
    throw InputError(where + ": the checkpoint's " + env.id() + " states have " +
                     std::to_string(values / std::max<std::size_t>(num_envs, 1)) +
                     " values per environment, but this run's have " + std::to_string(S) +
                     " (a checkpoint from a herd version with other game rules, or of an env.library rebuilt with "
                     "another state_dim)");
}

void load_sampler_state(const io::CheckpointReader& r, const std::string& p, const SamplerStateRefs& s) {
  const std::size_t B = s.num_envs;
  const auto states = r.get<double>(p + "env_states");
  const auto streams = r.get<std::uint64_t>(p + "env_streams");
  const std::size_t S = s.env(0).state_dim();
  if (streams.size() != 3 * B)
    throw InputError(std::string(s.who) + "::load: the checkpoint holds " + std::to_string(streams.size() / 3) +
                     " environments, but this sampler has " + std::to_string(B));
  require_env_state_size(std::string(s.who) + "::load", s.env(0), states.size(), B);
  auto raw = r.get<float>(p + "raw_obs");
  if (raw.size() != s.raw_obs.size())
    throw InputError(std::string(s.who) + "::load: the checkpoint's observations have " + std::to_string(raw.size()) +
                     " values, but this sampler's have " + std::to_string(s.raw_obs.size()));
  for (std::size_t k = 0; k < B; ++k) {
    Env& e = s.env(k);
    e.restore_stream(streams[3 * k], streams[3 * k + 1]);
    e.set_state(std::span<const double>(states.data() + k * S, S));
    e.set_elapsed_steps(static_cast<std::int64_t>(streams[3 * k + 2]));
  }
  s.obs_rms.set_state(r.get<double>(p + "obs_rms"));
  s.rew_norm.stats().set_state(r.get<double>(p + "rew_rms"));
  s.rew_norm.returns() = r.get<double>(p + "rew_returns");
  s.ep_ret = r.get<double>(p + "ep_ret");
  s.ep_len = r.get<std::int64_t>(p + "ep_len");
  s.step_count = r.value<std::uint64_t>(p + "step_count");
  s.raw_obs = std::move(raw);
}

}  // namespace herd::rl::detail
