#pragma once
/// @file batched_run.hpp
/// One entry point for applications (herd-sample's `device = "cpu_batched" | "cuda"`):
/// `run_batched(options, target, sink)` dispatches a target description to the host path or,
/// in CUDA builds, to the device path, by `options.device`. Header-inline so that it picks up
/// the CUDA entry points when the build has them (link herd::herd, or herd::mcmc_cuda).
///
/// How herd-sample should call it: per rank, `options.num_chains = chains_per_rank` and
/// `options.first_chain_id = rank * chains_per_rank` (global chain ids; one rank per GPU
/// under MPI), a `Hdf5BatchedSink` per rank (or a `MemoryBatchedSink` for the report), then
/// `batched_diagnostics` / `batched_report`. Pooled adaptation pools over the chains of one
/// rank, or of every rank when `options.communicator` is set (collective then). A user
/// callback that is not thread-safe needs `options.num_threads = 1`.
/// Thread-safety: as `run_batched_dram`. @throws as `run_batched_dram`; herd::InputError
/// when the target cannot run on the requested device.

#include <memory>

#include "herd/core/config.hpp"
#include "herd/mcmc/batched_dram.hpp"
#include "herd/mcmc/batched_targets.hpp"
#if HERD_HAVE_CUDA
#include "herd/mcmc/cuda/batched_dram_cuda.hpp"
#endif

namespace herd::mcmc {

/// A target for `run_batched`: a built-in analytic target, or a batched host log density
/// (any model: plugins, posteriordb models, a surrogate `MlpLogDensity`; host only).
struct BatchedTarget {
  enum class Kind { kGaussian, kBanana, kRosenbrock, kFunnel, kHostBatched };
  Kind kind = Kind::kHostBatched;
  std::shared_ptr<const GaussianTarget> gaussian;  ///< kGaussian
  BananaLogDensity banana;                         ///< kBanana
  RosenbrockLogDensity rosenbrock;                 ///< kRosenbrock
  FunnelLogDensity funnel;                         ///< kFunnel
  BatchedLogDensity host;                          ///< kHostBatched

  static BatchedTarget gaussian_target(std::shared_ptr<const GaussianTarget> g) {
    BatchedTarget t;
    t.kind = Kind::kGaussian;
    t.gaussian = std::move(g);
    return t;
  }
  static BatchedTarget host_batched(BatchedLogDensity f) {
    BatchedTarget t;
    t.kind = Kind::kHostBatched;
    t.host = std::move(f);
    return t;
  }
};

/// Runs the batched sampler on `target` on `options.device` (see the file comment).
inline BatchedDramResult run_batched(const BatchedDramOptions& options, const BatchedTarget& target,
                                     BatchedDrawSink& sink) {
  using K = BatchedTarget::Kind;
  if (options.device == BatchedDevice::kCuda) {
#if HERD_HAVE_CUDA
    switch (target.kind) {
      case K::kGaussian:
        return cuda::run_batched_gaussian(options, *target.gaussian, sink);
      case K::kBanana:
        return cuda::run_batched_banana(options, target.banana, sink);
      case K::kRosenbrock:
        return cuda::run_batched_rosenbrock(options, target.rosenbrock, sink);
      case K::kFunnel:
        return cuda::run_batched_funnel(options, target.funnel, sink);
      case K::kHostBatched:
        break;
    }
#endif
    detail::throw_no_cuda_path("run_batched");
  }
  switch (target.kind) {
    case K::kGaussian:
      return run_batched_dram(options, target.gaussian->view(), sink);
    case K::kBanana:
      return run_batched_dram(options, target.banana, sink);
    case K::kRosenbrock:
      return run_batched_dram(options, target.rosenbrock, sink);
    case K::kFunnel:
      return run_batched_dram(options, target.funnel, sink);
    case K::kHostBatched:
      break;
  }
  return run_batched_dram(options, target.host, sink);
}

}  // namespace herd::mcmc
