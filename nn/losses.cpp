#include "herd/nn/losses.hpp"

#include <cmath>

#include "cpu_compute.hpp"
#include "herd/core/config.hpp"
#if HERD_HAVE_CUDA
#include "device_context.hpp"
#include "herd/nn/cuda/kernels.hpp"
#endif

namespace herd::nn {
namespace {

void check_pair(const Tensor& p, const Tensor& t, const char* who) {
  HERD_REQUIRE(p.defined() && t.defined(), "{}: undefined input", who);
  HERD_REQUIRE(p.device() == t.device(), "{}: pred is on {} but target on {}; they must match", who, p.device().str(),
               t.device().str());
  HERD_REQUIRE(p.dtype() != DType::kInt64, "{}: pred is int64, but must be float", who);
  HERD_REQUIRE(p.shape() == t.shape() && p.dtype() == t.dtype(), "{}: pred is {} but target is {}; they must match",
               who, p.str(), t.str());
  HERD_REQUIRE(p.numel() > 0, "{}: empty input", who);
}

#if HERD_HAVE_CUDA
// The loss's float64 [1] device value (allocated once per device), and the next
// generation: earlier LossValues of this loss become stale.
LossValue device_value(Tensor& value, std::shared_ptr<std::uint64_t>& generation, Device d) {
  value.resize({1}, DType::kFloat64, d);
  return LossValue(value, generation, ++*generation);
}
// g = k clamp(d, -delta, delta) (delta <= 0: no clamp).
void dev_scaled_clamp(const Tensor& d, Tensor& g, double k, double delta) {
  detail::DevGuard guard(d.device());
  detail::dispatch(d.dtype(), [&](auto tag) {
    using T = decltype(tag);
    cuda::scaled_clamp<T>(d.data<T>(), g.data<T>(), d.numel(), k, delta, detail::dev_stream(d.device()));
  });
}
#endif

}  // namespace

using detail::CMapA;
using detail::MapA;

double LossValue::value() const {
  if (ready_) return host_;
  HERD_CHECK(current_ && *current_ == generation_,
             "nn::LossValue::value: the loss ran forward again after this value was returned; read a device "
             "loss value (or convert it to double) before the loss's next forward");
#if HERD_HAVE_CUDA
  const Device d = device_.device();
  detail::DevGuard guard(d);
  host_ = detail::dev_read(d, device_.data<double>());  // waits; reports deferred input errors
  ready_ = true;
#endif
  return host_;
}

LossValue MseLoss::forward(const Tensor& p, const Tensor& t) {
  check_pair(p, t, "nn::MseLoss::forward");
  diff_.resize_like(p);
#if HERD_HAVE_CUDA
  if (p.is_cuda()) {
    LossValue v = device_value(value_, generation_, p.device());
    detail::DevGuard guard(p.device());
    detail::dispatch(p.dtype(), [&](auto tag) {
      using T = decltype(tag);
      cuda::diff_sq_sum<T>(p.data<T>(), t.data<T>(), diff_.data<T>(), value_.data<double>(), p.numel(),
                           detail::dev_stream(p.device()), 1.0 / static_cast<double>(p.numel()));
    });
    return v;
  }
#endif
  return detail::dispatch(p.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const auto n = p.numel();
    MapA<T> d(diff_.data<T>(), n);
    d = CMapA<T>(p.data<T>(), n) - CMapA<T>(t.data<T>(), n);
    return d.template cast<double>().square().sum() / static_cast<double>(n);
  });
}

const Tensor& MseLoss::backward(double scale) {
  HERD_REQUIRE(diff_.defined(), "nn::MseLoss::backward: called before forward");
  grad_.resize_like(diff_);
#if HERD_HAVE_CUDA
  if (diff_.is_cuda()) {
    dev_scaled_clamp(diff_, grad_, 2.0 * scale / static_cast<double>(diff_.numel()), 0.0);
    return grad_;
  }
#endif
  detail::dispatch(diff_.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const auto n = diff_.numel();
    MapA<T>(grad_.data<T>(), n) = CMapA<T>(diff_.data<T>(), n) * static_cast<T>(2.0 * scale / static_cast<double>(n));
  });
  return grad_;
}

HuberLoss::HuberLoss(double delta) : delta_(delta) {
  HERD_REQUIRE(delta > 0, "nn::HuberLoss: delta is {}, but must be positive", delta);
}

LossValue HuberLoss::forward(const Tensor& p, const Tensor& t) {
  check_pair(p, t, "nn::HuberLoss::forward");
  diff_.resize_like(p);
#if HERD_HAVE_CUDA
  if (p.is_cuda()) {
    LossValue v = device_value(value_, generation_, p.device());
    detail::DevGuard guard(p.device());
    detail::dispatch(p.dtype(), [&](auto tag) {
      using T = decltype(tag);
      cudaStream_t st = detail::dev_stream(p.device());
      // d = p - t (its sum of squares goes to value_, then is overwritten by the Huber sum).
      cuda::diff_sq_sum<T>(p.data<T>(), t.data<T>(), diff_.data<T>(), value_.data<double>(), p.numel(), st);
      cuda::huber_sum<T>(diff_.data<T>(), value_.data<double>(), p.numel(), delta_, st,
                         1.0 / static_cast<double>(p.numel()));
    });
    return v;
  }
#endif
  return detail::dispatch(p.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const auto n = p.numel();
    MapA<T> d(diff_.data<T>(), n);
    d = CMapA<T>(p.data<T>(), n) - CMapA<T>(t.data<T>(), n);
    double s = 0;
    for (std::int64_t i = 0; i < n; ++i) {
      const double a = std::abs(static_cast<double>(d[i]));
      s += a < delta_ ? 0.5 * a * a : delta_ * (a - 0.5 * delta_);
    }
    return s / static_cast<double>(n);
  });
}

