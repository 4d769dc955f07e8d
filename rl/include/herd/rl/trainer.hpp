#pragma once
/// @file trainer.hpp
/// `Trainer`: the training loop of `herd-rl train` (sample a `[T, B]` rollout, GAE,
/// PPO/A2C update), with its learning curve, atomic checkpoints from which training resumes
/// bit-identically, and the `<prefix>.h5` output; plus deterministic policy evaluation.

#include <array>
#include <csignal>
#include <cstdint>
#include <deque>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "herd/io/tensorboard.hpp"
#include "herd/rl/agent.hpp"
#include "herd/rl/ppo.hpp"
#include "herd/rl/progress_csv.hpp"
#include "herd/rl/rollout_buffer.hpp"
#include "herd/rl/sampler.hpp"
#include "herd/rl/train_config.hpp"
#include "herd/rl/training_run.hpp"

namespace herd::rl {

namespace detail {
class DeviceComm;          // the gradients' NCCL communicator (rl/run_common.hpp, private to rl/)
class PeriodicEvaluation;  // evaluation during training (rl/run_common.hpp)
}  // namespace detail

/// Curve columns of evaluation during training (`eval.every_steps`; the last columns of
/// PPO/A2C's and DQN's curves, and of the progress CSV when evaluation is on): the mean,
/// population standard deviation, minimum and maximum undiscounted return and the mean
/// length of the evaluation episodes played after that iteration; NaN in the other rows.
inline constexpr std::array<const char*, 5> kEvalCurveColumns = {
    "eval_return_mean", "eval_return_std", "eval_return_min", "eval_return_max", "eval_length_mean"};

/// Columns of the learning curve, one row per iteration (names of the HDF5 datasets under
/// `/curve`). Returns and episode lengths are over the last 100 finished training episodes
/// (NaN before the first); losses and diagnostics are means over the iteration's
/// minibatches; `episodes` counts the training episodes finished so far (all ranks);
/// `steps_per_second` is the iteration's env steps over its wall time, the sampling and
/// training rates the same steps over the time of collecting the rollout and of the
/// advantages plus update; then the evaluation columns (`kEvalCurveColumns`).
inline constexpr std::array<const char*, 26> kCurveColumns = {"iteration",
                                                              "env_steps",
                                                              "wall_seconds",
                                                              "return_mean",
                                                              "return_min",
                                                              "return_max",
                                                              "episode_length",
                                                              "policy_loss",
                                                              "value_loss",
                                                              "entropy",
                                                              "approx_kl",
                                                              "clip_fraction",
                                                              "explained_variance",
                                                              "steps_per_second",
                                                              "learning_rate",
                                                              "clip_range",
                                                              "episodes",
                                                              "episode_length_min",
                                                              "episode_length_max",
                                                              "sample_steps_per_second",
                                                              "train_steps_per_second",
                                                              "eval_return_mean",
                                                              "eval_return_std",
                                                              "eval_return_min",
                                                              "eval_return_max",
                                                              "eval_length_mean"};

/// True for the curve columns measured by the wall clock (they differ between runs that
/// are otherwise bit-identical, e.g. a resumed run and an uninterrupted one).
bool is_wall_clock_column(const std::string& name);

/// One row of the learning curve, in the order of `kCurveColumns` (env steps, seconds).
using CurveRow = std::array<double, kCurveColumns.size()>;

/// Bytes one rank holds for training as configured (an upper estimate, as a double so that
/// no input overflows it): the `[T, B]` rollout buffer (observations of `obs_dim` floats,
/// actions of `action_dim` doubles, eleven per-step values), one minibatch's copy, indices,
/// and the actor's and critic's activations and gradients (convolution outputs included:
/// with `c.agent.conv` the image shape is read from env `c.env`). The `Trainer` constructor
/// refuses (herd::InputError) a run that needs more than `max_memory` or the memory
/// available. Thread-safe (pure).
double training_memory_need(const TrainConfig& c, std::size_t obs_dim, std::size_t action_dim);

/// Trains an `ActorCriticAgent` with PPO or A2C as configured. Not thread-safe.
///
/// Checkpoints (`herd::io::CheckpointWriter`, kind "herd.rl.trainer") hold the resolved
/// configuration, network parameters, optimizer state, normaliser states, env states and
/// reset-stream positions, current observations, episode accumulators, the policy-draw
/// counter, the iteration counter and the learning curve so far; every other random draw
/// is addressed by these counters (DESIGN.md §4), so a resumed run is bit-identical to an
/// uninterrupted one (except wall-clock columns).
///
/// **Data-parallel over MPI ranks** (a communicator of N > 1 ranks, e.g. `mpiexec -n N
/// herd-rl train`; Stooke & Abbeel 2018 §4): rank r runs its own sampler of B =
/// `sampler.num_envs` envs with global ids r*B + k (the union of the ranks' envs is one
/// process with N*B envs); `total_steps` and the curve's env steps count all ranks; rank
/// 0's initial parameters are broadcast; `Ppo` averages gradients every minibatch (global
/// advantage normalisation; `algo.minibatch_size` is the union minibatch, divisible by N);
/// normaliser statistics are merged across ranks at every step (so every rank normalises
/// the same); finished episodes are all-gathered every iteration, so every rank holds the
/// same curve. Checkpoints: `save_checkpoint` is collective, rank 0 writes the file with
/// every rank's sampler state (gathered) and the rank count; `load_checkpoint` refuses a
/// checkpoint of a different rank count. `run`, `iterate` and `save_checkpoint` are
/// collective; only rank 0 writes files. If one rank throws, the others block in the next
/// collective: the caller must end the job (herd-rl calls MPI_Abort naming the rank).
///
/// **Devices** (`device`): the agent, its optimizer state and the whole update
/// run on the configured device; environments, normalisers, GAE and the per-sample loss
/// arithmetic stay on the host. A plain "cuda" under N > 1 ranks gives rank r the GPU
/// (local rank mod device count), the local rank being the rank among `comm`'s ranks on
/// the same node (`node_local_rank`: MPI_Comm_split_type shared memory), one rank per GPU;
/// gradients are then averaged by `nn::DataParallel` over an `NcclCommunicator` (its own
/// stream, unique id over `comm`), and the host collectives stay on `comm`. Checkpoints
/// hold float64 host copies of the parameters and optimizer state, so a checkpoint of a
/// CPU run resumes on a GPU and the other way round (the trajectory then differs in float
/// rounding only; the change of `device` is reported by `changed_on_resume`).
class Trainer final : public TrainingRun {
 public:
  /// Builds sampler, agent and algorithm. `config_text` is the resolved configuration
  /// (TOML) stored in checkpoints and the output. `comm` (not owned; null: one process)
  /// with N > 1 ranks makes a data-parallel run (see the class comment); the constructor
  /// is then collective. @throws herd::InputError (also: a minibatch size not divisible
  /// by N; a CUDA device that is not usable; "cuda" with N > 1 ranks in a build without
  /// NCCL); herd::CommunicationError when NCCL cannot start.
  Trainer(const TrainConfig& config, std::string config_text, Communicator* comm = nullptr);
  ~Trainer();
  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  /// Runs one iteration (collect, advantages, update) and appends a curve row.
  /// @throws herd::NumericalError naming the iteration when a loss is not finite.
  void iterate();
  /// True when `num_iterations()` iterations are done, or when the evaluation after the
  /// last iteration reached `eval.stop_return`.
  bool done() const override;
  /// Iterates until done, until `stop_after` more iterations (< 0: no limit), or until
  /// `*interrupt` (may be null; set e.g. by a signal handler) is non-zero on any rank
  /// after an iteration. Writes a checkpoint every `checkpoint_period` iterations, after
  /// each iteration that ends at least `checkpoint_period_seconds` after the last
  /// checkpoint of this call (or its start), when stopped or interrupted, and when done,
  /// then also `<prefix>.h5`; a run interrupted in its last iteration completes (kDone).
  /// Rank 0 writes `<prefix>_progress.csv` (a row per iteration, `ProgressCsv`; a resumed
  /// run continues the file from the checkpoint's iteration) and, with
  /// `logging.tensorboard`, a TensorBoard event file in `<prefix>_tb/` (a new file per
  /// call; it starts with a SessionLog START at step env_steps + 1, so that TensorBoard
  /// drops the points an interrupted earlier call wrote after this checkpoint). Prints a
  /// progress line every `progress_period` iterations to `progress` (may be null; rank 0).
  /// Collective: under several ranks the decisions to checkpoint and to stop are agreed
  /// every iteration (one all-reduce), so all ranks stop after the same iteration.
  /// @throws as `iterate`; herd::IoError when writing fails.
  RunEnd run(std::ostream* progress, std::int64_t stop_after = -1,
             const volatile std::sig_atomic_t* interrupt = nullptr) override;
  /// After `run` returned kInterrupted: the largest `*interrupt` value over the ranks when
  /// they agreed to stop (e.g. the signal number); 0 otherwise. The same on every rank.
  int interrupted_by() const override { return interrupted_by_; }

