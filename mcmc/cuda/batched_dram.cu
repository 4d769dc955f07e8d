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

__global__ void begin_all(batched::KernelParams p, batched::ChainArrays a, std::size_t m, std::uint64_t k) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < m) batched::begin_proposal(p, a, i, k);
}

// out[i, j] = (src[i, j] - shift[j]) / width[j] in float32.
__global__ void to_input(const double* src, std::size_t m, int d, const double* shift, const double* width,
                         float* out) {
  const std::size_t q = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (q >= m * d) return;
  const int j = static_cast<int>(q % d);
  out[q] = static_cast<float>((src[q] - shift[j]) / width[j]);
}

__global__ void affine_out(const float* net, std::size_t m, double scale, double offset, double* lp) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < m) lp[i] = scale * static_cast<double>(net[i]) + offset;
}

__global__ void finish_all(batched::KernelParams p, batched::ChainArrays a, std::size_t m, std::uint64_t k,
                           const float* net, double scale, double offset) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= m || a.stage[i] == 0) return;
  const double v = a.inside[i] ? batched::checked_log_density(a, i, scale * static_cast<double>(net[i]) + offset)
                               : -std::numeric_limits<double>::infinity();
  batched::finish_stage(p, a, i, k, v);
}

__global__ void accumulate_all(batched::KernelParams p, batched::ChainArrays a, std::size_t m) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < m) batched::accumulate(p, a, i);
}

__global__ void record(batched::ChainArrays a, std::size_t m, int d, std::int64_t nd, std::int64_t t, double* bx,
                       double* blp, std::uint64_t since, batched::DrawStats bs) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= m) return;
  const std::size_t slot = i * static_cast<std::size_t>(nd) + static_cast<std::size_t>(t);
  for (int j = 0; j < d; ++j) bx[slot * d + j] = a.x[i * d + j];
  blp[slot] = a.lp[i];
  batched::record_stats(a, i, since, bs, slot);
}

}  // namespace

BatchedDramResult run_batched_device_network(const BatchedDramOptions& options_in, const DeviceForward& forward,
                                             const std::vector<double>& shift_in, const std::vector<double>& width_in,
                                             double scale, double offset, BatchedDrawSink& sink, cudaStream_t stream) {
  BatchedDramOptions options = options_in;
  options.device = BatchedDevice::kHost;
  const int d = options.ndim;
  const auto du = static_cast<std::size_t>(d);
  if ((!shift_in.empty() && shift_in.size() != du) || (!width_in.empty() && width_in.size() != du) || !forward)
    detail::throw_no_cuda_path(
        "run_batched_device_network: shift and width must have 0 or d values and the forward "
        "function must be set; this configuration");
  std::vector<double> shift = shift_in.empty() ? std::vector<double>(du, 0.0) : shift_in;
  std::vector<double> width = width_in.empty() ? std::vector<double>(du, 1.0) : width_in;
  detail::BatchedEngine engine(options);
  DeviceChains dc(engine, options, stream);
  const std::size_t m = dc.m;
  DeviceArray<double> dshift(shift.data(), du, stream), dwidth(width.data(), du, stream);
  DeviceArray<float> xin(m * du);
  const unsigned eb = static_cast<unsigned>((m * du + 255) / 256);
  engine.init_log_density([&](const double*, std::size_t n, double* out) {
    herd::gpu::launch(to_input, eb, 256, 0, stream, dc.da.x, n, d, dshift.get(), dwidth.get(), xin.get());
    HERD_CUDA_CHECK(cudaGetLastError());
    const float* y = forward(xin.get(), static_cast<std::int64_t>(n));
    herd::gpu::launch(affine_out, dc.blocks, dc.threads, 0, stream, y, n, scale, offset, dc.da.lp);
    HERD_CUDA_CHECK(cudaGetLastError());
    HERD_CUDA_CHECK(cudaMemcpyAsync(out, dc.da.lp, n * sizeof(double), cudaMemcpyDeviceToHost, stream));
    HERD_CUDA_CHECK(cudaStreamSynchronize(stream));
  });
  dc.upload_lp();
  const int stages = engine.params().stages;
  detail::BatchedEngine::DeviceHooks hooks;
  hooks.segment = [&](std::uint64_t k0, std::uint64_t per, std::int64_t nd, double* hbx, double* hblp,
                      const batched::DrawStats& hbs, bool adapting) {
    batched::KernelParams p = dc.dp;
    p.adapting = adapting;
    for (std::int64_t t = 0; t < nd; ++t) {
      const std::uint64_t ka = k0 + static_cast<std::uint64_t>(t) * per;
      for (std::uint64_t k = ka; k < ka + per; ++k) {
        herd::gpu::launch(begin_all, dc.blocks, dc.threads, 0, stream, p, dc.da, m, k);
        for (int r = 0; r < stages; ++r) {  // chains already decided skip the later rounds
          herd::gpu::launch(to_input, eb, 256, 0, stream, dc.da.y, m, d, dshift.get(), dwidth.get(), xin.get());
          const float* y = forward(xin.get(), static_cast<std::int64_t>(m));
          herd::gpu::launch(finish_all, dc.blocks, dc.threads, 0, stream, p, dc.da, m, k, y, scale, offset);
        }
        if (adapting) herd::gpu::launch(accumulate_all, dc.blocks, dc.threads, 0, stream, p, dc.da, m);
      }
      if (hbx)
        herd::gpu::launch(record, dc.blocks, dc.threads, 0, stream, dc.da, m, d, nd, t, dc.bx.get(), dc.blp.get(), ka,
                          hbs.accepted ? dc.bs : batched::DrawStats{});
      HERD_CUDA_CHECK(cudaGetLastError());
    }
    dc.download_block(nd, hbx, hblp, hbs);
  };
  hooks.adapt_update = [&] { dc.adapt_update(); };
  hooks.sync = [&] { dc.sync(); };
  hooks.download_state = [&] { dc.download_state(); };
  return engine.run_device(hooks, sink);
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
  herd::gpu::launch(draws_kernel, static_cast<unsigned>((n + threads - 1) / threads), threads, 0, stream, p, n, k,
                    dw.get(), du.get(), dn.get());
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
