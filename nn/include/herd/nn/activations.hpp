#pragma once
/// @file activations.hpp
/// Activation layers (PyTorch semantics): elementwise `ReLU`, `Tanh`, `ELU`, and `Softmax`,
/// `LogSoftmax` over the last dimension. No parameters. Any shape of 1 to 4 dimensions;
/// the output has the input's shape. Host or CUDA device (element-wise and row kernels, docs/nn.md "CUDA");
/// thread-safety as `Module`. NaN inputs propagate to the outputs.

#include "herd/nn/module.hpp"

namespace herd::nn {

/// y = max(x, 0); the derivative at 0 is taken as 0 (as PyTorch).
class ReLU : public Module {
 public:
  /// @throws InputError for int64 or a CUDA device in this build.
  explicit ReLU(DType dtype = DType::kFloat32, Device device = Device::cpu()) : Module(dtype, device) {}
  const Tensor& forward(const Tensor& input) override;
  const Tensor& backward(const Tensor& grad_output) override;
  std::string type_name() const override { return "ReLU"; }

 private:
  Tensor output_, grad_input_;
};

/// y = tanh(x); dy/dx = 1 - y^2.
class Tanh : public Module {
 public:
  /// @throws InputError for int64 or a CUDA device in this build.
  explicit Tanh(DType dtype = DType::kFloat32, Device device = Device::cpu()) : Module(dtype, device) {}
  const Tensor& forward(const Tensor& input) override;
  const Tensor& backward(const Tensor& grad_output) override;
  std::string type_name() const override { return "Tanh"; }

 private:
  Tensor output_, grad_input_;
};

/// y = x for x > 0, alpha (exp(x) - 1) otherwise (Clevert et al. 2016).
class ELU : public Module {
 public:
  /// @param alpha the negative saturation value. @throws InputError as for ReLU.
  explicit ELU(double alpha = 1.0, DType dtype = DType::kFloat32, Device device = Device::cpu())
      : Module(dtype, device), alpha_(alpha) {}
  const Tensor& forward(const Tensor& input) override;
  const Tensor& backward(const Tensor& grad_output) override;
  std::string type_name() const override { return "ELU"; }
  /// The alpha given at construction.
  double alpha() const { return alpha_; }

 private:
  double alpha_;
  Tensor input_, output_, grad_input_;
};

/// Softmax over the last dimension, computed stably (max subtracted).
class Softmax : public Module {
 public:
  /// @throws InputError for int64 or a CUDA device in this build.
  explicit Softmax(DType dtype = DType::kFloat32, Device device = Device::cpu()) : Module(dtype, device) {}
  const Tensor& forward(const Tensor& input) override;
  const Tensor& backward(const Tensor& grad_output) override;
  std::string type_name() const override { return "Softmax"; }

 private:
  Tensor output_, grad_input_;
};

/// Log-softmax over the last dimension: x - max - log(sum(exp(x - max))).
class LogSoftmax : public Module {
 public:
  /// @throws InputError for int64 or a CUDA device in this build.
  explicit LogSoftmax(DType dtype = DType::kFloat32, Device device = Device::cpu()) : Module(dtype, device) {}
  const Tensor& forward(const Tensor& input) override;
  const Tensor& backward(const Tensor& grad_output) override;
  std::string type_name() const override { return "LogSoftmax"; }

 private:
  Tensor output_, grad_input_;
};

}  // namespace herd::nn
