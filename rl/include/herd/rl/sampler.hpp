#pragma once
/// @file sampler.hpp
/// Samplers: collect `[T, B]` rollouts from B environments with one batched forward pass
/// of the agent per time step (Stooke & Abbeel 2018, "Accelerated methods for deep
/// reinforcement learning", §3: serial and parallel samplers).
///
/// The interface is `collect(agent, buffer)`: a sampler owns its environments, their
/// current observations, the observation/reward normalisers and episode statistics, and
/// fills the buffer. The alternating sampler (two env groups, one simulated while the
/// agent runs inference for the other; `AlternatingSampler` in alternating_sampler.hpp)
/// fits the same interface: it owns two async `EnvPool`s of B/2 envs each and interleaves
/// `send`/`recv` inside `collect`.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "herd/core/communicator.hpp"
#include "herd/core/rng.hpp"
#include "herd/io/checkpoint.hpp"
#include "herd/rl/agent.hpp"
#include "herd/rl/env_pool.hpp"
#include "herd/rl/rollout_buffer.hpp"
#include "herd/rl/running_mean_std.hpp"

namespace herd::rl {

namespace detail {
struct SamplerStateRefs;  // rl/sampler_state.hpp
}  // namespace detail

/// Options of a sampler.
struct SamplerOptions {
  std::string env_id = "CartPole-v1";   ///< registry id
  int num_envs = 8;                     ///< B
  int num_steps = 32;                   ///< T per `collect`
  int num_threads = 1;                  ///< env-stepping threads (parallel sampler)
  std::uint64_t seed = 0;               ///< env reset streams and policy draws
  std::uint32_t first_global_id = 0;    ///< env k has global id first_global_id + k
  bool normalize_obs = false;           ///< running observation normalisation (SB3 VecNormalize)
  bool normalize_reward = false;        ///< reward scaling by the discounted-return std
  double gamma = 0.99;                  ///< discount of the reward normaliser's return
  double clip_obs = 10.0;               ///< clip of normalised observations
  double clip_reward = 10.0;            ///< clip of scaled rewards
  std::int64_t max_episode_steps = -1;  ///< time limit override (-1: registered; 0: none)
  /// Observation dtype of the env batches: with kUint8 the pools write bytes (for integer
  /// observations in [0, 255], MinAtar's grids: faster stepping) and the sampler converts
  /// them to float32 for the agent (`obs_to_f32`, exact for integers).
  ObsDtype obs_dtype = ObsDtype::kFloat32;
  /// Ranks of a data-parallel run whose observation/reward normaliser statistics are
  /// merged at every step, so that every rank normalises the same (not owned; null: this
  /// process alone). With more than one rank and normalisation on, `collect` is collective.
  Communicator* comm = nullptr;
};

/// A finished episode: undiscounted raw return and length in env steps.
struct EpisodeInfo {
  double ret = 0;           ///< sum of raw rewards
  std::int64_t length = 0;  ///< steps
};

/// Base of the samplers (see the file comment). Not thread-safe: one owner thread.
class Sampler {
 public:
  virtual ~Sampler() = default;
  /// Fills `buffer` (resized to `[T, B]`) with T steps of every env, acting with `agent`
  /// (sampled actions, policy draws from `RngStream(seed, first_global_id, kPolicy)` at the
  /// sampler's step counter), and sets `last_values`. Finished episodes are appended to
  /// `episodes()`. @throws whatever the environments or the agent throw.
  virtual void collect(ActorCriticAgent& agent, RolloutBuffer& buffer) = 0;
  /// Episodes finished since `clear_episodes()`.
  virtual const std::vector<EpisodeInfo>& episodes() const = 0;
  /// Forgets finished episodes.
  virtual void clear_episodes() = 0;
  /// Observation normaliser (statistics unused when normalisation is off).
  virtual const RunningMeanStd& obs_rms() const = 0;
  /// Adds the sampler's state (env states and reset streams, current observations,
  /// normalisers, episode accumulators, step counter) to a checkpoint under `prefix`.
  virtual void save(io::CheckpointWriter& w, const std::string& prefix) const = 0;
  /// Restores what `save` wrote. @throws herd::IoError or herd::InputError on a mismatch.
  virtual void load(const io::CheckpointReader& r, const std::string& prefix) = 0;
};

/// A sampler over one synchronous `EnvPool`: the serial sampler with one thread, the
/// parallel sampler with more (the pool's threads step the envs; the agent runs one
/// batched forward pass per step on the calling thread). Results do not depend on the
/// thread count.
class EnvPoolSampler : public Sampler {
 public:
  /// Makes the pool and resets every env (seeded). @throws herd::InputError for an
  /// unknown env id or non-positive sizes.
  explicit EnvPoolSampler(const SamplerOptions& options);
  void collect(ActorCriticAgent& agent, RolloutBuffer& buffer) override;
  const std::vector<EpisodeInfo>& episodes() const override { return episodes_; }
  void clear_episodes() override { episodes_.clear(); }
  const RunningMeanStd& obs_rms() const override { return obs_rms_; }
  void save(io::CheckpointWriter& w, const std::string& prefix) const override;
  void load(const io::CheckpointReader& r, const std::string& prefix) override;
  /// The pool (spaces, sizes).
  EnvPool& pool() { return *pool_; }

 private:
  void new_obs(const float* raw, bool update);
  /// The pool's observations (`final`: of ended episodes) as float32 `[B, D]` (converted
  /// into u8_obs_ from a uint8 pool).
  const float* pool_obs(bool final);
  detail::SamplerStateRefs state_refs() const;
  SamplerOptions opt_;
  std::unique_ptr<EnvPool> pool_;
  RunningMeanStd obs_rms_;
  RewardNormalizer rew_norm_;
  std::vector<float> raw_obs_, norm_obs_, final_norm_, final_vals_, rew_tmp_, u8_obs_;
  std::vector<std::uint8_t> dones_;
  std::vector<double> ep_ret_, act_tmp_;
  std::vector<std::int64_t> ep_len_, act_int_;
  std::uint64_t step_count_ = 0;
  std::vector<EpisodeInfo> episodes_;
};

/// The serial sampler: envs stepped on the calling thread.
class SerialSampler : public EnvPoolSampler {
 public:
  /// `options.num_threads` is ignored (1). @throws as `EnvPoolSampler`.
  explicit SerialSampler(SamplerOptions options) : EnvPoolSampler((options.num_threads = 1, options)) {}
};

/// The parallel sampler: envs stepped by `num_threads` pool threads, one batched forward
/// pass per step.
class ParallelSampler : public EnvPoolSampler {
 public:
  /// @throws as `EnvPoolSampler`.
  explicit ParallelSampler(const SamplerOptions& options) : EnvPoolSampler(options) {}
};

/// "serial", "parallel" or "alternating" (`AlternatingSampler`).
/// @throws herd::InputError naming `kind` otherwise, and as the sampler's constructor.
std::unique_ptr<Sampler> make_sampler(const std::string& kind, const SamplerOptions& options);

}  // namespace herd::rl