  /// Writes the checkpoint atomically (rank 0 writes; collective). @throws herd::IoError
  void save_checkpoint(const std::string& path) const override;
  /// Restores a checkpoint of a run with the same configuration (every rank reads it).
  /// @throws herd::IoError for a bad file, herd::InputError when it does not match: a
  ///         setting of `resume_conflicts` changed (naming each, both values and `path`), or
  ///         a checkpoint written by a different number of ranks (naming both counts).
  void load_checkpoint(const std::string& path) override;
  /// The settings of this run that differ from those stored in the checkpoint `path` and
  /// cannot change on resume, because they fix the shapes of the saved state: env,
  /// sampler.num_envs, network.hidden, network.shared_trunk, algo.optimizer. Each entry is
  /// "key = new (the checkpoint has old)"; empty when the checkpoint can be resumed (the
  /// rank count is checked by `load_checkpoint`). Reads the file only; thread-safe with
  /// respect to other readers; not collective. @throws herd::IoError for a bad file.
  std::vector<std::string> resume_conflicts(const std::string& path) const override;
  /// Writes `<prefix>.h5`-style output to `path` atomically: `/curve/<column>` `[iterations]`,
  /// the attribute `config` (TOML text), `/policy/<param>` tensors, `/obs_rms/{mean,var,count}`.
  /// @throws herd::IoError
  void write_output(const std::string& path) const override;

