#pragma once
/// @file ppo.hpp
/// `Ppo`: proximal policy optimisation with the clipped surrogate (Schulman et al. 2017,
/// "Proximal policy optimization algorithms"), with the implementation details of
/// Stable-Baselines3 and Andrychowicz et al. 2021: per-minibatch advantage normalisation,
/// optional value clipping, entropy bonus, global gradient-norm clipping, several epochs of
/// shuffled minibatches, linear annealing of learning rate and clip range, approximate KL
/// ((r - 1) - log r) and clip fraction.

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "herd/core/communicator.hpp"
#include "herd/nn/data_parallel.hpp"
#include "herd/nn/optimizer.hpp"
#include "herd/rl/agent.hpp"
#include "herd/rl/rollout_buffer.hpp"

namespace herd::rl {

/// Which optimizer an algorithm uses.
enum class OptimizerKind {
  kAdam,     ///< Adam (PPO's default)
  kRmsProp,  ///< RMSprop, alpha 0.99 (A2C's default)
};

/// Options of `Ppo` (defaults: SB3's PPO, except where noted).
struct PpoOptions {
  double learning_rate = 3e-4;  ///< initial learning rate
  bool anneal_lr = true;        ///< lr * progress_remaining (linear to 0)
  double clip_range = 0.2;      ///< initial clip range epsilon (> 0)
  bool anneal_clip = true;      ///< clip_range * progress_remaining
  double clip_range_vf = 0.0;   ///< value clipping around the old values (0: off)
  int epochs = 10;              ///< passes over the rollout per update
  int minibatch_size = 64;      ///< samples per gradient step, over all ranks (0: the whole rollout)
  double ent_coef = 0.0;        ///< entropy bonus coefficient
  double vf_coef = 0.5;         ///< value loss coefficient
  double max_grad_norm = 0.5;   ///< global gradient-norm clip (<= 0: off)
  /// Per-minibatch advantage normalisation; a minibatch of one sample (over all ranks) is
  /// left unnormalised, as Stable-Baselines3 does (its normalised advantage would be 0).
  bool normalize_advantage = true;
  OptimizerKind optimizer = OptimizerKind::kAdam;  ///< Adam or RMSprop
  double optimizer_eps = 1e-5;                     ///< epsilon of Adam/RMSprop (SB3 uses 1e-5)
  std::uint64_t seed = 0;                          ///< minibatch permutations: `RngStream(seed, rank, kShuffle)`
  /// Gradual warm-up (Goyal et al. 2017, §2.2): for iteration i < `lr_warmup_iterations`
  /// the learning rate is multiplied by `lr_warmup_start + (1 - lr_warmup_start) * i /
  /// lr_warmup_iterations` (on top of annealing), reaching the full rate at iteration
  /// `lr_warmup_iterations`. 0: no warm-up.
  int lr_warmup_iterations = 0;
  double lr_warmup_start = 1.0;  ///< warm-up factor at iteration 0, in (0, 1]
  /// Device updates with Adam (see `Ppo`): capture the minibatch step as a CUDA graph and
  /// replay it (false: every minibatch is enqueued kernel by kernel; same results bit for bit).
  bool cuda_graph = true;
};

/// The warm-up factor of `o` at `iteration` (1 after the warm-up; see `PpoOptions`).
double lr_warmup_factor(const PpoOptions& o, std::int64_t iteration);

/// Diagnostics of one update (means over its minibatches; losses as minimised).
struct UpdateStats {
  double policy_loss = 0;         ///< clipped surrogate loss
  double value_loss = 0;          ///< (clipped) squared error of the value
  double entropy = 0;             ///< mean policy entropy (nats)
  double approx_kl = 0;           ///< mean (r - 1) - log r
  double clip_fraction = 0;       ///< fraction of samples with |r - 1| > clip
  double explained_variance = 0;  ///< 1 - Var(R - V) / Var(R) over the rollout
  double learning_rate = 0;       ///< learning rate used
  double clip_range = 0;          ///< clip range used
};

/// Per-minibatch loss terms (see `Ppo::minibatch_loss`).
struct MinibatchLoss {
  double total = 0;          ///< policy + vf_coef value - ent_coef entropy
  double policy = 0;         ///< clipped surrogate loss
  double value = 0;          ///< value loss
  double entropy = 0;        ///< mean entropy
  double approx_kl = 0;      ///< mean (r - 1) - log r
  double clip_fraction = 0;  ///< fraction clipped
};

/// One minibatch step of `Ppo::update`, as its observer sees it (`Ppo::set_minibatch_observer`).
struct MinibatchRecord {
  std::int64_t iteration = 0;              ///< the update's iteration (0-based)
  int epoch = 0;                           ///< pass over the rollout (0-based)
  std::size_t index = 0;                   ///< minibatch within the epoch (0-based)
  std::span<const std::uint32_t> samples;  ///< its rollout rows (`t * B + b`), valid during the call
  MinibatchLoss loss;                      ///< its loss terms (computed before the step)
  double learning_rate = 0;                ///< learning rate of the step
  double grad_norm = 0;                    ///< global L2 gradient norm before clipping (NaN without clipping)
};

/// PPO on an `ActorCriticAgent` (which it references and must outlive it).
/// One update: `epochs` passes of shuffled minibatches over the T*B samples of a rollout
/// whose advantages were computed (`RolloutBuffer::compute_advantages`). Not thread-safe.
///
/// **Data-parallel** (a communicator of N > 1 ranks; Stooke & Abbeel 2018 §4, synchronous
/// data parallelism): every rank holds its own rollout and the same parameters (rank 0's
/// are broadcast by the constructor, through `nn::DataParallel`). A minibatch of
/// `minibatch_size` samples is the union of N rank-local minibatches of
/// `minibatch_size / N` samples (each rank shuffles its own rollout with
/// `RngStream(seed, rank, kShuffle)`; rank 0's permutation is the single-process one).
/// Advantage normalisation uses *global* statistics: the mean and variance of the union
/// minibatch (one all-reduce of count, sum and sum of squares, in double precision), so
/// that the loss each rank computes is its share of the single-process loss on the union;
/// the gradients, all-reduced in buckets during backward and averaged by
/// `nn::DataParallel`, then equal the single-process gradient on the union up to rounding
/// (tested). Loss terms and diagnostics are averaged over ranks (a non-blocking all-reduce
/// beside the gradients'), so a non-finite loss on any rank stops every rank in the same
/// minibatch. Synchronisation points: one all-reduce per update for the advantage
/// statistics of all its minibatches (`update` draws every epoch's permutation first),
/// then one per minibatch (gradients and loss terms together).
/// Every rank then clips and steps identically: parameters stay identical across ranks
/// (tested bit for bit). `update` and `minibatch_loss` are then collective.
///
/// **Device updates** (an agent on a CUDA device, one process): `update` and `learn` run
/// on the device with one host wait per update. The rollout (observations, actions,
/// old log-probabilities and values, rewards, terminated/truncated flags, bootstrap
/// values; advantages and returns for `update`) and every epoch's minibatch permutation
/// (drawn on the host with the same generator as the host path) go to the device in one
/// host-to-device copy from pinned memory; `learn` then computes GAE there
/// (bit-identical to the host's); each minibatch gathers its rows, runs the agent's
/// `evaluate_device`, the loss kernel (advantage normalisation, clipped surrogate, value
/// and entropy terms and their gradients), `backward_device`, `nn::clip_grad_norm_on_device`
/// and the optimizer step, all enqueued without a host wait. A non-finite loss sets a
/// device flag that makes the optimizer skip that step and every later one of the update
/// (`nn::Optimizer::set_skip_flag`), so the parameters stay those before that minibatch,
/// as on the host. At the end one device-to-host copy brings every minibatch's loss terms,
/// the flag and the explained variance back, after the update's one host wait; the
/// `NumericalError` is thrown then. Every argument of a minibatch step's kernels stays
/// the same from minibatch to minibatch (the minibatch counter, the clip range and Adam's
/// learning rate and step count live in device memory, written by the upload), so with
/// Adam and `PpoOptions::cuda_graph` the step (zero_grad, gather, forward, loss, backward,
/// clipping, Adam) is captured as a CUDA graph after one eager warm-up step of a
/// minibatch size and replayed for every later minibatch of that size (also in later
/// updates, until a device buffer is reallocated); a shorter last minibatch of an epoch
/// runs eagerly. Replays give the eager steps' bits. Results equal the host path's within float rounding:
/// the network arithmetic is the same, but cuBLAS (or the host backend's reference GEMM)
/// sums in another order than the CPU's Eigen kernels, and the minibatch sums are trees.
class Ppo {
 public:
  /// `comm` (not owned, may be null: one process) selects data-parallel training when it
  /// has more than one rank (collective then: broadcasts rank 0's parameters); it carries
  /// the host collectives (advantage statistics, loss terms, explained variance).
  /// `grad_comm` (not owned; null: `comm`) is the communicator `nn::DataParallel` averages
  /// the gradients over: for an agent on a CUDA device an `NcclCommunicator` on that GPU
  /// with the same ranks as `comm` (the gradients are device memory), for a host agent
  /// `comm` itself.
  /// @throws herd::InputError for a non-positive learning rate, clip range or epochs,
  ///         a negative minibatch size, or one not divisible by the number of ranks, or a
  ///         `grad_comm` whose size differs from `comm`'s.
  Ppo(ActorCriticAgent& agent, const PpoOptions& options, Communicator* comm = nullptr,
      Communicator* grad_comm = nullptr);
  virtual ~Ppo();
  Ppo(const Ppo&) = delete;
  Ppo& operator=(const Ppo&) = delete;

