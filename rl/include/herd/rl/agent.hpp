#pragma once
/// @file agent.hpp
/// `ActorCriticAgent`: actor and critic networks (MLPs, or convolutional encoders for image
/// observations) with a categorical or diagonal-Gaussian policy, the agent of A2C (Mnih et
/// al. 2016) and PPO (Schulman et al. 2017), initialised as in Andrychowicz et al. 2021
/// ("What matters in on-policy RL"): orthogonal weights with gain sqrt(2) in hidden and
/// convolutional layers, 0.01 on the policy output, 1 on the value output, zero biases
/// (or PyTorch's default for every layer: `AgentOptions::init`).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "herd/core/device.hpp"
#include "herd/core/rng.hpp"
#include "herd/nn/distributions.hpp"
#include "herd/nn/linear.hpp"
#include "herd/nn/mlp.hpp"
#include "herd/nn/tensor.hpp"
#include "herd/rl/network.hpp"
#include "herd/rl/spaces.hpp"

namespace herd::rl {

/// Options of an `ActorCriticAgent`.
struct AgentOptions {
  std::vector<std::int64_t> hidden = {64, 64};        ///< hidden widths of actor and critic
  nn::Activation activation = nn::Activation::kTanh;  ///< hidden nonlinearity
  double init_log_std = 0.0;                          ///< initial log standard deviation of a Gaussian policy
  /// One MLP trunk shared by a linear policy head and a linear value head (the value loss
  /// then also trains the trunk), instead of separate actor and critic MLPs.
  bool shared_trunk = false;
  std::uint64_t seed = 0;  ///< initialisation draws: `RngStream(seed, 0 or 1, kInit)`
  /// Where the networks, heads and (through `named_parameters`) the optimizer state live:
  /// `Device::cpu()` or, in CUDA builds, `Device::cuda(i)` (see the class comment).
  Device device = Device::cpu();
  /// Convolutions before the `hidden` layers of actor and critic (or of the shared trunk),
  /// for image observations `{channels, height, width}` (`Space::shape()`); each is followed
  /// by `activation`, and the last one's output is flattened into the first hidden layer
  /// (see `make_encoder`). Empty (the default): MLPs on the flat observation vector.
  std::vector<ConvLayerSpec> conv;
  /// Initialisation of the encoders and heads: orthogonal (encoder gain sqrt(2), policy
  /// head 0.01, value head 1, biases zero; SB3's `ortho_init=True`) or PyTorch's default
  /// uniform +-1/sqrt(fan_in) for every layer (SB3's `ortho_init=False`).
  EncoderInit init = EncoderInit::kOrthogonal;

