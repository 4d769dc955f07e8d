#pragma once
/// @file losses.hpp
/// Losses with gradients, mean-reduced as PyTorch's defaults (`reduction='mean'`).
///
/// Protocol: `forward(...)` returns the loss as a `LossValue` (accumulated in double
/// precision; it converts implicitly to `double`) and caches what `backward` needs;
/// `backward(scale)` returns d(scale * loss)/d(input) in a buffer owned by the loss (valid
/// until its next call), so weighted sums of losses (PPO's policy + c * value terms) need
/// no extra pass. Host or CUDA device (inputs on one device). On the host the value is
/// computed at once. On a GPU `forward` only enqueues work (no host wait): the loss stays
/// on the device as a float64 `[1]` tensor (`LossValue::tensor()`) and is copied to the
/// host when first read (`value()` or the conversion to double), which waits for the
/// device's nn stream. Input checks that need the data (cross-entropy targets in range)
/// run on the device too and are reported as `InputError` at the next synchronisation of
/// that stream (reading a loss value, `nn::synchronize`, a copy from the device to the host).
/// One instance per thread. NaN inputs give NaN losses and gradients.

#include <cstdint>
#include <memory>

#include <fmt/format.h>

#include "herd/nn/tensor.hpp"

namespace herd::nn {

class GraphedTrainStep;

/// The value of a loss returned by `forward`: a host double, or (CUDA) a float64 `[1]`
/// device tensor read lazily. Copying is cheap; copies share the device value.
/// A device value is valid until its loss runs `forward` again: read it before that
/// (reading it later throws `herd::Error`; the storage is never reused silently).
/// Thread-safety: as the loss that made it.
class LossValue {
 public:
  /// A host value.
  LossValue(double v = 0.0) : host_(v), ready_(true) {}  // NOLINT(google-explicit-constructor)
  /// The loss as a host double. For a device value: the first call copies it to the host
  /// (waiting for the nn stream) and reports deferred input errors; later calls return
  /// the cached value.
  /// @throws InputError for an input error found on the device (e.g. a target out of
  ///         range); Error when the loss ran `forward` again before this read; CudaError.
  double value() const;
  /// Same as `value()`, so `double l = loss.forward(p, t);` works as before.
  operator double() const { return value(); }  // NOLINT(google-explicit-constructor)
  /// True when the value is on the host (always for host losses; after the first read
  /// for device ones).
  bool ready() const { return ready_; }
  /// The device tensor holding the loss (float64 `[1]`, on the loss's device; updated in
  /// place by the loss's next `forward`), or an undefined tensor for a host value.
  const Tensor& tensor() const { return device_; }

  /// A device value (used by the losses): `value` is a float64 `[1]` device tensor that
  /// holds the loss once the stream reaches it; `generation` is the loss's forward count
  /// at this call, `current` its live counter.
  LossValue(Tensor value, std::shared_ptr<const std::uint64_t> current, std::uint64_t generation)
      : device_(std::move(value)), current_(std::move(current)), generation_(generation) {}

 private:
  mutable double host_ = 0.0;
  mutable bool ready_ = false;
  Tensor device_;
  std::shared_ptr<const std::uint64_t> current_;
  std::uint64_t generation_ = 0;
};

/// Mean squared error: mean((pred - target)^2) over all elements.
class MseLoss {
 public:
  /// @param pred, target the same shape and float dtype.
  /// @throws InputError on a shape or dtype mismatch or an empty input.
  LossValue forward(const Tensor& pred, const Tensor& target);
  /// d(scale * loss)/d(pred) = scale * 2 (pred - target) / numel.
  const Tensor& backward(double scale = 1.0);

 private:
  friend class GraphedTrainStep;  // replays forward in a CUDA graph: the same value_, a new generation
  Tensor diff_, grad_, value_;
  std::shared_ptr<std::uint64_t> generation_ = std::make_shared<std::uint64_t>(0);
};

/// Huber loss (PyTorch `HuberLoss`): 0.5 d^2 when |d| < delta, delta (|d| - delta/2)
/// otherwise, with d = pred - target, averaged over all elements.
class HuberLoss {
 public:
  /// @throws InputError unless delta > 0.
  explicit HuberLoss(double delta = 1.0);
  /// @param pred, target the same shape and float dtype.
  /// @throws InputError on a shape or dtype mismatch or an empty input.
  LossValue forward(const Tensor& pred, const Tensor& target);
  /// scale * clamp(d, -delta, delta) / numel.
  const Tensor& backward(double scale = 1.0);
  /// The delta given at construction.
  double delta() const { return delta_; }

 private:
  double delta_;
  Tensor diff_, grad_, value_;
  std::shared_ptr<std::uint64_t> generation_ = std::make_shared<std::uint64_t>(0);
};

/// Cross-entropy of logits against class indices (PyTorch `CrossEntropyLoss` with integer
/// targets): mean over the batch of -log_softmax(logits)[target].
class CrossEntropyLoss {
 public:
  /// @param logits `[batch, classes]` float @param targets `[batch]` int64 in [0, classes)
  /// @throws InputError on shape/dtype mismatches or a target out of range (named). On a
  ///         GPU the range is checked on the device: a bad target is reported when the
  ///         value is read or at the next synchronisation (see the file comment); until
  ///         then its row's loss is NaN and its gradient row has no -1 term.
  LossValue forward(const Tensor& logits, const Tensor& targets);
  /// scale * (softmax(logits) - onehot(target)) / batch.
  const Tensor& backward(double scale = 1.0);

 private:
  Tensor log_probs_, targets_, grad_, value_;
  std::shared_ptr<std::uint64_t> generation_ = std::make_shared<std::uint64_t>(0);
};

}  // namespace herd::nn

/// Formats a `LossValue` as its double (`fmt::format("{:.4f}", loss.forward(p, t))`);
/// reads a device value (see `LossValue::value`).
template <>
struct fmt::formatter<herd::nn::LossValue> : fmt::formatter<double> {
  template <class Ctx>
  auto format(const herd::nn::LossValue& v, Ctx& ctx) const {
    return fmt::formatter<double>::format(v.value(), ctx);
  }
};
