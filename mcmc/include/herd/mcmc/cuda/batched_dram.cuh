#pragma once
/// @file batched_dram.cuh
/// The CUDA path of the batched DRAM sampler (batched_dram.hpp), header-only so that a user
/// functor target compiles into the kernel: include this file in a `.cu` file and call
/// `herd::mcmc::cuda::run_batched_dram(options, functor, sink, stream)`. CUDA builds only.
///
/// One thread per chain runs the same `HERD_HOST_DEVICE` per-chain functions as the host
/// path (batched_dram_kernel.hpp) for a whole segment of proposals (up to the next adaptive
/// update or the next block of thinned draws), so the per-step cost is the kernel's alone.
/// The host engine (`detail::BatchedEngine`) runs the schedule: validation, initial
/// factor, pooled merges (from a deterministic on-device reduction over chains: one block per
/// statistic, fixed summation order), per-chain updates (a kernel running
/// `batched::merge_and_factor` per chain), and the blocks of thinned draws copied back to
/// the host and handed to the sink.
///
/// The functor must be trivially copyable and callable on the device
/// (`HERD_HOST_DEVICE double operator()(const double* x, int d) const`); any pointers it
/// holds must be device memory (see `DeviceGaussian`). Integers and uniforms are
/// bit-identical to the host path; normals may differ in the last bits (exp/log), so chains
/// are statistically equivalent to the host path's, not identical.
///
/// Memory (device): about M (5 d + 2 + (1 + d + d^2) [adapting] + d^2 [per-chain factor])
/// doubles plus a draw buffer of M * block_draws * (d + 1) doubles. Streams: everything is
/// enqueued on `stream`; the call returns after the last draws were handed to the sink.
/// Thread-safety: one call at a time per stream. @throws herd::CudaError on CUDA failures,
/// herd::InputError on bad options, herd::NumericalError on a +inf log density.

#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "herd/core/cuda/cuda_check.hpp"
#include "herd/mcmc/batched_dram.hpp"
#include "herd/mcmc/batched_targets.hpp"

namespace herd::mcmc::cuda {

/// A device array of `T` (RAII; move-only). Host code.
template <class T>
class DeviceArray {
 public:
  DeviceArray() = default;
  explicit DeviceArray(std::size_t n) : n_(n) {
    if (n > 0) HERD_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p_), n * sizeof(T)));
  }
  DeviceArray(const T* host, std::size_t n, cudaStream_t s) : DeviceArray(n) { upload(host, n, s); }
  ~DeviceArray() {
    if (p_) cudaFree(p_);
  }
  DeviceArray(DeviceArray&& o) noexcept : p_(o.p_), n_(o.n_) { o.p_ = nullptr; o.n_ = 0; }
  DeviceArray& operator=(DeviceArray&& o) noexcept {
    if (this != &o) {
      if (p_) cudaFree(p_);
      p_ = o.p_;
      n_ = o.n_;
      o.p_ = nullptr;
      o.n_ = 0;
    }
    return *this;
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  void upload(const T* host, std::size_t n, cudaStream_t s) {
    if (n > 0) HERD_CUDA_CHECK(cudaMemcpyAsync(p_, host, n * sizeof(T), cudaMemcpyHostToDevice, s));
  }
  void download(T* host, std::size_t n, cudaStream_t s) const {
    if (n > 0) HERD_CUDA_CHECK(cudaMemcpyAsync(host, p_, n * sizeof(T), cudaMemcpyDeviceToHost, s));
  }
  void zero(cudaStream_t s) {
    if (n_ > 0) HERD_CUDA_CHECK(cudaMemsetAsync(p_, 0, n_ * sizeof(T), s));
  }
  T* get() const { return p_; }
  std::size_t size() const { return n_; }

 private:
  T* p_ = nullptr;
  std::size_t n_ = 0;
};

/// A multivariate normal on the device: `GaussianTarget`'s arrays copied to device memory,
/// and a `GaussianLogDensity` view of them for kernels. Host code; keep it alive while the
/// view is used.
class DeviceGaussian {
 public:
  DeviceGaussian(const GaussianTarget& g, cudaStream_t s)
      : mean_(g.mean().data(), g.mean().size(), s), prec_(g.precision().data(), g.precision().size(), s),
        view_{g.ndim(), mean_.get(), prec_.get(), g.log_norm()} {}
  GaussianLogDensity view() const { return view_; }

 private:
  DeviceArray<double> mean_, prec_;
  GaussianLogDensity view_;
};

namespace kernels {

template <class F>
__global__ void eval_rows(F f, const double* x, int d, std::size_t n, double* out) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < n) out[i] = f(x + i * d, d);
}

