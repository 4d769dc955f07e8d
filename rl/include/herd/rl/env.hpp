#pragma once
/// @file env.hpp
/// The environment interface (Gymnasium 1.4.0's `Env` with its `TimeLimit` wrapper), with
/// reset draws from herd's counter-based RNG streams.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "herd/core/rng.hpp"
#include "herd/rl/spaces.hpp"

namespace herd::rl {

/// float32 observation values to uint8 (the EnvPool's uint8 batches): rounded to the
/// nearest integer (halves up) and saturated to [0, 255]; NaN becomes 0. Exact for the
/// integer observations uint8 batches are meant for (MinAtar's 0/1 grids, pixels).
/// @param src `[n]` float32; @param dst `[n]` uint8. Thread-safe.
void obs_to_u8(const float* src, std::size_t n, std::uint8_t* dst);

/// uint8 observations to float32 (a network's input, a replay buffer's sample):
/// `dst[i] = scale * src[i]` (scale 1: the values; 1/255: pixels in [0, 1], as SB3's
/// image preprocessing). @param src `[n]` uint8; @param dst `[n]` float32. Thread-safe.
void obs_to_f32(const std::uint8_t* src, std::size_t n, float* dst, float scale = 1.0f);

/// Outcome of one step, besides the observation (written to the caller's buffer).
struct StepResult {
  double reward = 0.0;      ///< reward of the step (float64, as Gymnasium's Python floats)
  bool terminated = false;  ///< the MDP reached a terminal state
  bool truncated = false;   ///< the time limit ended the episode (Gymnasium `TimeLimit`)
};

/// An environment's time limit and step count in the current episode (inside `Env`, or an
/// `EnvStore`'s element, touched by every step). A plain value; thread-safety as its env's.
struct EpisodeClock {
  std::int64_t elapsed = 0;  ///< steps taken in the current episode
  std::int64_t limit = 0;    ///< steps after which a step is truncated (0: no limit)
  /// Counts one step; returns whether the time limit is reached (`Env::step`'s truncation).
  bool count_step() {
    ++elapsed;
    return limit > 0 && elapsed >= limit;
  }
};

/// An environment's position in its reset stream (inside `Env`, or an `EnvStore`'s element,
/// touched by resets). A plain value; thread-safety as its env's.
struct ResetStream {
  std::uint64_t episode = 0;                      ///< episode number within `stream`
  RngStream stream{0, 0, RngPurpose::kEnvReset};  ///< the reset stream
  bool has_reset = false;                         ///< a reset (or a state) came first; steps are valid
  /// Moves to the next episode (after a first reset) and returns the cursor of its reset
  /// draws (the caller restarts the step count).
  RngCursor next_episode() {
    ++episode;
    return stream.at(episode);
  }
};

/// The per-env state of a batch of environments of one type kept in structure-of-arrays
/// form (one dense array per state component; element k belongs to env k of the batch), as
/// `Env::make_store` makes it for an `EnvPool`. While the store lives, each of its
/// environments reads and writes its state and episode bookkeeping (`EpisodeClock`,
/// `ResetStream`) in the store's arrays instead of its own members, so every `Env` call on
/// it (`step`, `reset`, `get_state`, `set_state`, `set_elapsed_steps`, checkpoints) behaves
/// as before; `step` and `reset_done` (below) work on a range of them without touching the
/// objects. The destructor moves the values back into the objects, which must still exist
/// then. Not copyable.
///
/// Thread-safety: `step` on disjoint ranges may run on different threads at once; an env
/// must not be used through its own interface while a `step` range holding it runs.
class EnvStore {
 public:
  virtual ~EnvStore() = default;
  EnvStore(const EnvStore&) = delete;
  EnvStore& operator=(const EnvStore&) = delete;
  /// Number of environments in the store.
  std::size_t size() const { return size_; }
  /// Steps envs [b, e) of the store (b < e <= size()) with valid actions, bit-identical with
  /// `step_unchecked` on each env (time limit included).
  /// @param actions `[e - b, action_dim]`; @param obs `[e - b, obs_dim]` output rows
  /// @param rewards, terminated, truncated `[e - b]` outputs (flags 0 or 1)
  virtual void step(std::size_t b, std::size_t e, const double* actions, float* obs, double* rewards,
                    std::uint8_t* terminated, std::uint8_t* truncated) = 0;
  /// Resets each env k of [b, e) whose `terminated[k - b]` or `truncated[k - b]` is nonzero
  /// as `Env::reset(obs)` does (the next episode of its stream), bit-identically, writing
  /// its first observation to row k - b of `obs` (`[e - b, obs_dim]`; other rows untouched).
  /// When `final_obs` (`[e - b, obs_dim]`) is not null, row k - b of `obs` is first copied
  /// to row k - b of `final_obs` for each such env (the episode's last observation; other
  /// rows untouched).
  virtual void reset_done(std::size_t b, std::size_t e, const std::uint8_t* terminated, const std::uint8_t* truncated,
                          float* obs, float* final_obs) = 0;

