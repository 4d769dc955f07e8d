#pragma once
/// @file graphed_train_step.hpp
/// `GraphedTrainStep`: one supervised train step (zero_grad, forward, MSE loss, backward,
/// Adam) of a module, captured once as a CUDA graph for fixed input shapes and replayed,
/// so a step costs one graph launch instead of a few dozen kernel launches (at
/// batch <= 256 launch overhead dominates an MLP step). Same idea as PyTorch's
/// `torch.cuda.graphs.make_graphed_callables` / whole-step capture (static input buffers,
/// warm-up before capture, replay), through the module API, so it works for any device
/// module whose forward/backward enqueue work without host waits (every layer of this
/// library: `Mlp`, `Sequential`, `Linear`, `Conv2d`, activations, `LayerNorm`).

#include <cstdint>
#include <string>

#include "herd/nn/losses.hpp"
#include "herd/nn/module.hpp"
#include "herd/nn/optimizer.hpp"

namespace herd::nn {

/// A whole train step `zero_grad; loss = mse(model(x), y); model.backward(mse.backward());
/// adam.step()` that, on a CUDA device, is captured as a CUDA graph and replayed.
///
/// Behaviour (CUDA device):
/// - The first step with new shapes of `x` and `y` runs eagerly (the same calls as written
///   above): a warm-up that lets every buffer reach its size. The second step with those
///   shapes captures the step into a graph (on the device's nn stream, reading `x` and `y`
///   from static device buffers owned by this object) and launches it; later steps with
///   those shapes copy `x` and `y` into the static buffers and launch the graph.
/// - A step with other shapes drops the graph and runs eagerly (and captures again on the
///   next step with those shapes). So does a step after any device buffer of the process
///   was reallocated (`detail::storage_replacements()` changed: e.g. the model ran forward
///   on a larger batch between steps), since the graph holds raw pointers to the module's
///   buffers.
/// - Adam's learning rate and step count live on the device for the graph: `set_lr`,
///   `load_state` and eager `step()` calls between graphed steps are picked up (a 32-byte
///   copy before the launch when they changed). `Optimizer::steps()` counts graphed steps.
/// - If capture fails (a module that waits for the host inside forward/backward), the step
///   runs eagerly instead and the object stays eager (`graph_error()` says why).
/// - A model with a grad-ready hook (wrapped by `DataParallel`) is refused: the step does
///   not call `DataParallel::finish`.
/// Results equal the eager step's within float rounding: the same kernels run in the same
/// order, except that Adam's bias corrections use the device's pow (last bit of a double).
/// On the host (a CPU model) every step is the eager step, bit-identical to writing it out.
///
/// Thread-safety: one thread at a time, the thread that uses the model, loss and optimizer;
/// they (and this object) must not be used by other code *during* a step, and must outlive
/// this object. Between steps they may be used freely (reading parameters, evaluating the
/// model, saving state).
class GraphedTrainStep {
 public:
  /// @param model module on a host or CUDA device; @param loss its MSE loss;
  /// @param optimizer Adam over (a subset of) the model's parameters, on the same device.
  /// @param use_graph false: always eager (for comparisons and benchmarks).
  /// @throws InputError when the optimizer's parameters are on another device.
  GraphedTrainStep(Module& model, MseLoss& loss, Adam& optimizer, bool use_graph = true);
  ~GraphedTrainStep();
  GraphedTrainStep(const GraphedTrainStep&) = delete;
  GraphedTrainStep& operator=(const GraphedTrainStep&) = delete;

  /// One train step on `input` (`[batch, ...]`, the model's input) and `target` (the
  /// model's output shape), both of the model's dtype, on the model's device or (for a
  /// device model) on the host (then copied to the device with cudaMemcpyAsync from
  /// pageable memory, which stages the data before returning: the host tensor may be
  /// reused or freed once `step` returns). Returns the
  /// loss before the update (a device value on a GPU: no host wait unless it is read; see
  /// `LossValue`). Returns before the device work is done.
  /// @throws InputError on a dtype/shape mismatch (from the model or loss) or a model with
  ///         a grad-ready hook (`DataParallel`);
  ///         CudaError on CUDA failures.
  LossValue step(const Tensor& input, const Tensor& target);

  /// True while a captured graph exists (for the last shapes).
  bool captured() const;
  /// Number of graphs captured so far.
  std::int64_t captures() const { return captures_; }
  /// Number of steps run as a graph launch (including the launch right after a capture).
  std::int64_t graph_steps() const { return graph_steps_; }
  /// Number of steps run eagerly.
  std::int64_t eager_steps() const { return eager_steps_; }
  /// Why capture failed (empty when it did not).
  const std::string& graph_error() const { return graph_error_; }
  /// Drops the captured graph (the next step runs eagerly, the one after captures again).
  void reset();

 private:
  struct Graph;
  LossValue eager(const Tensor& input, const Tensor& target);
  void capture();
  LossValue launch();

  Module& model_;
  MseLoss& loss_;
  Adam& opt_;
  bool use_graph_;
  Graph* graph_ = nullptr;
  std::int64_t captures_ = 0, graph_steps_ = 0, eager_steps_ = 0;
  std::string graph_error_;
};

}  // namespace herd::nn
