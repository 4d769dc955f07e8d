#pragma once
/// @file targets.hpp
/// Built-in analytic log densities for tests, benchmarks and examples: multivariate
/// normal, the banana (Haario et al. 1999 twisted Gaussian) and Rosenbrock, a Gaussian
/// mixture, and Neal's funnel (Neal 2003). Each has a point form `operator()(x, d)` and a
/// batched form `batch(x, n, d, out)` on `[n, d]` row-major input and `[n]` output.
/// Log densities are natural logs and normalised unless stated otherwise. The formulas are
/// the device-callable functors of analytic_targets.hpp (`view()` gives each target's), so
/// the serial, batched host and CUDA paths compute the same numbers. The point form's `d`
/// must equal `ndim()`.
///
/// Thread-safety: targets are immutable after construction; every member function is
/// const and may be called concurrently. NaN inputs give NaN; infinite inputs give -inf
/// or NaN, as the formulas do.

#include <vector>

#include <Eigen/Dense>

#include "herd/mcmc/analytic_targets.hpp"

namespace herd::mcmc {

/// Multivariate normal N(mean, cov) (`GaussianLogDensity` over this object's arrays). The
/// precision is precomputed (Cholesky of `cov`).
class MultivariateNormal {
 public:
  /// @param mean `[d]`; @param cov `[d, d]`, symmetric positive definite.
  /// @throws herd::InputError when shapes disagree or `cov` is not positive definite.
  MultivariateNormal(Eigen::VectorXd mean, const Eigen::MatrixXd& cov);
  /// Zero mean, unit variances and AR(1) correlation `rho^|i-j|` (|rho| < 1).
  static MultivariateNormal ar1(int d, double rho);

  /// Log density at `x` (`d` values; `d` must equal `ndim()`).
  double operator()(const double* x, int d) const;
  /// Log densities of the `n` rows of `x` (`[n, d]` row-major) into `out[n]`.
  void batch(const double* x, int n, int d, double* out) const;

  /// Dimension d.
  int ndim() const { return static_cast<int>(mean_.size()); }
  /// Mean `[d]`.
  const Eigen::VectorXd& mean() const { return mean_; }
  /// Covariance `[d, d]`.
  const Eigen::MatrixXd& covariance() const { return cov_; }
  /// The formula over this object's arrays (valid while this object lives).
  GaussianLogDensity view() const { return {ndim(), mean_.data(), prec2_.data(), log_norm_}; }

 private:
  Eigen::VectorXd mean_;
  Eigen::MatrixXd cov_;
  std::vector<double> prec2_;  ///< the quadratic form (GaussianLogDensity::prec2)
  double log_norm_ = 0.0;
};

/// Haario's banana (`BananaLogDensity`), its parameters checked.
class Banana {
 public:
  /// @param d dimension (>= 2); @param b twist. @throws herd::InputError when d < 2.
  explicit Banana(int d = 2, double b = 0.03);
  /// Log density at `x` (`d` values).
  double operator()(const double* x, int d) const;
  /// Log densities of the `n` rows of `x` (`[n, d]` row-major) into `out[n]`.
  void batch(const double* x, int n, int d, double* out) const;
  /// Dimension d.
  int ndim() const { return f_.d; }
  /// The formula.
  BananaLogDensity view() const { return f_; }

 private:
  BananaLogDensity f_;
};

/// Rosenbrock's unnormalised density (`RosenbrockLogDensity`), its parameters checked.
class Rosenbrock {
 public:
  /// @param d dimension (>= 2); @param a, b the usual parameters; @param s temperature.
  /// @throws herd::InputError when d < 2 or b, s are not positive.
  explicit Rosenbrock(int d = 2, double a = 1.0, double b = 100.0, double s = 20.0);
  /// Log density at `x` (`d` values).
  double operator()(const double* x, int d) const;
  /// Log densities of the `n` rows of `x` (`[n, d]` row-major) into `out[n]`.
  void batch(const double* x, int n, int d, double* out) const;
  /// Dimension d.
  int ndim() const { return f_.d; }
  /// The formula.
  RosenbrockLogDensity view() const { return f_; }

 private:
  RosenbrockLogDensity f_;
};

/// A mixture of isotropic Gaussians, sum_k w_k N(mu_k, sigma_k^2 I) (`MixtureLogDensity`
/// over this object's arrays). Weights are normalised by the constructor.
class GaussianMixture {
 public:
  /// @param weights `[K]` positive; @param means `[K, d]` row-major; @param sigmas `[K]` positive.
  /// @throws herd::InputError on bad shapes or values.
  GaussianMixture(std::vector<double> weights, std::vector<double> means, std::vector<double> sigmas, int d);
  /// Log density at `x` (`d` values).
  double operator()(const double* x, int d) const;
  /// Log densities of the `n` rows of `x` (`[n, d]` row-major) into `out[n]`.
  void batch(const double* x, int n, int d, double* out) const;
  /// Dimension d.
  int ndim() const { return d_; }
  /// The formula over this object's arrays (valid while this object lives).
  MixtureLogDensity view() const {
    return {d_, static_cast<int>(logw_.size()), logw_.data(), means_.data(), sigmas_.data()};
  }

 private:
  int d_;
  std::vector<double> logw_, means_, sigmas_;
};

/// Neal's funnel (`FunnelLogDensity`; Neal 2003, "Slice sampling"): v = x1 ~ N(0, 3^2),
/// x2..xd | v ~ N(0, e^v).
class NealFunnel {
 public:
  /// @param d dimension (>= 2). @throws herd::InputError when d < 2.
  explicit NealFunnel(int d = 10);
  /// Log density at `x` (`d` values).
  double operator()(const double* x, int d) const;
  /// Log densities of the `n` rows of `x` (`[n, d]` row-major) into `out[n]`.
  void batch(const double* x, int n, int d, double* out) const;
  /// Dimension d.
  int ndim() const { return f_.d; }
  /// The formula.
  FunnelLogDensity view() const { return f_; }

 private:
  FunnelLogDensity f_;
};

}  // namespace herd::mcmc
