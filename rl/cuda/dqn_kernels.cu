// CUDA kernels of DQN on a device; launchers and their host references in
// herd/rl/cuda/dqn_kernels.hpp.
#include <cmath>

#include "herd/rl/cuda/dqn_kernels.hpp"
#include "kernel_common.cuh"

namespace herd::rl::cuda {
namespace {

using detail::block_sum;
using detail::blocks_for;
using detail::check_launch;
using detail::gid;
using detail::gstride;
using detail::kThreads;

__global__ void dueling_forward_kernel(const float* a, const float* v, float* q, std::int64_t n, std::int64_t A) {
  for (std::int64_t i = gid(); i < n; i += gstride()) {
    double mean = 0;
    for (std::int64_t j = 0; j < A; ++j) mean += a[i * A + j];
    mean /= static_cast<double>(A);
    for (std::int64_t j = 0; j < A; ++j)
      q[i * A + j] = static_cast<float>(static_cast<double>(v[i]) + static_cast<double>(a[i * A + j]) - mean);
  }
}

__global__ void dueling_backward_kernel(const float* g, float* ga, float* gv, std::int64_t n, std::int64_t A) {
  for (std::int64_t i = gid(); i < n; i += gstride()) {
    double s = 0;
    for (std::int64_t j = 0; j < A; ++j) s += g[i * A + j];
    gv[i] = static_cast<float>(s);
    const double mean = s / static_cast<double>(A);
    for (std::int64_t j = 0; j < A; ++j) ga[i * A + j] = static_cast<float>(static_cast<double>(g[i * A + j]) - mean);
  }
}

__global__ void td_loss_kernel(const float* q, const float* q_next, const std::int64_t* best,
                               const std::int64_t* actions, const double* returns, const double* discounts,
                               const double* weights, std::int64_t n, std::int64_t A, bool mse, double delta,
                               float* grad, double* td, double* stats, std::int32_t* bad) {
  __shared__ double buf[kThreads];
  double loss = 0, qm = 0, ym = 0;
  const double inv_n = 1.0 / static_cast<double>(n);
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const std::int64_t a = actions[i];
    const double y = returns[i] + discounts[i] * static_cast<double>(q_next[i * A + best[i]]);
    const double qsa = static_cast<double>(q[i * A + a]);
    const double d = qsa - y;
    const double ad = fabs(d);
    const double w = weights[i];
    double g;
    if (mse) {
      loss += w * (d * d);
      g = 2.0 * d;
    } else {
      loss += w * (ad < delta ? 0.5 * d * d : delta * (ad - 0.5 * delta));
      g = d < -delta ? -delta : (d > delta ? delta : d);
    }
    for (std::int64_t j = 0; j < A; ++j) grad[i * A + j] = 0.0f;
    grad[i * A + a] = static_cast<float>(w * g / static_cast<double>(n));
    td[i] = d;
    qm += qsa;
    ym += y;
  }
  // Fixed-order tree sums (deterministic).
  loss = block_sum(loss, buf) * inv_n;
  qm = block_sum(qm, buf) * inv_n;
  ym = block_sum(ym, buf) * inv_n;
  if (threadIdx.x == 0) {
    stats[0] = loss;
    stats[1] = qm;
    stats[2] = ym;
    *bad = isfinite(loss) ? 0 : 1;
  }
}

__global__ void polyak_kernel(float* dst, const float* src, std::int64_t n, float keep, float tau) {
  for (std::int64_t i = gid(); i < n; i += gstride()) dst[i] = dst[i] * keep + tau * src[i];
}

__global__ void fill_if_flagged_kernel(const std::int32_t* flag, float* x, std::int64_t n, float value) {
  if (*flag == 0) return;
  for (std::int64_t i = gid(); i < n; i += gstride()) x[i] = value;
}

__global__ void flag_if_not_finite_kernel(const double* v, std::int32_t* flag) {
  if (threadIdx.x == 0 && !isfinite(*v)) *flag = 1;
}

}  // namespace

void dueling_forward(const float* a, const float* v, float* q, std::int64_t n, std::int64_t A, cudaStream_t s) {
  if (n <= 0) return;
  herd::gpu::launch(dueling_forward_kernel, blocks_for(n), kThreads, 0, s, a, v, q, n, A);
  check_launch();
}

void dueling_backward(const float* g, float* ga, float* gv, std::int64_t n, std::int64_t A, cudaStream_t s) {
  if (n <= 0) return;
  herd::gpu::launch(dueling_backward_kernel, blocks_for(n), kThreads, 0, s, g, ga, gv, n, A);
  check_launch();
}

void dqn_td_loss(const float* q, const float* q_next, const std::int64_t* best, const std::int64_t* actions,
                 const double* returns, const double* discounts, const double* weights, std::int64_t n, std::int64_t A,
                 bool mse, double delta, float* grad, double* td, double* stats, std::int32_t* bad, cudaStream_t s) {
  herd::gpu::launch(td_loss_kernel, 1, kThreads, 0, s, q, q_next, best, actions, returns, discounts, weights, n, A, mse,
                    delta, grad, td, stats, bad);
  check_launch();
}

void polyak_update(float* dst, const float* src, std::int64_t n, float keep, float tau, cudaStream_t s) {
  if (n <= 0) return;
  herd::gpu::launch(polyak_kernel, blocks_for(n), kThreads, 0, s, dst, src, n, keep, tau);
  check_launch();
}

void fill_if_flagged(const std::int32_t* flag, float* x, std::int64_t n, float value, cudaStream_t s) {
  if (n <= 0) return;
  herd::gpu::launch(fill_if_flagged_kernel, blocks_for(n), kThreads, 0, s, flag, x, n, value);
  check_launch();
}

void flag_if_not_finite(const double* v, std::int32_t* flag, cudaStream_t s) {
  herd::gpu::launch(flag_if_not_finite_kernel, 1, 32, 0, s, v, flag);
  check_launch();
}

}  // namespace herd::rl::cuda