  /// Runs one update. `progress_remaining` in [0, 1] (1 at the start of training) scales
  /// the annealed lr and clip range; `iteration` (0-based) selects the permutations.
  /// @throws herd::NumericalError "iteration <i>: the loss is nan ..." when a minibatch
  ///         loss is not finite (before any parameter is changed by that minibatch).
  UpdateStats update(const RolloutBuffer& buffer, double progress_remaining, std::int64_t iteration);

  /// GAE(gamma, lambda) of `buffer` followed by `update`: on the host
  /// `buffer.compute_advantages(gamma, lambda)` then `update(buffer, ...)`; with a device
  /// update (see the class comment) GAE runs on the device and `buffer.advantages` and
  /// `buffer.returns` are left unchanged. Throws as `update` and `compute_advantages`.
  UpdateStats learn(RolloutBuffer& buffer, double gamma, double lambda, double progress_remaining,
                    std::int64_t iteration);

  /// True when `update` runs on the agent's CUDA device (see the class comment).
  bool device_update() const { return device_update_; }
  /// Device updates: minibatch steps run as CUDA graph replays so far (0 without graphs),
  /// and graphs captured so far.
  std::int64_t graph_steps() const { return graph_steps_; }
  std::int64_t graph_captures() const { return graph_captures_; }
  /// Why a capture failed (the update then stays eager); empty when none did.
  const std::string& graph_error() const { return graph_error_; }

