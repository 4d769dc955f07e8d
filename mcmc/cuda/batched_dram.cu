// CUDA entry points of the batched DRAM sampler for the built-in targets
// (herd/mcmc/cuda/batched_dram_cuda.hpp), instantiating the header-only runner.
#include "herd/mcmc/cuda/batched_dram.cuh"
#include "herd/mcmc/cuda/batched_dram_cuda.hpp"

namespace herd::mcmc::cuda {

BatchedDramResult run_batched_gaussian(const BatchedDramOptions& options, const GaussianTarget& target,
                                       BatchedDrawSink& sink, cudaStream_t stream) {
  const DeviceGaussian g(target, stream);
  return run_batched_dram(options, g.view(), sink, stream);
}

BatchedDramResult run_batched_banana(const BatchedDramOptions& options, const BananaLogDensity& target,
                                     BatchedDrawSink& sink, cudaStream_t stream) {
  return run_batched_dram(options, target, sink, stream);
}

BatchedDramResult run_batched_funnel(const BatchedDramOptions& options, const FunnelLogDensity& target,
                                     BatchedDrawSink& sink, cudaStream_t stream) {
  return run_batched_dram(options, target, sink, stream);
}

BatchedDramResult run_batched_rosenbrock(const BatchedDramOptions& options, const RosenbrockLogDensity& target,
                                         BatchedDrawSink& sink, cudaStream_t stream) {
  return run_batched_dram(options, target, sink, stream);
}

namespace {
__global__ void draws_kernel(batched::KernelParams p, std::size_t n, std::uint64_t k, std::uint32_t* words,
                             double* uniforms, double* normals) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const std::uint32_t cid = batched::chain_id(p, i);
  const RngPurpose purposes[3] = {RngPurpose::kProposal, RngPurpose::kAcceptance, RngPurpose::kDelayedRejection};
  for (int q = 0; q < 3; ++q) {
    const RngBlock b = RngStream(p.seed, cid, purposes[q]).block(k);
    for (int j = 0; j < 4; ++j) words[(i * 3 + q) * 4 + j] = b.v[j];
  }
  for (int s = 1; s <= p.stages; ++s) uniforms[i * p.stages + (s - 1)] = batched::acceptance_uniform(p, cid, k, s);
  RngCursor c = RngStream(p.seed, cid, RngPurpose::kProposal).at(k);
  ziggurat_normals(c, *p.zig, normals + i * p.d, p.d);
}
}  // namespace

void kernel_draws(std::uint64_t seed, std::uint32_t first_chain_id, std::size_t n, std::uint64_t k, int d, int stages,
                  std::vector<std::uint32_t>& words, std::vector<double>& uniforms, std::vector<double>& normals,
                  cudaStream_t stream) {
  DeviceArray<ZigguratTables> zig(&ziggurat_tables(), 1, stream);
  DeviceArray<std::uint32_t> dw(n * 12);
  DeviceArray<double> du(n * static_cast<std::size_t>(stages)), dn(n * static_cast<std::size_t>(d));
  batched::KernelParams p;
  p.d = d;
  p.stages = stages;
  p.seed = seed;
  p.first_chain_id = first_chain_id;
  p.zig = zig.get();
  const unsigned threads = 128;
  draws_kernel<<<static_cast<unsigned>((n + threads - 1) / threads), threads, 0, stream>>>(p, n, k, dw.get(), du.get(),
                                                                                           dn.get());
  HERD_CUDA_CHECK(cudaGetLastError());
  words.resize(n * 12);
  uniforms.resize(du.size());
  normals.resize(dn.size());
  dw.download(words.data(), words.size(), stream);
  du.download(uniforms.data(), uniforms.size(), stream);
  dn.download(normals.data(), normals.size(), stream);
  HERD_CUDA_CHECK(cudaStreamSynchronize(stream));
}

}  // namespace herd::mcmc::cuda
