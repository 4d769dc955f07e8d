#pragma once
/// @file optimizer.hpp
/// Optimizers (PyTorch `torch.optim` update rules): `Sgd` with momentum, `Adam`
/// (Kingma & Ba 2015), `RMSprop` (Tieleman & Hinton 2012; PyTorch's non-centred form and
/// its `centered=True` form, Graves 2013);
/// clipping by global gradient norm; linear learning-rate annealing.
///
/// State: `state()` returns deep copies of everything an update depends on ("step",
/// "lr" and per-parameter buffers named "<param>.<buffer>", e.g. "0.weight.exp_avg"), and
/// `load_state` restores it exactly, so training resumed from a saved model and optimizer
/// state continues bit-identically.
/// Updates run in the parameters' dtype on the parameters' device: the host, or (CUDA
/// builds) one element-wise kernel per parameter on the device's nn stream, with the state
/// buffers in device memory (`state()` clones them there; `load_state` takes tensors from
/// any device, converting the dtype on the host). All parameters of one optimizer share a
/// device. An optimizer is used by
/// one thread at a time. NaN gradients propagate into the parameters (clip_grad_norm
/// reports a NaN norm).

#include <cstdint>
#include <string>
#include <vector>

#include "herd/nn/module.hpp"

namespace herd::nn {

class GraphedTrainStep;

/// Base of the optimizers: owns the parameter list (not the parameters) and the state.
class Optimizer {
 public:
  /// @param params the parameters to update (e.g. `model.named_parameters()`); they must
  ///        outlive the optimizer. @param lr learning rate
  /// @throws InputError for a negative lr, duplicate names or parameters on different
  ///         devices.
  Optimizer(std::vector<NamedParameter> params, double lr);
  virtual ~Optimizer();
  /// Holds state per parameter pointer: not copyable.
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  /// Applies one update from the current gradients.
  void step();
  /// Zeroes the gradients of the optimised parameters.
  void zero_grad();
  double lr() const { return lr_; }
  /// @throws InputError for a negative, infinite or NaN lr.
  void set_lr(double lr);
  /// Number of `step()` calls so far (restored by `load_state`).
  std::int64_t steps() const { return steps_; }
  /// "SGD", "Adam", "RMSprop".
  virtual std::string type_name() const = 0;
  /// A device-side guard for the updates of parameters on a CUDA device: when `flag` (one
  /// int32 in that device's memory, or null to remove the guard) holds a non-zero value
  /// when an update kernel runs, that update leaves the parameters and buffers unchanged
  /// (`steps()` still counts the call). Lets a loss computed on the device veto a step
  /// without a host read-back (PPO's device update stops at a non-finite loss this way).
  /// The flag must outlive its use. @throws InputError for a non-null flag when the
  /// parameters live on the host.
  void set_skip_flag(const std::int32_t* flag);
  /// Counts `n` >= 0 steps that ran as replays of a captured CUDA graph holding this
  /// optimizer's device update (`Adam::step_with_device_hyper` with `count = false`), so
  /// that `steps()` (saved in `state()`) matches the device's step count.
  /// @throws InputError for a negative n.
  void count_replayed_steps(std::int64_t n);

  /// Deep copies of the state: "step" and "lr" (float64 `[1]`) and the buffers.
  std::vector<NamedTensor> state() const;
  /// Restores `state()` output.
  /// @throws InputError naming the entry when one is missing, unexpected, or of another
  ///         shape than the parameter (both shapes named).
  void load_state(const std::vector<NamedTensor>& state);

 protected:
  /// Declares per-parameter buffers (zero-initialised, parameter-shaped), e.g. "exp_avg".
  void add_buffers(const std::string& kind);
  /// Buffer `kind` (index of declaration) of parameter `i`.
  Tensor& buffer(std::size_t kind, std::size_t i) { return buffers_[kind][i]; }
  /// Updates parameter `i`; `steps()` already counts this step.
  virtual void update(std::size_t i, Parameter& p) = 0;

  std::vector<NamedParameter> params_;
  const std::int32_t* skip_ = nullptr;  // device guard (set_skip_flag)

 private:
  friend class GraphedTrainStep;  // replays Adam's update in a CUDA graph and counts its steps
  double lr_;
  std::int64_t steps_ = 0;
  std::vector<std::string> kinds_;
  std::vector<std::vector<Tensor>> buffers_;
};

/// SGD with momentum (PyTorch): buf = momentum buf + (1 - dampening) g (buf = g on the
/// first step), then p -= lr buf (or lr (g + momentum buf) with Nesterov).
class Sgd : public Optimizer {
 public:
  /// @throws InputError for negative lr or momentum, or `nesterov` without a positive
  ///         momentum and zero dampening (as PyTorch).
  Sgd(std::vector<NamedParameter> params, double lr, double momentum = 0.0, double dampening = 0.0,
      bool nesterov = false);
  std::string type_name() const override { return "SGD"; }

