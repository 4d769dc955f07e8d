#pragma once
#include "herd/core/cxx20.hpp"  // C++20 or one clear error
/// @file rollout_buffer.hpp
/// `RolloutBuffer`: the time-major `[T, B]` storage of one batch of on-policy experience
/// (Stooke & Abbeel 2018, "Accelerated methods for deep reinforcement learning": samplers
/// write `[T, B]` arrays that the algorithm reads as one batch of T*B samples).

#include <cstddef>
#include <cstdint>
#include <vector>

namespace herd::rl {

/// One rollout of T steps of B environments. Every array is host memory, row-major and
/// time-major: element (t, b) of a `[T, B]` array is at `t * B + b`, and row (t, b) of a
/// `[T, B, D]` array starts at `(t * B + b) * D`.
///
/// Thread-safety: a plain value; one writer (the sampler) then one reader (the algorithm).
struct RolloutBuffer {
  int steps = 0;               ///< T: steps per environment
  int envs = 0;                ///< B: environments
  std::size_t obs_dim = 0;     ///< components of one observation
  std::size_t action_dim = 0;  ///< components of one action (1 for a discrete space)

  std::vector<float> obs;                ///< `[T, B, obs_dim]` (normalised when enabled) observations the policy saw
  std::vector<double> actions;           ///< `[T, B, action_dim]` actions taken (unclipped samples)
  std::vector<float> log_probs;          ///< `[T, B]` log pi_old(a_t | s_t)
  std::vector<float> values;             ///< `[T, B]` V_old(s_t)
  std::vector<float> rewards;            ///< `[T, B]` rewards (scaled when reward normalisation is on)
  std::vector<std::uint8_t> terminated;  ///< `[T, B]` 1 where step t reached a terminal state
  std::vector<std::uint8_t> truncated;   ///< `[T, B]` 1 where a time limit ended the episode
  std::vector<float> final_values;       ///< `[T, B]` V(final observation) where truncated, else 0
  std::vector<float> last_values;        ///< `[B]` V(s_T), the observation after the rollout
  std::vector<float> advantages;         ///< `[T, B]` GAE advantages (after `compute_advantages`)
  std::vector<float> returns;            ///< `[T, B]` value targets advantages + values

  /// Sizes every array for T steps of B envs (contents unspecified).
  /// @throws herd::InputError unless steps, envs, obs_dim and action_dim are positive.
  void resize(int steps, int envs, std::size_t obs_dim, std::size_t action_dim);
  /// Number of samples T * B.
  std::size_t size() const { return static_cast<std::size_t>(steps) * static_cast<std::size_t>(envs); }
  /// Fills `advantages` and `returns` by GAE(gamma, lambda) with time limits done right
  /// (Schulman et al. 2016; Pardo et al. 2018): see `compute_gae`.
  /// @throws herd::InputError for gamma or lambda outside [0, 1].
  void compute_advantages(double gamma, double lambda);
};

}  // namespace herd::rl
