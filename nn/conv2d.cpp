#include "herd/nn/conv2d.hpp"

#include <algorithm>
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
namespace {

// col[(c, i, j), (y, x)] = input[c, y*s - p + i, x*s - p + j] (zero outside).
template <class T>
void im2col(const T* in, std::int64_t C, std::int64_t H, std::int64_t W, std::int64_t kh, std::int64_t kw,
            std::int64_t s, std::int64_t p, std::int64_t ho, std::int64_t wo, T* col) {
  for (std::int64_t c = 0; c < C; ++c)
    for (std::int64_t i = 0; i < kh; ++i)
      for (std::int64_t j = 0; j < kw; ++j) {
        T* row = col + ((c * kh + i) * kw + j) * ho * wo;
        for (std::int64_t y = 0; y < ho; ++y) {
          const std::int64_t iy = y * s - p + i;
          T* r = row + y * wo;
          if (iy < 0 || iy >= H) {
            for (std::int64_t x = 0; x < wo; ++x) r[x] = T(0);
            continue;
          }
          const T* src = in + (c * H + iy) * W;
          if (s == 1) {
            // Stride 1: columns [x0, x1) read src[x - p + j] contiguously; zeros around them.
            const std::int64_t x0 = std::min(wo, std::max<std::int64_t>(0, p - j));
            const std::int64_t x1 = std::max(x0, std::min(wo, W + p - j));
            for (std::int64_t x = 0; x < x0; ++x) r[x] = T(0);
            for (std::int64_t x = x0; x < x1; ++x) r[x] = src[x - p + j];
            for (std::int64_t x = x1; x < wo; ++x) r[x] = T(0);
            continue;
          }
          for (std::int64_t x = 0; x < wo; ++x) {
            const std::int64_t ix = x * s - p + j;
            r[x] = (ix >= 0 && ix < W) ? src[ix] : T(0);
          }
        }
      }
}

// The adjoint of im2col: adds col entries back onto the input positions.
template <class T>
void col2im(const T* col, std::int64_t C, std::int64_t H, std::int64_t W, std::int64_t kh, std::int64_t kw,
            std::int64_t s, std::int64_t p, std::int64_t ho, std::int64_t wo, T* out) {
  for (std::int64_t k = 0; k < C * H * W; ++k) out[k] = T(0);
  for (std::int64_t c = 0; c < C; ++c)
    for (std::int64_t i = 0; i < kh; ++i)
      for (std::int64_t j = 0; j < kw; ++j) {
        const T* row = col + ((c * kh + i) * kw + j) * ho * wo;
        for (std::int64_t y = 0; y < ho; ++y) {
          const std::int64_t iy = y * s - p + i;
          if (iy < 0 || iy >= H) continue;
          T* dst = out + (c * H + iy) * W;
          const T* r = row + y * wo;
          for (std::int64_t x = 0; x < wo; ++x) {
            const std::int64_t ix = x * s - p + j;
            if (ix >= 0 && ix < W) dst[ix] += r[x];
          }
        }
      }
}

}  // namespace

Conv2d::Conv2d(std::int64_t in_channels, std::int64_t out_channels, std::int64_t kernel_h, std::int64_t kernel_w,
               std::int64_t stride, std::int64_t padding, DType dtype, Device device, bool bias, const RngStream& rng,
               std::uint64_t init_index)
    : Module(dtype, device),
      cin_(in_channels),
      cout_(out_channels),
      kh_(kernel_h),
      kw_(kernel_w),
      stride_(stride),
      pad_(padding) {
  HERD_REQUIRE(cin_ > 0 && cout_ > 0, "nn::Conv2d: channels ({}, {}) must be positive", cin_, cout_);
  HERD_REQUIRE(kh_ > 0 && kw_ > 0, "nn::Conv2d: kernel {}x{} must be positive", kh_, kw_);
  HERD_REQUIRE(stride_ > 0, "nn::Conv2d: stride is {}, but must be positive", stride_);
  HERD_REQUIRE(pad_ >= 0, "nn::Conv2d: padding is {}, but must be non-negative", pad_);
  weight_ = &register_parameter("weight", {cout_, cin_, kh_, kw_});
  if (bias) bias_ = &register_parameter("bias", {cout_});
  const double bound = 1.0 / std::sqrt(static_cast<double>(cin_ * kh_ * kw_));
  RngCursor cur = rng.at(init_index);
  uniform_(weight_->value, -bound, bound, cur);
  if (bias_) uniform_(bias_->value, -bound, bound, cur);
}