 protected:
  void update(std::size_t i, Parameter& p) override;

 private:
  double momentum_, dampening_;
  bool nesterov_;
};

/// Adam (Kingma & Ba 2015, PyTorch's form): m = b1 m + (1-b1) g, v = b2 v + (1-b2) g^2,
/// p -= lr / (1 - b1^t) m / (sqrt(v) / sqrt(1 - b2^t) + eps). Buffers "exp_avg",
/// "exp_avg_sq".
class Adam : public Optimizer {
 public:
  /// @throws InputError unless 0 <= beta < 1 and eps >= 0.
  Adam(std::vector<NamedParameter> params, double lr = 1e-3, double beta1 = 0.9, double beta2 = 0.999,
       double eps = 1e-8);
  std::string type_name() const override { return "Adam"; }
  /// One step with the learning rate and step count in device memory, for CUDA graphs (a
  /// replayed graph cannot take new kernel arguments): `hyper` is float64 `[4]` in the
  /// parameters' device memory, {lr, step, step_size, inv_bc2_sqrt}; the caller writes lr
  /// and the step count so far (`steps()`) before the first such step. Enqueues on the nn
  /// stream the advance of the device step and bias corrections (`cuda::adam_tick`) and
  /// one update per parameter reading them (honouring the skip flag), without a host wait;
  /// with `count` the step is counted in `steps()` (capture it with `count = false` and
  /// count each execution with `count_replayed_steps`). Equals `step()` except that the
  /// device's pow may differ in the last bit of a double.
  /// @throws InputError for host parameters or a CPU-only build.
  void step_with_device_hyper(double* hyper, bool count = true);

 protected:
  void update(std::size_t i, Parameter& p) override;

 private:
  friend class GraphedTrainStep;
  double beta1_, beta2_, eps_;
};

/// RMSprop (PyTorch's `torch.optim.RMSprop` without momentum): v = alpha v + (1 - alpha) g^2,
/// p -= lr g / (sqrt(v) + eps). Buffer "square_avg". Centred (PyTorch's `centered=True`,
/// Graves 2013 eq. 38-40, the form DQN on Atari and the MinAtar paper's DQN used): also the
/// gradient's mean m = alpha m + (1 - alpha) g (buffer "grad_avg"), and
/// p -= lr g / (sqrt(v - m^2) + eps), normalising by an estimate of the gradient's variance.
class RmsProp : public Optimizer {
 public:
  /// @throws InputError unless 0 <= alpha < 1 and eps >= 0.
  RmsProp(std::vector<NamedParameter> params, double lr = 1e-2, double alpha = 0.99, double eps = 1e-8,
          bool centered = false);
  std::string type_name() const override { return "RMSprop"; }
  /// Whether the centred form is used.
  bool centered() const { return centered_; }

 protected:
  void update(std::size_t i, Parameter& p) override;

 private:
  double alpha_, eps_;
  bool centered_;
};

/// Scales all gradients by max_norm / (norm + 1e-6) when the global L2 norm exceeds
/// max_norm (PyTorch `clip_grad_norm_`). Returns the norm before clipping. Gradients may
/// live on the host and on CUDA devices: each device's squares are summed on the device
/// in double (one wait per device), then scaled there.
/// @throws InputError for max_norm <= 0.
double clip_grad_norm(const std::vector<Parameter*>& params, double max_norm);
/// Overload for named parameters.
double clip_grad_norm(const std::vector<NamedParameter>& params, double max_norm);
/// `clip_grad_norm` without a host read-back, for gradients on one CUDA device: the sum of
/// squares goes into the device double `*sum_sq` (overwritten; its square root is the norm
/// before clipping) and every gradient is scaled on the device by `max_norm / (norm +
/// 1e-6)` when that is below 1 (the host's rule and rounding). Enqueued on the device's nn
/// stream; returns at once (no host wait). The squares are summed in a fixed order
/// (deterministic), as in `clip_grad_norm`.
/// @throws InputError for max_norm <= 0, a host parameter, parameters on several devices,
///         or a CPU-only build.
void clip_grad_norm_on_device(const std::vector<NamedParameter>& params, double max_norm, double* sum_sq);

/// Linear annealing of a value from `start` at step 0 to `end` at `total_steps` (held at
/// `end` afterwards): the usual PPO/A2C learning-rate schedule.
class LinearSchedule {
 public:
  /// @throws InputError unless total_steps > 0.
  LinearSchedule(double start, double end, std::int64_t total_steps);
  /// The value at `step` (>= 0).
  double at(std::int64_t step) const;
  /// Sets the optimizer's learning rate to `at(step)`.
  void apply(Optimizer& opt, std::int64_t step) const { opt.set_lr(at(step)); }

 private:
  double start_, end_;
  std::int64_t total_;
};

}  // namespace herd::nn
