#pragma once
/// @file env_pool.hpp
/// N environments stepped in batches on a thread pool into contiguous buffers, in sync and
/// async mode (Stooke & Abbeel 2018, "Accelerated methods for deep RL"; Weng et al. 2022,
/// "EnvPool: a highly parallel reinforcement learning environment execution engine").

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "herd/core/thread_pool.hpp"
#include "herd/rl/env.hpp"

namespace herd::rl {

/// The element type of an `EnvPool`'s observation batches.
enum class ObsDtype : std::uint8_t {
  kFloat32,  ///< float32 rows: `obs()`, `final_obs()` (the default)
  /// uint8 rows: `obs_u8()`, `final_obs_u8()`, a quarter of the bytes, for environments whose
  /// observations are integers in [0, 255] (MinAtar's 0/1 grids, pixels), so that a replay
  /// buffer stores bytes and a network converts its input batch (`obs_to_f32`). The pool
  /// refuses an environment whose observation bounds are not within [0, 255] or whose
  /// observation space is not a Box of integers (`BoxValues::kInteger`; reals would be
  /// rounded).
  kUint8,
};

/// Construction options of an `EnvPool`.
struct EnvPoolOptions {
  std::string env_id;           ///< registry id (ignored when environments are given)
  std::size_t num_envs = 1;     ///< number of environments N (>= 1)
  std::size_t batch_size = 0;   ///< results per `recv` (0: N, sync mode); 1 <= B <= N
  std::size_t num_threads = 1;  ///< threads that step environments (>= 1)
  /// Async mode even when batch_size == num_envs: `num_threads` worker threads, so `send`
  /// returns at once and the envs step while the caller works (the alternating sampler's
  /// groups). Otherwise batch_size == num_envs means sync mode: num_threads - 1 workers
  /// plus the calling thread, and with one thread `send` steps the envs before returning.
  bool async_workers = false;
  std::uint64_t seed = 0;               ///< seed of every env's reset stream
  std::uint32_t first_global_id = 0;    ///< env k has global id first_global_id + k
  std::int64_t max_episode_steps = -1;  ///< time limit override (-1: registered; 0: none)
  /// Sync steps: the least work (seconds) worth handing to another thread. The pool
  /// measures the cost of an env step as it runs and gives each task at least this much,
  /// so cheap envs in small pools (16 CartPoles) step on the calling thread alone while
  /// costly ones spread over all threads. Thread use never changes results. 0: always use
  /// every thread.
  double min_task_seconds = 20e-6;
  /// Observation batch dtype; float32 by default. With kUint8 each env's float32 row is
  /// converted by `obs_to_u8` as it is written (or written directly by envs that override
  /// `Env::step_batch_u8`), and the float32 buffers are empty.
  ObsDtype obs_dtype = ObsDtype::kFloat32;
  /// Sync steps of a float32 pool of one environment type that has an `EnvStore`
  /// (`Env::make_store`: CartPole): keep the envs' states in the store's dense arrays and
  /// step them there, instead of each env object (the results are bit-identical; false is
  /// the per-object reference, for tests and benchmarks).
  bool structure_of_arrays = true;
};

/// One batch of results: row j belongs to environment `env_ids[j]`. Views into the pool's
/// buffers, valid until the next `recv` (async) or `step`/`reset` (sync).
struct EnvBatch {
  std::span<const std::int32_t> env_ids;       ///< `[B]`
  std::span<const float> obs;                  ///< `[B, obs_dim]` row-major float32
  std::span<const double> rewards;             ///< `[B]`
  std::span<const std::uint8_t> terminated;    ///< `[B]` 0 or 1
  std::span<const std::uint8_t> truncated;     ///< `[B]` 0 or 1
  std::span<const float> final_obs;            ///< `[B, obs_dim]`, meaningful where done
  std::span<const std::uint8_t> obs_u8;        ///< `[B, obs_dim]` of a uint8 pool (else empty)
  std::span<const std::uint8_t> final_obs_u8;  ///< `[B, obs_dim]` of a uint8 pool, where done
  /// Number of rows B.
  std::size_t size() const { return env_ids.size(); }
};

/// N environments of one kind, stepped by `num_threads` threads.
///
/// **Sync mode** (`batch_size == num_envs`; the sync calls also work in async mode while
/// no env is in flight): `reset()` then `step(actions)` with actions
/// `[N, action_dim]`; results are in env order in `obs()` `[N, obs_dim]`, `rewards()`,
/// `terminated()`, `truncated()`, `final_obs()` — contiguous buffers owned by the pool that
/// a network reads without copying (stable addresses for the pool's lifetime).
///
/// **Async mode** (any batch size; the point when `batch_size < num_envs`): `async_reset()`
/// sends a reset to every env; `send(actions, env_ids)` sends actions to some envs; `recv()`
/// blocks until `batch_size` envs have finished and returns their results in completion
/// order with their ids. Each env yields exactly one result per reset or action sent, and
/// an env may be sent again only after its result has been received.
///
/// **Auto-reset rule** (Gymnasium's "same-step" mode): when a step ends an episode
/// (`terminated` or `truncated`), the env is reset in that same step: `obs` holds the first
/// observation of the new episode, `final_obs` the last observation of the ended episode
/// (bootstrap truncated episodes from it), and reward and flags belong to the ended step.
/// Rows of `final_obs` of envs that did not finish are unspecified.
///
/// **Seeds**: env k (global id g = first_global_id + k) draws episode e's start from
/// `RngStream(seed, g, kEnvReset).at(e)`, so every env's trajectory depends only on
/// (seed, g, its actions), whatever the thread count, mode or batch size.
///
/// **Actions**: float64 (a discrete action is an integral value) or int64 for `Discrete`
/// spaces. Box actions are clipped by the environments as Gymnasium's do; a discrete action
/// out of range or not integral, a NaN or a wrong shape throws `herd::InputError` naming the
/// env and the value, before any env is stepped.
///
/// Thread-safety: the public API must be called from one thread at a time. Environments
/// are stepped on the pool's threads (each env by one thread at a time).
class EnvPool {
 public:
  /// Makes `num_envs` environments of `options.env_id` from the registry.
  /// @throws herd::InputError for an unknown id or invalid sizes.
  explicit EnvPool(const EnvPoolOptions& options);
  /// Takes ownership of `envs` (all with the same spaces); `options.env_id` and
  /// `options.num_envs` are ignored. Global ids are set to first_global_id + k.
  /// @throws herd::InputError when envs is empty or the spaces differ.
  EnvPool(std::vector<std::unique_ptr<Env>> envs, const EnvPoolOptions& options);
  /// Waits for environments still being stepped; never throws.
  ~EnvPool();
  EnvPool(const EnvPool&) = delete;
  EnvPool& operator=(const EnvPool&) = delete;

