#include "herd/nn/graphed_train_step.hpp"

#include <cmath>
#include <limits>

#include "cpu_compute.hpp"
#include "herd/core/config.hpp"
#if HERD_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "device_context.hpp"
#include "herd/core/cuda/cuda_check.hpp"
#include "herd/nn/cuda/kernels.hpp"
#endif

namespace herd::nn {

struct GraphedTrainStep::Graph {
  // Shapes of the last eager step (the warm-up) and the replacement count after it.
  bool pending = false;
  Shape pending_x, pending_y;
  std::uint64_t pending_epoch = 0;
  // The captured step: its shapes, static inputs and the replacement count it is valid for.
  Shape x_shape, y_shape;
  Tensor x, y;
  std::uint64_t epoch = 0;
  // Adam's {lr, step, step_size, inv_bc2_sqrt} on the device, and what it holds once the
  // queued work is done.
  Tensor hyper;
  double host_hyper[4] = {0, 0, 0, 0};
  double hyper_lr = std::numeric_limits<double>::quiet_NaN();
  std::int64_t hyper_steps = -1;
#if HERD_HAVE_CUDA
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  void drop() {
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    exec = nullptr;
    graph = nullptr;
  }
#else
  void drop() {}
#endif
};

GraphedTrainStep::GraphedTrainStep(Module& model, MseLoss& loss, Adam& optimizer, bool use_graph)
    : model_(model), loss_(loss), opt_(optimizer), use_graph_(use_graph), graph_(new Graph) {
  for (const auto& p : opt_.params_)
    HERD_REQUIRE(p.param->value.device() == model_.device(),
                 "nn::GraphedTrainStep: the optimizer's parameter '{}' is on {}, but the model is on {}", p.name,
                 p.param->value.device().str(), model_.device().str());
}

GraphedTrainStep::~GraphedTrainStep() {
#if HERD_HAVE_CUDA
  // Best effort: let queued launches finish before their graph and buffers go.
  if (model_.device().is_cuda()) cudaStreamSynchronize(detail::dev_stream(model_.device()));
#endif
  graph_->drop();
  delete graph_;
}

bool GraphedTrainStep::captured() const {
#if HERD_HAVE_CUDA
  return graph_->exec != nullptr;
#else
  return false;
#endif
}

void GraphedTrainStep::reset() {
  graph_->drop();
  graph_->pending = false;
}

LossValue GraphedTrainStep::eager(const Tensor& input, const Tensor& target) {
  const Device d = model_.device();
  const Tensor x = d.is_cuda() && input.is_cpu() ? input.to(d) : input;
  const Tensor y = d.is_cuda() && target.is_cpu() ? target.to(d) : target;
  opt_.zero_grad();
  LossValue v = loss_.forward(model_.forward(x), y);
  model_.backward(loss_.backward());
  opt_.step();
  ++eager_steps_;
  return v;
}

LossValue GraphedTrainStep::step(const Tensor& input, const Tensor& target) {
  const char* who = "nn::GraphedTrainStep::step";
  const Device d = model_.device();
  HERD_REQUIRE(input.defined() && target.defined(), "{}: undefined input or target", who);
  HERD_REQUIRE(input.dtype() == model_.dtype() && target.dtype() == model_.dtype(),
               "{}: input is {} and target is {}, but the model is {}", who, input.str(), target.str(),
               dtype_name(model_.dtype()));
  HERD_REQUIRE((input.device() == d || input.is_cpu()) && (target.device() == d || target.is_cpu()),
               "{}: input is {} and target is {}, but the model is on {} (inputs on the host are copied)", who,
               input.str(), target.str(), d.str());
  // DataParallel (a grad-ready hook) needs its finish() after backward, which this step
  // does not call: refuse rather than train on unreduced gradients.
  HERD_REQUIRE(!model_.has_grad_ready_hook(),
               "{}: the model has a grad-ready hook (DataParallel); GraphedTrainStep does not run its "
               "finish(), so use the DataParallel step instead",
               who);
  if (!d.is_cuda() || !use_graph_ || !graph_error_.empty()) return eager(input, target);
#if HERD_HAVE_CUDA
  Graph& g = *graph_;
  const std::uint64_t epoch = detail::storage_replacements();
  if (g.exec && input.shape() == g.x_shape && target.shape() == g.y_shape && epoch == g.epoch) {
    cudaStream_t st = detail::dev_stream(d);
    detail::DevGuard guard(d);
    g.x.copy_from_async(input, st);
    g.y.copy_from_async(target, st);
    return launch();
  }
  g.drop();
  if (g.pending && input.shape() == g.pending_x && target.shape() == g.pending_y && epoch == g.pending_epoch) {
    g.pending = false;
    detail::DevGuard guard(d);
    cudaStream_t st = detail::dev_stream(d);
    g.x.resize(input.shape(), model_.dtype(), d);
    g.y.resize(target.shape(), model_.dtype(), d);
    g.hyper.resize({4}, DType::kFloat64, d);
    g.x.copy_from_async(input, st);
    g.y.copy_from_async(target, st);
    g.x_shape = input.shape();
    g.y_shape = target.shape();
    try {
      capture();
    } catch (const std::exception& e) {
      g.drop();
      graph_error_ = e.what();
      return eager(input, target);
    }
    return launch();
  }
  LossValue v = eager(input, target);
  g.pending = true;
  g.pending_x = input.shape();
  g.pending_y = target.shape();
  g.pending_epoch = detail::storage_replacements();  // after the warm-up's allocations
  return v;
#else
  return eager(input, target);
#endif
}

#if HERD_HAVE_CUDA
void GraphedTrainStep::capture() {
  Graph& g = *graph_;
  const Device d = model_.device();
  cudaStream_t st = detail::dev_stream(d);
  HERD_CUDA_CHECK(cudaStreamSynchronize(st));
  const std::uint64_t before = detail::storage_replacements();
  HERD_CUDA_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
  try {
    opt_.zero_grad();
    loss_.forward(model_.forward(g.x), g.y);
    model_.backward(loss_.backward());
    // Adam with its step and learning rate on the device (kernel arguments are frozen).
    double* hyper = g.hyper.data<double>();
    cuda::adam_tick(hyper, opt_.beta1_, opt_.beta2_, st);
    for (std::size_t i = 0; i < opt_.params_.size(); ++i) {
      Parameter& p = *opt_.params_[i].param;
      detail::dispatch(p.value.dtype(), [&](auto tag) {
        using T = decltype(tag);
        cuda::adam_update_hyper<T>(p.value.data<T>(), p.grad.data<T>(), opt_.buffer(0, i).data<T>(),
                                   opt_.buffer(1, i).data<T>(), p.value.numel(), hyper, opt_.beta1_, opt_.beta2_,
                                   opt_.eps_, st);
      });
    }
  } catch (...) {
    cudaGraph_t partial = nullptr;
    cudaStreamEndCapture(st, &partial);
    if (partial) cudaGraphDestroy(partial);
    cudaGetLastError();  // capture errors are not sticky; clear the last-error slot
    throw;
  }
  const cudaError_t end = cudaStreamEndCapture(st, &g.graph);
  if (end != cudaSuccess) {
    cudaGetLastError();
    if (g.graph) cudaGraphDestroy(g.graph);
    g.graph = nullptr;
    throw CudaError(
        fmt::format("nn::GraphedTrainStep: stream capture failed ({}: {}); a module or hook waited for "
                    "the host inside the step",
                    cudaGetErrorName(end), cudaGetErrorString(end)));
  }
  HERD_CUDA_CHECK(cudaGraphInstantiate(&g.exec, g.graph, 0));
  HERD_CHECK(detail::storage_replacements() == before,
             "nn::GraphedTrainStep: a device buffer was reallocated during capture (the warm-up step did not "
             "reach the captured shapes)");
  g.epoch = detail::storage_replacements();
  ++captures_;
}

LossValue GraphedTrainStep::launch() {
  Graph& g = *graph_;
  const Device d = model_.device();
  detail::DevGuard guard(d);
  cudaStream_t st = detail::dev_stream(d);
  if (opt_.lr() != g.hyper_lr || opt_.steps() != g.hyper_steps) {
    // The device copy of {lr, step} is stale (first launch, set_lr, load_state, eager
    // steps): rewrite it before the launch. A pageable-memory copy is staged at the call,
    // so host_hyper may change afterwards.
    g.host_hyper[0] = opt_.lr();
    g.host_hyper[1] = static_cast<double>(opt_.steps());
    HERD_CUDA_CHECK(cudaMemcpyAsync(g.hyper.raw(), g.host_hyper, 2 * sizeof(double), cudaMemcpyHostToDevice, st));
    g.hyper_lr = opt_.lr();
  }
  HERD_CUDA_CHECK(cudaGraphLaunch(g.exec, st));
  ++opt_.steps_;
  g.hyper_steps = opt_.steps_;
  ++graph_steps_;
  return LossValue(loss_.value_, loss_.generation_, ++*loss_.generation_);
}
#else
void GraphedTrainStep::capture() {}
LossValue GraphedTrainStep::launch() { return LossValue(); }
#endif

}  // namespace herd::nn
