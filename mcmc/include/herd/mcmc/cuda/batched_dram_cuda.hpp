#pragma once
/// @file batched_dram_cuda.hpp
/// Precompiled CUDA entry points of the batched DRAM sampler for the built-in targets, and
/// the device side of the differential tests (CUDA builds only; plain C++ callers, no nvcc
/// needed). User functors go through the header-only herd/mcmc/cuda/batched_dram.cuh.
/// Each call runs on the current device, enqueued on `stream`, and returns when done.
/// @throws herd::CudaError on CUDA failures (no device included), herd::InputError on bad
/// options, herd::NumericalError on a +inf log density. Thread-safety: one call at a time
/// per stream.

#include <cstdint>
#include <functional>
#include <vector>

#include <cuda_runtime_api.h>

#include "herd/mcmc/batched_dram.hpp"
#include "herd/mcmc/batched_targets.hpp"

namespace herd::mcmc::cuda {

/// Batched DRAM on N(mean, cov) (arrays copied to the device).
BatchedDramResult run_batched_gaussian(const BatchedDramOptions& options, const GaussianTarget& target,
                                       BatchedDrawSink& sink, cudaStream_t stream = nullptr);
/// Batched DRAM on Haario's banana.
BatchedDramResult run_batched_banana(const BatchedDramOptions& options, const BananaLogDensity& target,
                                     BatchedDrawSink& sink, cudaStream_t stream = nullptr);
/// Batched DRAM on Neal's funnel.
BatchedDramResult run_batched_funnel(const BatchedDramOptions& options, const FunnelLogDensity& target,
                                     BatchedDrawSink& sink, cudaStream_t stream = nullptr);
/// Batched DRAM on Rosenbrock's density.
BatchedDramResult run_batched_rosenbrock(const BatchedDramOptions& options, const RosenbrockLogDensity& target,
                                         BatchedDrawSink& sink, cudaStream_t stream = nullptr);

/// A network's forward pass on the device: input `[n, d]` float32 (device), returns its
/// output `[n, 1]` (device memory it owns), enqueued on the runner's stream.
using DeviceForward = std::function<const float*(const float* x, std::int64_t n)>;

/// Batched DRAM on a device network as the log density (the staged path): each stage round
/// standardises the trial points of all M chains ((y - shift) / width, float32), runs one
/// `forward` over `[M, d]`, and decides every pending chain with log density
/// `scale * out + offset`. `shift`, `width` `[d]` or empty. Not validated on a GPU yet.
/// @throws herd::InputError on bad options; as above otherwise.
BatchedDramResult run_batched_device_network(const BatchedDramOptions& options, const DeviceForward& forward,
                                             const std::vector<double>& shift, const std::vector<double>& width,
                                             double scale, double offset, BatchedDrawSink& sink,
                                             cudaStream_t stream = nullptr);

/// The random draws of proposal `k` of chains `first_chain_id .. + n` computed on the
/// device with the kernel's own functions: the first Philox block of each purpose
/// (kProposal, kAcceptance, kDelayedRejection: `words` `[n, 3, 4]`), the acceptance uniforms
/// of stages 1..`stages` (`uniforms` `[n, stages]`) and the stage-1 normals (`normals`
/// `[n, d]`, ziggurat). Host vectors are resized. For the [gpu] differential tests.
void kernel_draws(std::uint64_t seed, std::uint32_t first_chain_id, std::size_t n, std::uint64_t k, int d, int stages,
                  std::vector<std::uint32_t>& words, std::vector<double>& uniforms, std::vector<double>& normals,
                  cudaStream_t stream = nullptr);

}  // namespace herd::mcmc::cuda
