#include "herd/nn/linear.hpp"

#include <cmath>

#include "cpu_compute.hpp"
#include "herd/core/config.hpp"
#include "herd/nn/init.hpp"
#if HERD_HAVE_CUDA
#include "device_blas.hpp"
#include "device_context.hpp"
#include "herd/nn/cuda/kernels.hpp"
#endif

namespace herd::nn {

Linear::Linear(std::int64_t in, std::int64_t out, DType dtype, Device device, bool bias, const RngStream& rng,
               std::uint64_t init_index)
    : Module(dtype, device), in_(in), out_(out) {
  HERD_REQUIRE(in > 0 && out > 0, "nn::Linear: in_features {} and out_features {} must be positive", in, out);
  weight_ = &register_parameter("weight", {out, in});
  if (bias) bias_ = &register_parameter("bias", {out});
  const double bound = 1.0 / std::sqrt(static_cast<double>(in));
  RngCursor cur = rng.at(init_index);
  uniform_(weight_->value, -bound, bound, cur);
  if (bias_) uniform_(bias_->value, -bound, bound, cur);
}

Parameter& Linear::bias() {
  HERD_CHECK(bias_ != nullptr, "nn::Linear::bias: the layer was built without bias");
  return *bias_;
}

const Tensor& Linear::forward(const Tensor& x) {
  check_input(x, 2, "nn::Linear::forward");
  detail::unalias_output(output_, x);
  HERD_REQUIRE(x.dim(1) == in_, "nn::Linear::forward: input has shape {}, but in_features is {}", x.shape().str(), in_);
  input_ = x;
  const std::int64_t B = x.dim(0);
  output_.resize({B, out_}, dtype(), device());
#if HERD_HAVE_CUDA
  if (device().is_cuda()) {
    detail::DevGuard guard(device());
    detail::dispatch(dtype(), [&](auto tag) {
      using T = decltype(tag);
      T* y = output_.data<T>();
      detail::dev_gemm<T>(device(), false, true, B, out_, in_, x.data<T>(), weight_->value.data<T>(), y, false);
      if (bias_) cuda::bias_add(y, bias_->value.data<T>(), B, out_, detail::dev_stream(device()));
    });
    return output_;
  }
#endif
  detail::dispatch(dtype(), [&](auto tag) {
    using T = decltype(tag);
    T* y = output_.data<T>();
    if (bias_) {
      // Broadcast the bias into y, then accumulate the product onto it.
      const T* b = bias_->value.data<T>();
      for (std::int64_t i = 0; i < B; ++i)
        for (std::int64_t j = 0; j < out_; ++j) y[i * out_ + j] = b[j];
    }
    detail::gemm<T>(false, true, B, out_, in_, x.data<T>(), weight_->value.data<T>(), y, bias_ != nullptr);
  });
  return output_;
}

const Tensor& Linear::backward(const Tensor& gy) {
  HERD_REQUIRE(input_.defined(), "nn::Linear::backward: called before forward");
  check_input(gy, 2, "nn::Linear::backward", "grad_output");
  const std::int64_t B = input_.dim(0);
  HERD_REQUIRE(gy.dim(0) == B && gy.dim(1) == out_,
               "nn::Linear::backward: grad_output has shape {}, but the output was [{}, {}]", gy.shape().str(), B,
               out_);
#if HERD_HAVE_CUDA
  if (device().is_cuda()) {
    detail::DevGuard guard(device());
    detail::dispatch(dtype(), [&](auto tag) {
      using T = decltype(tag);
      const T* g = gy.data<T>();
      detail::dev_gemm<T>(device(), true, false, out_, in_, B, g, input_.data<T>(), weight_->grad.data<T>(), true);
      if (bias_) cuda::bias_grad(g, bias_->grad.data<T>(), B, out_, detail::dev_stream(device()));
      if (!input_grad()) return;
      grad_input_.resize({B, in_}, dtype(), device());
      detail::dev_gemm<T>(device(), false, false, B, in_, out_, g, weight_->value.data<T>(), grad_input_.data<T>(),
                          false);
    });
    if (!input_grad()) {
      static const Tensor kNone;
      return kNone;
    }
    return grad_input_;
  }
#endif
  detail::dispatch(dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T* g = gy.data<T>();
    // dW[out, in] += dY^T[out, B] X[B, in]
    detail::gemm<T>(true, false, out_, in_, B, g, input_.data<T>(), weight_->grad.data<T>(), true);
    if (bias_) {
      auto db = detail::MapRMu<T>(bias_->grad.data<T>(), 1, out_);
      db.noalias() += detail::cmat<T>(gy, B, out_).colwise().sum();
    }
    if (!input_grad()) return;
    // dX[B, in] = dY[B, out] W[out, in]
    grad_input_.resize({B, in_}, dtype(), device());
    detail::gemm<T>(false, false, B, in_, out_, g, weight_->value.data<T>(), grad_input_.data<T>(), false);
  });
  if (!input_grad()) {
    static const Tensor kNone;
    return kNone;
  }
  return grad_input_;
}

}  // namespace herd::nn
