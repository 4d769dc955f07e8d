#pragma once
/// @file replay_buffer.hpp
/// Experience replay for DQN-family agents: a `SumTree` (the proportional prioritized
/// replay's sampling structure), and `ReplayBuffer`, uniform or prioritized (Schaul et al.
/// 2016, "Prioritized experience replay", proportional variant), with n-step returns
/// (Sutton & Barto 2018 §7.1; Hessel et al. 2018, "Rainbow") over B environments stepped
/// together (rlpyt's `[T, B]` replay, Stooke & Abbeel 2019).

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "herd/core/rng.hpp"
#include "herd/io/checkpoint.hpp"

namespace herd::rl {

/// A binary tree over `capacity` non-negative leaf values whose inner nodes hold the sums
/// of their children: O(log n) updates and prefix-sum search (sampling a leaf with
/// probability proportional to its value). Each update recomputes the sums on the leaf's
/// path from the children (it never adds differences), so the tree is a function of its
/// leaves alone: `assign(leaves())` rebuilds it bit for bit. Leaves are padded to a power
/// of two with zeros; memory 16 bytes per padded leaf. Not thread-safe for writes.
class SumTree {
 public:
  /// A tree of `capacity` zero leaves. @throws herd::InputError when capacity is 0.
  explicit SumTree(std::size_t capacity = 1);
  /// Number of leaves.
  std::size_t capacity() const { return capacity_; }
  /// Sets leaf `i` to `value`. @throws herd::InputError for i >= capacity or a value that
  /// is negative, NaN or infinite.
  void set(std::size_t i, double value);
  /// Leaf `i` (unchecked beyond an assertion of the range).
  double get(std::size_t i) const { return nodes_[size_ + i]; }
  /// The sum of all leaves.
  double total() const { return nodes_[1]; }
  /// The leaf i whose interval [sum of leaves before i, that plus leaf i) holds `prefix`;
  /// a prefix at or past `total()` (rounding) gives the last leaf with a positive value.
  /// Never returns a zero leaf. @throws herd::InputError when total() is 0.
  std::size_t find(double prefix) const;
  /// The leaves, `[capacity]`.
  std::span<const double> leaves() const { return {nodes_.data() + size_, capacity_}; }
  /// Replaces every leaf and recomputes the sums. @throws herd::InputError on a size
  /// mismatch or a value as `set` refuses.
  void assign(std::span<const double> leaves);

