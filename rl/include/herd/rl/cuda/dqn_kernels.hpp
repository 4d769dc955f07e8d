#pragma once
/// @file dqn_kernels.hpp
/// Host-callable launchers of the CUDA kernels of DQN on a device (CUDA builds only): the
/// dueling combination and its backward, the TD loss with its gradient, TD errors and
/// statistics, the Polyak target update, and the guards of a data-parallel step (a flagged
/// gradient filled with NaN, a flag raised by a non-finite value). Conventions as herd/rl/cuda/ppo_kernels.hpp:
/// every launcher enqueues on stream `s` and returns at once (no host wait); pointers are
/// device memory of the current device; arrays are row-major; a failed launch throws
/// `herd::CudaError`; launchers are reentrant; kernels go through the launch layer
/// (herd/core/cuda/launch.hpp), so the `host-emu` tests run them on the CPU. Compiled
/// without fused multiply-add (`--fmad=false`): the per-element arithmetic rounds as the
/// host's (`QNetwork`, `Dqn` in herd/rl/dqn.hpp). Sums are fixed-order trees in one block.

#include <cstdint>

#include <cuda_runtime_api.h>

namespace herd::rl::cuda {

/// Dueling heads (Wang et al. 2016, eq. 9), one thread per row: `q[i, j] = v[i] + a[i, j] -
/// mean_j a[i, :]` with the mean and the sum in double, rounded to float (as
/// `QNetwork::forward` on the host, bit for bit). `a`, `q` `[n, A]`; `v` `[n]`.
void dueling_forward(const float* a, const float* v, float* q, std::int64_t n, std::int64_t A, cudaStream_t s);

/// The backward of `dueling_forward`: `gv[i] = sum_j g[i, j]`, `ga[i, j] = g[i, j] - gv[i] / A`
/// (double, rounded to float; bit for bit as `QNetwork::backward` on the host).
void dueling_backward(const float* g, float* ga, float* gv, std::int64_t n, std::int64_t A, cudaStream_t s);

/// DQN's TD loss on a batch of `n`, the device twin of `Dqn::train_step`'s host loop: per
/// sample i, the target y_i = returns[i] + discounts[i] * q_next[i, best[i]] (double), the TD
/// error d_i = q[i, actions[i]] - y_i (written to `td[i]`), the weighted loss
/// weights[i] huber_delta(d_i) (`mse`: weights[i] d_i^2), and the gradient row `grad[i, :]`
/// = 0 except `grad[i, actions[i]] = weights[i] clamp(d_i, -delta, delta) / n` (`mse`:
/// weights[i] 2 d_i / n) (float). `stats` (3 doubles) receives the means {loss, q(s, a), y}; `*bad`
/// (an int32) 1 when the mean loss is not finite, else 0 (an optimizer skip flag). Actions
/// must lie in [0, A) (checked by the caller). One block; sums in a fixed tree order.
void dqn_td_loss(const float* q, const float* q_next, const std::int64_t* best, const std::int64_t* actions,
                 const double* returns, const double* discounts, const double* weights, std::int64_t n, std::int64_t A,
                 bool mse, double delta, float* grad, double* td, double* stats, std::int32_t* bad, cudaStream_t s);

/// Polyak target update over `n` floats: `dst[i] = dst[i] * (1 - tau) + tau * src[i]` in
/// float (as `QNetwork::update_from` on the host, bit for bit).
void polyak_update(float* dst, const float* src, std::int64_t n, float keep, float tau, cudaStream_t s);

/// Data-parallel DQN's poisoning of a rank's gradient: when `*flag` (an int32) is non-zero
/// at run time, every one of the `n` floats of `x` becomes `value` (NaN: a rank whose loss is
/// not finite sends NaN gradients into the all-reduce); otherwise `x` is left as is.
void fill_if_flagged(const std::int32_t* flag, float* x, std::int64_t n, float value, cudaStream_t s);

/// `*flag = 1` when the double `*v` is not finite (e.g. the squared norm of the gradients
/// averaged over the ranks); otherwise `*flag` is left as is. One thread.
void flag_if_not_finite(const double* v, std::int32_t* flag, cudaStream_t s);

}  // namespace herd::rl::cuda
