#pragma once
/// @file ppo_kernels.hpp
/// Host-callable launchers of the CUDA kernels of PPO/A2C's device update (CUDA builds
/// only): GAE over a device rollout, the minibatch gather, the clipped-surrogate/value/
/// entropy loss with its per-sample gradients, and the explained variance. Every launcher
/// enqueues on stream `s` and returns at once (no host wait); pointers are device memory
/// of the current device; arrays are row-major and time-major as in `RolloutBuffer`; a
/// failed launch throws `herd::CudaError`; launchers are reentrant. Kernels go through the
/// launch layer (herd/core/cuda/launch.hpp), so the `host-emu` tests run them on the CPU.
/// The device code is compiled without fused multiply-add (`--fmad=false`), so GAE gives
/// the host's bits. Sums are fixed-order trees in one block (deterministic run to run).

#include <cstdint>

#include <cuda_runtime_api.h>

namespace herd::rl::cuda {

/// GAE(gamma, lambda) with time limits done right, one thread per environment, walking
/// t = T-1 .. 0 with `gae_step` (herd/rl/advantage.hpp): bit-identical to `compute_gae` for
/// the same float inputs. `terminated`/`truncated` are bytes (non-zero: true) `[T, B]`;
/// `final_values` `[T, B]` is read only where truncated; `last_values` `[B]`.
/// Writes `advantages` and `returns` (= advantages + values, rounded to float) `[T, B]`.
void gae(const float* rewards, const float* values, const std::uint8_t* terminated, const std::uint8_t* truncated,
         const float* final_values, const float* last_values, int steps, int envs, float gamma, float lambda,
         float* advantages, float* returns, cudaStream_t s);

/// Gathers the rows of minibatch `*minibatch` (a device counter) of a device rollout: the
/// samples `perm[starts[*minibatch] + r]`, r < n. Observations `[N, obs_dim]` go into
/// `obs_out` `[n, obs_dim]`; actions (int64 `[N]` when `actions_i64` is not null, else
/// float32 `[N, action_dim]`) into `act_i64_out` / `act_f32_out`; and `aux` `[4, n]`:
/// advantages, old log-probabilities, old values, returns. Every argument stays the same
/// from minibatch to minibatch (the counter moves on the device), so the launch can be
/// replayed in a CUDA graph.
void ppo_gather(const std::uint32_t* perm, const std::uint32_t* starts, const std::int32_t* minibatch, std::int64_t n,
                const float* obs, std::int64_t obs_dim, const std::int64_t* actions_i64, const float* actions_f32,
                std::int64_t action_dim, const float* advantages, const float* log_probs, const float* values,
                const float* returns, float* obs_out, std::int64_t* act_i64_out, float* act_f32_out, float* aux,
                cudaStream_t s);

/// The PPO loss of one minibatch of `n` samples, the device twin of `Ppo::minibatch_loss`
/// (one process): advantages (`aux` row 0) normalised over the minibatch when `normalize`
/// and n > 1 (mean and population variance in double, eps 1e-8f), then per sample the
/// clipped surrogate with clip range `*clip` (a device double), the (optionally clipped by `clip_vf` > 0)
/// squared value error against `aux` row 3, the entropy, approx KL (r - 1) - log r and the
/// clip indicator |r - 1| > clip. Writes dL/d(log_prob), dL/d(entropy), dL/d(value) into
/// `grad` `[3n]` (the agent's `backward_device` input) and the means {total, policy,
/// value, entropy, approx_kl, clip_fraction} into row `*minibatch` of `terms`
/// `[minibatches, 6]` (total = policy + vf_coef value - ent_coef entropy). When `total` is
/// not finite, sets `*bad` to 1 (it is never cleared here: an optimizer guarded by it
/// skips this and every later step). Replayable in a CUDA graph (see `ppo_gather`).
void ppo_loss(const float* log_probs, const float* entropies, const float* values, const float* aux, std::int64_t n,
              bool normalize, const double* clip, double clip_vf, double vf_coef, double ent_coef, float* grad,
              double* terms, const std::int32_t* minibatch, std::int32_t* bad, cudaStream_t s);

/// `++*minibatch` on the device (one thread): the end of a minibatch step.
void next_minibatch(std::int32_t* minibatch, cudaStream_t s);

/// `*out = 1 - Var(y - y_pred) / Var(y)` over n values (NaN when Var(y) = 0), two passes in
/// double as `explained_variance` on the host (the sums in tree order).
void explained_variance(const float* y_pred, const float* y, std::int64_t n, double* out, cudaStream_t s);

}  // namespace herd::rl::cuda