  /// Settings of this run that differ from those of the checkpoint last loaded, each as
  /// "key = new (the checkpoint has old)", leaving out those that do not change the
  /// training's trajectory (total_steps, output_prefix, checkpoint_period,
  /// checkpoint_period_seconds, progress_period, logging.tensorboard, sampler.kind,
  /// sampler.num_threads). Empty before `load_checkpoint`.
  const std::vector<std::string>& changed_on_resume() const override { return changed_on_resume_; }
  /// Iterations done.
  std::int64_t iteration() const override { return iteration_; }
  /// Env steps done.
  std::int64_t env_steps() const { return iteration_ * config_.steps_per_iteration(); }
  /// Mean return of the last 100 finished training episodes (NaN before the first).
  double recent_mean_return() const;
  /// Number of finished episodes in the recent window (at most 100).
  std::size_t recent_episodes() const { return recent_.size(); }
  /// The learning curve so far.
  const std::vector<CurveRow>& curve() const { return curve_; }
  /// The agent.
  ActorCriticAgent& agent() { return *agent_; }
  /// The sampler.
  Sampler& sampler() { return *sampler_; }
  /// The configuration.
  const TrainConfig& config() const override { return config_; }
  /// The device the agent runs on (for "cuda" under several ranks: this rank's GPU).
  Device device() const override { return agent_->device(); }
  /// This process's rank (0 without a communicator).
  int rank() const { return comm_->rank(); }
  /// The number of data-parallel ranks (1 without a communicator).
  int ranks() const { return comm_->size(); }
  /// `<prefix>_tb`, the folder of TensorBoard event files.
  std::string tensorboard_dir() const { return config_.output_prefix + "_tb"; }
  /// A learning-curve row as a row of the progress CSV.
  static ProgressRow progress_row(const CurveRow& row);
  /// The TensorBoard scalars of a learning-curve row (tags "<section>/<CSV column>"; the
  /// algorithm's not-applicable quantities left out), the event's step its env steps.
  std::vector<io::TbScalar> tensorboard_scalars(const CurveRow& row) const;

