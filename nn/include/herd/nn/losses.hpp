#pragma once
/// @file losses.hpp
/// Losses with gradients, mean-reduced as PyTorch's defaults (`reduction='mean'`).
///
/// Protocol: `forward(...)` returns the loss as a double (accumulated in double precision)
/// and caches what `backward` needs; `backward(scale)` returns d(scale * loss)/d(input)
/// in a buffer owned by the loss (valid until its next call), so weighted sums of losses
/// (PPO's policy + c * value terms) need no extra pass. Host or CUDA device (inputs on one device; on a GPU
/// `forward` waits for the device's nn stream to return the loss);
/// one instance per thread. NaN inputs give NaN losses and gradients.

#include "herd/nn/tensor.hpp"

namespace herd::nn {

/// Mean squared error: mean((pred - target)^2) over all elements.
class MseLoss {
 public:
  /// @param pred, target the same shape and float dtype.
  /// @throws InputError on a shape or dtype mismatch or an empty input.
  double forward(const Tensor& pred, const Tensor& target);
  /// d(scale * loss)/d(pred) = scale * 2 (pred - target) / numel.
  const Tensor& backward(double scale = 1.0);

 private:
  Tensor diff_, grad_;
};

/// Huber loss (PyTorch `HuberLoss`): 0.5 d^2 when |d| < delta, delta (|d| - delta/2)
/// otherwise, with d = pred - target, averaged over all elements.
class HuberLoss {
 public:
  /// @throws InputError unless delta > 0.
  explicit HuberLoss(double delta = 1.0);
  /// @param pred, target the same shape and float dtype.
  /// @throws InputError on a shape or dtype mismatch or an empty input.
  double forward(const Tensor& pred, const Tensor& target);
  /// scale * clamp(d, -delta, delta) / numel.
  const Tensor& backward(double scale = 1.0);
  /// The delta given at construction.
  double delta() const { return delta_; }

 private:
  double delta_;
  Tensor diff_, grad_;
};

/// Cross-entropy of logits against class indices (PyTorch `CrossEntropyLoss` with integer
/// targets): mean over the batch of -log_softmax(logits)[target].
class CrossEntropyLoss {
 public:
  /// @param logits `[batch, classes]` float @param targets `[batch]` int64 in [0, classes)
  /// @throws InputError on shape/dtype mismatches or a target out of range (named).
  double forward(const Tensor& logits, const Tensor& targets);
  /// scale * (softmax(logits) - onehot(target)) / batch.
  const Tensor& backward(double scale = 1.0);

 private:
  Tensor log_probs_, targets_, grad_;
};

}  // namespace herd::nn
