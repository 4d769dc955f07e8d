#pragma once
/// @file dqn_trainer.hpp
/// `DqnTrainer`: `herd-rl train` with `algorithm = "dqn"`: B environments stepped together
/// (an `EnvPool`), epsilon-greedy actions from a `QNetwork`, a `ReplayBuffer`, `Dqn`
/// updates, target updates, the learning curve, checkpoints (replay buffer included) from
/// which training resumes bit-identically, and the `<prefix>.h5` output; plus greedy
/// evaluation of a DQN checkpoint.

#include <array>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "herd/io/tensorboard.hpp"
#include "herd/rl/dqn.hpp"
#include "herd/rl/env_pool.hpp"
#include "herd/rl/progress_csv.hpp"
#include "herd/rl/replay_buffer.hpp"
#include "herd/rl/sampler.hpp"
#include "herd/rl/trainer.hpp"
#include "herd/rl/training_run.hpp"

namespace herd::rl {

/// Columns of DQN's learning curve, one row per iteration (names of the `/curve` datasets
/// of `<prefix>.h5`; those shared with PPO's curve mean the same). Returns and lengths are
/// over the last 100 finished training episodes; `loss`, `q_mean` (mean Q(s, a) of the
/// sampled batches), `target_mean` and `grad_norm` are means over the iteration's gradient
/// steps (NaN without one); `epsilon` and `beta` are the values at the iteration's end;
/// `gradient_steps` counts all gradient steps so far; `replay_size` the valid transitions.
inline constexpr std::array<const char*, 27> kDqnCurveColumns = {"iteration",
                                                                 "env_steps",
                                                                 "wall_seconds",
                                                                 "return_mean",
                                                                 "return_min",
                                                                 "return_max",
                                                                 "episode_length",
                                                                 "episode_length_min",
                                                                 "episode_length_max",
                                                                 "episodes",
                                                                 "loss",
                                                                 "q_mean",
                                                                 "target_mean",
                                                                 "grad_norm",
                                                                 "epsilon",
                                                                 "beta",
                                                                 "learning_rate",
                                                                 "gradient_steps",
                                                                 "replay_size",
                                                                 "steps_per_second",
                                                                 "sample_steps_per_second",
                                                                 "train_steps_per_second",
                                                                 "eval_return_mean",
                                                                 "eval_return_std",
                                                                 "eval_return_min",
                                                                 "eval_return_max",
                                                                 "eval_length_mean"};

/// Columns of a DQN run's `<prefix>_progress.csv` (a subset of the curve, named as PPO's
/// CSV where they mean the same).
inline constexpr std::array<const char*, 18> kDqnProgressColumns = {"iteration",
                                                                    "env_steps",
                                                                    "wall_time_s",
                                                                    "episodes",
                                                                    "return_mean",
                                                                    "return_min",
                                                                    "return_max",
                                                                    "length_mean",
                                                                    "length_min",
                                                                    "length_max",
                                                                    "loss",
                                                                    "q_mean",
                                                                    "epsilon",
                                                                    "learning_rate",
                                                                    "gradient_steps",
                                                                    "replay_size",
                                                                    "sample_steps_per_s",
                                                                    "train_steps_per_s"};

/// Bytes a DQN run holds as configured (upper estimate): the replay buffer
/// (`ReplayBuffer::memory_need`), two sampled batches of observations, the envs' buffers
/// and the networks' activations. Thread-safe (pure).
double dqn_memory_need(const TrainConfig& c, std::size_t obs_dim, bool uint8_obs);

/// Whether observations of `space` are stored as uint8 in the replay buffer: a Box of
/// integer values (`BoxValues::kInteger`: MinAtar's 0/1 grids, image frames) whose bounds lie
/// within [0, 255]; any other space's as float32 (a Box of real values, whatever its bounds).
/// Thread-safe.
bool replay_uint8(const Space& space);

/// DQN training (see the file comment). Not thread-safe. The networks and their update run
/// on `device` (the CPU or a CUDA device: see "On a CUDA device" in `Dqn`; acting uploads
/// the envs' observations and reads the greedy actions back once per vector step).
///
/// **Ranks** (a communicator of N > 1): data-parallel (see "Data-parallel" in `Dqn`). Rank
/// r steps B envs of global ids r * B + k (their own reset and policy streams) into its own
/// replay buffer and samples its j-th batch from draw j * N + r of the replay stream; env
/// steps and every schedule count all ranks' env steps; a rank's finished episodes join
/// the window at the end of each iteration, in rank order; the curve's loss, Q and target
/// means are averaged and `replay_size` summed over the ranks. Each rank keeps its own
/// target network (updated from its online network, so identical on every rank). On CUDA
/// devices, as `Trainer`: a plain "cuda" gives rank r the GPU (node-local rank mod device
/// count; `data_parallel_device`), "cuda:<index>" pins every rank to that GPU; the
/// gradients are averaged over an `NcclCommunicator` on the device (own stream, unique id
/// over `comm`), the host collectives (replay readiness, episodes, curve statistics,
/// checkpoint gathers) stay on `comm`. `iterate`, `run` and `save_checkpoint` are
/// collective; rank 0 writes the files.
///
/// **Steps.** An iteration is `sampler.num_steps` vector steps (every one of the B =
/// `sampler.num_envs` envs steps once per vector step), so `steps_per_iteration()` and
/// `total_steps` count env steps as for PPO. Before each vector step, env k acts
/// epsilon-greedily: with the draw u of `RngStream(seed, k, kPolicy).at(vector step)`,
/// a uniformly random action when u < epsilon or env steps < learning_starts, else the
/// greedy action of the online network (first maximum). After the step the transitions go
/// into the replay; every `train_freq` vector steps, once env steps >= learning_starts,
/// `gradient_steps` gradient steps follow, the j-th (over the run) sampling its batch
/// from `RngStream(seed, 0xFFFFFF00, kShuffle).at(j)`; then, whenever the env steps pass a
/// multiple of `target_update_interval`, the target network is updated (hard or Polyak).
/// Epsilon follows `exploration_epsilon` over total_steps; beta rises linearly from beta0
/// to 1 at total_steps.
///
/// **Checkpoints** (kind "herd.rl.dqn") hold the resolved configuration, both networks,
/// the optimizer state, the replay buffer (filled slots only, observations in their
/// stored type), env states and reset-stream positions, the current observations, episode
/// accumulators, the step and gradient-step counters (every random draw is addressed by
/// them) and the curve; a resumed run is bit-identical to an uninterrupted one (except the
/// wall-clock columns). With N ranks each rank's replay buffer, envs, observations and
/// accumulators form a nested checkpoint "rank<r>" (kind "herd.rl.dqn.rank"), gathered on
/// rank 0; "ranks" records N, and a run of another rank count refuses the file.
class DqnTrainer final : public TrainingRun {
 public:
  /// Builds the envs, networks, replay buffer and optimizer. @throws herd::InputError (a
  /// non-discrete action space, a CUDA device in a build without CUDA, without a usable
  /// device on this rank, or with more than one rank in a build without NCCL, a replay
  /// buffer larger than `max_memory` or the memory available); herd::CommunicationError
  /// when NCCL cannot start. Collective over `comm` (null: one process).
  DqnTrainer(const TrainConfig& config, std::string config_text, Communicator* comm = nullptr);
  ~DqnTrainer() override;
  DqnTrainer(const DqnTrainer&) = delete;
  DqnTrainer& operator=(const DqnTrainer&) = delete;

