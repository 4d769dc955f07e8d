#include "herd/nn/losses.hpp"

#include <cmath>

#include "kernels.hpp"

namespace herd::nn {
namespace {

void check_pair(const Tensor& p, const Tensor& t, const char* who) {
  HERD_REQUIRE(p.defined() && t.defined(), "{}: undefined input", who);
  require_cpu(p, who);
  require_cpu(t, who);
  HERD_REQUIRE(p.dtype() != DType::kInt64, "{}: pred is int64, but must be float", who);
  HERD_REQUIRE(p.shape() == t.shape() && p.dtype() == t.dtype(),
               "{}: pred is {} but target is {}; they must match", who, p.str(), t.str());
  HERD_REQUIRE(p.numel() > 0, "{}: empty input", who);
}

}  // namespace

using detail::CMapA;
using detail::MapA;

double MseLoss::forward(const Tensor& p, const Tensor& t) {
  check_pair(p, t, "nn::MseLoss::forward");
  diff_.resize_like(p);
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
  detail::dispatch(diff_.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const auto n = diff_.numel();
    MapA<T>(grad_.data<T>(), n) =
        CMapA<T>(diff_.data<T>(), n) * static_cast<T>(2.0 * scale / static_cast<double>(n));
  });
  return grad_;
}

HuberLoss::HuberLoss(double delta) : delta_(delta) {
  HERD_REQUIRE(delta > 0, "nn::HuberLoss: delta is {}, but must be positive", delta);
}

double HuberLoss::forward(const Tensor& p, const Tensor& t) {
  check_pair(p, t, "nn::HuberLoss::forward");
  diff_.resize_like(p);
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
  detail::dispatch(diff_.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const auto n = diff_.numel();
    const T dl = static_cast<T>(delta_);
    MapA<T>(grad_.data<T>(), n) = CMapA<T>(diff_.data<T>(), n).max(-dl).min(dl) *
                                  static_cast<T>(scale / static_cast<double>(n));
  });
  return grad_;
}

double CrossEntropyLoss::forward(const Tensor& logits, const Tensor& targets) {
  const char* who = "nn::CrossEntropyLoss::forward";
  HERD_REQUIRE(logits.defined() && targets.defined(), "{}: undefined input", who);
  require_cpu(logits, who);
  require_cpu(targets, who);
  HERD_REQUIRE(logits.ndim() == 2 && logits.dtype() != DType::kInt64 && logits.dim(0) > 0 &&
                   logits.dim(1) > 0,
               "{}: logits are {}, but must be float [batch, classes], non-empty", who, logits.str());
  HERD_REQUIRE(targets.dtype() == DType::kInt64 && targets.ndim() == 1 && targets.dim(0) == logits.dim(0),
               "{}: targets are {}, but must be int64 [{}]", who, targets.str(), logits.dim(0));
  const std::int64_t B = logits.dim(0), C = logits.dim(1);
  const std::int64_t* tg = targets.data<std::int64_t>();
  for (std::int64_t i = 0; i < B; ++i)
    HERD_REQUIRE(tg[i] >= 0 && tg[i] < C, "{}: targets[{}] is {}, but must be in [0, {})", who, i,
                 tg[i], C);
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
