#pragma once
/// @file batched_dram.cuh
/// The CUDA path of the batched DRAM sampler (batched_dram.hpp), header-only so that a user
/// functor target compiles into the kernel: include this file in a `.cu` file and call
/// `herd::mcmc::cuda::run_batched_dram(options, functor, sink, stream)`. CUDA builds only.
///
/// One thread per chain runs the same `HERD_HOST_DEVICE` per-chain functions as the host
/// path (batched_dram_kernel.hpp) for a whole segment of proposals (up to the next adaptive
/// update or the next block of thinned draws), so the per-step cost is the kernel's alone.
/// For d <= 32 the chain's hot state lives in thread-local arrays during the segment
/// (`batched::segment_local`, bit-identical to the array form; tested on the host), whose
/// accesses coalesce across a warp.
/// The host engine (`detail::BatchedEngine`) runs the schedule: validation, initial
/// factor, pooled merges (the statistics summed on the device by the engine's fixed pairwise
/// tree over global chain ids, one kernel per level, then combined over the ranks by
/// `BatchedEngine::pooled_update`), per-chain updates (a kernel running
/// `batched::merge_and_factor` per chain), and the blocks of thinned draws copied back to
/// the host and handed to the sink.
///
/// The functor must be trivially copyable and callable on the device
/// (`HERD_HOST_DEVICE double operator()(const double* x, int d) const`); any pointers it
/// holds must be device memory (see `DeviceGaussian`). Integers and uniforms are
/// bit-identical to the host path; normals may differ in the last bits (exp/log), so chains
/// are statistically equivalent to the host path's, not identical.
///
/// Memory (device): `detail::device_memory_bytes(options)`: about M (5 d + 4 + (2 + d + d^2)
/// [adapting] + d^2 [per-chain factor]) doubles plus a draw buffer of M n ((d + 3) doubles +
/// 2 bytes) (the draws, their lp and per-draw statistics),
/// n = `detail::block_buffer_draws` = min(block_draws, steps / thin); a run that does not fit
/// the free device memory is refused up front with the sizes (herd::InputError). Streams: everything is
/// enqueued on `stream`; the call returns after the last draws were handed to the sink.
/// Thread-safety: one call at a time per stream. @throws herd::CudaError on CUDA failures,
/// herd::InputError on bad options, herd::NumericalError on a +inf log density.

#include "herd/core/cuda/launch.hpp"

#include <algorithm>
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
  DeviceArray(DeviceArray&& o) noexcept : p_(o.p_), n_(o.n_) {
    o.p_ = nullptr;
    o.n_ = 0;
  }
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

/// Page-locked host memory for `n` values of `T` (RAII; move-only), so that copies from the
/// device into it are asynchronous and one stream synchronisation covers several of them.
/// Host code.
template <class T>
class PinnedArray {
 public:
  PinnedArray() = default;
  explicit PinnedArray(std::size_t n) : n_(n) {
    if (n > 0) HERD_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&p_), n * sizeof(T), cudaHostAllocPortable));
  }
  ~PinnedArray() {
    if (p_) cudaFreeHost(p_);
  }
  PinnedArray(PinnedArray&& o) noexcept : p_(o.p_), n_(o.n_) {
    o.p_ = nullptr;
    o.n_ = 0;
  }
  PinnedArray& operator=(PinnedArray&& o) noexcept {
    if (this != &o) {
      if (p_) cudaFreeHost(p_);
      p_ = o.p_;
      n_ = o.n_;
      o.p_ = nullptr;
      o.n_ = 0;
    }
    return *this;
  }
  PinnedArray(const PinnedArray&) = delete;
  PinnedArray& operator=(const PinnedArray&) = delete;
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
      : mean_(g.mean().data(), g.mean().size(), s),
        prec2_(g.quadratic_form().data(), g.quadratic_form().size(), s),
        view_{g.ndim(), mean_.get(), prec2_.get(), g.log_norm()} {}
  GaussianLogDensity view() const { return view_; }

 private:
  DeviceArray<double> mean_, prec2_;
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
                        std::uint64_t per, std::int64_t nd, F f, double* bx, double* blp, batched::DrawStats bs) {
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
      batched::record_stats(a, i, ka, bs, slot);
    }
  }
}

