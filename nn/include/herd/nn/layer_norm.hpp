#pragma once
/// @file layer_norm.hpp
/// `LayerNorm` over the last dimension (Ba, Kiros & Hinton 2016; PyTorch `nn.LayerNorm`
/// with `normalized_shape = [features]`).

#include <cstdint>

#include "herd/nn/module.hpp"

namespace herd::nn {

/// y = (x - mean) / sqrt(var + eps) * weight + bias, with mean and the biased variance over
/// the last dimension (`features`). Parameters "weight" (ones) and "bias" (zeros), `[features]`,
/// when `affine`. Input of 1 to 4 dimensions, last = features. Host or CUDA device;
/// thread-safety as `Module`.
class LayerNorm : public Module {
 public:
  /// @throws InputError unless features > 0 and eps > 0.
  explicit LayerNorm(std::int64_t features, double eps = 1e-5, bool affine = true, DType dtype = DType::kFloat32,
                     Device device = Device::cpu());
  const Tensor& forward(const Tensor& input) override;
  const Tensor& backward(const Tensor& grad_output) override;
  std::string type_name() const override { return "LayerNorm"; }

 private:
  std::int64_t features_;
  double eps_;
  Parameter* weight_ = nullptr;
  Parameter* bias_ = nullptr;
  Tensor xhat_, rstd_, output_, grad_input_;
};

}  // namespace herd::nn
