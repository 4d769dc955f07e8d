// CUDA kernels of PPO/A2C's device update; launchers and their host references in
// herd/rl/cuda/ppo_kernels.hpp.
#include <cmath>

#include "herd/rl/advantage.hpp"
#include "herd/rl/cuda/ppo_kernels.hpp"
#include "kernel_common.cuh"

namespace herd::rl::cuda {
namespace {

using detail::block_sum;
using detail::blocks_for;
using detail::check_launch;
using detail::gid;
using detail::gstride;
using detail::kThreads;

__global__ void gae_kernel(const float* rewards, const float* values, const std::uint8_t* term,
                           const std::uint8_t* trunc, const float* final_values, const float* last_values, int T, int B,
                           double gamma, double gl, float* adv, float* ret) {
  for (std::int64_t b = gid(); b < B; b += gstride()) {
    double carry = 0.0;  // A_{t+1}
    for (int t = T; t-- > 0;) {
      const std::int64_t i = static_cast<std::int64_t>(t) * B + b;
      const bool te = term[i] != 0, tr = trunc[i] != 0;
      const double next = te ? 0.0
                             : (tr ? static_cast<double>(final_values[i])
                                   : static_cast<double>(t + 1 < T ? values[i + B] : last_values[b]));
      const double a = gae_step(rewards[i], values[i], next, te || tr, gamma, gl, carry);
      carry = a;
      adv[i] = static_cast<float>(a);
      ret[i] = static_cast<float>(a + values[i]);
    }
  }
}

__global__ void gather_kernel(const std::uint32_t* perm, const std::uint32_t* starts, const std::int32_t* k,
                              std::int64_t n, const float* obs, std::int64_t D, const std::int64_t* act_i64,
                              const float* act_f32, std::int64_t A, const float* adv, const float* logp,
                              const float* val, const float* ret, float* obs_out, std::int64_t* act_i64_out,
                              float* act_f32_out, float* aux) {
  const std::uint32_t* idx = perm + starts[*k];
  for (std::int64_t r = gid(); r < n; r += gstride()) {
    const std::int64_t j = idx[r];
    for (std::int64_t k = 0; k < D; ++k) obs_out[r * D + k] = obs[j * D + k];
    if (act_i64) {
      act_i64_out[r] = act_i64[j];
    } else {
      for (std::int64_t k = 0; k < A; ++k) act_f32_out[r * A + k] = act_f32[j * A + k];
    }
    aux[r] = adv[j];
    aux[n + r] = logp[j];
    aux[2 * n + r] = val[j];
    aux[3 * n + r] = ret[j];
  }
}

// One block: normalisation statistics, then the per-sample terms and gradients of
// Ppo::minibatch_loss (same double arithmetic per sample), then the means.
__global__ void ppo_loss_kernel(const float* logp, const float* ent, const float* val, const float* aux, std::int64_t n,
                                bool normalize, const double* clip_range, double cvf, double vf, double ec, float* grad,
                                double* all_terms, const std::int32_t* k, std::int32_t* bad) {
  __shared__ double buf[kThreads];
  const double clip = *clip_range;
  double* terms = all_terms + 6 * static_cast<std::int64_t>(*k);
  const float* adv = aux;
  const float* logp_old = aux + n;
  const float* val_old = aux + 2 * n;
  const float* ret = aux + 3 * n;
  const bool norm = normalize && n > 1;
  const double dn = static_cast<double>(n);
  double mean = 0.0, inv = 1.0;
  if (norm) {
    double s = 0.0;
    for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) s += adv[i];
    mean = block_sum(s, buf) / dn;
    double q = 0.0;
    for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) {
      const double d = adv[i] - mean;
      q += d * d;
    }
    const double var = block_sum(q, buf) / dn;
    inv = 1.0 / (::sqrt(var) + static_cast<double>(1e-8f));
  }
  const double inv_n = 1.0 / dn;
  double pl = 0.0, vl = 0.0, en = 0.0, kl = 0.0, cf = 0.0;
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const double a = norm ? static_cast<double>(static_cast<float>((adv[i] - mean) * inv)) : adv[i];
    const double log_ratio = static_cast<double>(logp[i]) - logp_old[i];
    const double ratio = ::exp(log_ratio);
    const double s1 = ratio * a;
    const double lo = 1.0 - clip, hi = 1.0 + clip;  // std::clamp and std::min, as on the host
    const double s2 = (ratio < lo ? lo : (hi < ratio ? hi : ratio)) * a;
    pl -= (s2 < s1 ? s2 : s1);
    grad[i] = static_cast<float>(s1 <= s2 ? -a * ratio * inv_n : 0.0);
    en += ent[i];
    grad[n + i] = static_cast<float>(-ec * inv_n);
    double v = val[i], dv = 1.0;
    if (cvf > 0) {
      const double old = val_old[i];
      const double d = v - old;
      if (d > cvf || d < -cvf) dv = 0.0;
      v = old + (d < -cvf ? -cvf : (cvf < d ? cvf : d));
    }
    const double err = v - ret[i];
    vl += err * err;
    grad[2 * n + i] = static_cast<float>(vf * 2.0 * err * dv * inv_n);
    kl += (ratio - 1.0) - log_ratio;
    if (::fabs(ratio - 1.0) > clip) cf += 1.0;
  }
  pl = block_sum(pl, buf) * inv_n;
  vl = block_sum(vl, buf) * inv_n;
  en = block_sum(en, buf) * inv_n;
  kl = block_sum(kl, buf) * inv_n;
  cf = block_sum(cf, buf) * inv_n;
  if (threadIdx.x == 0) {
    const double total = pl + vf * vl - ec * en;
    terms[0] = total;
    terms[1] = pl;
    terms[2] = vl;
    terms[3] = en;
    terms[4] = kl;
    terms[5] = cf;
    if (!::isfinite(total)) *bad = 1;
  }
}