// As `segment`, with each thread's chain in thread-local arrays of dimension D >= d
// (`batched::segment_local`): local memory is interleaved across a warp's threads, so the
// hot state's accesses coalesce.
template <int D, class F>
__global__ void segment_local_kernel(batched::KernelParams p, batched::ChainArrays a, std::size_t m, std::uint64_t k0,
                                     std::uint64_t per, std::int64_t nd, F f, double* bx, double* blp,
                                     batched::DrawStats bs) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < m) batched::segment_local<D>(p, a, i, k0, per, nd, f, bx, blp, bs);
}

// Launches the segment kernel: thread-local state for d <= 32, the arrays otherwise.
template <class F>
void launch_segment(unsigned blocks, unsigned threads, cudaStream_t s, const batched::KernelParams& p,
                    const batched::ChainArrays& a, std::size_t m, std::uint64_t k0, std::uint64_t per, std::int64_t nd,
                    const F& f, double* bx, double* blp, const batched::DrawStats& bs) {
  if (p.d <= 8)
    herd::gpu::launch(segment_local_kernel<8, F>, blocks, threads, 0, s, p, a, m, k0, per, nd, f, bx, blp, bs);
  else if (p.d <= 16)
    herd::gpu::launch(segment_local_kernel<16, F>, blocks, threads, 0, s, p, a, m, k0, per, nd, f, bx, blp, bs);
  else if (p.d <= 32)
    herd::gpu::launch(segment_local_kernel<32, F>, blocks, threads, 0, s, p, a, m, k0, per, nd, f, bx, blp, bs);
  else herd::gpu::launch(segment<F>, blocks, threads, 0, s, p, a, m, k0, per, nd, f, bx, blp, bs);
}

// One level of the pooled summation tree (detail::pooled_tree_plan): parent node
// lo + t of level `level` (>= 1) adds its right child's statistics into its left child's row.
__global__ inline void pooled_tree_level(batched::ChainArrays a, int d, std::uint64_t first, int level,
                                         std::uint64_t lo, std::uint64_t hi) {
  const std::uint64_t j = lo + blockIdx.x * static_cast<std::uint64_t>(blockDim.x) + threadIdx.x;
  if (j >= hi) return;
  const std::uint64_t left = (j << level) - first;
  batched::pooled_pair_add(a, d, left, left + (std::uint64_t{1} << (level - 1)));
}

// Per-chain adaptive update: counts[0] += chains whose factor was replaced, counts[1] +=
// chains whose factorisation failed (integer sums: the order does not matter), so only two
// numbers go back to the host, not a result per chain. Resets the statistics and moves each
// chain's reference to its running mean; the factors stay on the device.
__global__ inline void per_chain_update(batched::ChainArrays a, std::size_t m, int d, double scale, double* run_n,
                                        double* run_mean, double* run_m2, double* ref, unsigned long long* counts) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= m) return;
  const std::size_t du = static_cast<std::size_t>(d), dd = du * du;
  double* s2 = a.ad_s2 + i * dd;
  double h = 0.0;
  const int r = batched::merge_and_factor(d, a.ad_n[i], a.ad_s1 + i * du, s2, ref + i * du, run_n[i], run_mean + i * du,
                                          run_m2 + i * dd, scale, a.chol + i * dd, s2, &h);
  if (h > a.adapt_measure[i]) a.adapt_measure[i] = h;
  if (r == 1) atomicAdd(counts, 1ULL);
  if (r == -1) atomicAdd(counts + 1, 1ULL);
  a.ad_n[i] = 0.0;
  for (std::size_t j = 0; j < du; ++j) {
    a.ad_s1[i * du + j] = 0.0;
    ref[i * du + j] = run_mean[i * du + j];
  }
  for (std::size_t j = 0; j < dd; ++j) s2[j] = 0.0;
}