const Tensor& HuberLoss::backward(double scale) {
  HERD_REQUIRE(diff_.defined(), "nn::HuberLoss::backward: called before forward");
  grad_.resize_like(diff_);
#if HERD_HAVE_CUDA
  if (diff_.is_cuda()) {
    dev_scaled_clamp(diff_, grad_, scale / static_cast<double>(diff_.numel()), delta_);
    return grad_;
  }
#endif
  detail::dispatch(diff_.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const auto n = diff_.numel();
    const T dl = static_cast<T>(delta_);
    MapA<T>(grad_.data<T>(), n) =
        CMapA<T>(diff_.data<T>(), n).max(-dl).min(dl) * static_cast<T>(scale / static_cast<double>(n));
  });
  return grad_;
}

LossValue CrossEntropyLoss::forward(const Tensor& logits, const Tensor& targets) {
  const char* who = "nn::CrossEntropyLoss::forward";
  HERD_REQUIRE(logits.defined() && targets.defined(), "{}: undefined input", who);
  HERD_REQUIRE(logits.device() == targets.device(), "{}: logits are on {} but targets on {}; they must match", who,
               logits.device().str(), targets.device().str());
  HERD_REQUIRE(logits.ndim() == 2 && logits.dtype() != DType::kInt64 && logits.dim(0) > 0 && logits.dim(1) > 0,
               "{}: logits are {}, but must be float [batch, classes], non-empty", who, logits.str());
  HERD_REQUIRE(targets.dtype() == DType::kInt64 && targets.ndim() == 1 && targets.dim(0) == logits.dim(0),
               "{}: targets are {}, but must be int64 [{}]", who, targets.str(), logits.dim(0));
  const std::int64_t B = logits.dim(0), C = logits.dim(1);
#if HERD_HAVE_CUDA
  if (logits.is_cuda()) {
    // Targets are range-checked on the device (gather_rows writes the first bad one to the
    // device's error record, reported at the next synchronisation): no host wait here.
    targets_ = targets;
    log_probs_.resize_like(logits);
    LossValue v = device_value(value_, generation_, logits.device());
    detail::DevGuard guard(logits.device());
    detail::dispatch(logits.dtype(), [&](auto tag) {
      using T = decltype(tag);
      cudaStream_t st = detail::dev_stream(logits.device());
      cuda::softmax_rows(logits.data<T>(), log_probs_.data<T>(), B, C, true, st);
      cuda::gather_rows<T>(log_probs_.data<T>(), targets.data<std::int64_t>(), nullptr, value_.data<double>(), B, C, st,
                           -1.0 / static_cast<double>(B), detail::dev_error_record(logits.device()),
                           detail::kDevErrCrossEntropyTarget);
    });
    return v;
  }
#endif
  const std::int64_t* tg = targets.data<std::int64_t>();
  for (std::int64_t i = 0; i < B; ++i)
    HERD_REQUIRE(tg[i] >= 0 && tg[i] < C, "{}: targets[{}] is {}, but must be in [0, {})", who, i, tg[i], C);
  targets_ = targets;
  log_probs_.resize_like(logits);
  return detail::dispatch(logits.dtype(), [&](auto tag) {
    using T = decltype(tag);
    double s = 0;
    for (std::int64_t i = 0; i < B; ++i) {
      CMapA<T> x(logits.data<T>() + i * C, C);
      MapA<T> y(log_probs_.data<T>() + i * C, C);
      const T m = x.maxCoeff();
      y = x - (m + std::log((x - m).exp().sum()));
      s -= static_cast<double>(y[tg[i]]);
    }
    return s / static_cast<double>(B);
  });
}

const Tensor& CrossEntropyLoss::backward(double scale) {
  HERD_REQUIRE(log_probs_.defined(), "nn::CrossEntropyLoss::backward: called before forward");
  grad_.resize_like(log_probs_);
#if HERD_HAVE_CUDA
  if (log_probs_.is_cuda()) {
    detail::DevGuard guard(log_probs_.device());
    detail::dispatch(log_probs_.dtype(), [&](auto tag) {
      using T = decltype(tag);
      const std::int64_t B = log_probs_.dim(0), C = log_probs_.dim(1);
      cuda::cross_entropy_backward<T>(log_probs_.data<T>(), targets_.data<std::int64_t>(), grad_.data<T>(), B, C,
                                      scale / static_cast<double>(B), detail::dev_stream(log_probs_.device()));
    });
    return grad_;
  }
#endif
  detail::dispatch(log_probs_.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const std::int64_t B = log_probs_.dim(0), C = log_probs_.dim(1);
    const T s = static_cast<T>(scale / static_cast<double>(B));
    const std::int64_t* tg = targets_.data<std::int64_t>();
    for (std::int64_t i = 0; i < B; ++i) {
      MapA<T> g(grad_.data<T>() + i * C, C);
      g = CMapA<T>(log_probs_.data<T>() + i * C, C).exp() * s;
      g[tg[i]] -= s;
    }
  });
  return grad_;
}

}  // namespace herd::nn