  /// Runs one iteration (num_steps vector steps with their training) and appends a curve row.
  /// @throws herd::NumericalError when a loss is not finite.
  void iterate();
  RunEnd run(std::ostream* progress, std::int64_t stop_after = -1,
             const volatile std::sig_atomic_t* interrupt = nullptr) override;
  int interrupted_by() const override { return interrupted_by_; }
  /// True when `num_iterations()` iterations are done, or when the evaluation after the
  /// last iteration reached `eval.stop_return`.
  bool done() const override;
  std::int64_t iteration() const override { return iteration_; }
  const TrainConfig& config() const override { return config_; }
  /// The device the networks run on (for "cuda" under several ranks: this rank's GPU).
  Device device() const override { return config_.agent.device; }
  void save_checkpoint(const std::string& path) const override;
  void load_checkpoint(const std::string& path) override;
  /// Fixed on resume: algorithm, env, sampler.num_envs, network.hidden, network.activation, network.conv_*,
  /// dqn.buffer_size, dqn.n_step, dqn.dueling, dqn.prioritized, dqn.optimizer.
  std::vector<std::string> resume_conflicts(const std::string& path) const override;
  const std::vector<std::string>& changed_on_resume() const override { return changed_on_resume_; }
  /// `<prefix>_tb`, the folder of TensorBoard event files (`logging.tensorboard`: tags
  /// "rollout/<column>", "train/<column>", "time/<column>" of the progress CSV, a new file
  /// per `run`, starting with a SessionLog START at env_steps + 1, as `Trainer` does).
  std::string tensorboard_dir() const { return config_.output_prefix + "_tb"; }
  /// `/curve/<column>` (`kDqnCurveColumns`), attributes `config`, `env`, `algorithm`,
  /// `/q_network/<param>` and `/target_network/<param>` (float32).
  void write_output(const std::string& path) const override;