// One thread per chain: nd blocks of `per` proposals, recording the state after each.
template <class F>
__global__ void segment(batched::KernelParams p, batched::ChainArrays a, std::size_t m, std::uint64_t k0,
                        std::uint64_t per, std::int64_t nd, F f, double* bx, double* blp) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= m) return;
  const int d = p.d;
  for (std::int64_t t = 0; t < nd; ++t) {
    const std::uint64_t ka = k0 + static_cast<std::uint64_t>(t) * per;
    for (std::uint64_t k = ka; k < ka + per; ++k) batched::fused_proposal(p, a, i, k, f);
    if (bx) {
      const std::size_t slot = i * static_cast<std::size_t>(nd) + static_cast<std::size_t>(t);
      for (int j = 0; j < d; ++j) bx[slot * d + j] = a.x[i * d + j];
      blp[slot] = a.lp[i];
    }
  }
}

// out[q] = sum over chains of stat q, q in [0, 1 + d + d*d): n, s1, s2 (one block per q,
// fixed order: deterministic).
__global__ inline void reduce_stats(batched::ChainArrays a, std::size_t m, int d, double* out) {
  extern __shared__ double sh[];
  const int q = blockIdx.x;
  const std::size_t dd = static_cast<std::size_t>(d) * d;
  double s = 0.0;
  for (std::size_t i = threadIdx.x; i < m; i += blockDim.x) {
    if (q == 0)
      s += a.ad_n[i];
    else if (q <= d)
      s += a.ad_s1[i * d + (q - 1)];
    else
      s += a.ad_s2[i * dd + static_cast<std::size_t>(q - 1 - d)];
  }
  sh[threadIdx.x] = s;
  __syncthreads();
  for (unsigned w = blockDim.x / 2; w > 0; w /= 2) {
    if (threadIdx.x < w) sh[threadIdx.x] += sh[threadIdx.x + w];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[q] = sh[0];
}

// Per-chain adaptive update; result[i] = 1 replaced, 0 deferred, -1 failed. Resets the
// statistics and moves each chain's reference to its running mean.
__global__ inline void per_chain_update(batched::ChainArrays a, std::size_t m, int d, double scale, double* run_n,
                                        double* run_mean, double* run_m2, double* ref, int* result) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= m) return;
  const std::size_t du = static_cast<std::size_t>(d), dd = du * du;
  double* s2 = a.ad_s2 + i * dd;
  result[i] = batched::merge_and_factor(d, a.ad_n[i], a.ad_s1 + i * du, s2, ref + i * du, run_n[i],
                                        run_mean + i * du, run_m2 + i * dd, scale, a.chol + i * dd, s2);
  a.ad_n[i] = 0.0;
  for (std::size_t j = 0; j < du; ++j) {
    a.ad_s1[i * du + j] = 0.0;
    ref[i * du + j] = run_mean[i * du + j];
  }
  for (std::size_t j = 0; j < dd; ++j) s2[j] = 0.0;
}

}  // namespace kernels