 protected:
  /// @param size number of environments
  explicit EnvStore(std::size_t size) : size_(size) {}

 private:
  std::size_t size_;
};

/// One environment instance: spaces, `reset`, `step`, internal state, time limit.
///
/// Observations are float32 vectors `[obs_dim]` written into a caller-owned buffer (so a
/// pool writes straight into its batch). Actions are float64 vectors `[action_dim]`; a
/// `Discrete` action is one float64 holding an integer (or use the `int64` overload).
///
/// Time limit: `step` counts the steps of the episode and sets `truncated` when the count
/// reaches `max_episode_steps()` (0: no limit), as Gymnasium's `TimeLimit` does; both flags
/// may be set on the same step.
///
/// Randomness: the reset distribution (as Gymnasium's) is drawn from
/// `RngStream(seed, global_id(), RngPurpose::kEnvReset).at(episode)`, where `episode` counts
/// the resets since the last seeded reset (0, 1, 2, ...). So an episode's start depends only
/// on (seed, global id, episode number), never on threads or call order. An unseeded first
/// reset uses seed 0.
///
/// Thread-safety: one instance must not be used by two threads at once; distinct instances
/// are independent (user C environments may declare otherwise, see `c_env.h`).
class Env {
 public:
  virtual ~Env() = default;
  Env(const Env&) = delete;
  Env& operator=(const Env&) = delete;

  /// Registered id, for example "CartPole-v1".
  const std::string& id() const { return id_; }
  /// Observation space (a float32 `Box`).
  const Space& observation_space() const { return obs_space_; }
  /// Action space (`Discrete` or `Box`).
  const Space& action_space() const { return action_space_; }
  /// Components of one observation.
  std::size_t obs_dim() const { return obs_space_.dim(); }
  /// Components of one action (1 for `Discrete`).
  std::size_t action_dim() const { return action_space_.dim(); }
  /// Number of float64 values of the internal state (`get_state`).
  std::size_t state_dim() const { return state_dim_; }

  /// Steps after which `step` reports `truncated` (0: no limit).
  std::int64_t max_episode_steps() const { return clock_->limit; }
  /// Sets the time limit (0: none). @throws herd::InputError when negative.
  void set_max_episode_steps(std::int64_t steps);
  /// Steps taken in the current episode.
  std::int64_t elapsed_steps() const { return clock_->elapsed; }
  /// Sets the step count of the current episode (for checkpoints and tests).
  /// @throws herd::InputError when negative.
  void set_elapsed_steps(std::int64_t steps);

  /// Global id of this instance: the stream id of its reset draws.
  std::uint32_t global_id() const { return global_id_; }
  /// Sets the global id; takes effect at the next seeded reset.
  void set_global_id(std::uint32_t id) { global_id_ = id; }
  /// Seed of the current reset stream.
  std::uint64_t seed() const { return rs_->stream.seed(); }
  /// Episode number within the current stream (0 after a seeded reset).
  std::uint64_t episode() const { return rs_->episode; }
  /// Restores the reset stream position (for checkpoints): the seed and the episode
  /// number of the current episode, so the next unseeded reset draws episode + 1. With
  /// `set_state` and `set_elapsed_steps` it restores an env exactly (a run resumed from a
  /// checkpoint continues bit-identically). Takes the current global id.
  void restore_stream(std::uint64_t seed, std::uint64_t episode);

  /// Seeds the reset stream with `seed` and starts episode 0.
  /// @param obs `[obs_dim]` output: the first observation.
  void reset(std::uint64_t seed, float* obs);
  /// Starts the next episode of the current stream (episode 0 of seed 0 if never reset).
  /// @param obs `[obs_dim]` output: the first observation.
  void reset(float* obs);

  /// One step. `Box` actions outside the bounds are clipped inside the environment exactly
  /// where Gymnasium's environment clips them; NaN is rejected.
  /// @param action `[action_dim]` float64
  /// @param obs    `[obs_dim]` output: the next observation
  /// @throws herd::InputError naming the env and value when the action is not valid (a
  ///         `Discrete` action out of range or not integral, NaN) or no reset came first.
  StepResult step(std::span<const double> action, float* obs);
  /// One step of a `Discrete` environment. @throws herd::InputError as above.
  StepResult step(std::int64_t action, float* obs);
  /// `step` without validation, for pools that validate a whole batch first. The caller
  /// guarantees a valid action of `action_dim` components and a previous reset.
  StepResult step_unchecked(const double* action, float* obs) {
    StepResult r = step_impl(action, obs);
    r.truncated = count_step() || r.truncated;
    return r;
  }

