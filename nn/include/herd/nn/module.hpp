#pragma once
/// @file module.hpp
/// `Module`: the base of every layer, with explicit forward and backward passes,
/// named parameters, gradients, train/eval mode and a state dict (PyTorch's `nn.Module`
/// semantics, without autograd).
///
/// Protocol: `forward(x)` caches what `backward` needs and returns a reference to an output
/// buffer the module owns (valid until its next `forward`); `backward(dy)` must follow the
/// `forward` it differentiates, *accumulates* parameter gradients into `Parameter::grad`
/// (call `zero_grad()` between steps) and returns the gradient with respect to the input
/// (valid until the next `backward`). The input given to `forward` must stay unchanged
/// until `backward`. Buffers are reused, so after the first call at a given batch size a
/// forward/backward pair does not allocate (with 1 thread).
///
/// Devices: a module is built for one `Device` and dtype; its inputs must match them.
/// CUDA builds run every module on `Device::cuda(i)` too: the work
/// is enqueued on the device's nn stream (`compute_stream`) and calls return before it is
/// done (docs/nn.md "CUDA"). CPU-only builds reject CUDA devices with InputError, and so
/// do CUDA builds for a device the machine does not have (no driver or GPU, or an index
/// past the last one); nothing falls back to the host.
///
/// Thread-safety: a module instance is used by one thread at a time; distinct instances are
/// independent. Internally large matrix products may run on the nn thread pool
/// (`set_num_threads`). The calling thread needs about 2 MiB of stack (Eigen's product
/// blocking buffers live there; default thread stacks on Linux are 8 MiB).

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "herd/nn/tensor.hpp"

namespace herd::nn {

/// A trainable tensor and its gradient (same shape, dtype, device).
struct Parameter {
  Tensor value;  ///< the trainable values
  Tensor grad;   ///< dL/d(value), accumulated by `backward`, zeroed by `zero_grad`
};

/// A parameter with its dotted name ("0.weight", "pi.2.bias").
struct NamedParameter {
  std::string name;            ///< dotted name
  Parameter* param = nullptr;  ///< owned by its module
};

/// Callback run when a parameter's gradient for the current backward pass is complete
/// (see `Module::set_grad_ready_hook`).
using GradReadyHook = std::function<void(Parameter&)>;

/// Base class of layers (see the file comment).
class Module {
 public:
  /// @param dtype kFloat32 or kFloat64 @param device where parameters and buffers live
  /// @throws InputError for kInt64.
  Module(DType dtype, Device device);
  virtual ~Module();
  /// Modules own buffers and hand out pointers to their parameters: not copyable.
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;

  /// Computes the output for `input` and caches what `backward` needs.
  /// @throws InputError on a shape, dtype or device mismatch (named in the message).
  virtual const Tensor& forward(const Tensor& input) = 0;
  /// Given dL/d(output) of the last forward, accumulates dL/d(parameters) and returns
  /// dL/d(input).
  /// @throws InputError when no forward preceded it or the shape does not match.
  virtual const Tensor& backward(const Tensor& grad_output) = 0;
  /// The layer's kind, for messages: "Linear", "Sequential".
  virtual std::string type_name() const = 0;

  /// Dtype of parameters, inputs and outputs.
  DType dtype() const { return dtype_; }
  /// Device of parameters, inputs and outputs.
  Device device() const { return device_; }

  /// All parameters, depth first, with dotted names (children prefixed by their names).
  std::vector<NamedParameter> named_parameters();
  /// All parameters, in the order of `named_parameters`.
  std::vector<Parameter*> parameters();
  /// Total number of scalar parameters.
  std::int64_t parameter_count();
  /// Sets every parameter gradient to zero.
  void zero_grad();
  /// Switches training mode (on) or evaluation mode (off) here and in all children.
  void train(bool on = true);
  /// Same as `train(false)`.
  void eval() { train(false); }
  /// True in training mode (the default).
  bool is_training() const { return training_; }
  /// Whether `backward` must compute dL/d(input) (default true). Turning it off for a
  /// network whose input is data (observations) lets `Linear` and `Conv2d` skip that
  /// product, as PyTorch skips inputs without `requires_grad`; their `backward` then
  /// returns an undefined tensor (other layers compute it anyway). Parameter gradients
  /// are unaffected. Containers pass it on to their first child.
  virtual void set_input_grad(bool on) { input_grad_ = on; }
  /// See `set_input_grad`.
  bool input_grad() const { return input_grad_; }

  /// Installs `hook` (empty: removes it) on this module and all its descendants. During
  /// `backward`, a container (`Sequential`) calls `notify_grads_ready()` on each child as
  /// soon as that child's backward has returned, so the hook sees the parameters of the
  /// last layers first (reverse layer order) while earlier layers are still being
  /// differentiated; this is what `DataParallel` uses to start all-reduces during backward
  /// (Li et al. 2020, "PyTorch Distributed", §3.2). A parameter can be reported more than
  /// once per pass (nested containers report their subtree again); modules that are not
  /// containers report nothing, so users of the hook must treat parameters never reported
  /// as ready when `backward` returns. The hook runs on the thread calling `backward`.
  void set_grad_ready_hook(GradReadyHook hook);
  /// Runs the hook on every parameter of this module's subtree, in reverse order of
  /// `named_parameters()`. No-op without a hook.
  void notify_grads_ready();
  /// True when a grad-ready hook is installed on this module (see `set_grad_ready_hook`).
  bool has_grad_ready_hook() const { return static_cast<bool>(grad_ready_hook_); }

  /// Deep copies of the parameters under their names (PyTorch's `state_dict`).
  std::vector<NamedTensor> state_dict();
  /// Copies parameters from `state` by name; dtypes are converted.
  /// @throws InputError naming the parameter and both shapes when a shape differs, naming
  ///         a parameter missing from `state`, or (strict) naming an entry of `state`
  ///         that the module does not have.
  void load_state_dict(const std::vector<NamedTensor>& state, bool strict = true);

 protected:
  /// Creates a zero parameter (and zero gradient) named `name` owned by this module.
  Parameter& register_parameter(const std::string& name, const Shape& shape);
  /// Registers a child owned elsewhere (normally by the subclass) under `name`.
  void register_module(const std::string& name, Module* child);
  /// Throws InputError unless `x` has this module's dtype and device and `ndim` dims
  /// (ndim < 0: any), naming `who` and the argument `what` ("input" of `forward`,
  /// "grad_output" of `backward`).
  void check_input(const Tensor& x, int ndim, const char* who, const char* what = "input") const;

 private:
  void collect(const std::string& prefix, std::vector<NamedParameter>& out);

  DType dtype_;
  Device device_;
  bool training_ = true;
  bool input_grad_ = true;
  std::vector<std::pair<std::string, std::unique_ptr<Parameter>>> params_;
  std::vector<std::pair<std::string, Module*>> children_;
  GradReadyHook grad_ready_hook_;
};

/// Sets the number of threads the nn CPU backend uses for large matrix products
/// (1 = run on the calling thread only, the default). Not thread-safe: call it while no
/// module is running.
/// @throws InputError when `n < 1`.
void set_num_threads(int n);
/// The current thread count of the nn CPU backend.
int num_threads();

}  // namespace herd::nn
