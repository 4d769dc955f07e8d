#pragma once
/// @file distributions.hpp
/// Action-distribution heads for policy-gradient methods (PPO, A2C): `Categorical` over
/// logits and a diagonal `Gaussian` with a learned, state-independent log standard
/// deviation (as rlpyt and Stable-Baselines do).
///
/// Gradients: `backward_log_prob(g)` and `backward_entropy(g)` take per-sample weights
/// g = dL/d(log_prob) or dL/d(entropy), shape `[batch]`, and *accumulate* dL/d(logits or
/// mean) into an internal buffer (and, for the Gaussian, into the "log_std" parameter
/// gradient), so a PPO loss -(ratio A) - c_e H needs one call of each. The accumulated
/// input gradient is reset by `set_logits` / `forward`.
///
/// Sampling: row i draws from the stream with id `rng.stream() + i` (same seed and
/// purpose) at `index`, so a batch of environments with consecutive global ids draws the
/// same actions however it is split (DESIGN.md §4).
/// Host or CUDA device (inputs on the distribution's device; on a GPU, sampling runs on the
/// device with the same Philox counters, docs/nn.md "CUDA"); one instance per thread.

#include <cstdint>

#include "herd/core/rng.hpp"
#include "herd/nn/module.hpp"

namespace herd::nn {

/// Categorical distribution over `classes` actions per row, from unnormalised logits.
class Categorical {
 public:
  /// Sets logits `[batch, classes]` (float32/float64; copied into log-probabilities) and
  /// zeroes the accumulated gradient.
  /// @throws InputError unless the logits are a non-empty float 2-D tensor (on the host or,
  ///         in CUDA builds, a CUDA device).
  void set_logits(const Tensor& logits);
  /// log p(action) per row, `[batch]`. @param actions int64 `[batch]` in [0, classes)
  /// @throws InputError on a shape mismatch or an action out of range. On a GPU the range
  ///         is checked on the device without a host wait: a bad action gives a NaN
  ///         log-prob and is reported as InputError at the next synchronisation of the nn
  ///         stream (`nn::synchronize`, a copy from the device to the host, reading a loss).
  const Tensor& log_prob(const Tensor& actions);
  /// Entropy -sum p log p per row, `[batch]`.
  const Tensor& entropy();
  /// Probabilities `[batch, classes]`.
  const Tensor& probs() const { return probs_; }
  /// Log-probabilities `[batch, classes]`.
  const Tensor& log_probs() const { return log_probs_; }
  /// Draws one action per row by inversion of one uniform (see the file comment);
  /// `actions` becomes int64 `[batch]`.
  void sample(const RngStream& rng, std::uint64_t index, Tensor& actions) const;
  /// The most probable action per row (first on ties); `actions` becomes int64 `[batch]`
  /// on the distribution's device (on a GPU: a row kernel, no host wait).
  void mode(Tensor& actions) const;
  /// Accumulates g_i * d log p(a_i) / d logits_i, for the actions of the last `log_prob`.
  void backward_log_prob(const Tensor& grad);
  /// Accumulates g_i * d H_i / d logits_i.
  void backward_entropy(const Tensor& grad);
  /// The accumulated dL/d(logits), `[batch, classes]`.
  const Tensor& grad_logits() const { return grad_logits_; }

 private:
  Tensor log_probs_, probs_, actions_, log_prob_, entropy_, grad_logits_;
};

/// Diagonal Gaussian N(mean, diag(exp(log_std))^2) with parameter "log_std" `[dim]`.
/// As a `Module` it is the identity on the mean (`forward(mean)` returns it), so it can
/// close a `Sequential`; `backward(g)` returns g plus the accumulated gradient of the
/// log-prob and entropy terms with respect to the mean.
class Gaussian : public Module {
 public:
  /// @throws InputError unless dim > 0.
  Gaussian(std::int64_t dim, DType dtype = DType::kFloat32, Device device = Device::cpu(), double init_log_std = 0.0);
  /// Sets the mean `[batch, dim]`, zeroes the accumulated mean gradient, returns `mean`.
  const Tensor& forward(const Tensor& mean) override;
  /// grad_output + the accumulated dL/d(mean).
  const Tensor& backward(const Tensor& grad_output) override;
  std::string type_name() const override { return "Gaussian"; }

  /// Sum over dimensions of the log-density of `actions` `[batch, dim]`, `[batch]`.
  const Tensor& log_prob(const Tensor& actions);
  /// Entropy sum_d (1/2 + log(2 pi)/2 + log_std_d) per row, `[batch]`.
  const Tensor& entropy();
  /// mean + exp(log_std) z with z standard normal (see the file comment); `actions`
  /// becomes `[batch, dim]` of the module's dtype.
  void sample(const RngStream& rng, std::uint64_t index, Tensor& actions) const;
  /// Accumulates g_i d log p_i / d(mean_i) and g_i d log p_i / d(log_std).
  void backward_log_prob(const Tensor& grad);
  /// Accumulates g_i d H_i / d(log_std).
  void backward_entropy(const Tensor& grad);
  /// The accumulated dL/d(mean), `[batch, dim]`.
  const Tensor& grad_mean() const { return grad_mean_; }
  /// The "log_std" parameter `[dim]`.
  Parameter& log_std() { return *log_std_; }
  /// Action dimension.
  std::int64_t dim() const { return dim_; }

 private:
  std::int64_t dim_;
  Parameter* log_std_;
  Tensor mean_, actions_, log_prob_, entropy_, grad_mean_, grad_input_, inv_var_;
};

}  // namespace herd::nn