 private:
  void gather_episodes();
  void open_logs();
  void log_row(const CurveRow& row);
  bool evaluate_if_due(std::ostream* progress);
  std::vector<double> csv_values(const CurveRow& row) const;
  TrainConfig config_;
  std::string config_text_;
  std::vector<std::string> changed_on_resume_;
  std::unique_ptr<Communicator> own_comm_;  // SelfCommunicator when none was given
  Communicator* comm_ = nullptr;
  std::unique_ptr<Sampler> sampler_;
  std::unique_ptr<ActorCriticAgent> agent_;
  std::unique_ptr<detail::DeviceComm> dev_comm_;  // NCCL and its stream (CUDA agents under several ranks)
  std::unique_ptr<Ppo> algo_;
  RolloutBuffer buffer_;
  std::int64_t iteration_ = 0;
  double wall_offset_ = 0;  // seconds of earlier sessions (resumed runs)
  double wall_start_ = 0;
  std::deque<EpisodeInfo> recent_;
  int interrupted_by_ = 0;
  double episodes_total_ = 0;  // finished training episodes, all ranks (NaN: unknown, an older checkpoint)
  std::vector<CurveRow> curve_;
  std::unique_ptr<detail::PeriodicEvaluation> eval_;
  std::unique_ptr<ActorCriticAgent> eval_agent_;  // host copy of the agent that evaluation plays
  std::unique_ptr<ProgressCsv> csv_;              // rank 0, during `run`
  std::unique_ptr<io::TensorBoardWriter> tb_;     // rank 0 with logging.tensorboard, during `run`
};

/// Result of `evaluate_policy`: per-episode returns, their mean and population std, lengths
/// and how the episodes ended.
struct EvalResult {
  std::vector<double> returns;        ///< undiscounted returns
  double mean = 0;                    ///< mean return
  double std = 0;                     ///< standard deviation of the returns
  std::vector<std::int64_t> lengths;  ///< steps of each episode
  /// Episodes that ended truncated, not terminated: by the env's time limit or cut off at
  /// the evaluation's step cap (their returns are those of the steps played).
  std::size_t truncated = 0;
  std::size_t capped = 0;  ///< of these, the episodes cut off at the step cap

  /// Adds one step (its reward) to the running episode; returns true when that episode is
  /// over: terminated, truncated by the env, or cut off at `max_episode_steps` (> 0; 0: no
  /// cap). Its return, length and ending are then recorded, and the next step starts the
  /// next episode.
  bool add_step(const StepResult& step, std::int64_t max_episode_steps);

 private:
  double episode_return_ = 0;
  std::int64_t episode_length_ = 0;
};

/// Default step cap of an evaluation episode (`eval.max_episode_steps`): 27000 agent steps,
/// as Stable-Baselines3's and the Atari literature's evaluations (108000 frames at frame skip 4).
inline constexpr std::int64_t kEvalMaxEpisodeSteps = 27000;

/// Runs `episodes` episodes of `env_id` one after another with the agent's mode action
/// (deterministic, as SB3 evaluates) or sampled actions (`stochastic`), observations
/// normalised by `obs_rms` when given. Env global id 1<<20 (disjoint from training envs),
/// reset stream `seed`. An episode that has not ended after `max_episode_steps` steps is cut
/// off there and counted as truncated (0: no cap; an episode that never ends then never
/// returns). @throws herd::InputError for an unknown env, episodes < 1 or max_episode_steps < 0.
EvalResult evaluate_policy(ActorCriticAgent& agent, const std::string& env_id, const RunningMeanStd* obs_rms,
                           int episodes, bool stochastic, std::uint64_t seed,
                           std::int64_t max_episode_steps = kEvalMaxEpisodeSteps);

/// Loads the agent of a checkpoint written by `Trainer` (or `DqnTrainer`) and evaluates it;
/// `max_episode_steps` < 0: the run's `eval.max_episode_steps`.
/// @throws herd::IoError for a bad file; herd::InputError
EvalResult evaluate_checkpoint(const std::string& path, int episodes, bool stochastic,
                               std::int64_t max_episode_steps = -1);

}  // namespace herd::rl