  /// The loss of the samples `idx` of `buffer` with clip range `clip` (advantages
  /// normalised over these samples when enabled; one sample gives advantage 0, not NaN);
  /// with `accumulate_grad` the parameter gradients of `total` are accumulated. Data-
  /// parallel: advantages are normalised with the statistics of the union of every rank's
  /// `idx`, and with `accumulate_grad` the gradients and the returned terms are averaged
  /// over ranks (collective).
  MinibatchLoss minibatch_loss(const RolloutBuffer& buffer, std::span<const std::uint32_t> idx, double clip,
                               bool accumulate_grad);

  /// Calls `observer` after every minibatch step of a host `update` (after the optimizer
  /// step: the agent's parameters and gradients, clipped, are those of that step); an empty
  /// function removes it. A diagnostic hook (bench/rl/ppo_update_dump.cpp records an
  /// update with it); it changes nothing in the update. Device updates do not call it.
  void set_minibatch_observer(std::function<void(const MinibatchRecord&)> observer) { observer_ = std::move(observer); }

  /// The optimizer (state for checkpoints).
  nn::Optimizer& optimizer() { return *opt_; }
  /// Ranks of data-parallel training (1: one process).
  int ranks() const { return comm_ ? comm_->size() : 1; }
  /// The options.
  const PpoOptions& options() const { return opt_options_; }

 private:
  ActorCriticAgent& agent_;
  PpoOptions opt_options_;
  Communicator* comm_ = nullptr;          // null or one rank: single process
  std::unique_ptr<nn::DataParallel> dp_;  // data-parallel gradient averaging
  std::vector<nn::NamedParameter> params_;
  std::unique_ptr<nn::Optimizer> opt_;
  std::vector<float> obs_, adv_, g_logp_, g_ent_, g_val_;
  std::vector<double> act_;
  std::vector<std::uint32_t> perm_;                       // [epochs, n] permutations of one update
  std::vector<double> stats_;                             // data-parallel: [epochs * minibatches, 3] advantage sums
  const double* adv_stats_ = nullptr;                     // this minibatch's global (count, sum, sum of squares)
  std::array<double, 6> terms_{};                         // loss terms being all-reduced
  std::function<void(const MinibatchRecord&)> observer_;  // see set_minibatch_observer
  bool device_update_ = false;                            // updates run on the agent's CUDA device
  std::int64_t graph_steps_ = 0, graph_captures_ = 0;
  std::string graph_error_;
  struct DeviceState;  // device buffers of a device update (ppo_device.cpp)
  struct DeviceStateDeleter {
    void operator()(DeviceState* d) const;
  };
  std::unique_ptr<DeviceState, DeviceStateDeleter> dev_;
  // Fills perm_ with every epoch's permutation of n samples (identity when mb >= n).
  void draw_permutations(std::uint32_t n, std::uint32_t mb, std::int64_t iteration);
  UpdateStats update_on_device(const RolloutBuffer& buffer, bool run_gae, double gamma, double lambda,
                               double progress_remaining, std::int64_t iteration);
};

/// Explained variance 1 - Var(y - y_pred) / Var(y) of n values (NaN when Var(y) = 0, as SB3).
double explained_variance(const float* y_pred, const float* y, std::size_t n);
/// As above over the union of every rank's values (sums all-reduced; collective when
/// `comm` has more than one rank, else the function above).
double explained_variance(const float* y_pred, const float* y, std::size_t n, Communicator* comm);

}  // namespace herd::rl