 private:
  std::size_t capacity_ = 0, size_ = 1;
  std::vector<double> nodes_;  // 1-based heap layout: node j has children 2j, 2j+1; leaves at size_ + i
};

/// Options of a `ReplayBuffer`.
struct ReplayBufferOptions {
  /// Transitions held over all environments (SB3's `buffer_size`); each env keeps a ring of
  /// `capacity / num_envs` slots (rounded down).
  std::size_t capacity = 1000000;
  std::size_t num_envs = 1;  ///< B: environments stepped together
  std::size_t obs_dim = 1;   ///< components of one observation (with a frame stack: all k frames)
  /// k of a frame-stack wrapper (`WrapperOptions::frame_stack`) whose stacked observations
  /// `add` receives: each slot then stores the newest frame only (obs_dim / k components),
  /// and `sample` rebuilds the stacks (see the class comment). 1: observations are stored
  /// whole. obs_dim must be a multiple of it.
  int frame_stack = 1;
  /// Observations stored as uint8 (each value must be an integer in [0, 255], e.g. MinAtar's
  /// 0/1 grids or Atari frames); otherwise float32.
  bool uint8_obs = false;
  int n_step = 1;              ///< n of the n-step return (>= 1)
  double gamma = 0.99;         ///< discount of the n-step return
  bool prioritized = false;    ///< proportional prioritized replay instead of uniform
  double alpha = 0.6;          ///< priority exponent (prioritized)
  double priority_eps = 1e-6;  ///< added to |TD error| before the exponent (prioritized)
};

/// A sampled minibatch (host arrays, row-major).
struct ReplaySample {
  std::vector<float> obs;             ///< `[batch, obs_dim]` s_t
  std::vector<std::int64_t> actions;  ///< `[batch]` a_t (0-based index)
  std::vector<double> returns;        ///< `[batch]` sum_{k<m} gamma^k r_{t+k}
  /// `[batch]` gamma^m, or 0 where the episode terminated within the m steps: the target is
  /// returns + discounts * max_a Q(next_obs, a).
  std::vector<double> discounts;
  std::vector<float> next_obs;         ///< `[batch, obs_dim]` s_{t+m} (the bootstrap observation)
  std::vector<double> weights;         ///< `[batch]` importance weights (1 for uniform replay)
  std::vector<std::uint64_t> indices;  ///< `[batch]` slots, for `update_priorities`
  std::vector<int> steps;              ///< `[batch]` m: steps summed (n, or fewer at an episode end)
};

/// Replay memory of B environments stepped together, one `add` per vector step.
///
/// **Layout (compact).** Env b owns a ring of T = capacity / B slots. A slot holds one
/// observation (stored once: the next observation of a transition is the following slot,
/// never a second copy), the action taken in it (int32), its reward (float32, as SB3
/// stores rewards) and a flags byte (terminated, truncated, valid, final, first of an
/// episode). When a time limit truncates an episode, the episode's last observation gets a
/// slot of its own (a "final" slot, which is no transition) so that the transition
/// bootstraps from it, as SB3 and Gymnasium prescribe for truncation (Pardo et al. 2018),
/// while the env's next slot holds the first observation of the new episode. A terminated
/// episode needs no such slot.
///
/// **Frame stacks (frames stored once).** With `frame_stack` k > 1 the observations are
/// the frame-stack wrapper's `[k frames]`, oldest first, and a slot stores only the newest
/// frame (as rlpyt's frame-based replay): the stack of a slot is rebuilt from the frames of
/// the k - 1 slots before it in its episode, the episode's first frame standing in for the
/// frames before its start (the wrapper's reset padding, Gymnasium's `padding_type =
/// "reset"`), so a rebuilt stack equals the observation the agent saw, bit for bit. `add`
/// checks that each observation is that stack (the older frames equal the stored ones) and
/// refuses others. When a ring overwrites a frame, the transitions whose stacks still needed
/// it stop being sampleable. Sampling, n-step returns and priorities are those of k = 1.
///
/// **Memory.** Bytes per slot: the stored frame (obs_dim / k values: 1 byte each as uint8,
/// 4 as float32) + 9, plus the sampling tree's 16 bytes per slot (slots padded to a power
/// of two): `bytes_per_slot()`. MinAtar Breakout ([4, 10, 10] as uint8): 400 + 9 + 16 = 425
/// bytes, or 42.5 MB for SB3's and the MinAtar paper's 100000 transitions; with a 4-frame
/// stack ([16, 10, 10]) the same 425 bytes instead of 1625 with whole stacks.
///
/// **n-step returns.** The transition in slot t of env b is sampleable ("valid") once its
/// horizon is known: the n following steps are stored (bootstrap from slot t + n), or the
/// episode ended at step t + m - 1 with m <= n (terminated: no bootstrap; truncated:
/// bootstrap from the final slot t + m). So the newest n slots of an env whose episode is
/// running wait for later steps.
///
/// **Sampling.** Uniform: with replacement, uniformly over the valid transitions (a sum
/// tree of 0/1 weights). Prioritized (Schaul et al. 2016, proportional): a transition has
/// priority p = (|delta| + priority_eps)^alpha, new transitions get the largest
/// |delta| + eps seen so far (1 at the start); a batch of k is stratified (one draw in each
/// of k equal segments of the total priority, as OpenAI Baselines), with importance weights
/// w = (size * P(i))^-beta divided by the batch's largest weight (as rlpyt).
///
/// **Randomness.** `sample` draws from one `RngCursor` given by the caller (a stream and a
/// counter), so sampling is reproducible and a checkpointed run resumes bit-identically.
///
/// Thread-safety: one thread at a time.
class ReplayBuffer {
 public:
  /// @throws herd::InputError when num_envs or obs_dim is 0, frame_stack < 1 or does not
  ///         divide obs_dim, capacity / num_envs < n_step + frame_stack + 1, n_step < 1,
  ///         gamma outside [0, 1], alpha < 0 or priority_eps <= 0.
  explicit ReplayBuffer(const ReplayBufferOptions& options);

  /// The options.
  const ReplayBufferOptions& options() const { return opt_; }
  /// Slots per env ring (T).
  std::size_t slots_per_env() const { return per_env_; }
  /// Bytes one slot takes (observation or newest frame, action, reward, flags, sampling tree).
  double bytes_per_slot() const;
  /// Bytes a buffer of `options` takes (an upper estimate without allocating it). Thread-safe.
  static double memory_need(const ReplayBufferOptions& options);

