#pragma once
/// @file batched_targets.hpp
/// Targets of the batched DRAM sampler (batched_dram.hpp):
/// - the built-in analytic targets (targets.hpp) as trivially copyable `HERD_HOST_DEVICE`
///   functors `double operator()(const double* x, int d) const`, usable on the host path and,
///   compiled by nvcc, inside the CUDA kernel (herd/mcmc/cuda/batched_dram.cuh). Functors
///   that need arrays (the Gaussian's mean and precision) hold pointers, which must point to
///   memory the executing side can read: `GaussianTarget` owns host arrays and gives a host
///   view; the CUDA runner copies them to the device (`cuda::DeviceGaussian`).
/// - `MlpLogDensity`: a neural surrogate, an nn `Mlp` with one output taken as the log
///   density (or as a log likelihood added to a prior functor), evaluated for all pending
///   trials of a stage in one batched forward pass `[n, d] -> [n, 1]`.
///
/// Formulas and normalisation are those of targets.hpp (same expressions, so the values
/// agree to rounding). Thread-safety: the functors are immutable values (concurrent calls
/// fine); `MlpLogDensity` calls `Mlp::forward`, which is not reentrant: one thread at a time
/// (the batched sampler calls it from its calling thread only).

#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

#include "herd/core/host_device.hpp"

namespace herd::nn {
class Mlp;
}

namespace herd::mcmc {

namespace batched_detail {
inline constexpr double kLog2Pi = 1.8378770664093454836;
}

/// View of N(mean, P^-1): log p = log_norm - (x - mean)^T P (x - mean) / 2. `mean` `[d]`,
/// `prec` `[d, d]` row-major symmetric (host or device memory).
struct GaussianLogDensity {
  int d = 0;
  const double* mean = nullptr;
  const double* prec = nullptr;
  double log_norm = 0.0;
  HERD_HOST_DEVICE double operator()(const double* x, int /*d*/) const {
    double q = 0.0;
    for (int i = 0; i < d; ++i) {
      const double* pi = prec + static_cast<std::size_t>(i) * d;
      double s = pi[i] * (x[i] - mean[i]);
      for (int j = 0; j < i; ++j) s += 2.0 * pi[j] * (x[j] - mean[j]);
      q += (x[i] - mean[i]) * s;
    }
    return log_norm - 0.5 * q;
  }
};

/// Owns the arrays of a multivariate normal for `GaussianLogDensity` (host).
class GaussianTarget {
 public:
  /// @param mean `[d]`; @param cov `[d, d]` row-major, symmetric positive definite.
  /// @throws herd::InputError on bad shapes or a covariance that is not positive definite.
  GaussianTarget(std::vector<double> mean, const std::vector<double>& cov);
  /// Zero mean, unit variances, AR(1) correlation rho^|i-j| (|rho| < 1).
  static GaussianTarget ar1(int d, double rho);
  /// The functor over this object's host arrays (valid while this object lives).
  GaussianLogDensity view() const { return {d_, mean_.data(), prec_.data(), log_norm_}; }
  int ndim() const { return d_; }
  const std::vector<double>& mean() const { return mean_; }
  const std::vector<double>& precision() const { return prec_; }  ///< `[d, d]`
  const std::vector<double>& covariance() const { return cov_; }  ///< `[d, d]`
  double log_norm() const { return log_norm_; }

 private:
  int d_ = 0;
  std::vector<double> mean_, cov_, prec_;
  double log_norm_ = 0.0;
};

/// Haario's banana (targets.hpp `Banana`): y = (x1, x2 + b x1^2 - 100 b, x3, ...) ~
/// N(0, diag(100, 1, ...)). d >= 2.
struct BananaLogDensity {
  int d = 2;
  double b = 0.03;
  HERD_HOST_DEVICE double operator()(const double* x, int /*d*/) const {
    const double y2 = x[1] + b * x[0] * x[0] - 100.0 * b;
    double q = x[0] * x[0] / 100.0 + y2 * y2;
    for (int i = 2; i < d; ++i) q += x[i] * x[i];
    return -0.5 * q - 0.5 * d * batched_detail::kLog2Pi - std::log(10.0);
  }
};

/// Rosenbrock's unnormalised density (targets.hpp `Rosenbrock`). d >= 2.
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

/// Neal's funnel (targets.hpp `NealFunnel`): v = x1 ~ N(0, 9), x2.. | v ~ N(0, e^v). d >= 2.
struct FunnelLogDensity {
  int d = 10;
  HERD_HOST_DEVICE double operator()(const double* x, int /*d*/) const {
    const double v = x[0];
    double q = 0.0;
    for (int i = 1; i < d; ++i) q += x[i] * x[i];
    return -0.5 * v * v / 9.0 - std::log(3.0) - 0.5 * batched_detail::kLog2Pi -
           0.5 * (d - 1) * (batched_detail::kLog2Pi + v) - 0.5 * q * std::exp(-v);
  }
};

/// A neural surrogate log density: `out[i] = scale * mlp([x_i - shift] / width)[0] + offset
/// (+ prior(x_i))`, one batched forward per call. The model must have d inputs and 1
/// output (float32 or float64; inputs are converted to its dtype, outputs back to double).
/// Input standardisation (`shift`, `width`, `[d]` each; empty: none) and output scaling
/// are those used in training. Not thread-safe (see the file comment).
class MlpLogDensity {
 public:
  /// @param model the trained network (kept by reference; must outlive this object)
  /// @param d dimension
  /// @throws herd::InputError when the model's sizes are not d -> ... -> 1 or the
  ///   standardisation arrays have the wrong size.
  MlpLogDensity(nn::Mlp& model, int d, std::vector<double> shift = {}, std::vector<double> width = {},
                double scale = 1.0, double offset = 0.0);
  /// Adds a prior log density (point functor) to the network's output: the network is
  /// then a log likelihood.
  void set_prior(std::function<double(const double*, int)> prior) { prior_ = std::move(prior); }
  /// Log densities of the `n` rows of `x` (`[n, d]` row-major) into `out[n]`.
  /// @throws herd::InputError when `d` differs from the constructor's.
  void operator()(const double* x, int n, int d, double* out) const;
  /// Network evaluations so far (rows).
  std::int64_t evaluations() const { return evals_; }

 private:
  nn::Mlp* model_;
  int d_;
  std::vector<double> shift_, width_;
  double scale_, offset_;
  std::function<double(const double*, int)> prior_;
  mutable std::vector<double> in_;
  mutable std::int64_t evals_ = 0;
};

}  // namespace herd::mcmc