// After a pooled update: every chain's current state saw the shared proposal change by `h`.
__global__ inline void raise_measure(double* measure, std::size_t m, double h) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i < m && h > measure[i]) measure[i] = h;
}

}  // namespace kernels

/// The device mirror of a `detail::BatchedEngine`'s chains: every array of
/// `batched::ChainArrays` in device memory (uploaded from the engine's host arrays), the
/// kernel parameters with device pointers, the draw buffers, and the engine hooks for
/// adaptive updates and counter syncs. Host code; used by the runners.
class DeviceChains {
 public:
  DeviceChains(detail::BatchedEngine& engine, const BatchedDramOptions& o, cudaStream_t stream)
      : engine_(engine), stream_(stream), hp_(engine.params()), ha_(engine.arrays()) {
    std::size_t free_bytes = 0, total_bytes = 0;
    HERD_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
    detail::check_device_memory(o, free_bytes);
    m = static_cast<std::size_t>(o.num_chains);
    d = o.ndim;
    du_ = static_cast<std::size_t>(d);
    dd_ = du_ * du_;
    const std::size_t np = static_cast<std::size_t>(hp_.stages) + 1;
    blocks = static_cast<unsigned>((m + threads - 1) / threads);
    zig_ = DeviceArray<ZigguratTables>(&ziggurat_tables(), 1, stream);
    lower_ = DeviceArray<double>(hp_.lower, du_, stream);
    upper_ = DeviceArray<double>(hp_.upper, du_, stream);
    x_ = DeviceArray<double>(ha_.x, m * du_, stream);
    lp_ = DeviceArray<double>(m);
    y_ = DeviceArray<double>(m * du_);
    w_ = DeviceArray<double>(m * np * du_);
    lpath_ = DeviceArray<double>(m * np);
    nchol_ = hp_.chol_per_chain ? m * dd_ : dd_;
    chol_ = DeviceArray<double>(ha_.chol, nchol_, stream);
    stage_ = DeviceArray<std::int32_t>(m);
    inside_ = DeviceArray<std::uint8_t>(m);
    dr_cursor_ = DeviceArray<RngCursor>(m);
    accepted_ = DeviceArray<std::int64_t>(m * static_cast<std::size_t>(hp_.stages));
    ood_ = DeviceArray<std::int64_t>(m);
    nan_ = DeviceArray<std::int64_t>(m);
    posinf_ = DeviceArray<std::int64_t>(m);
    // Counters from the host arrays (zero at a fresh start, a resumed run's otherwise).
    accepted_.upload(ha_.accepted, accepted_.size(), stream);
    ood_.upload(ha_.out_of_domain, m, stream);
    nan_.upload(ha_.nan_count, m, stream);
    posinf_.upload(ha_.posinf_count, m, stream);
    stage_.zero(stream);
    // The states' records (a resumed run's from the host).
    state_step_ = DeviceArray<std::uint64_t>(ha_.state_step, m, stream);
    state_stage_ = DeviceArray<std::uint8_t>(ha_.state_stage, m, stream);
    state_alpha_ = DeviceArray<double>(ha_.state_alpha, m, stream);
    adapt_ = ha_.ad_n != nullptr;
    measure_ = DeviceArray<double>(ha_.adapt_measure != nullptr ? m : 0);
    if (ha_.adapt_measure != nullptr) measure_.upload(ha_.adapt_measure, m, stream);
    const bool pc = adapt_ && hp_.chol_per_chain;
    ad_n_ = DeviceArray<double>(adapt_ ? m : 0);
    ad_s1_ = DeviceArray<double>(adapt_ ? m * du_ : 0);
    ad_s2_ = DeviceArray<double>(adapt_ ? m * dd_ : 0);
    ad_ref_ = DeviceArray<double>(adapt_ ? (hp_.chol_per_chain ? m * du_ : du_) : 0);
    run_n_ = DeviceArray<double>(pc ? m : 0);
    run_mean_ = DeviceArray<double>(pc ? m * du_ : 0);
    run_m2_ = DeviceArray<double>(pc ? m * dd_ : 0);
    result_ = DeviceArray<unsigned long long>(pc ? 2 : 0);
    if (adapt_) {
      for (auto* arr : {&ad_n_, &ad_s1_, &ad_s2_}) arr->zero(stream);
      ad_ref_.upload(ha_.ad_ref, ad_ref_.size(), stream);
      if (pc) {  // the running estimates live on the device (a resumed run's from the host)
        const detail::BatchedEngine::AdaptationArrays r = engine_.adaptation_arrays();
        run_n_.upload(r.run_n, m, stream);
        run_mean_.upload(r.run_mean, m * du_, stream);
        run_m2_.upload(r.run_m2, m * dd_, stream);
      }
    }
    // The draw buffer holds the draws a block needs (not block_draws when the run keeps
    // fewer); refuse up front, with the sizes, what does not fit the device.
    const auto bmax = static_cast<std::size_t>(detail::block_buffer_draws(o));
    bx = DeviceArray<double>(m * bmax * du_);
    blp = DeviceArray<double>(m * bmax);
    b_accepted_ = DeviceArray<std::uint8_t>(m * bmax);
    b_stage_ = DeviceArray<std::uint8_t>(m * bmax);
    b_alpha_ = DeviceArray<double>(m * bmax);
    b_measure_ = DeviceArray<double>(m * bmax);
    bs = batched::DrawStats{b_accepted_.get(), b_stage_.get(), b_alpha_.get(), b_measure_.get()};
    dp = hp_;
    dp.lower = lower_.get();
    dp.upper = upper_.get();
    dp.zig = zig_.get();
    da.x = x_.get();
    da.lp = lp_.get();
    da.y = y_.get();
    da.w = w_.get();
    da.lpath = lpath_.get();
    da.chol = chol_.get();
    da.stage = stage_.get();
    da.inside = inside_.get();
    da.dr_cursor = dr_cursor_.get();
    da.accepted = accepted_.get();
    da.out_of_domain = ood_.get();
    da.nan_count = nan_.get();
    da.posinf_count = posinf_.get();
    da.state_step = state_step_.get();
    da.state_stage = state_stage_.get();
    da.state_alpha = state_alpha_.get();
    da.adapt_measure = ha_.adapt_measure != nullptr ? measure_.get() : nullptr;
    da.ad_n = adapt_ ? ad_n_.get() : nullptr;
    da.ad_s1 = adapt_ ? ad_s1_.get() : nullptr;
    da.ad_s2 = adapt_ ? ad_s2_.get() : nullptr;
    da.ad_ref = adapt_ ? ad_ref_.get() : nullptr;
  }