Parameter& Conv2d::bias() {
  HERD_CHECK(bias_ != nullptr, "nn::Conv2d::bias: the layer was built without bias");
  return *bias_;
}

const Tensor& Conv2d::forward(const Tensor& x) {
  const char* who = "nn::Conv2d::forward";
  check_input(x, 4, who);
  detail::unalias_output(output_, x);
  HERD_REQUIRE(x.dim(1) == cin_, "{}: input has shape {}, but in_channels is {}", who, x.shape().str(), cin_);
  const std::int64_t N = x.dim(0), H = x.dim(2), W = x.dim(3);
  HERD_REQUIRE(H + 2 * pad_ >= kh_ && W + 2 * pad_ >= kw_,
               "{}: input {} with padding {} is smaller than the kernel {}x{}", who, x.shape().str(), pad_, kh_, kw_);
  ho_ = (H + 2 * pad_ - kh_) / stride_ + 1;
  wo_ = (W + 2 * pad_ - kw_) / stride_ + 1;
  input_ = x;
  output_.resize({N, cout_, ho_, wo_}, dtype(), device());
  const std::int64_t K = cin_ * kh_ * kw_, P = ho_ * wo_;
  col_.resize({K, P}, dtype(), device());
#if HERD_HAVE_CUDA
  if (device().is_cuda()) {
    // Per sample: im2col into col_, then Y_n[O, P] = W[O, K] col[K, P] (cuBLAS); the bias
    // is added to the whole output at the end. All on the nn stream, so col_ is reused safely.
    detail::DevGuard guard(device());
    cudaStream_t st = detail::dev_stream(device());
    detail::dispatch(dtype(), [&](auto tag) {
      using T = decltype(tag);
      for (std::int64_t n = 0; n < N; ++n) {
        cuda::conv_im2col<T>(x.data<T>() + n * cin_ * H * W, col_.data<T>(), cin_, H, W, kh_, kw_, stride_, pad_, ho_,
                             wo_, st);
        detail::dev_gemm<T>(device(), false, false, cout_, P, K, weight_->value.data<T>(), col_.data<T>(),
                            output_.data<T>() + n * cout_ * P, false);
      }
      if (bias_) cuda::conv_bias_add<T>(output_.data<T>(), bias_->value.data<T>(), N, cout_, P, st);
    });
    return output_;
  }
#endif
  detail::dispatch(dtype(), [&](auto tag) {
    using T = decltype(tag);
    for (std::int64_t n = 0; n < N; ++n) {
      T* y = output_.data<T>() + n * cout_ * P;
      im2col<T>(x.data<T>() + n * cin_ * H * W, cin_, H, W, kh_, kw_, stride_, pad_, ho_, wo_, col_.data<T>());
      if (bias_) {
        const T* b = bias_->value.data<T>();
        for (std::int64_t o = 0; o < cout_; ++o) std::fill(y + o * P, y + (o + 1) * P, b[o]);
      }
      detail::gemm<T>(false, false, cout_, P, K, weight_->value.data<T>(), col_.data<T>(), y, bias_ != nullptr);
    }
  });
  return output_;
}

