#pragma once
/// @file train_config.hpp
/// `TrainConfig`: everything `herd-rl train` reads from its TOML input and `--set`
/// overrides, declared once through `herd::io::Schema` (docs/io.md), so bad input gets a
/// one-line error naming the key, the value and the requirement.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "herd/core/config.hpp"
#include "herd/core/device.hpp"
#include "herd/io/schema.hpp"
#include "herd/rl/a2c.hpp"
#include "herd/rl/agent.hpp"
#include "herd/rl/dqn.hpp"
#include "herd/rl/ppo.hpp"
#include "herd/rl/sampler.hpp"

namespace herd::rl {

/// A resolved training configuration (defaults: RL Zoo's PPO settings for CartPole-v1:
/// 8 envs x 32 steps, 20 epochs, minibatch 256, gamma 0.98, lambda 0.8, lr 1e-3 and clip
/// 0.2 annealed linearly, 1e5 env steps).
struct TrainConfig {
  /// Registry id `make_env` takes: `env.id`, or with wrappers (`env.frame_stack`,
  /// `env.clip_reward`, `env.episodic_life`, `env.max_episode_steps`) the id that
  /// `register_wrapped_env` registered, e.g. "MinAtar/Breakout-v1[frame_stack=4]".
  std::string env = "CartPole-v1";
  /// `env.library`: absolute path of the shared library of a C environment (empty: none);
  /// resolving the configuration loads it and registers its environment as `env`.
  std::string env_library;
  std::string env_symbol;  ///< `env.symbol`: its `herd_env_spec_fn` (with env_library)
  /// `env.frame_stack`: observations stacked by the wrapper (1: none); DQN's replay stores
  /// each frame once and rebuilds the stacks.
  int frame_stack = 1;
  /// `eval.max_episode_steps`: `herd-rl eval` cuts an episode off after this many steps and
  /// reports it as truncated (0: no cap).
  std::int64_t eval_max_episode_steps = 27000;
  /// `eval.every_steps`: evaluation during training after the iteration that passes each
  /// multiple of this many env steps (all ranks); 0: none.
  std::int64_t eval_every_steps = 0;
  int eval_episodes = 5;         ///< `eval.episodes`: episodes of each evaluation during training
  bool eval_stochastic = false;  ///< `eval.stochastic`: sampled (DQN: epsilon-greedy) actions
  bool eval_save_best = true;    ///< `eval.save_best`: `<prefix>_best.ckpt` at each new best mean
  /// `eval.stop_return`: training ends after an evaluation whose mean return is at least
  /// this (Stable-Baselines3's StopTrainingOnRewardThreshold); unset: never.
  std::optional<double> eval_stop_return;

  std::string algorithm = "ppo";          ///< "ppo", "a2c" or "dqn"
  std::uint64_t seed = 0;                 ///< seed of every random stream
  std::int64_t total_steps = 100000;      ///< env steps to train (rounded up to whole rollouts)
  std::string output_prefix = "herd_rl";  ///< writes `<prefix>.h5` and `<prefix>.ckpt`
  std::int64_t checkpoint_period = 0;     ///< iterations between checkpoints (0: only at the end)
  /// Wall-clock seconds between checkpoints (0: none by time): after each iteration that
  /// ends at least this long after the last checkpoint, so an interrupted run loses little.
  double checkpoint_period_seconds = 120;
  bool tensorboard = false;           ///< `logging.tensorboard`: also write TensorBoard event files
  std::int64_t progress_period = 10;  ///< iterations between progress lines (0: none)
  /// Where the agent's networks run and train (`device`): "cpu", "cuda" or "cuda:<index>"
  /// (`agent.device` holds it parsed). Under `mpiexec` a plain "cuda" gives each rank GPU
  /// (local rank mod device count), chosen by `Trainer`.
  std::string device = "cpu";
  std::string sampler = "serial";  ///< "serial", "parallel" or "alternating"
  SamplerOptions sampler_options;  ///< env, sizes, threads, normalisation
  AgentOptions agent;              ///< network
  double gamma = 0.98;             ///< discount
  double gae_lambda = 0.8;         ///< GAE lambda
  PpoOptions ppo;                  ///< PPO hyperparameters (A2C uses a subset); `ppo.learning_rate` is scaled
  /// DQN hyperparameters (the `[dqn]` section; `dqn.gamma` is `algo.gamma`); with
  /// `algo.lr_scaling`, `dqn.learning_rate` is scaled by k = dqn.batch_size / lr_reference_batch.
  DqnOptions dqn;
  /// Learning-rate scaling with the batch (`algo.lr_scaling`: "none", "sqrt" or "linear").
  /// With k = steps_per_iteration() / lr_reference_batch, `ppo.learning_rate` is
  /// `algo.learning_rate` * k (linear) or * sqrt(k) (sqrt), and `lr_scale` holds that factor.
  /// References: Goyal et al. 2017 (linear scaling with gradual warm-up, SGD); Hoffer et al.
  /// 2017 and Malladi et al. 2022 (square-root scaling, the rule that matches adaptive
  /// optimizers such as Adam and RMSprop); Stooke & Abbeel 2018 §4 (A2C and PPO keep
  /// learning at large batches when A2C's learning rate grows with the batch and PPO keeps
  /// its number of minibatches, `algo.num_minibatches`, fixed so that its minibatches grow).
  /// The warm-up (`algo.lr_warmup_iterations`, in `ppo`) starts at the unscaled rate.
  std::string lr_scaling = "none";
  std::int64_t lr_reference_batch = 256;  ///< steps per iteration (all ranks) of the tuned rate
  double lr_scale = 1.0;                  ///< factor applied to `algo.learning_rate`
  /// Bytes the run may hold (`max_memory`; 0: the memory available on the machine);
  /// `Trainer` refuses a run whose rollout and update need more.
  std::uint64_t max_memory = 0;
  /// Where max_memory was set ("run.toml:7", "--set max_memory=200MB"; empty when it took
  /// its default): a refusal for exceeding it starts with this origin, as input errors do.
  std::string max_memory_origin;
  /// "<max_memory_origin>: " when max_memory was set, else "": what a refusal for exceeding
  /// it starts with.
  std::string max_memory_prefix() const {
    return max_memory > 0 && !max_memory_origin.empty() ? max_memory_origin + ": " : std::string();
  }
  /// Why this configuration learns little or nothing (one line each; herd-rl prints them
  /// as warnings before training), e.g. minibatches of one sample.
  std::vector<std::string> warnings;

