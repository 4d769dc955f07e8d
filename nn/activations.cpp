#include "herd/nn/activations.hpp"

#include <cmath>

#include "cpu_compute.hpp"
#include "herd/core/config.hpp"
#if HERD_HAVE_CUDA
#include "device_context.hpp"
#include "herd/nn/cuda/kernels.hpp"
#endif

namespace herd::nn {
namespace {

void check_grad(const Tensor& out, const Tensor& g, const char* who) {
  HERD_REQUIRE(out.defined(), "{}: called before forward", who);
  HERD_REQUIRE(g.shape() == out.shape() && g.dtype() == out.dtype(), "{}: grad_output is {}, but the output was {}",
               who, g.str(), out.str());
  HERD_REQUIRE(g.device() == out.device(), "{}: grad_output is on {}, but the output is on {}", who, g.device().str(),
               out.device().str());
}

#if HERD_HAVE_CUDA
// Device paths: the element-wise activations and the row-wise (log-)softmax.
void dev_act_forward(cuda::Act act, const Tensor& x, Tensor& y, double alpha) {
  detail::DevGuard guard(x.device());
  detail::dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    cuda::activation_forward(act, x.data<T>(), y.data<T>(), x.numel(), alpha, detail::dev_stream(x.device()));
  });
}
void dev_act_backward(cuda::Act act, const Tensor& x, const Tensor& y, const Tensor& g, Tensor& gx, double alpha) {
  detail::DevGuard guard(g.device());
  detail::dispatch(g.dtype(), [&](auto tag) {
    using T = decltype(tag);
    cuda::activation_backward(act, x.defined() ? x.data<T>() : nullptr, y.data<T>(), g.data<T>(), gx.data<T>(),
                              g.numel(), alpha, detail::dev_stream(g.device()));
  });
}
void dev_softmax(const Tensor& x, Tensor& y, bool log) {
  detail::DevGuard guard(x.device());
  detail::dispatch(x.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const auto cols = x.dim(-1);
    cuda::softmax_rows(x.data<T>(), y.data<T>(), cols ? x.numel() / cols : 0, cols, log,
                       detail::dev_stream(x.device()));
  });
}
void dev_softmax_backward(const Tensor& y, const Tensor& g, Tensor& gx, bool log) {
  detail::DevGuard guard(g.device());
  detail::dispatch(g.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const auto cols = g.dim(-1);
    cuda::softmax_backward(y.data<T>(), g.data<T>(), gx.data<T>(), cols ? g.numel() / cols : 0, cols, log,
                           detail::dev_stream(g.device()));
  });
}
#endif

}  // namespace

using detail::CMapA;
using detail::MapA;

const Tensor& ReLU::forward(const Tensor& x) {
  check_input(x, -1, "nn::ReLU::forward");
  detail::unalias_output(output_, x);
  output_.resize_like(x);
#if HERD_HAVE_CUDA
  if (device().is_cuda()) {
    dev_act_forward(cuda::Act::kReLU, x, output_, 0.0);
    return output_;
  }
#endif
  detail::dispatch(dtype(), [&](auto tag) {
    using T = decltype(tag);
    MapA<T>(output_.data<T>(), x.numel()) = CMapA<T>(x.data<T>(), x.numel()).max(T(0));
  });
  return output_;
}

const Tensor& ReLU::backward(const Tensor& g) {
  check_grad(output_, g, "nn::ReLU::backward");
  grad_input_.resize_like(g);
#if HERD_HAVE_CUDA
  if (device().is_cuda()) {
    dev_act_backward(cuda::Act::kReLU, Tensor(), output_, g, grad_input_, 0.0);
    return grad_input_;
  }
#endif
  detail::dispatch(dtype(), [&](auto tag) {
    using T = decltype(tag);
    const auto n = g.numel();
    CMapA<T> y(output_.data<T>(), n), gy(g.data<T>(), n);
    MapA<T>(grad_input_.data<T>(), n) = (y > T(0)).select(gy, T(0));
  });
  return grad_input_;
}

const Tensor& Tanh::forward(const Tensor& x) {
  check_input(x, -1, "nn::Tanh::forward");
  detail::unalias_output(output_, x);
  output_.resize_like(x);
#if HERD_HAVE_CUDA
  if (device().is_cuda()) {
    dev_act_forward(cuda::Act::kTanh, x, output_, 0.0);
    return output_;
  }
#endif
  detail::dispatch(dtype(), [&](auto tag) {
    using T = decltype(tag);
    MapA<T>(output_.data<T>(), x.numel()) = CMapA<T>(x.data<T>(), x.numel()).tanh();
  });
  return output_;
}

const Tensor& Tanh::backward(const Tensor& g) {
  check_grad(output_, g, "nn::Tanh::backward");
  grad_input_.resize_like(g);
#if HERD_HAVE_CUDA
  if (device().is_cuda()) {
    dev_act_backward(cuda::Act::kTanh, Tensor(), output_, g, grad_input_, 0.0);
    return grad_input_;
  }
#endif
  detail::dispatch(dtype(), [&](auto tag) {
    using T = decltype(tag);
    const auto n = g.numel();
    CMapA<T> y(output_.data<T>(), n), gy(g.data<T>(), n);
    MapA<T>(grad_input_.data<T>(), n) = gy * (T(1) - y.square());
  });
  return grad_input_;
}

