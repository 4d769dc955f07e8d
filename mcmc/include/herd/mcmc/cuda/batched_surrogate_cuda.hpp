#pragma once
/// @file batched_surrogate_cuda.hpp
/// The neural-surrogate target of the batched DRAM sampler on a CUDA device (CUDA builds
/// only): an nn `Mlp` run by `nn::cuda::DeviceMlp` through `run_batched_device_network`.
/// Header-inline and kept apart from batched_dram_cuda.hpp, which .cu files include: the nn
/// headers (fmt) do not compile under nvcc. Include this one from C++ files.

#include "herd/mcmc/cuda/batched_dram_cuda.hpp"
#include "herd/nn/cuda/device_mlp.hpp"

namespace herd::mcmc::cuda {

/// The neural-surrogate target on the device: `model` (a float32 `Mlp` built from
/// `mlp_options`, d inputs, 1 output) copied to a `nn::cuda::DeviceMlp` whose cuBLAS forward
/// runs once per stage round over all chains (see `run_batched_device_network`). A prior is
/// not supported on the device (fold it into the training target). Header-inline so that
/// this header's .cu users need not see the nn headers (include it from C++ files).
/// @throws herd::InputError unless the model is float32 with d inputs and 1 output.
inline BatchedDramResult run_batched_surrogate(const BatchedDramOptions& options, nn::Mlp& model,
                                               const nn::MlpOptions& mlp_options, const std::vector<double>& shift,
                                               const std::vector<double>& width, double scale, double offset,
                                               BatchedDrawSink& sink, cudaStream_t stream = nullptr) {
  if (mlp_options.sizes.size() < 2 || mlp_options.sizes.front() != options.ndim || mlp_options.sizes.back() != 1)
    detail::throw_no_cuda_path("run_batched_surrogate: the model must map d inputs to 1 output; this model");
  nn::cuda::DeviceMlp net(model, mlp_options, stream);
  return run_batched_device_network(
      options, [&net](const float* x, std::int64_t n) { return net.forward(x, n); }, shift, width, scale, offset, sink,
      stream);
}

}  // namespace herd::mcmc::cuda