  /// The encoder these options describe (`conv`, `hidden`, `activation`, `init`), as the
  /// agent, the DQN Q-network and tools rebuilding them pass it to `make_encoder`.
  EncoderSpec encoder() const { return EncoderSpec{conv, hidden, activation, init}; }
};

/// An actor-critic agent with separate actor and critic networks, or one shared trunk with
/// two linear heads (`AgentOptions::shared_trunk`), float32 on the host or a CUDA device.
///
/// Networks: each of actor, critic and shared trunk is `make_encoder(observation shape,
/// {conv, hidden, activation})` (optional convolutions, flatten, dense layers, each
/// followed by the activation); the actor and critic end in a Linear output layer appended
/// to their encoder, the shared trunk feeds two Linear heads. Without convolutions these
/// are exactly the MLPs of earlier versions (same names, initial values and arithmetic), so
/// vector-observation runs and checkpoints are unchanged. Initialisation draws: actor
/// `RngStream(seed, 0, kInit)`, critic stream 1, trunk stream 0, heads stream 2; the k-th
/// weighted layer of a network draws from index k. Observation rows are always flat
/// `[obs_dim]` float32 (an image in C order of its shape).
///
/// Discrete action spaces get a `Categorical` over `n` logits; `Box` spaces a diagonal
/// `Gaussian` with a state-independent learned log standard deviation ("dist.log_std").
/// Parameters are named "pi.*" (actor or policy head), "vf.*" (critic or value head),
/// "trunk.*" (shared trunk) and "dist.log_std".
///
/// Actions are float64 rows `[n, action_dim]`; a discrete action is its index (0-based;
/// the sampler adds the space's start). Gaussian samples are not clipped (the environment
/// clips them, and the log-probability is of the unclipped sample, as in SB3).
///
/// **Devices.** With `AgentOptions::device` a CUDA device (CUDA builds), the networks,
/// heads and parameter gradients live on that GPU and every forward/backward pass, the
/// softmax/Gaussian head and action sampling run there (on the nn stream,
/// `nn::compute_stream`); the API stays host pointers. Each call stages its host inputs in
/// pinned (page-locked) buffers, copies them host->device with cudaMemcpyAsync on the nn
/// stream, enqueues the work, gathers the outputs into one device buffer (device-to-device
/// copies), copies that device->host into pinned memory in one copy on the same stream
/// and waits once for the stream before returning (`backward` only enqueues
/// its uploads and returns; the next call that refills the staging buffers waits for
/// them). Sampling uses the same Philox counters as the host (docs/nn.md "CUDA"), so for
/// the same seeds a CUDA agent draws the same discrete actions as a CPU agent (barring a
/// uniform within float rounding of a class boundary) and its log-probabilities and values
/// agree within float32 rounding (cuBLAS sums in another order). Row padding is kept.
/// `Ppo`'s device update uses `device_batch`, `evaluate_device` and `backward_device`
/// instead of `evaluate`/`backward` (no copies, no waits). `state_dict` returns tensors on the agent's device;
/// `load_state_dict` takes tensors of any device and float dtype, so checkpoints move between CPU and CUDA runs.
///
/// Thread-safety: one thread at a time (the modules keep buffers).
class ActorCriticAgent {
 public:
  /// An agent for observations of `observation_space` (a `Box`; its `shape()` decides
  /// whether `options.conv` applies: it needs `{channels, height, width}`).
  /// @throws herd::InputError for a `Discrete` observation space, empty or non-positive
  ///         hidden sizes (an empty `hidden` is allowed after convolutions), convolutions
  ///         with a non-3-D observation shape or shrinking the image below 1x1 (see
  ///         `make_encoder`), or a CUDA device in a CPU-only build; herd::CudaError when the
  ///         device cannot be used.
  ActorCriticAgent(const Space& observation_space, const Space& action_space, const AgentOptions& options);
  /// An agent for flat observation vectors `[obs_dim]` (a 1-D observation shape).
  /// @throws herd::InputError for obs_dim 0, and as above.
  ActorCriticAgent(std::size_t obs_dim, const Space& action_space, const AgentOptions& options);
  ~ActorCriticAgent();
  ActorCriticAgent(const ActorCriticAgent&) = delete;
  ActorCriticAgent& operator=(const ActorCriticAgent&) = delete;

  /// Components of one observation (the product of `obs_shape()`).
  std::size_t obs_dim() const { return obs_dim_; }
  /// Array shape of one observation: `{obs_dim}`, or `{channels, height, width}` for an image.
  const std::vector<std::int64_t>& obs_shape() const { return obs_shape_; }
  /// Components of one action row (1 for a discrete space).
  std::size_t action_dim() const { return action_dim_; }
  /// True for a categorical policy.
  bool discrete() const { return discrete_; }
  /// The device of the networks (`AgentOptions::device`).
  Device device() const { return device_; }

  /// Acts on `n` observations `obs` `[n, obs_dim]`: writes actions `[n, action_dim]`,
  /// log-probabilities `[n]` and values `[n]` (either may be null). With `rng` the actions
  /// are sampled (row i from stream `rng.stream() + i` at `index`); without it they are the
  /// distribution's mode (deterministic evaluation, as SB3). Row i's outputs depend only
  /// on row i's observation (and draws), not on n or the other rows, bit for bit: the
  /// batch is padded to a multiple of 8 rows so every row takes the same path through the
  /// matrix products. Same for `value`.
  void act(const float* obs, std::size_t n, const RngStream* rng, std::uint64_t index, double* actions,
           float* log_probs, float* values);
  /// Critic values V(obs) `[n]` for `obs` `[n, obs_dim]`.
  void value(const float* obs, std::size_t n, float* values);

  /// Training forward pass on a minibatch: observations `[n, obs_dim]`, actions
  /// `[n, action_dim]`; afterwards `log_probs()`, `entropies()` and `values()` hold `[n]`.
  void evaluate(const float* obs, const double* actions, std::size_t n);
  /// log pi(a|s) of the last `evaluate`, `[n]`.
  const std::vector<float>& log_probs() const { return logp_; }
  /// Policy entropies of the last `evaluate`, `[n]`.
  const std::vector<float>& entropies() const { return ent_; }
  /// Values of the last `evaluate`, `[n]`.
  const std::vector<float>& values() const { return val_; }
  /// Accumulates parameter gradients of L given dL/d(log_prob), dL/d(entropy) and
  /// dL/d(value), each `[n]`, for the last `evaluate`.
  void backward(const float* grad_log_prob, const float* grad_entropy, const float* grad_value);

