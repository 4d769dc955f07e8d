#pragma once
/// @file conv2d.hpp
/// `Conv2d` (NCHW, stride, zero padding; PyTorch `nn.Conv2d` with dilation 1 and groups 1)
/// and `Flatten`.

#include <cstdint>

#include "herd/core/rng.hpp"
#include "herd/nn/module.hpp"

namespace herd::nn {

/// 2-D cross-correlation: input `[N, C_in, H, W]` -> output `[N, C_out, H_out, W_out]`,
/// H_out = (H + 2 padding - kernel_h) / stride + 1 (floor), likewise W_out. Parameters
/// "weight" `[C_out, C_in, kernel_h, kernel_w]` and "bias" `[C_out]`. Default
/// initialisation as PyTorch: uniform +-1/sqrt(C_in kernel_h kernel_w), from
/// `rng.at(init_index)` (layers with the same `rng` and `init_index`, the defaults included,
/// start alike: give each its own index). Computed by im2col and a matrix product per sample (no batch-sized
/// scratch), on the host (Eigen) or, built for a CUDA device, with im2col/col2im kernels and
/// cuBLAS GEMMs on the device's nn stream (float32 and float64; the bias gradient is a
/// per-channel block reduction in double). `Flatten` runs on both (a view). Thread-safety
/// as `Module`. Reference: PyTorch `torch.nn.Conv2d`; im2col as in Chellapilla et al. 2006,
/// "High performance convolutional neural networks for document processing".
class Conv2d : public Module {
 public:
  /// @throws InputError for a non-positive channel count, kernel size or stride, or a
  ///         negative padding.
  Conv2d(std::int64_t in_channels, std::int64_t out_channels, std::int64_t kernel_h, std::int64_t kernel_w,
         std::int64_t stride = 1, std::int64_t padding = 0, DType dtype = DType::kFloat32,
         Device device = Device::cpu(), bool bias = true, const RngStream& rng = RngStream(0, 0, RngPurpose::kInit),
         std::uint64_t init_index = 0);

  /// @throws InputError when the input is not `[N, C_in, H, W]` or smaller than the kernel.
  const Tensor& forward(const Tensor& input) override;
  const Tensor& backward(const Tensor& grad_output) override;
  std::string type_name() const override { return "Conv2d"; }

  /// "weight" `[C_out, C_in, kernel_h, kernel_w]`.
  Parameter& weight() { return *weight_; }
  /// "bias" `[C_out]`. @throws Error when built without bias.
  Parameter& bias();

 private:
  std::int64_t cin_, cout_, kh_, kw_, stride_, pad_;
  std::int64_t ho_ = 0, wo_ = 0;
  Parameter* weight_;
  Parameter* bias_ = nullptr;
  Tensor input_, output_, grad_input_, col_, dcol_;
};

/// Flattens every dimension after the first: `[N, d1, ..., dk]` -> `[N, d1 * ... * dk]`
/// (a view, no copy); backward reshapes the gradient back.
class Flatten : public Module {
 public:
  /// @throws InputError for int64 or a CUDA device in this build.
  explicit Flatten(DType dtype = DType::kFloat32, Device device = Device::cpu()) : Module(dtype, device) {}
  const Tensor& forward(const Tensor& input) override;
  const Tensor& backward(const Tensor& grad_output) override;
  std::string type_name() const override { return "Flatten"; }

 private:
  Shape in_shape_;
  bool have_input_ = false;
  Tensor output_, grad_input_;
};

}  // namespace herd::nn
