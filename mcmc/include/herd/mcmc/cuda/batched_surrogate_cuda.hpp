#pragma once
/// @file batched_surrogate_cuda.hpp
/// The neural-surrogate target of the batched DRAM sampler on a CUDA device (CUDA builds
/// only): an nn `Mlp` built on the device (the nn module API) run through
/// `run_batched_device_network`. Header-inline and kept apart from batched_dram_cuda.hpp,
/// which .cu files include: the nn headers (fmt) do not compile under nvcc. Include this one
/// from C++ files.

#include <cstddef>
#include <cstdint>
#include <vector>

#include <cuda_runtime_api.h>

#include "herd/core/cuda/cuda_check.hpp"
#include "herd/core/device.hpp"
#include "herd/core/error.hpp"
#include "herd/mcmc/cuda/batched_dram_cuda.hpp"
#include "herd/nn/mlp.hpp"
#include "herd/nn/tensor.hpp"

namespace herd::mcmc::cuda {

/// The neural-surrogate target on the device: `model` (a float32 `Mlp` built from
/// `mlp_options`, d inputs, 1 output; on the host or on a CUDA device) copied exactly into
/// an `Mlp` on the current CUDA device, whose forward (cuBLAS GEMMs and the nn kernels, on
/// the device's nn stream, `nn::compute_stream`) runs once per stage round over all chains
/// (see `run_batched_device_network`). Each round copies the standardised points into the
/// network's input (device to device) after the sampler's work on `stream`, and the sampler
/// reads the output after the forward (CUDA events; no host wait). A prior is not supported
/// on the device (fold it into the training target). Header-inline so that this header's
/// .cu users need not see the nn headers (include it from C++ files).
/// @throws herd::InputError unless the model is float32 with d inputs and 1 output, or when
///         the model does not match `mlp_options`; as `run_batched_device_network` otherwise.
inline BatchedDramResult run_batched_surrogate(const BatchedDramOptions& options, nn::Mlp& model,
                                               const nn::MlpOptions& mlp_options, const std::vector<double>& shift,
                                               const std::vector<double>& width, double scale, double offset,
                                               BatchedDrawSink& sink, cudaStream_t stream = nullptr) {
  if (mlp_options.sizes.size() < 2 || mlp_options.sizes.front() != options.ndim || mlp_options.sizes.back() != 1)
    detail::throw_no_cuda_path("run_batched_surrogate: the model must map d inputs to 1 output; this model");
  HERD_REQUIRE(model.dtype() == nn::DType::kFloat32, "run_batched_surrogate: the model is {}, but must be float32",
               nn::dtype_name(model.dtype()));
  int index = 0;
  HERD_CUDA_CHECK(cudaGetDevice(&index));
  const Device gpu = Device::cuda(index);
  nn::MlpOptions o = mlp_options;
  o.dtype = nn::DType::kFloat32;
  o.device = gpu;
  nn::Mlp net(o);
  net.load_state_dict(model.state_dict());  // exact copies of the float32 parameters
  const cudaStream_t nn_stream = nn::compute_stream(gpu);
  // Two events (no timing) order the sampler's stream and the nn stream around a forward.
  struct Events {
    cudaEvent_t input_ready = nullptr, output_ready = nullptr;
    Events() {
      HERD_CUDA_CHECK(cudaEventCreateWithFlags(&input_ready, cudaEventDisableTiming));
      HERD_CUDA_CHECK(cudaEventCreateWithFlags(&output_ready, cudaEventDisableTiming));
    }
    ~Events() {
      if (input_ready) cudaEventDestroy(input_ready);
      if (output_ready) cudaEventDestroy(output_ready);
    }
    Events(const Events&) = delete;
    Events& operator=(const Events&) = delete;
  } events;
  const std::int64_t d = options.ndim;
  nn::Tensor input;
  const auto forward = [&](const float* x, std::int64_t n) -> const float* {
    input.resize({n, d}, nn::DType::kFloat32, gpu);
    // x was written on `stream`, which also read the previous output: the nn stream waits.
    HERD_CUDA_CHECK(cudaEventRecord(events.input_ready, stream));
    HERD_CUDA_CHECK(cudaStreamWaitEvent(nn_stream, events.input_ready, 0));
    HERD_CUDA_CHECK(cudaMemcpyAsync(input.data<float>(), x, static_cast<std::size_t>(n * d) * sizeof(float),
                                    cudaMemcpyDeviceToDevice, nn_stream));
    const nn::Tensor& y = net.forward(input);
    HERD_CUDA_CHECK(cudaEventRecord(events.output_ready, nn_stream));
    HERD_CUDA_CHECK(cudaStreamWaitEvent(stream, events.output_ready, 0));
    return y.data<float>();
  };
  return run_batched_device_network(options, forward, shift, width, scale, offset, sink, stream);
}

}  // namespace herd::mcmc::cuda