  /// Device-resident minibatch inputs of a CUDA agent (for `Ppo`'s device update): the
  /// agent's own input tensors, sized for `n` samples, as raw device pointers on the
  /// agent's device. Fill them on the nn stream (`nn::compute_stream`), then call
  /// `evaluate_device(n)`. Observations `[n, obs_dim]` float32; actions `[n]` int64 class
  /// indices (discrete; `continuous_actions` null) or `[n, action_dim]` float32
  /// (continuous; `discrete_actions` null). Valid until the next call of the agent.
  struct DeviceBatch {
    float* obs = nullptr;
    std::int64_t* discrete_actions = nullptr;
    float* continuous_actions = nullptr;
  };
  /// See `DeviceBatch`. @throws herd::InputError for an agent on the host.
  DeviceBatch device_batch(std::size_t n);
  /// Outputs of `evaluate_device`, device pointers: log pi(a|s), entropies and values
  /// `[n]` each, and the gradient input `grad` `[3n]` that `backward_device` reads:
  /// dL/d(log_prob), dL/d(entropy), dL/d(value) end to end (the caller writes it).
  struct DeviceEvaluation {
    const float* log_probs = nullptr;
    const float* entropies = nullptr;
    const float* values = nullptr;
    float* grad = nullptr;
  };
  /// `evaluate` on the inputs written through `device_batch(n)`, entirely on the device:
  /// no copy, no host wait (the work is enqueued on the nn stream). `log_probs()`,
  /// `entropies()` and `values()` are not updated. @throws herd::InputError for an agent
  /// on the host or an `n` other than the last `device_batch`'s.
  DeviceEvaluation evaluate_device(std::size_t n);
  /// `backward` with the gradients already in `DeviceEvaluation::grad` of the last
  /// `evaluate_device` (no upload, no host wait). @throws herd::InputError without a
  /// preceding `evaluate_device`.
  void backward_device();

  /// All parameters with their names (see the class comment), for the optimizer.
  std::vector<nn::NamedParameter> named_parameters();
  /// Deep copies of the parameters (float32, on the agent's device).
  std::vector<nn::NamedTensor> state_dict();
  /// Restores `state_dict()` output, from tensors on any device and of any float dtype
  /// (converted to float32 on the host first when needed).
  /// @throws herd::InputError on a missing or misshaped entry.
  void load_state_dict(const std::vector<nn::NamedTensor>& state);

  /// The agent's networks as one `nn::Module` container (children "trunk", "pi", "vf",
  /// "dist" as present), whose `named_parameters()` equal the agent's, for
  /// `nn::DataParallel` (its grad-ready hook sees each layer as the agent's `backward`
  /// finishes it). Its own `forward`/`backward` throw `herd::InputError`: run the agent's.
  nn::Module& module();

 private:
  static constexpr std::size_t kRowBlock = 8;  // inference batches padded to a multiple
  ActorCriticAgent(std::vector<std::int64_t> obs_shape, const Space& action_space, const AgentOptions& options);
  struct DeviceIo;  // pinned staging buffers and pending copies (CUDA agents)
  void load_obs(const float* obs, std::size_t n, bool pad);
  void fetch(const nn::Tensor& t, float* out, std::size_t n);
  void wait_fetches();
  const nn::Tensor& actor_forward(const float* obs, std::size_t n, bool pad);
  void policy_backward(const nn::Tensor& grad_out);
  std::vector<std::int64_t> obs_shape_;
  struct Outputs {
    const nn::Tensor* log_probs;
    const nn::Tensor* entropies;
    const nn::Tensor* values;
  };
  const nn::Tensor& policy_forward();
  Outputs evaluate_forward();
  void backward_from_grad(std::int64_t n);
  std::size_t device_n_ = 0;  // samples of the last device_batch / evaluate_device
  bool device_evaluated_ = false;
  std::size_t obs_dim_, action_dim_;
  bool discrete_;
  Device device_;
  std::unique_ptr<DeviceIo> io_;
  std::unique_ptr<nn::Sequential> actor_, critic_;
  std::unique_ptr<nn::Gaussian> gauss_;
  std::unique_ptr<nn::Sequential> trunk_;
  std::unique_ptr<nn::Linear> pi_head_, vf_head_;
  nn::Tensor gh_;
  const nn::Tensor* h_ = nullptr;
  nn::Categorical cat_;
  nn::Tensor obs_t_, act_t_, sample_t_, grad_t_, critic_in_, gv_;
  std::vector<float> logp_, ent_, val_;
  std::unique_ptr<nn::Module> module_;
};

}  // namespace herd::rl
