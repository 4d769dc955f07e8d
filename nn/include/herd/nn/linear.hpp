#pragma once
/// @file linear.hpp
/// `Linear`: the affine layer y = x W^T + b (PyTorch `nn.Linear`: weight `[out, in]`,
/// bias `[out]`).

#include <cstdint>

#include "herd/core/rng.hpp"
#include "herd/nn/module.hpp"

namespace herd::nn {

/// y = x W^T + b on `[batch, in]` -> `[batch, out]` (row-major), float32 or float64.
/// Parameters "weight" `[out, in]` and "bias" `[out]` (when `bias` is true).
/// Default initialisation follows PyTorch: weight and bias uniform in
/// (-1/sqrt(in), 1/sqrt(in)), drawn from `rng.at(init_index)` (weight first, row-major,
/// then bias), so it is deterministic. Layers built with the same `rng` and `init_index`
/// (the defaults included) start with the same values: give each layer of a network its
/// own `init_index`, as `Mlp` does. Use the functions of init.hpp to re-initialise.
/// Host, or CUDA device (cuBLAS GEMMs on the device's nn stream); thread-safety as for `Module`.
class Linear : public Module {
 public:
  /// @throws InputError when `in` or `out` is not positive.
  Linear(std::int64_t in, std::int64_t out, DType dtype = DType::kFloat32, Device device = Device::cpu(),
         bool bias = true, const RngStream& rng = RngStream(0, 0, RngPurpose::kInit), std::uint64_t init_index = 0);

  /// @param input `[batch, in]` @return `[batch, out]`
  const Tensor& forward(const Tensor& input) override;
  /// @param grad_output `[batch, out]` @return `[batch, in]`; accumulates weight/bias grads.
  const Tensor& backward(const Tensor& grad_output) override;
  std::string type_name() const override { return "Linear"; }

  /// Input width.
  std::int64_t in_features() const { return in_; }
  /// Output width.
  std::int64_t out_features() const { return out_; }
  /// "weight" `[out, in]`.
  Parameter& weight() { return *weight_; }
  /// "bias" `[out]`. @throws Error when built without bias.
  Parameter& bias();

 private:
  std::int64_t in_, out_;
  Parameter* weight_;
  Parameter* bias_ = nullptr;
  Tensor input_, output_, grad_input_;
};

}  // namespace herd::nn
