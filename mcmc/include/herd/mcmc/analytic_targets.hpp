#pragma once
/// @file analytic_targets.hpp
/// The formulas of the built-in analytic targets, written once as trivially copyable
/// `HERD_HOST_DEVICE` functors `double operator()(const double* x, int d) const`: the
/// serial targets (targets.hpp: `MultivariateNormal`, `Banana`, ...), the batched host
/// path and, compiled by nvcc, the CUDA kernels (herd/mcmc/cuda/batched_dram.cuh) all
/// evaluate these, so every path computes the same floating-point operations in the same
/// order (bit-identical on the host; on the device up to nvcc's fused multiply-add
/// contraction and its exp/log).
///
/// Functors that need arrays (the Gaussian's mean and quadratic form, the mixture's
/// components) hold pointers, which must point to memory the executing side can read;
/// their owners (`MultivariateNormal`, `GaussianMixture` in targets.hpp, `GaussianTarget`
/// in batched_targets.hpp) give a host view, and the CUDA runner copies the arrays to the
/// device (`cuda::DeviceGaussian`). The functors read their own dimension `d`: the `d`
/// argument is the sampler's and must equal it.
///
/// Log densities are natural logs and normalised unless stated otherwise. No Eigen, no
/// allocation, no exceptions. Thread-safety: immutable values; concurrent calls are fine.
/// NaN inputs give NaN; infinite inputs give -inf or NaN, as the formulas do.

#include <cmath>
#include <cstddef>
#include <limits>
#include <string>
#include <vector>

#include "herd/core/host_device.hpp"

