#include "herd/nn/distributions.hpp"

#include <cmath>
#include <numbers>

#include "kernels.hpp"

namespace herd::nn {

using detail::CMapA;
using detail::MapA;

namespace {

void check_weights(const Tensor& g, const Tensor& like, std::int64_t batch, const char* who) {
  HERD_REQUIRE(like.defined(), "{}: no preceding forward", who);
  require_cpu(g, who);
  HERD_REQUIRE(g.ndim() == 1 && g.dim(0) == batch && g.dtype() == like.dtype(),
               "{}: grad is {}, but must be {} [{}]", who, g.str(), dtype_name(like.dtype()), batch);
}

RngStream row_stream(const RngStream& rng, std::int64_t i) {
  return RngStream(rng.seed(), rng.stream() + static_cast<std::uint32_t>(i), rng.purpose());
}

}  // namespace

// ---------------------------------------------------------------- Categorical
void Categorical::set_logits(const Tensor& logits) {
  const char* who = "nn::Categorical::set_logits";
  HERD_REQUIRE(logits.defined(), "{}: undefined logits", who);
  require_cpu(logits, who);
  HERD_REQUIRE(logits.ndim() == 2 && logits.dtype() != DType::kInt64 && logits.numel() > 0,
               "{}: logits are {}, but must be float [batch, classes], non-empty", who, logits.str());
  log_probs_.resize_like(logits);
  probs_.resize_like(logits);
  grad_logits_.resize_like(logits);
  grad_logits_.zero();
  actions_ = Tensor();
  detail::dispatch(logits.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const std::int64_t B = logits.dim(0), C = logits.dim(1);
    for (std::int64_t i = 0; i < B; ++i) {
      CMapA<T> x(logits.data<T>() + i * C, C);
      MapA<T> l(log_probs_.data<T>() + i * C, C);
      const T m = x.maxCoeff();
      l = x - (m + std::log((x - m).exp().sum()));
      MapA<T>(probs_.data<T>() + i * C, C) = l.exp();
    }
  });
}

const Tensor& Categorical::log_prob(const Tensor& actions) {
  const char* who = "nn::Categorical::log_prob";
  HERD_REQUIRE(log_probs_.defined(), "{}: set_logits was not called", who);
  require_cpu(actions, who);
  const std::int64_t B = log_probs_.dim(0), C = log_probs_.dim(1);
  HERD_REQUIRE(actions.dtype() == DType::kInt64 && actions.ndim() == 1 && actions.dim(0) == B,
               "{}: actions are {}, but must be int64 [{}]", who, actions.str(), B);
  const std::int64_t* a = actions.data<std::int64_t>();
  for (std::int64_t i = 0; i < B; ++i)
    HERD_REQUIRE(a[i] >= 0 && a[i] < C, "{}: actions[{}] is {}, but must be in [0, {})", who, i, a[i], C);
  actions_ = actions;
  log_prob_.resize({B}, log_probs_.dtype());
  detail::dispatch(log_probs_.dtype(), [&](auto tag) {
    using T = decltype(tag);
    for (std::int64_t i = 0; i < B; ++i) log_prob_.data<T>()[i] = log_probs_.data<T>()[i * C + a[i]];
  });
  return log_prob_;
}

const Tensor& Categorical::entropy() {
  HERD_REQUIRE(log_probs_.defined(), "nn::Categorical::entropy: set_logits was not called");
  const std::int64_t B = log_probs_.dim(0), C = log_probs_.dim(1);
  entropy_.resize({B}, log_probs_.dtype());
  detail::dispatch(log_probs_.dtype(), [&](auto tag) {
    using T = decltype(tag);
    for (std::int64_t i = 0; i < B; ++i)
      entropy_.data<T>()[i] =
          -(CMapA<T>(probs_.data<T>() + i * C, C) * CMapA<T>(log_probs_.data<T>() + i * C, C)).sum();
  });
  return entropy_;
}

void Categorical::sample(const RngStream& rng, std::uint64_t index, Tensor& actions) const {
  HERD_REQUIRE(probs_.defined(), "nn::Categorical::sample: set_logits was not called");
  const std::int64_t B = probs_.dim(0), C = probs_.dim(1);
  actions.resize({B}, DType::kInt64);
  std::int64_t* a = actions.data<std::int64_t>();
  detail::dispatch(probs_.dtype(), [&](auto tag) {
    using T = decltype(tag);
    for (std::int64_t i = 0; i < B; ++i) {
      const T* p = probs_.data<T>() + i * C;
      const double u = row_stream(rng, i).uniform(index);
      double c = 0;
      std::int64_t k = 0;
      for (; k < C - 1; ++k) {
        c += static_cast<double>(p[k]);
        if (u < c) break;
      }
      a[i] = k;
    }
  });
}

