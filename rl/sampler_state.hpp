#pragma once
// Private to rl/: the checkpointed state that every `Sampler` shares (env states and reset
// streams, current raw observations, normalisers, episode accumulators, policy-draw
// counter), saved and restored in one place so that the samplers' checkpoints stay
// interchangeable.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "herd/io/checkpoint.hpp"
#include "herd/rl/env.hpp"
#include "herd/rl/running_mean_std.hpp"

namespace herd::rl::detail {

/// References to a sampler's checkpointed members. `env(k)` gives env k of `num_envs`
/// (global order); `who` names the sampler in error messages.
struct SamplerStateRefs {
  const char* who;
  std::size_t num_envs;
  std::function<Env&(std::size_t)> env;
  std::vector<float>& raw_obs;  ///< `[num_envs, obs_dim]`
  RunningMeanStd& obs_rms;
  RewardNormalizer& rew_norm;
  std::vector<double>& ep_ret;
  std::vector<std::int64_t>& ep_len;
  std::uint64_t& step_count;
};

/// Adds the state under `prefix` (sections env_states, env_streams, raw_obs, obs_rms,
/// rew_rms, rew_returns, ep_ret, ep_len, step_count).
void save_sampler_state(io::CheckpointWriter& w, const std::string& prefix, const SamplerStateRefs& s);

/// Checks that a checkpoint's env states (`values` doubles for `num_envs` envs) have `env`'s
/// state size per env. @throws herd::InputError naming `where`, the env id and both sizes
/// (a checkpoint from a version whose game state had another layout).
void require_env_state_size(const std::string& where, const Env& env, std::size_t values, std::size_t num_envs);

/// Restores what `save_sampler_state` wrote, raw observations included; checks the sizes
/// before anything is changed. @throws herd::InputError on a mismatch, herd::IoError for a
/// missing section.
void load_sampler_state(const io::CheckpointReader& r, const std::string& prefix, const SamplerStateRefs& s);

}  // namespace herd::rl::detail