const Tensor& ELU::forward(const Tensor& x) {
  check_input(x, -1, "nn::ELU::forward");
  detail::unalias_output(output_, x);
  input_ = x;
  output_.resize_like(x);
#if HERD_HAVE_CUDA
  if (device().is_cuda()) {
    dev_act_forward(cuda::Act::kELU, x, output_, alpha_);
    return output_;
  }
#endif
  detail::dispatch(dtype(), [&](auto tag) {
    using T = decltype(tag);
    const auto n = x.numel();
    CMapA<T> xi(x.data<T>(), n);
    const T a = static_cast<T>(alpha_);
    MapA<T>(output_.data<T>(), n) = (xi > T(0)).select(xi, a * (xi.exp() - T(1)));
  });
  return output_;
}

const Tensor& ELU::backward(const Tensor& g) {
  check_grad(output_, g, "nn::ELU::backward");
  grad_input_.resize_like(g);
#if HERD_HAVE_CUDA
  if (device().is_cuda()) {
    dev_act_backward(cuda::Act::kELU, input_, output_, g, grad_input_, alpha_);
    return grad_input_;
  }
#endif
  detail::dispatch(dtype(), [&](auto tag) {
    using T = decltype(tag);
    const auto n = g.numel();
    CMapA<T> x(input_.data<T>(), n), y(output_.data<T>(), n), gy(g.data<T>(), n);
    const T a = static_cast<T>(alpha_);
    MapA<T>(grad_input_.data<T>(), n) = (x > T(0)).select(gy, gy * (y + a));
  });
  return grad_input_;
}

namespace {
template <class T>
void softmax_rows(const T* x, T* y, std::int64_t rows, std::int64_t cols, bool log) {
  for (std::int64_t r = 0; r < rows; ++r) {
    CMapA<T> xr(x + r * cols, cols);
    MapA<T> yr(y + r * cols, cols);
    const T m = xr.maxCoeff();
    yr = (xr - m).exp();
    const T s = yr.sum();
    if (log) yr = xr - (m + std::log(s));
    else yr /= s;
  }
}
// Softmax (log = false) or log-softmax (log = true) over the last axis of x into `out`
// (resized like x), on the GPU when `cuda`, else on the host in dtype `dt`.
void softmax_forward(const Tensor& x, Tensor& out, DType dt, [[maybe_unused]] bool cuda, bool log) {
  out.resize_like(x);
#if HERD_HAVE_CUDA
  if (cuda) {
    dev_softmax(x, out, log);
    return;
  }
#endif
  detail::dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    const auto cols = x.dim(-1);
    softmax_rows<T>(x.data<T>(), out.data<T>(), cols ? x.numel() / cols : 0, cols, log);
  });
}

// The gradient through softmax_forward's output y of the upstream gradient g into `gx`:
// per row y (gy - <y, gy>) for softmax, gy - exp(y) sum(gy) for log-softmax.
void softmax_backward(const Tensor& y, const Tensor& g, Tensor& gx, DType dt, [[maybe_unused]] bool cuda, bool log) {
  gx.resize_like(g);
#if HERD_HAVE_CUDA
  if (cuda) {
    dev_softmax_backward(y, g, gx, log);
    return;
  }
#endif
  detail::dispatch(dt, [&](auto tag) {
    using T = decltype(tag);
    const auto cols = g.dim(-1);
    const auto rows = cols ? g.numel() / cols : 0;
    for (std::int64_t r = 0; r < rows; ++r) {
      CMapA<T> yr(y.data<T>() + r * cols, cols), gy(g.data<T>() + r * cols, cols);
      MapA<T> out(gx.data<T>() + r * cols, cols);
      if (log) out = gy - yr.exp() * gy.sum();
      else out = yr * (gy - (yr * gy).sum());
    }
  });
}
}  // namespace

const Tensor& Softmax::forward(const Tensor& x) {
  check_input(x, -1, "nn::Softmax::forward");
  detail::unalias_output(output_, x);
  HERD_REQUIRE(x.ndim() >= 1, "nn::Softmax::forward: input is 0-d");
  softmax_forward(x, output_, dtype(), device().is_cuda(), false);
  return output_;
}

const Tensor& Softmax::backward(const Tensor& g) {
  check_grad(output_, g, "nn::Softmax::backward");
  softmax_backward(output_, g, grad_input_, dtype(), device().is_cuda(), false);
  return grad_input_;
}

const Tensor& LogSoftmax::forward(const Tensor& x) {
  check_input(x, -1, "nn::LogSoftmax::forward");
  detail::unalias_output(output_, x);
  HERD_REQUIRE(x.ndim() >= 1, "nn::LogSoftmax::forward: input is 0-d");
  softmax_forward(x, output_, dtype(), device().is_cuda(), true);
  return output_;
}

const Tensor& LogSoftmax::backward(const Tensor& g) {
  check_grad(output_, g, "nn::LogSoftmax::backward");
  softmax_backward(output_, g, grad_input_, dtype(), device().is_cuda(), true);
  return grad_input_;
}

}  // namespace herd::nn