  /// Uploads the start log densities from the engine's host array.
  void upload_lp() { lp_.upload(ha_.lp, m, stream_); }
  /// The end of every segment: copies the recorded block (nd draws per chain, when `hbx`,
  /// and their statistics into `hbs` when `hbs.accepted` is non-null) and the chains'
  /// counters (acceptances, out-of-domain, NaN, +inf) to the host arrays with one host wait
  /// (all copies go to page-locked staging, then one stream synchronisation). The counters
  /// change only in segments, so the engine's `sync` after a segment needs no copy of them.
  void download_block(std::int64_t nd, double* hbx, double* hblp, const batched::DrawStats& hbs = {}) {
    const std::size_t nx = m * static_cast<std::size_t>(nd) * du_, nl = m * static_cast<std::size_t>(nd);
    if (hbx) {
      if (stage_x_.size() < nx) stage_x_ = PinnedArray<double>(bx.size());
      if (stage_lp_.size() < 3 * nl) stage_lp_ = PinnedArray<double>(3 * blp.size());
      if (stage_bytes_.size() < 2 * nl) stage_bytes_ = PinnedArray<std::uint8_t>(2 * blp.size());
      bx.download(stage_x_.get(), nx, stream_);
      blp.download(stage_lp_.get(), nl, stream_);
      if (hbs.accepted) {
        b_alpha_.download(stage_lp_.get() + nl, nl, stream_);
        b_measure_.download(stage_lp_.get() + 2 * nl, nl, stream_);
        b_accepted_.download(stage_bytes_.get(), nl, stream_);
        b_stage_.download(stage_bytes_.get() + nl, nl, stream_);
      }
    }
    const std::size_t na = accepted_.size();
    if (stage_counts_.size() < na + 3 * m) stage_counts_ = PinnedArray<std::int64_t>(na + 3 * m);
    std::int64_t* sc = stage_counts_.get();
    accepted_.download(sc, na, stream_);
    ood_.download(sc + na, m, stream_);
    nan_.download(sc + na + m, m, stream_);
    posinf_.download(sc + na + 2 * m, m, stream_);
    HERD_CUDA_CHECK(cudaStreamSynchronize(stream_));
    if (hbx) {
      std::copy(stage_x_.get(), stage_x_.get() + nx, hbx);
      std::copy(stage_lp_.get(), stage_lp_.get() + nl, hblp);
      if (hbs.accepted) {
        std::copy(stage_lp_.get() + nl, stage_lp_.get() + 2 * nl, hbs.alpha);
        std::copy(stage_lp_.get() + 2 * nl, stage_lp_.get() + 3 * nl, hbs.measure);
        std::copy(stage_bytes_.get(), stage_bytes_.get() + nl, hbs.accepted);
        std::copy(stage_bytes_.get() + nl, stage_bytes_.get() + 2 * nl, hbs.stage);
      }
    }
    std::copy(sc, sc + na, ha_.accepted);
    std::copy(sc + na, sc + na + m, ha_.out_of_domain);
    std::copy(sc + na + m, sc + na + 2 * m, ha_.nan_count);
    std::copy(sc + na + 2 * m, sc + na + 3 * m, ha_.posinf_count);
  }

