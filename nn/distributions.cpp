#include "herd/nn/distributions.hpp"

#include <cmath>
#include <numbers>

#include "categorical_draw.hpp"
#include "cpu_compute.hpp"
#include "herd/core/config.hpp"
#if HERD_HAVE_CUDA
#include "device_context.hpp"
#include "herd/nn/cuda/kernels.hpp"
#endif
namespace herd::nn {

using detail::CMapA;
using detail::MapA;

namespace {

void check_weights(const Tensor& g, const Tensor& like, std::int64_t batch, const char* who) {
  HERD_REQUIRE(like.defined(), "{}: no preceding forward", who);
  HERD_REQUIRE(g.device() == like.device(), "{}: grad is on {}, but the distribution is on {}", who, g.device().str(),
               like.device().str());
  HERD_REQUIRE(g.ndim() == 1 && g.dim(0) == batch && g.dtype() == like.dtype(), "{}: grad is {}, but must be {} [{}]",
               who, g.str(), dtype_name(like.dtype()), batch);
}

RngStream row_stream(const RngStream& rng, std::int64_t i) {
  return RngStream(rng.seed(), rng.stream() + static_cast<std::uint32_t>(i), rng.purpose());
}

#if HERD_HAVE_CUDA
cudaStream_t dev_stream_of(const Tensor& t) { return detail::dev_stream(t.device()); }
#endif

}  // namespace

// ---------------------------------------------------------------- Categorical
void Categorical::set_logits(const Tensor& logits) {
  const char* who = "nn::Categorical::set_logits";
  HERD_REQUIRE(logits.defined(), "{}: undefined logits", who);
  HERD_REQUIRE(logits.ndim() == 2 && logits.dtype() != DType::kInt64 && logits.numel() > 0,
               "{}: logits are {}, but must be float [batch, classes], non-empty", who, logits.str());
  log_probs_.resize_like(logits);
  probs_.resize_like(logits);
  grad_logits_.resize_like(logits);
  grad_logits_.zero();
  actions_ = Tensor();
#if HERD_HAVE_CUDA
  if (logits.is_cuda()) {
    detail::DevGuard guard(logits.device());
    detail::dispatch(logits.dtype(), [&](auto tag) {
      using T = decltype(tag);
      cudaStream_t st = dev_stream_of(logits);
      cuda::softmax_rows(logits.data<T>(), log_probs_.data<T>(), logits.dim(0), logits.dim(1), true, st);
      cuda::exp<T>(log_probs_.data<T>(), probs_.data<T>(), logits.numel(), st);
    });
    return;
  }
#endif
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
  const std::int64_t B = log_probs_.dim(0), C = log_probs_.dim(1);
  HERD_REQUIRE(actions.dtype() == DType::kInt64 && actions.ndim() == 1 && actions.dim(0) == B &&
                   actions.device() == log_probs_.device(),
               "{}: actions are {}, but must be int64 [{}] on {}", who, actions.str(), B, log_probs_.device().str());
#if HERD_HAVE_CUDA
  if (actions.is_cuda()) {
    // Actions are range-checked on the device (the first bad one goes to the device's
    // error record and is reported at the next synchronisation): no host wait here.
    actions_ = actions;
    log_prob_.resize({B}, log_probs_.dtype(), log_probs_.device());
    detail::DevGuard guard(actions.device());
    detail::dispatch(log_probs_.dtype(), [&](auto tag) {
      using T = decltype(tag);
      cuda::gather_rows<T>(log_probs_.data<T>(), actions.data<std::int64_t>(), log_prob_.data<T>(), nullptr, B, C,
                           dev_stream_of(actions), 1.0, detail::dev_error_record(actions.device()),
                           detail::kDevErrCategoricalAction);
    });
    return log_prob_;
  }
#endif
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
  entropy_.resize({B}, log_probs_.dtype(), log_probs_.device());
#if HERD_HAVE_CUDA
  if (log_probs_.is_cuda()) {
    detail::DevGuard guard(log_probs_.device());
    detail::dispatch(log_probs_.dtype(), [&](auto tag) {
      using T = decltype(tag);
      cuda::categorical_entropy<T>(probs_.data<T>(), log_probs_.data<T>(), entropy_.data<T>(), B, C,
                                   dev_stream_of(log_probs_));
    });
    return entropy_;
  }
#endif
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
#if HERD_HAVE_CUDA
  if (probs_.is_cuda()) {
    // On the device with the same Philox counters: the same actions as the CPU path.
    actions.resize({B}, DType::kInt64, probs_.device());
    detail::DevGuard guard(probs_.device());
    detail::dispatch(probs_.dtype(), [&](auto tag) {
      using T = decltype(tag);
      cuda::categorical_sample<T>(probs_.data<T>(), actions.data<std::int64_t>(), B, C, rng.seed(), rng.stream(),
                                  static_cast<int>(rng.purpose()), index, dev_stream_of(probs_));
    });
    return;
  }
#endif
  actions.resize({B}, DType::kInt64);
  std::int64_t* a = actions.data<std::int64_t>();
  detail::dispatch(probs_.dtype(), [&](auto tag) {
    using T = decltype(tag);
    for (std::int64_t i = 0; i < B; ++i) {
      a[i] = detail::categorical_draw(probs_.data<T>() + i * C, C, row_stream(rng, i).uniform(index));
    }
  });
}

void Categorical::mode(Tensor& actions) const {
  HERD_REQUIRE(probs_.defined(), "nn::Categorical::mode: set_logits was not called");
  const std::int64_t B = probs_.dim(0), C = probs_.dim(1);
#if HERD_HAVE_CUDA
  if (log_probs_.is_cuda()) {
    actions.resize({B}, DType::kInt64, log_probs_.device());
    detail::DevGuard guard(log_probs_.device());
    detail::dispatch(log_probs_.dtype(), [&](auto tag) {
      using T = decltype(tag);
      cuda::argmax_rows<T>(log_probs_.data<T>(), actions.data<std::int64_t>(), B, C, dev_stream_of(log_probs_));
    });
    return;
  }
#endif
  const Tensor& lp = log_probs_;
  actions.resize({B}, DType::kInt64);
  std::int64_t* a = actions.data<std::int64_t>();
  detail::dispatch(lp.dtype(), [&](auto tag) {
    using T = decltype(tag);
    for (std::int64_t i = 0; i < B; ++i) {
      const T* l = lp.data<T>() + i * C;
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
#if HERD_HAVE_CUDA
  if (probs_.is_cuda()) {
    detail::DevGuard guard(probs_.device());
    detail::dispatch(probs_.dtype(), [&](auto tag) {
      using T = decltype(tag);
      cuda::categorical_log_prob_backward<T>(probs_.data<T>(), actions_.data<std::int64_t>(), g.data<T>(),
                                             grad_logits_.data<T>(), B, C, dev_stream_of(probs_));
    });
    return;
  }
#endif
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
#if HERD_HAVE_CUDA
  if (probs_.is_cuda()) {
    detail::DevGuard guard(probs_.device());
    detail::dispatch(probs_.dtype(), [&](auto tag) {
      using T = decltype(tag);
      cuda::categorical_entropy_backward<T>(probs_.data<T>(), log_probs_.data<T>(), g.data<T>(), grad_logits_.data<T>(),
                                            B, C, dev_stream_of(probs_));
    });
    return;
  }
#endif
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
  HERD_REQUIRE(mean.dim(1) == dim_, "nn::Gaussian::forward: mean has shape {}, but dim is {}", mean.shape().str(),
               dim_);
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
  HERD_REQUIRE(g.device() == device(), "nn::Gaussian::backward: grad_output is on {}, but the module is on {}",
               g.device().str(), device().str());
  grad_input_.resize_like(g);
#if HERD_HAVE_CUDA
  if (device().is_cuda()) {
    detail::DevGuard guard(device());
    detail::dispatch(dtype(), [&](auto tag) {
      using T = decltype(tag);
      cuda::add<T>(g.data<T>(), grad_mean_.data<T>(), grad_input_.data<T>(), g.numel(), dev_stream_of(g));
    });
    return grad_input_;
  }
#endif
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
  HERD_REQUIRE(actions.device() == device(), "{}: actions are on {}, but the module is on {}", who,
               actions.device().str(), device().str());
  actions_ = actions;
  const std::int64_t B = mean_.dim(0), D = dim_;
  log_prob_.resize({B}, dtype(), device());
#if HERD_HAVE_CUDA
  if (device().is_cuda()) {
    detail::DevGuard guard(device());
    detail::dispatch(dtype(), [&](auto tag) {
      using T = decltype(tag);
      cuda::gaussian_log_prob<T>(actions.data<T>(), mean_.data<T>(), log_std_->value.data<T>(), log_prob_.data<T>(), B,
                                 D, dev_stream_of(actions));
    });
    return log_prob_;
  }
#endif
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
  entropy_.resize({B}, dtype(), device());
#if HERD_HAVE_CUDA
  if (device().is_cuda()) {
    detail::DevGuard guard(device());
    detail::dispatch(dtype(), [&](auto tag) {
      using T = decltype(tag);
      cuda::gaussian_entropy<T>(log_std_->value.data<T>(), entropy_.data<T>(), B, dim_, dev_stream_of(entropy_));
    });
    return entropy_;
  }
#endif
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
#if HERD_HAVE_CUDA
  if (device().is_cuda()) {
    // On the device with the same Philox counters (normals may differ from the host's in
    // the last bits: device log/sincospi).
    actions.resize(mean_.shape(), dtype(), device());
    detail::DevGuard guard(device());
    detail::dispatch(dtype(), [&](auto tag) {
      using T = decltype(tag);
      cuda::gaussian_sample<T>(mean_.data<T>(), log_std_->value.data<T>(), actions.data<T>(), B, D, rng.seed(),
                               rng.stream(), static_cast<int>(rng.purpose()), index, dev_stream_of(mean_));
    });
    return;
  }
#endif
  actions.resize(mean_.shape(), dtype());
  for (std::int64_t i = 0; i < B; ++i) {
    RngCursor cur = row_stream(rng, i).at(index);
    for (std::int64_t j = 0; j < D; ++j)
      actions.set_item(i * D + j, mean_.item(i * D + j) + std::exp(log_std_->value.item(j)) * cur.normal());
  }
}

void Gaussian::backward_log_prob(const Tensor& g) {
  const char* who = "nn::Gaussian::backward_log_prob";
  HERD_REQUIRE(actions_.defined(), "{}: log_prob was not called after forward", who);
  const std::int64_t B = mean_.dim(0), D = dim_;
  check_weights(g, mean_, B, who);
#if HERD_HAVE_CUDA
  if (device().is_cuda()) {
    detail::DevGuard guard(device());
    detail::dispatch(dtype(), [&](auto tag) {
      using T = decltype(tag);
      cuda::gaussian_log_prob_backward<T>(actions_.data<T>(), mean_.data<T>(), log_std_->value.data<T>(), g.data<T>(),
                                          grad_mean_.data<T>(), log_std_->grad.data<T>(), B, D, dev_stream_of(g));
    });
    return;
  }
#endif
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
#if HERD_HAVE_CUDA
  if (device().is_cuda()) {
    detail::DevGuard guard(device());
    detail::dispatch(dtype(), [&](auto tag) {
      using T = decltype(tag);
      cuda::gaussian_entropy_backward<T>(g.data<T>(), log_std_->grad.data<T>(), mean_.dim(0), dim_, dev_stream_of(g));
    });
    return;
  }
#endif
  detail::dispatch(dtype(), [&](auto tag) {
    using T = decltype(tag);
    const T s = CMapA<T>(g.data<T>(), g.numel()).sum();
    MapA<T>(log_std_->grad.data<T>(), dim_) += s;
  });
}

}  // namespace herd::nn