  /// Ranks of a data-parallel run (set by `Trainer` from its communicator, not read from
  /// the input): each rank runs `sampler.num_envs` envs, so a run of N ranks has N * B envs.
  int ranks = 1;

  /// Env steps per iteration over all ranks: ranks * num_envs * num_steps.
  std::int64_t steps_per_iteration() const {
    return static_cast<std::int64_t>(ranks) * sampler_options.num_envs * sampler_options.num_steps;
  }
  /// Iterations to run: ceil(total_steps / steps_per_iteration).
  std::int64_t num_iterations() const { return (total_steps + steps_per_iteration() - 1) / steps_per_iteration(); }
  /// The A2C options this configuration implies.
  A2cOptions a2c() const;
};

/// The schema of `herd-rl train` (keys, types, defaults, ranges, docs).
const io::Schema& train_schema();

/// Resolves `config` with `overrides` ("key=value") into a `TrainConfig` for a run of
/// `ranks` data-parallel ranks (sets `TrainConfig::ranks`); `text` receives the resolved
/// settings as TOML (for the HDF5 output and checkpoints) when not null. `user_input`: the
/// configuration is a user's (a file, `--set`): a CUDA `device` must be usable here (a CUDA
/// build with that device), and a key that the run would not read is refused instead of
/// ignored: one of another algorithm (of `[algo]` other than gamma, lr_scaling and
/// lr_reference_batch for DQN; PPO's epochs, minibatches and clipping for A2C; of `[dqn]`
/// for PPO/A2C), `algo.minibatch_size` that disagrees with `algo.num_minibatches`,
/// `env.symbol` without `env.library`, `sampler.num_threads` > 1 with the serial sampler;
/// false for the text this function wrote (a checkpoint's, which lists every key). The
/// text comments such keys out, so that it runs again as an input file.
/// @throws herd::InputError with a one-line message naming the key, the value and the
///         requirement (e.g. an unknown env id, a minibatch larger than the rollout of all
///         ranks or not divisible by `ranks`, `algo.num_minibatches` not dividing the steps
///         per iteration, an odd num_envs for the alternating sampler, a `device` that is
///         not "cpu", "cuda" or "cuda:<index>", or, with `user_input`, "cuda" in a
///         CPU-only build or without a usable CUDA device, for DQN "cuda" over several
///         ranks in a build without NCCL (`multi_gpu_refusal`), an `env.library` that cannot be
///         loaded, lacks `env.symbol` or fills an invalid spec). The learning-rate
///         scale depends on `ranks`: resolve with the rank count of the run.
TrainConfig resolve_train_config(const io::Config& config, const std::vector<std::string>& overrides,
                                 std::string* text = nullptr, int ranks = 1, bool user_input = true);

/// As above from a TOML file (empty path: the defaults).
/// @throws herd::InputError, herd::IoError when the file cannot be read.
TrainConfig load_train_config(const std::string& path, const std::vector<std::string>& overrides,
                              std::string* text = nullptr, int ranks = 1);

/// Resolves a configuration from the TOML text `resolve_train_config` wrote (the device is
/// not checked: a checkpoint of a CUDA run can be evaluated on a CPU-only machine).
/// @throws herd::InputError
TrainConfig parse_train_config(const std::string& text, std::string* resolved = nullptr, int ranks = 1);

/// Where one rank of a data-parallel run puts its networks (`Trainer` and `DqnTrainer`):
/// with the plain device "cuda" (`device_text`) under `ranks` > 1, each rank its own GPU,
/// `cuda:(local_rank mod device_count)`, `local_rank` being the rank among the ranks on the
/// same node (`node_local_rank`) and `device_count` the CUDA devices usable there (one rank
/// per GPU; more ranks than GPUs on a node share them, which NCCL then refuses); otherwise
/// (the CPU, "cuda:<index>", which pins every rank to that GPU, or one rank) `configured`.
/// Host-side; thread-safe.
/// @throws herd::InputError "<who>: device is \"cuda\", but no CUDA device is usable on rank
///         <rank> (<devices>)" when a GPU per rank is wanted and `device_count` is 0.
Device data_parallel_device(const Device& configured, const std::string& device_text, int ranks, int rank,
                            int local_rank, int device_count, const std::string& who);

/// Why networks on `device` cannot train over `ranks` data-parallel ranks in a build with
/// (`have_nccl`) or without NCCL: empty when they can (the CPU, one rank, or CUDA devices
/// with NCCL, over which their gradients are averaged), else "this build of herd has no NCCL
/// (gradients of GPU agents are averaged over NCCL); run one rank, or device = \"cpu\"" (the
/// end of the refusal of `resolve_train_config`, `Trainer` and `DqnTrainer`). Host-side;
/// thread-safe (pure).
std::string multi_gpu_refusal(const Device& device, int ranks, bool have_nccl = HERD_HAVE_NCCL != 0);

}  // namespace herd::rl