  /// Steps `envs[0..n)`, all of the same dynamic type as `*this`, by `step_unchecked`
  /// (pools call it per chunk; environments override it with a tight, non-virtual loop
  /// that must give bit-identical results).
  /// @param actions `[n, action_dim]` valid actions
  /// @param obs `[n, obs_dim]` output rows
  /// @param rewards, terminated, truncated `[n]` outputs (flags 0 or 1)
  virtual void step_batch(Env* const* envs, std::size_t n, const double* actions, float* obs, double* rewards,
                          std::uint8_t* terminated, std::uint8_t* truncated) const;

  /// A structure-of-arrays store of `envs[0..n)` (all of the same dynamic type as `*this`,
  /// none in another store), which binds them to it; null (the default) when this type has
  /// none. The pool keeps the store for its lifetime and steps through it.
  /// @throws herd::InputError when an env is already in a store.
  virtual std::unique_ptr<EnvStore> make_store(Env* const* envs, std::size_t n) const;

  /// `step_batch` with the observations written as uint8 (`ObsDtype::kUint8` pools): the
  /// default steps each env into a float32 row and converts it with `obs_to_u8`;
  /// environments whose observations are bytes (MinAtar's grids) may override it to write
  /// them directly, with the same values.
  /// @param obs `[n, obs_dim]` uint8 output rows
  virtual void step_batch_u8(Env* const* envs, std::size_t n, const double* actions, std::uint8_t* obs, double* rewards,
                             std::uint8_t* terminated, std::uint8_t* truncated) const;

  /// Message "<id> (env <global id>): action ... is <value>, but must be ..." when the
  /// action is not valid; empty when it is. Thread-safe (reads only the spaces).
  std::string check_action(const double* action) const;

  /// The internal state, `[state_dim]` float64, in Gymnasium's layout (`env.unwrapped.state`).
  virtual std::vector<double> get_state() const = 0;
  /// Replaces the internal state (time-limit count and episode number unchanged); the
  /// environment behaves as Gymnasium's after `env.unwrapped.state = state`.
  /// @throws herd::InputError when `state.size() != state_dim()`.
  void set_state(std::span<const double> state);
  /// Writes the observation of the current state to `obs[0..obs_dim)`.
  virtual void observe(float* obs) const = 0;
  /// Whether the game has lives (as Atari's; the episodic-life wrapper needs them). None of
  /// the built-in environments has.
  virtual bool has_lives() const { return false; }
  /// Lives left in the game (as Atari's `ale.lives()`); 0 when it has none.
  virtual std::int64_t lives() const { return 0; }

 protected:
  /// @param state_dim components of `get_state`
  /// @param max_episode_steps Gymnasium's registered limit (0: none)
  Env(std::string id, Space observation_space, Space action_space, std::size_t state_dim,
      std::int64_t max_episode_steps);

  /// Counts one step of the episode; returns whether the time limit is reached.
  bool count_step() { return clock_->count_step(); }

  /// For `EnvStore`s: moves this env's step count and time limit to `*clock` and its reset
  /// stream position to `*stream` (the current values copied there), or back into the
  /// object when both are null. Not thread-safe against other calls on this env.
  void bind_episode(EpisodeClock* clock, ResetStream* stream);

  /// Draws a start state from `rng` and writes its observation.
  virtual void reset_impl(RngCursor& rng, float* obs) = 0;
  /// Advances the dynamics by one valid action; writes the observation; sets `reward`,
  /// `terminated` and (for environments with their own truncation) `truncated`; the base
  /// class adds the time limit to `truncated`.
  virtual StepResult step_impl(const double* action, float* obs) = 0;
  /// Replaces the internal state (size already checked).
  virtual void set_state_impl(const double* state) = 0;

  /// For wrappers: resets `inner` (an environment the wrapper owns) from `rng`, giving it
  /// the reset-stream position (seed, global id, episode) of `outer`, so that randomness
  /// that depends on them (MinAtar's step stream) is the unwrapped environment's. The
  /// inner step count restarts at 0.
  static void reset_wrapped(Env& inner, const Env& outer, RngCursor& rng, float* obs);
  /// For wrappers: gives `inner` the reset-stream position of `outer` (after a restore).
  static void sync_stream(Env& inner, const Env& outer);

 private:
  std::string id_;
  Space obs_space_, action_space_;
  std::size_t state_dim_;
  EpisodeClock own_clock_;
  ResetStream own_stream_;
  // The episode bookkeeping: the members above, or an EnvStore's elements.
  EpisodeClock* clock_ = &own_clock_;
  ResetStream* rs_ = &own_stream_;
  std::uint32_t global_id_ = 0;
};

}  // namespace herd::rl