  /// The engine hook: one adaptive update on the device (see the file comment).
  void adapt_update() {
    if (hp_.chol_per_chain) {
      result_.zero(stream_);
      herd::gpu::launch(kernels::per_chain_update, blocks, threads, 0, stream_, da, m, d, engine_.scale(), run_n_.get(),
                        run_mean_.get(), run_m2_.get(), ad_ref_.get(), result_.get());
      HERD_CUDA_CHECK(cudaGetLastError());
      chol_dirty_ = true;  // the factors changed on the device
      unsigned long long counts[2] = {0, 0};
      result_.download(counts, 2, stream_);
      HERD_CUDA_CHECK(cudaStreamSynchronize(stream_));
      engine_.count_updates(static_cast<std::int64_t>(counts[0]), static_cast<std::int64_t>(counts[1]));
      return;
    }
    // The fixed summation tree over global chain ids, level by level in place (as the
    // host engine; the same additions in the same order), then the maximal nodes to the host.
    const detail::PooledTreePlan& plan = engine_.pooled_plan();
    const std::uint64_t first = hp_.first_chain_id;
    for (std::size_t lv = 0; lv < plan.parents.size(); ++lv) {
      const auto [lo, hi] = plan.parents[lv];
      const auto nb = static_cast<unsigned>((hi - lo + threads - 1) / threads);
      herd::gpu::launch(kernels::pooled_tree_level, nb, threads, 0, stream_, da, d, first, static_cast<int>(lv) + 1, lo,
                        hi);
      HERD_CUDA_CHECK(cudaGetLastError());
    }
    std::vector<detail::PooledNode> nodes(plan.emitted.size());
    for (std::size_t q = 0; q < nodes.size(); ++q) {
      const auto [lv, j] = plan.emitted[q];
      const std::size_t row = static_cast<std::size_t>((j << lv) - first);
      detail::PooledNode& nd = nodes[q];
      nd.level = lv;
      nd.index = j;
      nd.stats.resize(1 + du_ + dd_);
      HERD_CUDA_CHECK(
          cudaMemcpyAsync(nd.stats.data(), ad_n_.get() + row, sizeof(double), cudaMemcpyDeviceToHost, stream_));
      HERD_CUDA_CHECK(cudaMemcpyAsync(nd.stats.data() + 1, ad_s1_.get() + row * du_, du_ * sizeof(double),
                                      cudaMemcpyDeviceToHost, stream_));
      HERD_CUDA_CHECK(cudaMemcpyAsync(nd.stats.data() + 1 + du_, ad_s2_.get() + row * dd_, dd_ * sizeof(double),
                                      cudaMemcpyDeviceToHost, stream_));
    }
    HERD_CUDA_CHECK(cudaStreamSynchronize(stream_));
    engine_.pooled_update(nodes);  // collective over the ranks when the options name a communicator
    herd::gpu::launch(kernels::raise_measure, blocks, threads, 0, stream_, measure_.get(), m,
                      engine_.last_adaptation_measure());
    HERD_CUDA_CHECK(cudaGetLastError());
    chol_.upload(ha_.chol, dd_, stream_);
    ad_ref_.upload(engine_.pooled_reference(), du_, stream_);
    ad_n_.zero(stream_);
    ad_s1_.zero(stream_);
    ad_s2_.zero(stream_);
  }

