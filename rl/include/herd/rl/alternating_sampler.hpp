#pragma once
/// @file alternating_sampler.hpp
/// `AlternatingSampler`: rlpyt's alternating sampler (Stooke & Abbeel 2018, "Accelerated
/// methods for deep reinforcement learning", §3; rlpyt's `AlternatingSampler`): the B
/// environments form two groups of B/2, each in its own async `EnvPool`; while one group
/// steps on its pool's threads, the agent runs inference on the other group's observations,
/// so simulation and inference overlap.

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "herd/rl/sampler.hpp"

namespace herd::rl {

/// The alternating sampler (see the file comment). Per time step t:
/// receive group A's step t-1, run the policy on A's observations and send A's actions;
/// receive group B's step t-1, run the policy on B's and send B's. Inference on one group
/// thus overlaps the other group's env steps (rlpyt's bound: 2x the parallel sampler when
/// env and inference costs are equal).
///
/// **Same results as the parallel sampler.** Env k (k < B/2 in group A, else group B at
/// B/2 + j) keeps global id `first_global_id + k` and its reset stream; its policy draws
/// at step counter s come from `RngStream(seed, first_global_id + k, kPolicy).at(s)`, as
/// in `EnvPoolSampler`; rewards are scaled (reward normalisation) once both groups of a
/// step are in, over all B envs as there. So without observation normalisation, for fixed
/// agent parameters, `collect` fills the same `[T, B]` buffer bit for bit as the parallel
/// sampler (tested for B = 2 to 48 on three envs), because `ActorCriticAgent::act` and
/// `value` give each row the same outputs whatever the batch (they pad batches to a
/// multiple of 8 rows; without that, Eigen's products take different kernels for
/// different row counts and the last bits differ). With observation
/// normalisation each group's observations update the running statistics when they arrive
/// (group A's step-t rows are normalised before group B's step-t rows are in the
/// statistics; at the end of `collect` both groups are re-normalised with the final
/// statistics), so results are equal in law, not bit-identical.
///
/// Preconditions (rlpyt's): an even number of envs, checked. Recurrent agents would need
/// one recurrent state per group; `ActorCriticAgent` is feed-forward, so there is none.
///
/// Threads: each group's pool has `num_threads` worker threads (async mode,
/// `EnvPoolOptions::async_workers`), so `send` returns at once. Each step hands both groups
/// to their workers and back: the sampler pays off when a group's env work is well above
/// a thread wake-up (tens of microseconds on a loaded machine) and a core is free to
/// overlap (bench/rl/bench_sampler.cpp, docs/rl.md). Checkpoint sections are those of `EnvPoolSampler`
/// (interchangeable between the two). Not thread-safe: one owner thread.
class AlternatingSampler : public Sampler {
 public:
  /// Makes the two pools and resets every env (seeded).
  /// @throws herd::InputError for an odd `num_envs` (naming it), non-positive sizes or an
  ///         unknown env id.
  explicit AlternatingSampler(const SamplerOptions& options);
  ~AlternatingSampler() override;
  void collect(ActorCriticAgent& agent, RolloutBuffer& buffer) override;
  const std::vector<EpisodeInfo>& episodes() const override { return episodes_; }
  void clear_episodes() override { episodes_.clear(); }
  const RunningMeanStd& obs_rms() const override { return obs_rms_; }
  void save(io::CheckpointWriter& w, const std::string& prefix) const override;
  void load(const io::CheckpointReader& r, const std::string& prefix) override;
  /// The pool of group `g` (0: envs [0, B/2), 1: envs [B/2, B)). @throws std::out_of_range
  EnvPool& pool(int g) { return *pools_.at(static_cast<std::size_t>(g)); }
  /// B.
  std::size_t num_envs() const { return 2 * half_; }

 private:
  Env& env(std::size_t k) const { return pools_[k / half_]->env(k % half_); }
  void normalize_group(int g, bool update);
  void act_and_send(int g, ActorCriticAgent& agent, RolloutBuffer& buf, int t);
  void receive(int g, ActorCriticAgent& agent, RolloutBuffer& buf, int t);
  void finish_row(RolloutBuffer& buf, int t);
  detail::SamplerStateRefs state_refs() const;

  SamplerOptions opt_;
  std::size_t half_ = 0, obs_dim_ = 0, action_dim_ = 0;
  bool discrete_ = false;
  std::int64_t action_start_ = 0;
  std::array<std::unique_ptr<EnvPool>, 2> pools_;
  std::array<bool, 2> in_flight_{false, false};
  std::vector<std::int32_t> ids_;  // 0..B/2-1
  RunningMeanStd obs_rms_;
  RewardNormalizer rew_norm_;
  std::vector<float> raw_obs_, norm_obs_, final_raw_, final_norm_, final_vals_, rew_tmp_;
  std::vector<std::uint8_t> dones_, term_, trunc_;
  std::vector<double> ep_ret_, send_act_, rewards_;
  std::vector<std::int64_t> ep_len_;
  std::uint64_t step_count_ = 0;
  std::vector<EpisodeInfo> episodes_;
};

}  // namespace herd::rl