  /// Number of environments N.
  std::size_t num_envs() const { return envs_.size(); }
  /// Results per `recv` (N in sync mode).
  std::size_t batch_size() const { return batch_size_; }
  /// Threads stepping environments (sync mode: num_threads - 1 workers plus the caller;
  /// async mode: num_threads workers).
  std::size_t num_threads() const { return num_threads_; }
  /// Components of one observation (row length of the obs buffers).
  std::size_t obs_dim() const { return obs_dim_; }
  /// Components of one action (1 for `Discrete`).
  std::size_t action_dim() const { return action_dim_; }
  /// Observation space of every env.
  const Space& observation_space() const { return envs_[0]->observation_space(); }
  /// Whether sync steps go through a structure-of-arrays `EnvStore`
  /// (`EnvPoolOptions::structure_of_arrays`).
  bool uses_store() const { return store_ != nullptr; }
  /// Element type of the observation batches.
  ObsDtype obs_dtype() const { return obs_dtype_; }
  /// Action space of every env.
  const Space& action_space() const { return envs_[0]->action_space(); }
  /// Environment k (for inspection, get_state/set_state between steps; not while it is in
  /// flight; with a structure-of-arrays store its state lives in the store, which every
  /// `Env` call reads and writes). @throws std::out_of_range when k >= N.
  Env& env(std::size_t k) { return *envs_.at(k); }

  // --- sync mode -------------------------------------------------------------------------
  /// Seeded reset of every env (episode 0); fills `obs()`, zeroes rewards and flags.
  /// @throws herd::InputError when async results are outstanding.
  void reset();
  /// Steps every env with its action (row k of `actions`, `[N, action_dim]`), auto-resets
  /// finished ones, fills the buffers.
  /// @throws herd::InputError for a wrong shape, an invalid action (naming env and value),
  ///         or outstanding async results; whatever an environment threw.
  void step(std::span<const double> actions);
  /// As above with int64 actions `[N]` of a `Discrete` space.
  void step(std::span<const std::int64_t> actions);