void Categorical::mode(Tensor& actions) const {
  HERD_REQUIRE(probs_.defined(), "nn::Categorical::mode: set_logits was not called");
  const std::int64_t B = probs_.dim(0), C = probs_.dim(1);
  actions.resize({B}, DType::kInt64);
  std::int64_t* a = actions.data<std::int64_t>();
  detail::dispatch(probs_.dtype(), [&](auto tag) {
    using T = decltype(tag);
    for (std::int64_t i = 0; i < B; ++i) {
      const T* l = log_probs_.data<T>() + i * C;
      std::int64_t best = 0;
      for (std::int64_t k = 1; k < C; ++k)
        if (l[k] > l[best]) best = k;
      a[i] = best;
    }
  });
}

void Categorical::backward_log_prob(const Tensor& g) {
  const char* who = "nn::Categorical::backward_log_prob";
  HERD_REQUIRE(actions_.defined(), "{}: log_prob was not called after set_logits", who);
  const std::int64_t B = probs_.dim(0), C = probs_.dim(1);
  check_weights(g, probs_, B, who);
  const std::int64_t* a = actions_.data<std::int64_t>();
  detail::dispatch(probs_.dtype(), [&](auto tag) {
    using T = decltype(tag);
    for (std::int64_t i = 0; i < B; ++i) {
      const T gi = g.data<T>()[i];
      MapA<T> d(grad_logits_.data<T>() + i * C, C);
      d -= gi * CMapA<T>(probs_.data<T>() + i * C, C);
      d[a[i]] += gi;
    }
  });
}

void Categorical::backward_entropy(const Tensor& g) {
  const char* who = "nn::Categorical::backward_entropy";
  HERD_REQUIRE(probs_.defined(), "{}: set_logits was not called", who);
  const std::int64_t B = probs_.dim(0), C = probs_.dim(1);
  check_weights(g, probs_, B, who);
  detail::dispatch(probs_.dtype(), [&](auto tag) {
    using T = decltype(tag);
    for (std::int64_t i = 0; i < B; ++i) {
      CMapA<T> p(probs_.data<T>() + i * C, C), l(log_probs_.data<T>() + i * C, C);
      const T h = -(p * l).sum();
      // dH/dz_k = -p_k (log p_k + H)
      MapA<T>(grad_logits_.data<T>() + i * C, C) -= g.data<T>()[i] * p * (l + h);
    }
  });
}

// ---------------------------------------------------------------- Gaussian
Gaussian::Gaussian(std::int64_t dim, DType dtype, Device device, double init_log_std)
    : Module(dtype, device), dim_(dim) {
  HERD_REQUIRE(dim > 0, "nn::Gaussian: dim is {}, but must be positive", dim);
  log_std_ = &register_parameter("log_std", {dim});
  log_std_->value.fill(init_log_std);
}

const Tensor& Gaussian::forward(const Tensor& mean) {
  check_input(mean, 2, "nn::Gaussian::forward");
  HERD_REQUIRE(mean.dim(1) == dim_, "nn::Gaussian::forward: mean has shape {}, but dim is {}",
               mean.shape().str(), dim_);
  mean_ = mean;
  actions_ = Tensor();
  grad_mean_.resize_like(mean);
  grad_mean_.zero();
  return mean_;
}

const Tensor& Gaussian::backward(const Tensor& g) {
  HERD_REQUIRE(mean_.defined(), "nn::Gaussian::backward: called before forward");
  HERD_REQUIRE(g.shape() == mean_.shape() && g.dtype() == dtype(),
               "nn::Gaussian::backward: grad_output is {}, but the mean was {}", g.str(), mean_.str());
  require_cpu(g, "nn::Gaussian::backward");
  grad_input_.resize_like(g);
  detail::dispatch(dtype(), [&](auto tag) {
    using T = decltype(tag);
    const auto n = g.numel();
    MapA<T>(grad_input_.data<T>(), n) = CMapA<T>(g.data<T>(), n) + CMapA<T>(grad_mean_.data<T>(), n);
  });
  return grad_input_;
}