  /// The engine hook before a checkpoint: states, log densities, every chain's factor and
  /// (per chain) the adaptation estimates and references back to the host arrays.
  void download_state() {
    x_.download(ha_.x, m * du_, stream_);
    lp_.download(ha_.lp, m, stream_);
    chol_.download(ha_.chol, nchol_, stream_);
    state_step_.download(ha_.state_step, m, stream_);
    state_stage_.download(ha_.state_stage, m, stream_);
    state_alpha_.download(ha_.state_alpha, m, stream_);
    if (ha_.adapt_measure != nullptr) measure_.download(ha_.adapt_measure, m, stream_);
    if (adapt_ && hp_.chol_per_chain) {
      const detail::BatchedEngine::AdaptationArrays r = engine_.adaptation_arrays();
      run_n_.download(r.run_n, m, stream_);
      run_mean_.download(r.run_mean, m * du_, stream_);
      run_m2_.download(r.run_m2, m * dd_, stream_);
      ad_ref_.download(r.ad_ref, m * du_, stream_);
    }
    HERD_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

  /// The engine hook after every segment: the counters came with the last segment
  /// (`download_block`); pooled factors are computed on the host; with per-chain factors only
  /// chain 0's is copied back (what the result reports as the proposal covariance), and only
  /// after an update on the device changed it (one wait); the other chains' factors stay on
  /// the device until a checkpoint (`download_state`), instead of M d^2 doubles after every
  /// segment.
  void sync() {
    if (!chol_dirty_) return;
    chol_.download(ha_.chol, dd_, stream_);
    HERD_CUDA_CHECK(cudaStreamSynchronize(stream_));
    chol_dirty_ = false;
  }

  std::size_t m = 0;
  int d = 0;
  static constexpr unsigned threads = 128;
  unsigned blocks = 0;
  batched::KernelParams dp;     ///< parameters with device pointers
  batched::ChainArrays da;      ///< device arrays
  DeviceArray<double> bx, blp;  ///< device draw buffers `[M, block, d]`, `[M, block]`
  batched::DrawStats bs;        ///< device buffers of the per-draw statistics `[M, block]`

 private:
  detail::BatchedEngine& engine_;
  cudaStream_t stream_;
  batched::KernelParams hp_;
  const batched::ChainArrays& ha_;
  std::size_t du_ = 0, dd_ = 0, nchol_ = 0;
  bool adapt_ = false;
  DeviceArray<ZigguratTables> zig_;
  DeviceArray<double> lower_, upper_, x_, lp_, y_, w_, lpath_, chol_;
  DeviceArray<std::int32_t> stage_;
  DeviceArray<std::uint8_t> inside_;
  DeviceArray<RngCursor> dr_cursor_;
  DeviceArray<std::int64_t> accepted_, ood_, nan_, posinf_;
  DeviceArray<std::uint64_t> state_step_;
  DeviceArray<std::uint8_t> state_stage_, b_accepted_, b_stage_;
  DeviceArray<double> state_alpha_, measure_, b_alpha_, b_measure_;
  PinnedArray<std::uint8_t> stage_bytes_;  ///< page-locked staging of the per-draw bytes
  DeviceArray<double> ad_n_, ad_s1_, ad_s2_, ad_ref_, run_n_, run_mean_, run_m2_;
  DeviceArray<unsigned long long> result_;  ///< per-chain updates: {replaced, failed}
  PinnedArray<double> stage_x_, stage_lp_;  ///< page-locked staging of the draw blocks (lp, alpha, measure)
  PinnedArray<std::int64_t> stage_counts_;  ///< page-locked staging of the counters
  bool chol_dirty_ = false;                 ///< per-chain factors changed on the device
};

/// Runs the batched sampler on the current CUDA device with a device-callable functor
/// (see the file comment). Ziggurat tables, the domain box and all chain arrays are copied
/// to the device; thinned draws come back in blocks of `options.block_draws`.
template <class F>
BatchedDramResult run_batched_dram(BatchedDramOptions options, const F& f, BatchedDrawSink& sink,
                                   cudaStream_t stream = nullptr) {
  options.device = BatchedDevice::kHost;  // the engine validates and keeps the host mirror
  detail::BatchedEngine engine(options);
  DeviceChains dc(engine, options, stream);
  const int d = options.ndim;
  // Start log densities on the device (the host engine checks them; a resumed engine has
  // them from its checkpoint and does not call this).
  engine.init_log_density([&](const double*, std::size_t n, double* out) {
    herd::gpu::launch(kernels::eval_rows<F>, dc.blocks, dc.threads, 0, stream, f, dc.da.x, d, n, dc.da.lp);
    HERD_CUDA_CHECK(cudaGetLastError());
    HERD_CUDA_CHECK(cudaMemcpyAsync(out, dc.da.lp, n * sizeof(double), cudaMemcpyDeviceToHost, stream));
    HERD_CUDA_CHECK(cudaStreamSynchronize(stream));
  });
  dc.upload_lp();
  detail::BatchedEngine::DeviceHooks hooks;
  hooks.segment = [&](std::uint64_t k0, std::uint64_t per, std::int64_t nd, double* hbx, double* hblp,
                      const batched::DrawStats& hbs, bool adapting) {
    batched::KernelParams p = dc.dp;
    p.adapting = adapting;
    kernels::launch_segment(dc.blocks, dc.threads, stream, p, dc.da, dc.m, k0, per, nd, f, hbx ? dc.bx.get() : nullptr,
                            hbx ? dc.blp.get() : nullptr, hbx && hbs.accepted ? dc.bs : batched::DrawStats{});
    HERD_CUDA_CHECK(cudaGetLastError());
    dc.download_block(nd, hbx, hblp, hbs);
  };
  hooks.adapt_update = [&] { dc.adapt_update(); };
  hooks.sync = [&] { dc.sync(); };
  hooks.download_state = [&] { dc.download_state(); };
  return engine.run_device(hooks, sink);
}

}  // namespace herd::mcmc::cuda
