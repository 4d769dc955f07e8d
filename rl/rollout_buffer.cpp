#include "herd/rl/rollout_buffer.hpp"

#include "herd/core/error.hpp"
#include "herd/rl/advantage.hpp"

namespace herd::rl {

void RolloutBuffer::resize(int t, int b, std::size_t od, std::size_t ad) {
  if (t < 1 || b < 1 || od < 1 || ad < 1)
    throw InputError("rl::RolloutBuffer::resize: steps, envs, obs_dim and action_dim must be positive");
  steps = t;
  envs = b;
  obs_dim = od;
  action_dim = ad;
  const std::size_t n = size();
  obs.resize(n * od);
  actions.resize(n * ad);
  log_probs.resize(n);
  values.resize(n);
  rewards.resize(n);
  terminated.resize(n);
  truncated.resize(n);
  final_values.resize(n);
  last_values.resize(static_cast<std::size_t>(b));
  advantages.resize(n);
  returns.resize(n);
}

void RolloutBuffer::compute_advantages(double gamma, double lambda) {
  GaeInputs in;
  in.steps = steps;
  in.envs = envs;
  in.rewards = rewards.data();
  in.values = values.data();
  in.terminated = terminated.data();
  in.truncated = truncated.data();
  in.final_values = final_values.data();
  in.last_values = last_values.data();
  in.gamma = static_cast<float>(gamma);
  in.lambda = static_cast<float>(lambda);
  compute_gae(in, advantages.data(), returns.data());
}

}  // namespace herd::rl