const Tensor& Gaussian::log_prob(const Tensor& actions) {
  const char* who = "nn::Gaussian::log_prob";
  HERD_REQUIRE(mean_.defined(), "{}: forward was not called", who);
  HERD_REQUIRE(actions.shape() == mean_.shape() && actions.dtype() == dtype(),
               "{}: actions are {}, but must be like the mean {}", who, actions.str(), mean_.str());
  require_cpu(actions, who);
  actions_ = actions;
  const std::int64_t B = mean_.dim(0), D = dim_;
  log_prob_.resize({B}, dtype());
  inv_var_.resize({D}, dtype());
  detail::dispatch(dtype(), [&](auto tag) {
    using T = decltype(tag);
    CMapA<T> ls(log_std_->value.data<T>(), D);
    MapA<T> inv_var(inv_var_.data<T>(), D);
    inv_var = (T(-2) * ls).exp();
    const T c = ls.sum() + static_cast<T>(0.5 * static_cast<double>(D) * std::log(2 * std::numbers::pi));
    for (std::int64_t i = 0; i < B; ++i) {
      const auto d = CMapA<T>(actions.data<T>() + i * D, D) - CMapA<T>(mean_.data<T>() + i * D, D);
      log_prob_.data<T>()[i] = T(-0.5) * (d.square() * inv_var).sum() - c;
    }
  });
  return log_prob_;
}

const Tensor& Gaussian::entropy() {
  HERD_REQUIRE(mean_.defined(), "nn::Gaussian::entropy: forward was not called");
  const std::int64_t B = mean_.dim(0);
  entropy_.resize({B}, dtype());
  detail::dispatch(dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T h = CMapA<T>(log_std_->value.data<T>(), dim_).sum() +
                static_cast<T>(dim_ * 0.5 * (1.0 + std::log(2 * std::numbers::pi)));
    for (std::int64_t i = 0; i < B; ++i) entropy_.data<T>()[i] = h;
  });
  return entropy_;
}

void Gaussian::sample(const RngStream& rng, std::uint64_t index, Tensor& actions) const {
  HERD_REQUIRE(mean_.defined(), "nn::Gaussian::sample: forward was not called");
  const std::int64_t B = mean_.dim(0), D = dim_;
  actions.resize(mean_.shape(), dtype());
  for (std::int64_t i = 0; i < B; ++i) {
    RngCursor cur = row_stream(rng, i).at(index);
    for (std::int64_t j = 0; j < D; ++j)
      actions.set_item(i * D + j,
                       mean_.item(i * D + j) + std::exp(log_std_->value.item(j)) * cur.normal());
  }
}

void Gaussian::backward_log_prob(const Tensor& g) {
  const char* who = "nn::Gaussian::backward_log_prob";
  HERD_REQUIRE(actions_.defined(), "{}: log_prob was not called after forward", who);
  const std::int64_t B = mean_.dim(0), D = dim_;
  check_weights(g, mean_, B, who);
  inv_var_.resize({D}, dtype());
  detail::dispatch(dtype(), [&](auto tag) {
    using T = decltype(tag);
    MapA<T> inv_var(inv_var_.data<T>(), D);
    inv_var = (T(-2) * CMapA<T>(log_std_->value.data<T>(), D)).exp();
    MapA<T> gls(log_std_->grad.data<T>(), D);
    for (std::int64_t i = 0; i < B; ++i) {
      const T gi = g.data<T>()[i];
      const auto d = CMapA<T>(actions_.data<T>() + i * D, D) - CMapA<T>(mean_.data<T>() + i * D, D);
      // d log p / d mean = (a - mu) / var; d log p / d log_std = (a - mu)^2 / var - 1
      MapA<T>(grad_mean_.data<T>() + i * D, D) += gi * d * inv_var;
      gls += gi * (d.square() * inv_var - T(1));
    }
  });
}

void Gaussian::backward_entropy(const Tensor& g) {
  const char* who = "nn::Gaussian::backward_entropy";
  HERD_REQUIRE(mean_.defined(), "{}: forward was not called", who);
  check_weights(g, mean_, mean_.dim(0), who);
  detail::dispatch(dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T s = CMapA<T>(g.data<T>(), g.numel()).sum();
    MapA<T>(log_std_->grad.data<T>(), dim_) += s;
  });
}

}  // namespace herd::nn
