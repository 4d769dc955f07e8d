#pragma once
/// @file surrogate.hpp
/// The neural-surrogate example: an "expensive" model (logistic growth
/// dN/dt = r N (1 - N/K), N(0) = 0.1, integrated by classical RK4 with many small steps)
/// observed with Gaussian noise; a surrogate of its log likelihood is trained with the nn
/// layer (MLP, Adam, MSE on standardised inputs and outputs) from model runs at design
/// points, and the batched DRAM sampler then samples prior + surrogate log likelihood, with
/// one batched forward pass per proposal stage over all chains. The exact posterior (the
/// batched sampler on the expensive model itself) is the reference.
///
/// Thread-safety: `LogisticModel` is immutable (const calls may run concurrently);
/// `train_surrogate` and `sample_surrogate` use one thread for the network.

#include <cstdint>
#include <memory>
#include <vector>

#include "herd/mcmc/batched_dram.hpp"
#include "herd/mcmc/batched_targets.hpp"
#include "herd/nn/mlp.hpp"

namespace herd::examples {

/// Logistic growth observed at t = 1..n_obs with noise sd `sigma`; parameters theta = (r, K).
struct LogisticModel {
  std::vector<double> data;  ///< observations `[n_obs]`
  double sigma = 0.1;        ///< noise sd
  int rk4_steps = 400;       ///< RK4 steps per unit time (the "expense")
  /// Model prediction N(t) at t = 1..n `[n]`.
  std::vector<double> predict(double r, double k, int n) const;
  /// Gaussian log likelihood of `data` at theta (`[2]`); -inf outside r, K > 0.
  double log_likelihood(const double* theta) const;
  /// Prior: r ~ N(1, 0.5^2), K ~ N(1, 0.5^2) (unnormalised log density).
  static double log_prior(const double* theta);
  /// Synthetic data from (r, K) = (0.8, 1.2) with noise from `seed`.
  static LogisticModel synthetic(int n_obs, double sigma, std::uint64_t seed);
};

/// A trained surrogate of the log likelihood: the network and its standardisation.
struct Surrogate {
  std::unique_ptr<nn::Mlp> net;
  std::vector<double> shift, width;  ///< input standardisation `[2]`
  double scale = 1.0, offset = 0.0;  ///< output de-standardisation
  double train_rmse = 0.0;           ///< RMSE of the fitted log likelihood on the design points
  std::int64_t model_runs = 0;       ///< expensive-model evaluations used for training
};

/// Trains a 2-64-64-1 tanh MLP (float64) on `design` model runs at uniform points of the
/// box [lo, hi]^2, Adam for `iterations` minibatches of 256. Deterministic given `seed`.
Surrogate train_surrogate(const LogisticModel& model, const std::vector<double>& lo, const std::vector<double>& hi,
                          int design, int iterations, std::uint64_t seed);

/// Samples prior + surrogate log likelihood with the batched sampler (staged path).
mcmc::BatchedDramResult sample_surrogate(Surrogate& s, const mcmc::BatchedDramOptions& options,
                                         mcmc::BatchedDrawSink& sink);

}  // namespace herd::examples
