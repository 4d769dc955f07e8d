#pragma once
/// @file dqn.hpp
/// The DQN family (Mnih et al. 2015, "Human-level control through deep reinforcement
/// learning"): `QNetwork` (an encoder with a linear Q head, or the dueling value/advantage
/// heads of Wang et al. 2016), and `Dqn`, its update: Huber TD loss against a target
/// network, plain or double targets (van Hasselt et al. 2016), n-step returns and
/// prioritized-replay importance weights (`ReplayBuffer`), gradient-norm clipping, hard or
/// Polyak target updates, and the linear epsilon schedule of Stable-Baselines3's DQN.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "herd/core/communicator.hpp"
#include "herd/core/rng.hpp"
#include "herd/nn/data_parallel.hpp"
#include "herd/nn/linear.hpp"
#include "herd/nn/mlp.hpp"
#include "herd/nn/module.hpp"
#include "herd/nn/optimizer.hpp"
#include "herd/rl/ppo.hpp"
#include "herd/rl/replay_buffer.hpp"

namespace herd::rl {

/// The TD loss of `Dqn`.
enum class DqnLoss {
  kHuber,  ///< weighted Huber loss with threshold `huber_delta` (SB3's smooth L1)
  kMse,    ///< weighted squared error, mean_i w_i d_i^2 (PyTorch's `mse_loss`)
};

/// Options of DQN (defaults: Stable-Baselines3's `DQN`, with SB3's names; `double_q`,
/// `dueling`, `n_step` and `prioritized` add the rlpyt/Rainbow variants, off by default).
/// Step counts are env steps summed over all environments unless said otherwise.
struct DqnOptions {
  std::int64_t buffer_size = 1000000;  ///< replay capacity (transitions, all envs)
  int batch_size = 32;                 ///< transitions per gradient step
  std::int64_t learning_starts = 100;  ///< env steps of uniformly random actions before training starts
  int train_freq = 4;                  ///< vector steps (one step of every env) between training rounds
  /// Gradient steps per training round (-1: as many as the env steps of the round,
  /// train_freq * num_envs, as SB3's -1).
  int gradient_steps = 1;
  std::int64_t target_update_interval = 10000;  ///< env steps between target updates
  double tau = 1.0;                             ///< target update: 1 copies, < 1 is Polyak averaging
  double exploration_initial_eps = 1.0;         ///< epsilon at the start
  double exploration_final_eps = 0.05;          ///< epsilon after the schedule
  double exploration_fraction = 0.1;            ///< fraction of total_steps over which epsilon decays linearly
  bool double_q = false;                        ///< double DQN targets
  bool dueling = false;                         ///< dueling heads
  int n_step = 1;                               ///< n of the n-step return
  bool prioritized = false;                     ///< prioritized replay (proportional)
  double alpha = 0.6;                           ///< priority exponent
  double beta0 = 0.4;              ///< importance exponent at the start, annealed linearly to 1 at total_steps
  double priority_eps = 1e-6;      ///< added to |TD error| in priorities
  double learning_rate = 1e-4;     ///< optimizer step size (constant)
  double max_grad_norm = 10.0;     ///< gradient-norm clip (0: off)
  double gamma = 0.99;             ///< discount
  double huber_delta = 1.0;        ///< Huber loss threshold (SB3: smooth L1, 1)
  DqnLoss loss = DqnLoss::kHuber;  ///< TD loss
  OptimizerKind optimizer = OptimizerKind::kAdam;  ///< Adam (SB3) or RMSprop (the MinAtar paper)
  double optimizer_eps = 1e-8;                     ///< Adam/RMSprop epsilon (PyTorch's Adam default)
  double rmsprop_alpha = 0.95;                     ///< RMSprop's squared-gradient decay (MinAtar paper: 0.95)
  /// Centred RMSprop (PyTorch's `centered=True`; the MinAtar paper's and Mnih et al.'s DQN).
  bool rmsprop_centered = false;
};

/// The exploration rate after `steps` of `total_steps` env steps: linear from `initial` to
/// `final` over the first `fraction` * total_steps, then `final` (SB3's `get_linear_fn`).
/// fraction 0 gives `final` at once. Thread-safe (pure).
double exploration_epsilon(std::int64_t steps, std::int64_t total_steps, double initial, double final_eps,
                           double fraction);

/// A Q-network: `encoder` (observations `[n, obs_shape...]` -> features `[n, F]`, e.g.
/// `make_encoder` of network.hpp: the MinAtar paper's one 3x3 convolution with 16 channels
/// and 128 ReLU units, or an MLP) then a
/// linear Q head (parameters "q.weight" `[A, F]`, "q.bias"), or with `dueling` a value head
/// ("value.*", `[1, F]`) and an advantage head ("advantage.*", `[A, F]`) combined as
/// Q = V + A - mean_a A (Wang et al. 2016, eq. 9). The encoder's parameters are named
/// "encoder.*". Heads take PyTorch's default initialisation from `rng.at(init_index)` and
/// `rng.at(init_index + 1)` (on the host, then copied: the same values on every device).
/// Float32, on the host or a CUDA device (`device`, which must be the encoder's; the
/// dueling combination then runs as kernels of herd/rl/cuda/dqn_kernels.hpp, bit for bit
/// as on the host). `forward` takes `[n, obs_dim]` rows (on the network's device) and
/// reshapes them to `[n, obs_shape...]` for the encoder. Thread-safety as `nn::Module`.
class QNetwork : public nn::Module {
 public:
  /// @param encoder maps `[n, obs_shape...]` to `[n, features]` (owned)
  /// @throws herd::InputError for a null encoder, features or num_actions < 1, an empty
  ///         obs_shape, or an encoder on another device than `device`.
  QNetwork(std::unique_ptr<nn::Module> encoder, std::int64_t features, std::vector<std::int64_t> obs_shape,
           std::int64_t num_actions, bool dueling, const RngStream& rng, std::uint64_t init_index,
           Device device = Device::cpu());
  ~QNetwork() override;
  QNetwork(const QNetwork&) = delete;
  QNetwork& operator=(const QNetwork&) = delete;
  /// `[n, obs_dim]` (or `[n, obs_shape...]`) -> Q values `[n, A]`.
  const nn::Tensor& forward(const nn::Tensor& obs) override;
  /// dL/dQ `[n, A]` -> accumulates parameter gradients; returns an undefined tensor (the
  /// observations need no gradient).
  const nn::Tensor& backward(const nn::Tensor& grad_q) override;
  std::string type_name() const override { return "QNetwork"; }
  /// Actions A.
  std::int64_t num_actions() const { return actions_; }
  /// Whether the heads are dueling.
  bool dueling() const { return dueling_; }
  /// The encoder.
  nn::Module& encoder() { return *encoder_; }
  /// The Q head (not dueling) or the advantage head (dueling).
  nn::Linear& head() { return *head_; }
  /// The value head. @throws herd::Error when not dueling.
  nn::Linear& value_head();
  /// Greedy actions of `n` observations: `obs` host `[n, obs_dim]` floats, `actions` host
  /// `[n]` receives argmax_a Q(obs_i, a) (the first maximum). On a CUDA device: one upload
  /// (pinned), the forward pass and the argmax on the device, one read-back and one host wait.
  void greedy_actions(const float* obs, std::int64_t n, std::int64_t* actions);
  /// Target update: every parameter p' of this network becomes tau p + (1 - tau) p' of
  /// `online` (float32: p' * (1 - tau) + tau * p, as SB3's `polyak_update`); tau = 1
  /// copies exactly. @throws herd::InputError when the networks' parameters differ in
  /// names or shapes, or tau is outside (0, 1].
  void update_from(QNetwork& online, double tau);