namespace herd::mcmc {

namespace target_detail {
/// log(2 pi).
inline constexpr double kLog2Pi = 1.8378770664093454836;
/// Mixture components whose terms `MixtureLogDensity` keeps between its two passes (more
/// are recomputed in the second pass, with the same operations).
inline constexpr int kMixtureKept = 64;
}  // namespace target_detail

/// Multivariate normal N(mean, P^-1) over arrays: log p = log_norm - r^T P r / 2 with
/// r = x - mean. `mean` `[d]`; `prec2` `[d, d]` row-major holds the quadratic form's
/// coefficients: the precision's diagonal, its strict lower triangle doubled, upper
/// triangle unused (so the form takes half the products). The sum runs row by row,
/// q_i = r_i (P_ii r_i + 2 sum_{j<i} P_ij r_j), with two accumulators per row and two over
/// the rows (short sums are latency-bound). Arrays in host or device memory.
struct GaussianLogDensity {
  int d = 0;
  const double* mean = nullptr;
  const double* prec2 = nullptr;
  double log_norm = 0.0;
  HERD_HOST_DEVICE double operator()(const double* x, int /*d*/) const {
    double q0 = 0.0, q1 = 0.0;
    for (int i = 0; i < d; ++i) {
      const double* p = prec2 + static_cast<std::size_t>(i) * d;
      const double ri = x[i] - mean[i];
      double s0 = p[i] * ri, s1 = 0.0;
      int j = 0;
      for (; j + 2 <= i; j += 2) {
        s0 += p[j] * (x[j] - mean[j]);
        s1 += p[j + 1] * (x[j + 1] - mean[j + 1]);
      }
      if (j < i) s0 += p[j] * (x[j] - mean[j]);
      const double t = ri * (s0 + s1);
      if (i & 1) q1 += t;
      else q0 += t;
    }
    return log_norm - 0.5 * (q0 + q1);
  }
};

/// Haario's banana ("twisted Gaussian", Haario, Saksman & Tamminen 1999):
/// y = (x1, x2 + b x1^2 - 100 b, x3, ...) is N(0, diag(100, 1, ..., 1)). The map has unit
/// Jacobian, so x1 ~ N(0, 100) and x3.. ~ N(0, 1) exactly; E[x2] = 0. d >= 2.
struct BananaLogDensity {
  int d = 2;
  double b = 0.03;
  HERD_HOST_DEVICE double operator()(const double* x, int /*d*/) const {
    const double y2 = x[1] + b * x[0] * x[0] - 100.0 * b;
    double q = x[0] * x[0] / 100.0 + y2 * y2;
    for (int i = 2; i < d; ++i) q += x[i] * x[i];
    return -0.5 * q - 0.5 * d * target_detail::kLog2Pi - std::log(10.0);
  }
};

/// Rosenbrock's density, unnormalised: log p = -[(a - x1)^2 + b (x2 - x1^2)^2] / s, with
/// the same terms summed over consecutive pairs for d > 2. d >= 2.
struct RosenbrockLogDensity {
  int d = 2;
  double a = 1.0, b = 100.0, s = 20.0;
  HERD_HOST_DEVICE double operator()(const double* x, int /*d*/) const {
    double q = 0.0;
    for (int i = 0; i + 1 < d; ++i) {
      const double u = a - x[i];
      const double v = x[i + 1] - x[i] * x[i];
      q += u * u + b * v * v;
    }
    return -q / s;
  }
};

/// Neal's funnel (Neal 2003, "Slice sampling"): v = x1 ~ N(0, 3^2), x2..xd | v ~ N(0, e^v).
/// d >= 2.
struct FunnelLogDensity {
  int d = 10;
  HERD_HOST_DEVICE double operator()(const double* x, int /*d*/) const {
    const double v = x[0];
    double q = 0.0;
    for (int i = 1; i < d; ++i) q += x[i] * x[i];
    // log N(v; 0, 9) + sum log N(x_i; 0, e^v)
    return -0.5 * v * v / 9.0 - std::log(3.0) - 0.5 * target_detail::kLog2Pi -
           0.5 * (d - 1) * (target_detail::kLog2Pi + v) - 0.5 * q * std::exp(-v);
  }
};

/// A mixture of isotropic Gaussians over arrays, sum_k w_k N(mu_k, sigma_k^2 I), by a
/// two-pass log-sum-exp. `logw` `[k]` holds log w_k - d log sigma_k - d/2 log(2 pi) (the
/// weights normalised), `means` `[k, d]` row-major, `sigmas` `[k]`. Arrays in host or
/// device memory.
struct MixtureLogDensity {
  int d = 1;
  int k = 0;
  const double* logw = nullptr;
  const double* means = nullptr;
  const double* sigmas = nullptr;
  /// The log of component c's weighted density at x.
  HERD_HOST_DEVICE double term(const double* x, int c) const {
    const double* m = means + static_cast<std::size_t>(c) * d;
    double q = 0.0;
    for (int i = 0; i < d; ++i) q += (x[i] - m[i]) * (x[i] - m[i]);
    return logw[c] - 0.5 * q / (sigmas[c] * sigmas[c]);
  }
  HERD_HOST_DEVICE double operator()(const double* x, int /*d*/) const {
    double kept[target_detail::kMixtureKept];
    double mx = -std::numeric_limits<double>::infinity();
    for (int c = 0; c < k; ++c) {
      const double t = term(x, c);
      if (c < target_detail::kMixtureKept) kept[c] = t;
      mx = mx < t ? t : mx;  // std::max(mx, t)
    }
    if (!std::isfinite(mx)) return mx;
    double s = 0.0;
    for (int c = 0; c < k; ++c) s += std::exp((c < target_detail::kMixtureKept ? kept[c] : term(x, c)) - mx);
    return mx + std::log(s);
  }
};

namespace target_detail {

/// The parts of N(mean, cov) that `GaussianLogDensity` needs, from a covariance `[d, d]`
/// row-major: the precision `prec` (symmetrised, `[d, d]`), its quadratic-form layout
/// `prec2` (see `GaussianLogDensity`) and the log normalising constant
/// -(d log 2 pi + log det cov) / 2. Host only (Eigen's Cholesky, in targets.cpp).
struct GaussianForm {
  std::vector<double> prec, prec2;
  double log_norm = 0.0;
};
/// @param who the caller's name for messages ("MultivariateNormal", "GaussianTarget").
/// @throws herd::InputError when `cov` is not positive definite ("<who>: cov is not
///   positive definite"). Shapes are the caller's to check.
GaussianForm gaussian_form(const double* cov, int d, const std::string& who);

}  // namespace target_detail

}  // namespace herd::mcmc