  /// Stores one step of every env: `obs` `[B, obs_dim]` the observations acted on,
  /// `actions` `[B]` (0-based), `rewards` `[B]`, `terminated`/`truncated` `[B]`, and
  /// `final_obs` `[B, obs_dim]` (read where truncated and not terminated: the episode's last
  /// observation). The oldest slots of each ring are overwritten when it is full.
  /// @throws herd::InputError when uint8 storage gets an observation value that is not an
  ///         integer in [0, 255], or (frame_stack > 1) an observation whose older frames are
  ///         not the frames stored before it in its episode (naming env, component and
  ///         value; nothing is stored then).
  void add(const float* obs, const std::int64_t* actions, const double* rewards, const std::uint8_t* terminated,
           const std::uint8_t* truncated, const float* final_obs);

  /// Valid (sampleable) transitions.
  std::size_t size() const { return valid_; }
  /// Steps added so far (calls of `add` times B).
  std::uint64_t steps_added() const { return added_; }

  /// Samples `batch` transitions (see the class comment) with draws from `rng`, importance
  /// exponent `beta` (prioritized; ignored for uniform). @throws herd::InputError when
  /// batch is 0 or no transition is valid yet.
  void sample(std::size_t batch, RngCursor& rng, double beta, ReplaySample& out) const;
  /// Sets the priorities of slots `indices` from their TD errors (prioritized replay;
  /// a no-op for uniform): p = (|delta| + eps)^alpha; a slot that is no longer valid is
  /// skipped. @throws herd::InputError on a size mismatch or a NaN error.
  void update_priorities(std::span<const std::uint64_t> indices, std::span<const double> td_errors);
  /// The sampling weight of a slot (0 for slots that cannot be sampled).
  double priority(std::uint64_t index) const { return tree_.get(static_cast<std::size_t>(index)); }
  /// The largest |delta| + eps seen (new transitions get it raised to alpha).
  double max_priority() const { return max_priority_; }

  /// Adds the buffer (the filled slots only, observations in their stored type: one frame
  /// per slot with a frame stack) to a checkpoint under `prefix`.
  void save(io::CheckpointWriter& w, const std::string& prefix) const;
  /// Restores what `save` wrote. @throws herd::IoError or herd::InputError when the
  /// checkpoint's buffer has other sizes or options.
  void load(const io::CheckpointReader& r, const std::string& prefix);

 private:
  enum Flag : std::uint8_t { kTerminated = 1, kTruncated = 2, kValid = 4, kFinal = 8, kFirst = 16 };
  std::size_t slot(std::size_t env, std::uint64_t pos) const { return env * per_env_ + pos % per_env_; }
  /// The slot before `s` in its env's ring.
  std::size_t previous(std::size_t s) const { return s - s % per_env_ + (s % per_env_ + per_env_ - 1) % per_env_; }
  void write_slot(std::size_t s, const float* obs, std::int32_t action, float reward, std::uint8_t flags);
  void invalidate(std::size_t s);
  /// Before env `env` writes position `pos` (over position pos - T): makes the transitions
  /// whose stacks need the overwritten frame unsampleable.
  void forget(std::size_t env, std::uint64_t pos);
  void validate(std::size_t s);
  void read_frame(std::size_t s, float* out) const;
  /// The observation of slot `s` (the stack rebuilt from its frames when frame_stack > 1).
  void read_obs(std::size_t s, float* out) const;
  /// Checks that `obs` (a row of obs_dim) is the stack a slot after slot `last` of the same
  /// episode would rebuild, or (`first`) k copies of its newest frame. @throws InputError
  void check_stack(std::size_t env, const float* obs, bool first, std::size_t last) const;
  /// Checks that `final_obs` is `obs` moved one frame on (its older k - 1 frames are obs's
  /// newest). @throws InputError
  void check_final_stack(std::size_t env, const float* obs, const float* final_obs) const;
  ReplayBufferOptions opt_;
  std::size_t per_env_ = 0;
  std::size_t frame_dim_ = 0;  // stored components per slot: obs_dim / frame_stack
  std::vector<std::uint8_t> obs_u8_;
  std::vector<float> obs_f32_;
  std::vector<std::int32_t> actions_;
  std::vector<float> rewards_;
  std::vector<std::uint8_t> flags_;
  std::vector<std::uint64_t> written_;  // per env: slots written so far
  SumTree tree_;
  std::size_t valid_ = 0;
  std::uint64_t added_ = 0;
  double max_priority_ = 1.0;
};

}  // namespace herd::rl