/// Runs the batched sampler on the current CUDA device with a device-callable functor
/// (see the file comment). Ziggurat tables, the domain box and all chain arrays are copied
/// to the device; thinned draws come back in blocks of `options.block_draws`.
template <class F>
BatchedDramResult run_batched_dram(BatchedDramOptions options, const F& f, BatchedDrawSink& sink,
                                   cudaStream_t stream = nullptr) {
  options.device = BatchedDevice::kHost;  // the engine validates and keeps the host mirror
  detail::BatchedEngine engine(options);
  const batched::KernelParams hp = engine.params();
  const batched::ChainArrays& ha = engine.arrays();
  const std::size_t m = static_cast<std::size_t>(options.num_chains);
  const int d = options.ndim;
  const std::size_t du = static_cast<std::size_t>(d), dd = du * du;
  const std::size_t np = static_cast<std::size_t>(hp.stages) + 1;
  const unsigned threads = 128;
  const unsigned blocks = static_cast<unsigned>((m + threads - 1) / threads);

  // Device copies of the parameters' arrays and the chains' state.
  DeviceArray<ZigguratTables> zig(&ziggurat_tables(), 1, stream);
  DeviceArray<double> lower(hp.lower, du, stream), upper(hp.upper, du, stream);
  DeviceArray<double> x(ha.x, m * du, stream), lp(m), y(m * du), w(m * np * du), lpath(m * np);
  const std::size_t nchol = hp.chol_per_chain ? m * dd : dd;
  DeviceArray<double> chol(ha.chol, nchol, stream);
  DeviceArray<std::int32_t> stage(m);
  DeviceArray<std::uint8_t> inside(m);
  DeviceArray<RngCursor> dr_cursor(m);
  DeviceArray<std::int64_t> accepted(m * static_cast<std::size_t>(hp.stages)), ood(m), nan(m), posinf(m);
  for (auto* arr : {&accepted, &ood, &nan, &posinf}) arr->zero(stream);
  stage.zero(stream);
  const bool adapt = ha.ad_n != nullptr;
  DeviceArray<double> ad_n(adapt ? m : 0), ad_s1(adapt ? m * du : 0), ad_s2(adapt ? m * dd : 0);
  DeviceArray<double> ad_ref(adapt ? (hp.chol_per_chain ? m * du : du) : 0);
  DeviceArray<double> run_n(adapt && hp.chol_per_chain ? m : 0), run_mean(adapt && hp.chol_per_chain ? m * du : 0),
      run_m2(adapt && hp.chol_per_chain ? m * dd : 0), sums(adapt ? 1 + du + dd : 0);
  DeviceArray<int> result(adapt && hp.chol_per_chain ? m : 0);
  if (adapt) {
    ad_n.zero(stream);
    ad_s1.zero(stream);
    ad_s2.zero(stream);
    ad_ref.upload(ha.ad_ref, ad_ref.size(), stream);
    run_n.zero(stream);
    run_mean.zero(stream);
    run_m2.zero(stream);
  }
  batched::KernelParams dp = hp;
  dp.lower = lower.get();
  dp.upper = upper.get();
  dp.zig = zig.get();
  batched::ChainArrays da;
  da.x = x.get();
  da.lp = lp.get();
  da.y = y.get();
  da.w = w.get();
  da.lpath = lpath.get();
  da.chol = chol.get();
  da.stage = stage.get();
  da.inside = inside.get();
  da.dr_cursor = dr_cursor.get();
  da.accepted = accepted.get();
  da.out_of_domain = ood.get();
  da.nan_count = nan.get();
  da.posinf_count = posinf.get();
  da.ad_n = adapt ? ad_n.get() : nullptr;
  da.ad_s1 = adapt ? ad_s1.get() : nullptr;
  da.ad_s2 = adapt ? ad_s2.get() : nullptr;
  da.ad_ref = adapt ? ad_ref.get() : nullptr;

  // Start log densities on the device (the host engine checks them).
  engine.init_log_density([&](const double*, std::size_t n, double* out) {
    kernels::eval_rows<<<blocks, threads, 0, stream>>>(f, x.get(), d, n, lp.get());
    HERD_CUDA_CHECK(cudaGetLastError());
    lp.download(out, n, stream);
    HERD_CUDA_CHECK(cudaStreamSynchronize(stream));
  });
  lp.upload(ha.lp, m, stream);

  const std::size_t bmax = static_cast<std::size_t>(options.block_draws);
  DeviceArray<double> bx(m * bmax * du), blp(m * bmax);
  detail::BatchedEngine::DeviceHooks hooks;
  hooks.segment = [&](std::uint64_t k0, std::uint64_t per, std::int64_t nd, double* hbx, double* hblp, bool adapting) {
    batched::KernelParams p = dp;
    p.adapting = adapting;
    kernels::segment<<<blocks, threads, 0, stream>>>(p, da, m, k0, per, nd, f, hbx ? bx.get() : nullptr,
                                                     hbx ? blp.get() : nullptr);
    HERD_CUDA_CHECK(cudaGetLastError());
    if (hbx) {
      bx.download(hbx, m * static_cast<std::size_t>(nd) * du, stream);
      blp.download(hblp, m * static_cast<std::size_t>(nd), stream);
    }
    HERD_CUDA_CHECK(cudaStreamSynchronize(stream));
  };
  hooks.adapt_update = [&] {
    if (hp.chol_per_chain) {
      kernels::per_chain_update<<<blocks, threads, 0, stream>>>(da, m, d, engine.scale(), run_n.get(), run_mean.get(),
                                                                run_m2.get(), ad_ref.get(), result.get());
      HERD_CUDA_CHECK(cudaGetLastError());
      std::vector<int> r(m);
      result.download(r.data(), m, stream);
      HERD_CUDA_CHECK(cudaStreamSynchronize(stream));
      std::int64_t rep = 0, fail = 0;
      for (int v : r) {
        rep += v == 1;
        fail += v == -1;
      }
      engine.count_updates(rep, fail);
      return;
    }
    const unsigned rt = 256;
    kernels::reduce_stats<<<static_cast<unsigned>(1 + du + dd), rt, rt * sizeof(double), stream>>>(da, m, d, sums.get());
    HERD_CUDA_CHECK(cudaGetLastError());
    std::vector<double> hs(1 + du + dd);
    sums.download(hs.data(), hs.size(), stream);
    HERD_CUDA_CHECK(cudaStreamSynchronize(stream));
    engine.pooled_merge(hs[0], hs.data() + 1, hs.data() + 1 + du);
    chol.upload(ha.chol, dd, stream);
    ad_ref.upload(engine.pooled_reference(), du, stream);
    ad_n.zero(stream);
    ad_s1.zero(stream);
    ad_s2.zero(stream);
  };
  hooks.sync = [&] {
    accepted.download(ha.accepted, accepted.size(), stream);
    ood.download(ha.out_of_domain, m, stream);
    nan.download(ha.nan_count, m, stream);
    posinf.download(ha.posinf_count, m, stream);
    chol.download(ha.chol, nchol, stream);
    HERD_CUDA_CHECK(cudaStreamSynchronize(stream));
  };
  return engine.run_device(hooks, sink);
}

}  // namespace herd::mcmc::cuda
