#include "herd/nn/layer_norm.hpp"

#include <cmath>

#include "cpu_compute.hpp"
#include "herd/core/config.hpp"
#if HERD_HAVE_CUDA
#include "device_context.hpp"
#include "herd/nn/cuda/kernels.hpp"
#endif

namespace herd::nn {

using detail::CMapA;
using detail::MapA;

LayerNorm::LayerNorm(std::int64_t features, double eps, bool affine, DType dtype, Device device)
    : Module(dtype, device), features_(features), eps_(eps) {
  HERD_REQUIRE(features > 0, "nn::LayerNorm: features is {}, but must be positive", features);
  HERD_REQUIRE(eps > 0, "nn::LayerNorm: eps is {}, but must be positive", eps);
  if (affine) {
    weight_ = &register_parameter("weight", {features});
    weight_->value.fill(1.0);
    bias_ = &register_parameter("bias", {features});
  }
}

const Tensor& LayerNorm::forward(const Tensor& x) {
  check_input(x, -1, "nn::LayerNorm::forward");
  detail::unalias_output(output_, x);
  HERD_REQUIRE(x.ndim() >= 1 && x.dim(-1) == features_,
               "nn::LayerNorm::forward: input has shape {}, but the last dimension must be {}", x.shape().str(),
               features_);
  const std::int64_t F = features_, R = x.numel() / F;
  xhat_.resize_like(x);
  output_.resize_like(x);
  rstd_.resize({R}, dtype(), device());
#if HERD_HAVE_CUDA
  if (device().is_cuda()) {
    detail::DevGuard guard(device());
    detail::dispatch(dtype(), [&](auto tag) {
      using T = decltype(tag);
      cuda::layer_norm_forward<T>(x.data<T>(), weight_ ? weight_->value.data<T>() : nullptr,
                                  bias_ ? bias_->value.data<T>() : nullptr, output_.data<T>(), xhat_.data<T>(),
                                  rstd_.data<T>(), R, F, eps_, detail::dev_stream(device()));
    });
    return output_;
  }
#endif
  detail::dispatch(dtype(), [&](auto tag) {
    using T = decltype(tag);
    for (std::int64_t r = 0; r < R; ++r) {
      CMapA<T> xr(x.data<T>() + r * F, F);
      MapA<T> h(xhat_.data<T>() + r * F, F);
      const T mean = xr.mean();
      h = xr - mean;
      const T var = h.square().mean();
      const T rs = T(1) / std::sqrt(var + static_cast<T>(eps_));
      rstd_.data<T>()[r] = rs;
      h *= rs;
      MapA<T> y(output_.data<T>() + r * F, F);
      if (weight_) y = h * CMapA<T>(weight_->value.data<T>(), F) + CMapA<T>(bias_->value.data<T>(), F);
      else y = h;
    }
  });
  return output_;
}

const Tensor& LayerNorm::backward(const Tensor& g) {
  HERD_REQUIRE(xhat_.defined(), "nn::LayerNorm::backward: called before forward");
  HERD_REQUIRE(g.shape() == xhat_.shape() && g.dtype() == dtype(),
               "nn::LayerNorm::backward: grad_output is {}, but the output was {}", g.str(), xhat_.str());
  HERD_REQUIRE(g.device() == device(), "nn::LayerNorm::backward: grad_output is on {}, but the module is on {}",
               g.device().str(), device().str());
  const std::int64_t F = features_, R = g.numel() / F;
  grad_input_.resize_like(g);
#if HERD_HAVE_CUDA
  if (device().is_cuda()) {
    detail::DevGuard guard(device());
    detail::dispatch(dtype(), [&](auto tag) {
      using T = decltype(tag);
      cuda::layer_norm_backward<T>(g.data<T>(), xhat_.data<T>(), rstd_.data<T>(),
                                   weight_ ? weight_->value.data<T>() : nullptr,
                                   weight_ ? weight_->grad.data<T>() : nullptr, bias_ ? bias_->grad.data<T>() : nullptr,
                                   grad_input_.data<T>(), R, F, detail::dev_stream(device()));
    });
    return grad_input_;
  }
#endif
  detail::dispatch(dtype(), [&](auto tag) {
    using T = decltype(tag);
    for (std::int64_t r = 0; r < R; ++r) {
      CMapA<T> gy(g.data<T>() + r * F, F), h(xhat_.data<T>() + r * F, F);
      MapA<T> gx(grad_input_.data<T>() + r * F, F);
      if (weight_) {
        MapA<T>(weight_->grad.data<T>(), F) += gy * h;
        MapA<T>(bias_->grad.data<T>(), F) += gy;
        gx = gy * CMapA<T>(weight_->value.data<T>(), F);  // d xhat
      } else {
        gx = gy;
      }
      const T m1 = gx.mean();
      const T m2 = (gx * h).mean();
      gx = rstd_.data<T>()[r] * (gx - m1 - h * m2);
    }
  });
  return grad_input_;
}

}  // namespace herd::nn