__global__ void explained_variance_kernel(const float* yp, const float* y, std::int64_t n, double* out) {
  __shared__ double buf[kThreads];
  double sy = 0.0, sd = 0.0;
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    sy += y[i];
    sd += static_cast<double>(y[i]) - yp[i];
  }
  const double my = block_sum(sy, buf) / static_cast<double>(n);
  const double md = block_sum(sd, buf) / static_cast<double>(n);
  double vy = 0.0, vd = 0.0;
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const double d = static_cast<double>(y[i]) - yp[i] - md;
    vy += (y[i] - my) * (y[i] - my);
    vd += d * d;
  }
  vy = block_sum(vy, buf);
  vd = block_sum(vd, buf);
  if (threadIdx.x == 0) *out = vy == 0 ? NAN : 1.0 - vd / vy;
}

__global__ void advance_kernel(std::int32_t* k) {
  if (blockIdx.x == 0 && threadIdx.x == 0) ++*k;
}

}  // namespace

void gae(const float* rewards, const float* values, const std::uint8_t* terminated, const std::uint8_t* truncated,
         const float* final_values, const float* last_values, int steps, int envs, float gamma, float lambda,
         float* advantages, float* returns, cudaStream_t s) {
  if (steps <= 0 || envs <= 0) return;
  // The host's constants: gamma and gamma * lambda from the float inputs, in double.
  const double g = gamma, gl = static_cast<double>(gamma) * lambda;
  herd::gpu::launch(gae_kernel, blocks_for(envs), kThreads, 0, s, rewards, values, terminated, truncated, final_values,
                    last_values, steps, envs, g, gl, advantages, returns);
  check_launch();
}

void ppo_gather(const std::uint32_t* perm, const std::uint32_t* starts, const std::int32_t* minibatch, std::int64_t n,
                const float* obs, std::int64_t obs_dim, const std::int64_t* actions_i64, const float* actions_f32,
                std::int64_t action_dim, const float* advantages, const float* log_probs, const float* values,
                const float* returns, float* obs_out, std::int64_t* act_i64_out, float* act_f32_out, float* aux,
                cudaStream_t s) {
  if (n <= 0) return;
  herd::gpu::launch(gather_kernel, blocks_for(n), kThreads, 0, s, perm, starts, minibatch, n, obs, obs_dim, actions_i64,
                    actions_f32, action_dim, advantages, log_probs, values, returns, obs_out, act_i64_out, act_f32_out,
                    aux);
  check_launch();
}

void ppo_loss(const float* log_probs, const float* entropies, const float* values, const float* aux, std::int64_t n,
              bool normalize, const double* clip, double clip_vf, double vf_coef, double ent_coef, float* grad,
              double* terms, const std::int32_t* minibatch, std::int32_t* bad, cudaStream_t s) {
  if (n <= 0) return;
  herd::gpu::launch(ppo_loss_kernel, 1, kThreads, 0, s, log_probs, entropies, values, aux, n, normalize, clip, clip_vf,
                    vf_coef, ent_coef, grad, terms, minibatch, bad);
  check_launch();
}

void next_minibatch(std::int32_t* minibatch, cudaStream_t s) {
  herd::gpu::launch(advance_kernel, 1, 1, 0, s, minibatch);
  check_launch();
}

void explained_variance(const float* y_pred, const float* y, std::int64_t n, double* out, cudaStream_t s) {
  if (n <= 0) return;
  herd::gpu::launch(explained_variance_kernel, 1, kThreads, 0, s, y_pred, y, n, out);
  check_launch();
}

}  // namespace herd::rl::cuda