  /// `[N, obs_dim]` observations after the last `reset`/`step` (empty in a uint8 pool).
  std::span<const float> obs() const { return obs_; }
  /// `[N, obs_dim]` uint8 observations of a uint8 pool (empty in a float32 pool).
  std::span<const std::uint8_t> obs_u8() const { return obs_u8_; }
  /// `[N, obs_dim]` uint8 last observations of ended episodes (uint8 pool; else empty).
  std::span<const std::uint8_t> final_obs_u8() const { return final_obs_u8_; }
  /// `[N]` rewards of the last step.
  std::span<const double> rewards() const { return rewards_; }
  /// `[N]` termination flags of the last step.
  std::span<const std::uint8_t> terminated() const { return terminated_; }
  /// `[N]` truncation flags of the last step.
  std::span<const std::uint8_t> truncated() const { return truncated_; }
  /// `[N, obs_dim]` last observations of episodes that ended in the last step (empty in a
  /// uint8 pool).
  std::span<const float> final_obs() const { return final_obs_; }
  /// The sync buffers as one batch (env ids 0..N-1).
  EnvBatch batch() const;

  // --- async mode ------------------------------------------------------------------------
  /// Sends a seeded reset (episode 0) to every env; results come through `recv`
  /// (reward 0, flags 0). @throws herd::InputError when any env is in flight.
  void async_reset();
  /// Sends `actions` (`[M, action_dim]`) to envs `env_ids` (`[M]`, distinct, none in flight).
  /// @throws herd::InputError for a wrong shape, an unknown or busy env id, or an invalid
  ///         action (naming env and value); nothing is sent then.
  void send(std::span<const double> actions, std::span<const std::int32_t> env_ids);
  /// As above with int64 actions `[M]` of a `Discrete` space.
  void send(std::span<const std::int64_t> actions, std::span<const std::int32_t> env_ids);
  /// Blocks until `batch_size` results are ready and returns them (completion order).
  /// @throws herd::InputError when fewer than `batch_size` results can ever arrive (not
  ///         enough envs in flight); whatever an environment threw while stepping.
  EnvBatch recv();
  /// Number of envs sent and not yet received.
  std::size_t in_flight() const { return num_in_flight_; }

 private:
  void init(const EnvPoolOptions& options);
  void check_sync_idle(const char* what) const;
  void validate_actions(const double* actions, const std::int32_t* ids, std::size_t m, const char* what) const;
  void step_range(std::size_t b, std::size_t e, const double* actions);
  void step_range_u8(std::size_t b, std::size_t e, const double* actions);
  void step_validated(const double* actions);
  void dispatch(const std::int32_t* ids, std::size_t m);
  void run_one(std::int32_t id);

  std::vector<std::unique_ptr<Env>> envs_;
  std::unique_ptr<EnvStore> store_;  // after envs_: destroyed first, unbinding them
  std::vector<Env*> env_ptrs_;
  bool homogeneous_ = true;  // same dynamic type: use Env::step_batch per chunk
  std::size_t batch_size_ = 0, num_threads_ = 1, obs_dim_ = 0, action_dim_ = 0;
  ObsDtype obs_dtype_ = ObsDtype::kFloat32;
  std::uint64_t seed_ = 0;
  double min_task_ns_ = 0;  // from options.min_task_seconds
  double env_step_ns_ = 0;  // running estimate of one env step (0: not yet measured)

  // sync buffers
  std::vector<float> obs_, final_obs_;
  std::vector<std::uint8_t> obs_u8_, final_obs_u8_;  // uint8 pools
  std::vector<double> rewards_;
  std::vector<std::uint8_t> terminated_, truncated_;
  std::vector<std::int32_t> ids_;
  std::vector<double> action_scratch_;

  // async state: a ring of `num_slots_` batches of `batch_size_` rows
  enum class Op : std::uint8_t { kNone, kReset, kStep };
  std::vector<Op> op_;                   // pending operation per env (user thread writes)
  std::vector<double> pending_actions_;  // [N, action_dim]
  std::vector<std::uint8_t> busy_;       // in flight (user thread only)
  std::size_t num_in_flight_ = 0;
  std::size_t num_slots_ = 0;
  std::vector<std::int32_t> r_ids_;
  std::vector<float> r_obs_, r_final_obs_;
  std::vector<std::uint8_t> r_obs_u8_, r_final_obs_u8_;  // uint8 pools
  std::vector<double> r_rewards_;
  std::vector<std::uint8_t> r_terminated_, r_truncated_;
  std::unique_ptr<std::atomic<std::uint32_t>[]> filled_;  // rows written per slot
  std::atomic<std::uint64_t> next_row_{0};
  std::uint64_t received_batches_ = 0;
  std::mutex error_mutex_;
  std::exception_ptr error_;

  std::unique_ptr<ThreadPool> pool_;  // last: destroyed first, finishing queued work
};

}  // namespace herd::rl
