#pragma once
/// @file batched_targets.hpp
/// Targets of the batched DRAM sampler (batched_dram.hpp):
/// - the built-in analytic targets as the trivially copyable `HERD_HOST_DEVICE` functors of
///   analytic_targets.hpp (included here), usable on the host path and, compiled by nvcc,
///   inside the CUDA kernel (herd/mcmc/cuda/batched_dram.cuh); `GaussianTarget` owns the
///   host arrays of a `GaussianLogDensity` without Eigen in its interface (the CUDA runner
///   copies them to the device, `cuda::DeviceGaussian`).
/// - `MlpLogDensity`: a neural surrogate, an nn `Mlp` with one output taken as the log
///   density (or as a log likelihood added to a prior functor), evaluated for all pending
///   trials of a stage in one batched forward pass `[n, d] -> [n, 1]`.
///
/// The analytic formulas are those of the serial targets (targets.hpp evaluates the same
/// functors), so the values are bit-identical on the host. Thread-safety: the functors are
/// immutable values (concurrent calls fine); `MlpLogDensity` calls `Mlp::forward`, which is not reentrant: one thread
/// at a time (the batched sampler calls it from its calling thread only).

#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

#include "herd/mcmc/analytic_targets.hpp"

namespace herd::nn {
class Mlp;
}

namespace herd::mcmc {

/// Owns the arrays of a multivariate normal for `GaussianLogDensity` (host).
class GaussianTarget {
 public:
  /// @param mean `[d]`; @param cov `[d, d]` row-major, symmetric positive definite.
  /// @throws herd::InputError on bad shapes or a covariance that is not positive definite.
  GaussianTarget(std::vector<double> mean, const std::vector<double>& cov);
  /// Zero mean, unit variances, AR(1) correlation rho^|i-j| (|rho| < 1).
  static GaussianTarget ar1(int d, double rho);
  /// The functor over this object's host arrays (valid while this object lives).
  GaussianLogDensity view() const { return {d_, mean_.data(), prec2_.data(), log_norm_}; }
  /// Dimension d.
  int ndim() const { return d_; }
  /// Mean `[d]`.
  const std::vector<double>& mean() const { return mean_; }
  /// Precision (inverse covariance) `[d, d]`, symmetric.
  const std::vector<double>& precision() const { return prec_; }
  /// The quadratic form's coefficients `[d, d]` (`GaussianLogDensity::prec2`).
  const std::vector<double>& quadratic_form() const { return prec2_; }
  /// Covariance `[d, d]`.
  const std::vector<double>& covariance() const { return cov_; }
  /// -(d log 2 pi + log det cov) / 2.
  double log_norm() const { return log_norm_; }

 private:
  int d_ = 0;
  std::vector<double> mean_, cov_, prec_, prec2_;
  double log_norm_ = 0.0;
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
