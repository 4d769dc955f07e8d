#pragma once
/// @file wrappers.hpp
/// Environment wrappers as Gymnasium 1.x and Stable-Baselines3 users know them, applied to
/// each environment inside the EnvPool's batch step (so the pool writes wrapped rows
/// straight into its batch, on its threads, with its auto-reset rule):
///
/// - **time limit** (Gymnasium `TimeLimit`): `truncated` after `max_episode_steps` steps of
///   the game (not of a life), never `terminated`;
/// - **episodic life** (SB3 `EpisodicLifeEnv`, Mnih et al. 2015): losing a life ends the
///   agent's episode (`terminated`) while the game goes on; the next reset continues the
///   game with one no-op step instead of starting a new one, unless the game was really
///   over (terminated or truncated). Only for environments with lives (`Env::has_lives`);
/// - **reward clipping** (SB3 `ClipRewardEnv`, Atari DQN): reward -> sign(reward) in
///   {-1, 0, +1} (NaN stays NaN);
/// - **frame stack** (Gymnasium `FrameStackObservation` with its default
///   `padding_type="reset"`): the observation is the last k observations, oldest first,
///   concatenated along the first axis: `[k * C, H, W]` for an image `[C, H, W]` (the
///   channel axis), `[k * D]` for a vector `[D]`; a reset fills all k slots with the first
///   observation (SB3's `VecFrameStack` fills zeros instead).
///
/// Order, innermost first: env, time limit, episodic life, reward clipping, frame stack (as
/// SB3's Atari wrappers with a `VecFrameStack`). The observation dtype (uint8 or float32 in
/// the batch) is the EnvPool's `obs_dtype`, not a wrapper.
///
/// Episode returns that a sampler reports from a wrapped env are the wrapped env's: clipped
/// rewards, one life per episode.

#include <cstdint>
#include <memory>
#include <string>

#include "herd/rl/env.hpp"

namespace herd::rl {

/// Which wrappers to apply (the defaults apply none).
struct WrapperOptions {
  int frame_stack = 1;                  ///< k observations stacked (1: none); 1 <= k <= 64
  bool clip_reward = false;             ///< reward -> sign(reward)
  bool episodic_life = false;           ///< a lost life ends the episode (envs with lives)
  std::int64_t max_episode_steps = -1;  ///< time limit (-1: the env's registered one; 0: none)
  /// Whether any wrapper (or time-limit override) is asked for.
  bool any() const { return frame_stack != 1 || clip_reward || episodic_life || max_episode_steps != -1; }
};

/// Wraps `env` (which must not have been reset yet) as `options` says; returns it unchanged
/// when `options.any()` is false, and with only its time limit changed when only that is
/// asked for. The wrapped env has the inner env's id, action space, global id and reset
/// streams (its randomness is the inner env's), the stacked observation space (bounds
/// repeated k times, shape as above), and state `[inner state..., stacked frames (k > 1:
/// k * obs_dim values), lives at the last step, game over flag, game steps]`, so a
/// checkpoint restores it exactly.
/// @throws herd::InputError naming the env and value when frame_stack is not in [1, 64],
///         max_episode_steps < -1, or episodic_life is asked of an env without lives.
std::unique_ptr<Env> wrap_env(std::unique_ptr<Env> env, const WrapperOptions& options);

/// The id `register_wrapped_env` registers: `id` when no wrapper is asked for, else
/// `<id>[frame_stack=4,clip_reward,episodic_life,max_episode_steps=1000]` (the asked ones).
std::string wrapped_env_id(const std::string& id, const WrapperOptions& options);

/// Registers `wrapped_env_id(id, options)` (unless it is `id` itself) with a factory that
/// wraps `make_env(id)`, so the EnvPool, samplers, trainer and evaluation make wrapped envs
/// by id; returns that id. Checks the options on one instance first. Thread-safe.
/// @throws herd::InputError for an unknown id and as `wrap_env`.
std::string register_wrapped_env(const std::string& id, const WrapperOptions& options);

}  // namespace herd::rl