  /// Env steps done.
  std::int64_t env_steps() const {
    return static_cast<std::int64_t>(vector_steps_) * static_cast<std::int64_t>(pool_->num_envs()) * config_.ranks;
  }
  /// Gradient steps done.
  std::uint64_t gradient_steps() const { return grad_steps_; }
  /// The learning curve so far (rows of `kDqnCurveColumns`).
  const std::vector<std::vector<double>>& curve() const { return curve_; }
  /// Mean return of the last 100 finished episodes (NaN before the first).
  double recent_mean_return() const;
  /// The online network.
  QNetwork& q_network() { return *online_; }
  /// The target network.
  QNetwork& target_network() { return *target_; }
  /// The update (its optimizer; `Dqn::set_step_observer` to watch the gradient steps).
  Dqn& dqn() { return *dqn_; }
  /// The replay buffer.
  const ReplayBuffer& replay() const { return *replay_; }
  /// Epsilon at the current env step.
  double epsilon() const;

 private:
  void vector_step();
  void train_round();
  void save_local(io::CheckpointWriter& w) const;
  void load_local(const io::CheckpointReader& r, const std::string& path);
  void open_logs();
  bool evaluate_if_due(std::ostream* progress);
  std::vector<double> progress_values(const std::vector<double>& row) const;
  TrainConfig config_;
  std::string config_text_;
  std::vector<std::string> changed_on_resume_;
  std::unique_ptr<SelfCommunicator> own_comm_;  // when none is given
  Communicator* comm_ = nullptr;
  std::uint32_t first_gid_ = 0;        // global id of this rank's env 0
  bool replay_ready_ = false;          // every rank's replay holds a transition (several ranks)
  std::vector<EpisodeInfo> finished_;  // this rank's episodes finished in the current iteration
  std::unique_ptr<EnvPool> pool_;
  std::unique_ptr<QNetwork> online_, target_;
  std::unique_ptr<detail::DeviceComm> dev_comm_;  // NCCL and its stream (CUDA networks under several ranks)
  std::unique_ptr<Dqn> dqn_;
  std::unique_ptr<ReplayBuffer> replay_;
  std::int64_t num_actions_ = 0;
  std::vector<float> obs_;  // [B, obs_dim] current observations
  std::vector<double> ep_ret_;
  std::vector<std::int64_t> ep_len_;
  std::vector<std::int64_t> actions_;
  std::vector<std::int64_t> greedy_;  // greedy actions of the envs [B]
  ReplaySample batch_;
  std::vector<double> td_;
  std::uint64_t vector_steps_ = 0, grad_steps_ = 0;
  std::int64_t iteration_ = 0;
  // Per-iteration sums of the gradient steps' statistics.
  double sum_loss_ = 0, sum_q_ = 0, sum_target_ = 0, sum_norm_ = 0;
  std::int64_t n_stats_ = 0;
  double train_seconds_ = 0;
  std::deque<EpisodeInfo> recent_;
  double episodes_total_ = 0;
  std::vector<std::vector<double>> curve_;
  double wall_offset_ = 0, wall_start_ = 0;
  int interrupted_by_ = 0;
  std::unique_ptr<detail::PeriodicEvaluation> eval_;
  std::unique_ptr<QNetwork> eval_q_;  // host copy of the online network that evaluation plays
  std::unique_ptr<ProgressCsv> csv_;
  std::unique_ptr<io::TensorBoardWriter> tb_;  // with logging.tensorboard, during `run`
};

/// Greedy (or, with `epsilon` > 0, epsilon-greedy) episodes of `env_id` with `q`: env global
/// id 1<<20, reset stream `seed`, exploration draws from `RngStream(seed, 1<<20, kPolicy)`;
/// episodes cut off at `max_episode_steps` steps as `evaluate_policy` (0: no cap).
/// @throws herd::InputError for an unknown env, episodes < 1 or max_episode_steps < 0.
EvalResult evaluate_q_network(QNetwork& q, const std::string& env_id, int episodes, double epsilon, std::uint64_t seed,
                              std::int64_t max_episode_steps = kEvalMaxEpisodeSteps);

/// Loads the online network of a `DqnTrainer` checkpoint and evaluates it greedily
/// (`stochastic`: epsilon-greedy with the run's final epsilon); `max_episode_steps` < 0:
/// the run's `eval.max_episode_steps`.
/// @throws herd::IoError for a bad file; herd::InputError
EvalResult evaluate_dqn_checkpoint(const std::string& path, int episodes, bool stochastic,
                                   std::int64_t max_episode_steps = -1);

/// The checkpoint kind DQN runs write ("herd.rl.dqn").
inline constexpr const char* kDqnCheckpointKind = "herd.rl.dqn";

}  // namespace herd::rl