 private:
  std::unique_ptr<nn::Module> encoder_;
  std::unique_ptr<nn::Linear> head_, value_;
  std::vector<std::int64_t> obs_shape_;
  std::int64_t features_, actions_;
  bool dueling_;
  nn::Tensor in_, q_, grad_adv_, grad_val_, grad_h_, none_;
  nn::Tensor act_in_;    // greedy_actions on the host: the input rows
  struct ActingBuffers;  // greedy_actions on a CUDA device: pinned staging, device tensors
  std::unique_ptr<ActingBuffers> acting_;
};

/// Statistics of one `Dqn::train_step`.
struct DqnStepStats {
  double loss = 0;         ///< weighted mean TD loss (Huber or squared error: `DqnLoss`)
  double q_mean = 0;       ///< mean Q(s, a) of the batch
  double target_mean = 0;  ///< mean TD target
  double grad_norm = 0;    ///< gradient norm before clipping
};

/// One gradient step of `Dqn::train_step`, as its observer sees it (`Dqn::set_step_observer`).
/// The spans and the batch are valid during the call only.
struct DqnStepRecord {
  const ReplaySample* batch = nullptr;  ///< the step's batch
  std::span<const double> targets;      ///< TD targets y_i `[batch]` (`Dqn::targets`)
  std::span<const double> td_errors;    ///< Q(s_i, a_i) - y_i `[batch]` (Q of the online network before the step)
  DqnStepStats stats;                   ///< the step's statistics (loss, means, gradient norm)
};

/// DQN's update on an online and a target `QNetwork` (not owned; same architecture and
/// device). Not thread-safe.
///
/// **On a CUDA device** `train_step` runs every stage on the device: the batch is packed
/// into pinned host memory and uploaded in one copy; the target (and with `double_q` the
/// online) network's forward pass on the next observations, the argmax, the TD loss with
/// its gradient and TD errors (herd/rl/cuda/dqn_kernels.hpp), backward, the gradient-norm
/// clip (`nn::clip_grad_norm_on_device`) and the optimizer step are enqueued on the nn
/// stream; the statistics, the gradient norm and the TD errors come back in one copy: one
/// upload, one read-back and one host wait per gradient step (test_rl_dqn_gpu holds this
/// budget). A non-finite loss vetoes the optimizer step on the device (its skip flag) and
/// `train_step` then throws as on the host. Results equal the host's up to summation order
/// (cuBLAS against Eigen, tree sums against sequential ones).
///
/// **Data-parallel** (a communicator of more than one rank): every rank computes the loss
/// on its own batch; the gradients are all-reduced (averaged) during backward by
/// `nn::DataParallel`, which also broadcasts rank 0's parameters at construction, so every
/// rank takes the same optimizer step and the parameters stay identical: one collective
/// per gradient step. Host networks average over `comm` (MPI); networks on a CUDA device
/// over `grad_comm`, an `NcclCommunicator` on that GPU (one GPU per rank), on the device:
/// the bucket all-reduces run on the communicator's stream during backward, and the nn
/// stream waits for them on the device, so a step keeps its one upload, one read-back and
/// one host wait (NCCL gives every rank the same bits, so the parameters stay bitwise
/// identical). The loss, mean Q and mean target returned are this rank's (`DqnTrainer`
/// averages them over the ranks once per iteration); the gradient norm is that of the
/// averaged gradient; TD errors stay per rank (each rank's replay priorities).
/// `train_step` is then collective. A rank whose loss is not finite sends NaN gradients, so
/// every rank finds the averaged gradient not finite and throws `NumericalError` before
/// the optimizer step (the parameters stay as they were; on a device the optimizer's skip
/// flag, raised on every rank by the non-finite norm of the averaged gradient, vetoes it).
class Dqn {
 public:
  /// Builds the optimizer over `online`'s parameters; with `comm` of more than one rank
  /// (not owned; outlives this object) trains data-parallel (collective). `grad_comm` (not
  /// owned; null: `comm`) is the communicator the gradients are averaged over, the same
  /// ranks as `comm`: for networks on a CUDA device an `NcclCommunicator` on that GPU
  /// (required there). @throws herd::InputError for non-positive learning rate, batch size
  /// or huber_delta, networks on different devices, a `grad_comm` of another size, CUDA
  /// networks over several ranks without `grad_comm` (or with one that is not an
  /// `NcclCommunicator` on their GPU: `nn::DataParallel`).
  Dqn(QNetwork& online, QNetwork& target, const DqnOptions& options, Communicator* comm = nullptr,
      Communicator* grad_comm = nullptr);
  ~Dqn();
  Dqn(const Dqn&) = delete;
  Dqn& operator=(const Dqn&) = delete;
  /// TD targets of `batch`: y = returns + discounts * Q_target(next_obs, a*), with a* the
  /// argmax of Q_target (plain) or of the online network (`double_q`); `[batch]`.
  /// Runs forward passes of the target (and with double_q the online) network (on a CUDA
  /// device: an upload and a read-back).
  std::vector<double> targets(const ReplaySample& batch);
  /// One gradient step on `batch`: targets, Q(s, a) of the online network, the loss
  /// mean_i w_i huber(Q(s_i, a_i) - y_i) (or mean_i w_i (Q(s_i, a_i) - y_i)^2 with
  /// `DqnLoss::kMse`), backward, gradient-norm clip, optimizer step.
  /// `td_errors` (not null) receives Q(s_i, a_i) - y_i for the priorities.
  /// @throws herd::NumericalError when the loss is not finite; herd::InputError for an
  ///         action outside [0, A).
  DqnStepStats train_step(const ReplaySample& batch, std::vector<double>* td_errors);
  /// The optimizer (state for checkpoints).
  nn::Optimizer& optimizer() { return *opt_; }
  /// The options.
  const DqnOptions& options() const { return opt_options_; }
  /// Calls `observer` after every gradient step of a host `train_step` (after the optimizer
  /// step: the online network's parameters are those after the step, their gradients
  /// those of the step, clipped when `max_grad_norm` > 0); an empty function removes it. A
  /// diagnostic hook (bench/rl/dqn_update_dump.cpp records gradient steps with it); it
  /// changes nothing in the update. Steps on a CUDA device, and a step that throws, do not
  /// call it.
  void set_step_observer(std::function<void(const DqnStepRecord&)> observer) { observer_ = std::move(observer); }

 private:
  QNetwork& online_;
  QNetwork& target_;
  DqnOptions opt_options_;
  std::vector<nn::NamedParameter> params_;
  std::unique_ptr<nn::Optimizer> opt_;
  nn::Tensor obs_t_, next_t_, grad_q_;
  Communicator* comm_ = nullptr;          // data-parallel ranks (null: one process)
  std::unique_ptr<nn::DataParallel> dp_;  // gradient all-reduce over comm_ (or the device communicator)
  struct DeviceState;                     // CUDA buffers of train_step_device
  std::unique_ptr<DeviceState> dev_;
  std::function<void(const DqnStepRecord&)> observer_;  // see set_step_observer
  std::vector<double> observed_td_;                     // the TD errors for observer_
  DqnStepStats train_step_device(const ReplaySample& batch, std::vector<double>* td_errors);
};

}  // namespace herd::rl
