#pragma once
/// @file advantage.hpp
/// Generalized advantage estimation (Schulman et al. 2016, "High-dimensional continuous
/// control using generalized advantage estimation") on time-major rollouts `[T, B]`, with
/// time limits done right: a *terminated* step has next value 0, a *truncated* step is
/// bootstrapped from the value of its final observation (Pardo et al. 2018, "Time limits in
/// reinforcement learning"), and no trace crosses an episode boundary.

#include <cstddef>
#include <cstdint>

#include "herd/core/host_device.hpp"

namespace herd::rl {

/// Inputs of `compute_gae`. All arrays are host memory, row-major time-major `[T, B]`
/// (element (t, b) at `t * B + b`) unless stated otherwise.
struct GaeInputs {
  int steps = 0;                             ///< T: rollout length in steps
  int envs = 0;                              ///< B: number of environments
  const float* rewards = nullptr;            ///< r_t, `[T, B]`
  const float* values = nullptr;             ///< V(s_t), `[T, B]`
  const std::uint8_t* terminated = nullptr;  ///< 1 where step t ended the episode in a terminal state
  const std::uint8_t* truncated = nullptr;   ///< 1 where step t ended the episode by a time limit
  /// V(final observation) where `truncated` is 1 (ignored elsewhere), `[T, B]`; may be null
  /// only if no step is truncated.
  const float* final_values = nullptr;
  const float* last_values = nullptr;  ///< V(s_T) of the observation after the rollout, `[B]`
  float gamma = 0.99f;                 ///< discount in [0, 1]
  float lambda = 0.95f;                ///< GAE lambda in [0, 1]
};

/// One step of the GAE recursion, shared by `compute_gae` and the device kernel
/// (herd/rl/cuda/ppo_kernels.hpp) so that both do the same double arithmetic in the same
/// order (the device code is compiled without fused multiply-add): returns
/// A_t = (r_t + gamma next_t - V(s_t)) + (episode_end ? 0 : gamma_lambda A_{t+1}).
HERD_HOST_DEVICE inline double gae_step(double reward, double value, double next, bool episode_end, double gamma,
                                        double gamma_lambda, double next_advantage) {
  const double delta = reward + gamma * next - value;
  return delta + (episode_end ? 0.0 : gamma_lambda * next_advantage);
}

/// Computes advantages A_t and returns R_t = A_t + V(s_t) (the value targets), `[T, B]` each:
///   next_t = 0 if terminated, V(final obs) if truncated, V(s_{t+1}) otherwise (last_values at T-1);
///   delta_t = r_t + gamma * next_t - V(s_t);
///   A_t = delta_t + gamma * lambda * (1 - done_t) * A_{t+1}, done = terminated or truncated.
/// Accumulates in double. NaN in the inputs propagates to the outputs of the affected env.
/// Thread-safe (pure). O(T B).
/// @throws herd::InputError for non-positive sizes, null arrays, gamma or lambda outside [0, 1],
///         or a truncated step without `final_values`.
void compute_gae(const GaeInputs& in, float* advantages, float* returns);

/// Normalises `x[0..n)` in place to mean 0 and standard deviation 1 (population sd, plus
/// `eps` = 1e-8 in the denominator, as Stable-Baselines3). A single element (n = 1) becomes
/// 0, never NaN. Thread-safe (pure).
void normalize_advantages(float* x, std::size_t n, float eps = 1e-8f);

}  // namespace herd::rl