const Tensor& Conv2d::backward(const Tensor& g) {
  const char* who = "nn::Conv2d::backward";
  HERD_REQUIRE(input_.defined(), "{}: called before forward", who);
  check_input(g, 4, who, "grad_output");
  HERD_REQUIRE(g.shape() == output_.shape(), "{}: grad_output has shape {}, but the output was {}", who,
               g.shape().str(), output_.shape().str());
  const std::int64_t N = input_.dim(0), H = input_.dim(2), W = input_.dim(3);
  const std::int64_t K = cin_ * kh_ * kw_, P = ho_ * wo_;
  if (input_grad()) {
    grad_input_.resize(input_.shape(), dtype(), device());
    dcol_.resize({K, P}, dtype(), device());
  }
#if HERD_HAVE_CUDA
  if (device().is_cuda()) {
    detail::DevGuard guard(device());
    cudaStream_t st = detail::dev_stream(device());
    detail::dispatch(dtype(), [&](auto tag) {
      using T = decltype(tag);
      if (bias_) cuda::conv_bias_grad<T>(g.data<T>(), bias_->grad.data<T>(), N, cout_, P, st);
      for (std::int64_t n = 0; n < N; ++n) {
        const T* gy = g.data<T>() + n * cout_ * P;
        cuda::conv_im2col<T>(input_.data<T>() + n * cin_ * H * W, col_.data<T>(), cin_, H, W, kh_, kw_, stride_, pad_,
                             ho_, wo_, st);
        // dW[O, K] += dY_n[O, P] col^T[P, K]
        detail::dev_gemm<T>(device(), false, true, cout_, K, P, gy, col_.data<T>(), weight_->grad.data<T>(), true);
        if (!input_grad()) continue;
        // dcol[K, P] = W^T[K, O] dY_n[O, P], then scattered back onto the input positions.
        detail::dev_gemm<T>(device(), true, false, K, P, cout_, weight_->value.data<T>(), gy, dcol_.data<T>(), false);
        cuda::conv_col2im<T>(dcol_.data<T>(), grad_input_.data<T>() + n * cin_ * H * W, cin_, H, W, kh_, kw_, stride_,
                             pad_, ho_, wo_, st);
      }
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
    for (std::int64_t n = 0; n < N; ++n) {
      const T* gy = g.data<T>() + n * cout_ * P;
      im2col<T>(input_.data<T>() + n * cin_ * H * W, cin_, H, W, kh_, kw_, stride_, pad_, ho_, wo_, col_.data<T>());
      // dW[O, K] += dY[O, P] col^T[P, K]
      detail::gemm<T>(false, true, cout_, K, P, gy, col_.data<T>(), weight_->grad.data<T>(), true);
      if (bias_)
        for (std::int64_t o = 0; o < cout_; ++o) {
          T s = 0;
          for (std::int64_t q = 0; q < P; ++q) s += gy[o * P + q];
          bias_->grad.data<T>()[o] += s;
        }
      if (!input_grad()) continue;
      // dcol[K, P] = W^T[K, O] dY[O, P]
      detail::gemm<T>(true, false, K, P, cout_, weight_->value.data<T>(), gy, dcol_.data<T>(), false);
      col2im<T>(dcol_.data<T>(), cin_, H, W, kh_, kw_, stride_, pad_, ho_, wo_,
                grad_input_.data<T>() + n * cin_ * H * W);
    }
  });
  if (!input_grad()) {
    static const Tensor kNone;
    return kNone;
  }
  return grad_input_;
}

const Tensor& Flatten::forward(const Tensor& x) {
  check_input(x, -1, "nn::Flatten::forward");
  HERD_REQUIRE(x.ndim() >= 1, "nn::Flatten::forward: input is 0-d");
  in_shape_ = x.shape();
  have_input_ = true;
  const std::int64_t N = x.dim(0);
  output_ = x.reshape({N, N ? x.numel() / N : 0});
  return output_;
}

const Tensor& Flatten::backward(const Tensor& g) {
  HERD_REQUIRE(have_input_, "nn::Flatten::backward: called before forward");
  HERD_REQUIRE(g.numel() == in_shape_.numel() && g.dtype() == dtype(),
               "nn::Flatten::backward: grad_output is {}, but the input was {}", g.str(), in_shape_.str());
  grad_input_ = g.reshape(in_shape_);
  return grad_input_;
}

}  // namespace herd::nn
