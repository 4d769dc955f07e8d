#include "herd/nn/optimizer.hpp"

#include <algorithm>
#include <cmath>
#include <set>

#include "cpu_compute.hpp"
#include "herd/core/config.hpp"
#if HERD_HAVE_CUDA
#include "device_context.hpp"
#include "herd/core/cuda/cuda_check.hpp"
#include "herd/nn/cuda/kernels.hpp"
#endif
namespace herd::nn {

using detail::CMapA;
using detail::MapA;

Optimizer::Optimizer(std::vector<NamedParameter> params, double lr) : params_(std::move(params)), lr_(lr) {
  HERD_REQUIRE(lr >= 0 && std::isfinite(lr), "nn::Optimizer: lr is {}, but must be finite and non-negative", lr);
  std::set<std::string> names;
  for (const auto& p : params_) {
    HERD_REQUIRE(p.param != nullptr, "nn::Optimizer: parameter '{}' is null", p.name);
    HERD_REQUIRE(names.insert(p.name).second,
                 "nn::Optimizer: parameter name '{}' appears twice, but names must be unique (state() keys the "
                 "buffers by them); to optimise several modules together, prefix each one's names, e.g. "
                 "{{\"critic.\" + p.name, p.param}}",
                 p.name);
    HERD_REQUIRE(p.param->value.device() == params_.front().param->value.device(),
                 "nn::Optimizer: parameter '{}' is on {}, but '{}' is on {}; one optimizer takes one device", p.name,
                 p.param->value.device().str(), params_.front().name, params_.front().param->value.device().str());
  }
}

Optimizer::~Optimizer() = default;

void Optimizer::set_lr(double lr) {
  HERD_REQUIRE(lr >= 0 && std::isfinite(lr), "nn::Optimizer::set_lr: lr is {}, but must be finite and non-negative",
               lr);
  lr_ = lr;
}

void Optimizer::add_buffers(const std::string& kind) {
  kinds_.push_back(kind);
  std::vector<Tensor> b;
  for (const auto& p : params_) b.emplace_back(p.param->value.shape(), p.param->value.dtype(), p.param->value.device());
  buffers_.push_back(std::move(b));
}

void Optimizer::step() {
  ++steps_;
  for (std::size_t i = 0; i < params_.size(); ++i) update(i, *params_[i].param);
}

void Optimizer::set_skip_flag(const std::int32_t* flag) {
  if (flag)
    for (const auto& p : params_)
      HERD_REQUIRE(p.param->value.is_cuda(),
                   "nn::Optimizer::set_skip_flag: parameter '{}' is on {}, but a skip flag needs device parameters",
                   p.name, p.param->value.device().str());
  skip_ = flag;
}

void Optimizer::count_replayed_steps(std::int64_t n) {
  HERD_REQUIRE(n >= 0, "nn::Optimizer::count_replayed_steps: n is {}, but must be >= 0", n);
  steps_ += n;
}

void Optimizer::zero_grad() {
  for (auto& p : params_) p.param->grad.zero();
}

std::vector<NamedTensor> Optimizer::state() const {
  std::vector<NamedTensor> out;
  out.push_back({"step", Tensor::from_vector({1}, std::vector<double>{static_cast<double>(steps_)})});
  out.push_back({"lr", Tensor::from_vector({1}, std::vector<double>{lr_})});
  for (std::size_t k = 0; k < kinds_.size(); ++k)
    for (std::size_t i = 0; i < params_.size(); ++i)
      out.push_back({params_[i].name + "." + kinds_[k], buffers_[k][i].clone()});
  return out;
}

void Optimizer::load_state(const std::vector<NamedTensor>& state) {
  const char* who = "nn::Optimizer::load_state";
  auto find = [&](const std::string& name, const Shape& shape) -> const Tensor& {
    for (const auto& s : state)
      if (s.name == name) {
        HERD_REQUIRE(s.tensor.shape() == shape, "{}: '{}' has shape {} in the optimizer but {} in the state", who, name,
                     shape.str(), s.tensor.shape().str());
        HERD_REQUIRE(s.tensor.dtype() != DType::kInt64,
                     "{}: '{}' is int64 in the state, but must be float32 or float64", who, name);
        return s.tensor;
      }
    throw InputError(
        fmt::format("{}: the optimizer's '{}' (shape {}) is missing from the state", who, name, shape.str()));
  };
  std::set<std::string> expected{"step", "lr"};
  for (const auto& k : kinds_)
    for (const auto& p : params_) expected.insert(p.name + "." + k);
  for (const auto& s : state)
    HERD_REQUIRE(expected.count(s.name), "{}: state has '{}' (shape {}), which this {} optimizer does not have", who,
                 s.name, s.tensor.shape().str(), type_name());
  const double step = find("step", {1}).item(0);
  const double lr = find("lr", {1}).item(0);
  std::vector<const Tensor*> src;
  for (std::size_t k = 0; k < kinds_.size(); ++k)
    for (std::size_t i = 0; i < params_.size(); ++i)
      src.push_back(&find(params_[i].name + "." + kinds_[k], params_[i].param->value.shape()));
  steps_ = static_cast<std::int64_t>(step);
  set_lr(lr);
  std::size_t n = 0;
  for (std::size_t k = 0; k < kinds_.size(); ++k)
    for (std::size_t i = 0; i < params_.size(); ++i) {
      const Tensor& t = *src[n++];
      Tensor& b = buffers_[k][i];
      // Device copies need equal dtypes: convert on the host first.
      if (b.is_cuda() && (t.dtype() != b.dtype() || !t.is_cpu())) b.copy_from(t.to(Device::cpu()).to(b.dtype()));
      else b.copy_from(t);
    }
}

// ---------------------------------------------------------------- SGD
Sgd::Sgd(std::vector<NamedParameter> params, double lr, double momentum, double dampening, bool nesterov)
    : Optimizer(std::move(params), lr), momentum_(momentum), dampening_(dampening), nesterov_(nesterov) {
  HERD_REQUIRE(momentum >= 0, "nn::Sgd: momentum is {}, but must be non-negative", momentum);
  // PyTorch's rule: Nesterov's look-ahead needs a momentum buffer, undamped.
  HERD_REQUIRE(!nesterov || (momentum > 0 && dampening == 0),
               "nn::Sgd: nesterov is true with momentum {} and dampening {}, but Nesterov momentum needs a positive "
               "momentum and zero dampening",
               momentum, dampening);
  if (momentum_ != 0) add_buffers("momentum_buffer");
}

void Sgd::update(std::size_t i, Parameter& p) {
#if HERD_HAVE_CUDA
  if (p.value.is_cuda()) {
    detail::DevGuard guard(p.value.device());
    detail::dispatch(p.value.dtype(), [&](auto tag) {
      using T = decltype(tag);
      cuda::sgd_update(p.value.data<T>(), p.grad.data<T>(), momentum_ == 0 ? nullptr : buffer(0, i).data<T>(),
                       p.value.numel(), lr(), momentum_, dampening_, nesterov_, steps() == 1,
                       detail::dev_stream(p.value.device()), skip_);
    });
    return;
  }
#endif
  detail::dispatch(p.value.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const auto n = p.value.numel();
    MapA<T> w(p.value.data<T>(), n);
    CMapA<T> g(p.grad.data<T>(), n);
    const T lr = static_cast<T>(this->lr());
    if (momentum_ == 0) {
      w -= lr * g;
      return;
    }
    MapA<T> b(buffer(0, i).data<T>(), n);
    const T m = static_cast<T>(momentum_);
    if (steps() == 1) b = g;
    else b = m * b + static_cast<T>(1 - dampening_) * g;
    if (nesterov_) w -= lr * (g + m * b);
    else w -= lr * b;
  });
}

// ---------------------------------------------------------------- Adam
Adam::Adam(std::vector<NamedParameter> params, double lr, double beta1, double beta2, double eps)
    : Optimizer(std::move(params), lr), beta1_(beta1), beta2_(beta2), eps_(eps) {
  HERD_REQUIRE(beta1 >= 0 && beta1 < 1 && beta2 >= 0 && beta2 < 1,
               "nn::Adam: betas are ({}, {}), but must be in [0, 1)", beta1, beta2);
  HERD_REQUIRE(eps >= 0, "nn::Adam: eps is {}, but must be non-negative", eps);
  add_buffers("exp_avg");
  add_buffers("exp_avg_sq");
}

void Adam::update(std::size_t i, Parameter& p) {
#if HERD_HAVE_CUDA
  if (p.value.is_cuda()) {
    detail::DevGuard guard(p.value.device());
    detail::dispatch(p.value.dtype(), [&](auto tag) {
      using T = decltype(tag);
      cuda::adam_update(p.value.data<T>(), p.grad.data<T>(), buffer(0, i).data<T>(), buffer(1, i).data<T>(),
                        p.value.numel(), lr(), beta1_, beta2_, eps_, steps(), detail::dev_stream(p.value.device()),
                        skip_);
    });
    return;
  }
#endif
  detail::dispatch(p.value.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const auto n = p.value.numel();
    MapA<T> w(p.value.data<T>(), n), m(buffer(0, i).data<T>(), n), v(buffer(1, i).data<T>(), n);
    CMapA<T> g(p.grad.data<T>(), n);
    const double t = static_cast<double>(steps());
    const double bc1 = 1 - std::pow(beta1_, t), bc2 = 1 - std::pow(beta2_, t);
    const T b1 = static_cast<T>(beta1_), b2 = static_cast<T>(beta2_);
    const T step_size = static_cast<T>(lr() / bc1);
    const T inv_bc2_sqrt = static_cast<T>(1 / std::sqrt(bc2));
    const T eps = static_cast<T>(eps_);
    m = b1 * m + (T(1) - b1) * g;
    v = b2 * v + (T(1) - b2) * g.square();
    w -= step_size * m / (v.sqrt() * inv_bc2_sqrt + eps);
  });
}

void Adam::step_with_device_hyper(double* hyper, bool count) {
  for (const auto& p : params_)
    HERD_REQUIRE(p.param->value.is_cuda(),
                 "nn::Adam::step_with_device_hyper: parameter '{}' is on {}, but must be on a CUDA device", p.name,
                 p.param->value.device().str());
#if HERD_HAVE_CUDA
  if (params_.empty()) return;
  const Device d = params_.front().param->value.device();
  detail::DevGuard guard(d);
  cudaStream_t st = detail::dev_stream(d);
  cuda::adam_tick(hyper, beta1_, beta2_, st);
  for (std::size_t i = 0; i < params_.size(); ++i) {
    Parameter& p = *params_[i].param;
    detail::dispatch(p.value.dtype(), [&](auto tag) {
      using T = decltype(tag);
      cuda::adam_update_hyper<T>(p.value.data<T>(), p.grad.data<T>(), buffer(0, i).data<T>(), buffer(1, i).data<T>(),
                                 p.value.numel(), hyper, beta1_, beta2_, eps_, st, skip_);
    });
  }
  if (count) count_replayed_steps(1);
#else
  (void)hyper;
  (void)count;
  throw InputError("nn::Adam::step_with_device_hyper: this build of herd has no CUDA support");
#endif
}

// ---------------------------------------------------------------- RMSprop
RmsProp::RmsProp(std::vector<NamedParameter> params, double lr, double alpha, double eps, bool centered)
    : Optimizer(std::move(params), lr), alpha_(alpha), eps_(eps), centered_(centered) {
  HERD_REQUIRE(alpha >= 0 && alpha < 1, "nn::RmsProp: alpha is {}, but must be in [0, 1)", alpha);
  HERD_REQUIRE(eps >= 0, "nn::RmsProp: eps is {}, but must be non-negative", eps);
  add_buffers("square_avg");
  if (centered_) add_buffers("grad_avg");
}

void RmsProp::update(std::size_t i, Parameter& p) {
#if HERD_HAVE_CUDA
  if (p.value.is_cuda()) {
    detail::DevGuard guard(p.value.device());
    detail::dispatch(p.value.dtype(), [&](auto tag) {
      using T = decltype(tag);
      cuda::rmsprop_update<T>(p.value.data<T>(), p.grad.data<T>(), buffer(0, i).data<T>(),
                              centered_ ? buffer(1, i).data<T>() : nullptr, p.value.numel(), lr(), alpha_, eps_,
                              detail::dev_stream(p.value.device()), skip_);
    });
    return;
  }
#endif
  detail::dispatch(p.value.dtype(), [&](auto tag) {
    using T = decltype(tag);
    const auto n = p.value.numel();
    MapA<T> w(p.value.data<T>(), n), v(buffer(0, i).data<T>(), n);
    CMapA<T> g(p.grad.data<T>(), n);
    const T a = static_cast<T>(alpha_);
    v = a * v + (T(1) - a) * g.square();
    if (centered_) {
      MapA<T> m(buffer(1, i).data<T>(), n);
      m = a * m + (T(1) - a) * g;
      w -= static_cast<T>(lr()) * g / ((v - m.square()).sqrt() + static_cast<T>(eps_));
    } else {
      w -= static_cast<T>(lr()) * g / (v.sqrt() + static_cast<T>(eps_));
    }
  });
}

// ---------------------------------------------------------------- clipping, schedule
double clip_grad_norm(const std::vector<Parameter*>& params, double max_norm) {
  HERD_REQUIRE(max_norm > 0, "nn::clip_grad_norm: max_norm is {}, but must be positive", max_norm);
  double sq = 0;
#if HERD_HAVE_CUDA
  // Device gradients: sums of squares accumulate into one device double per device, read
  // back once (one synchronisation per device).
  {
    std::vector<Device> devs;
    for (const Parameter* p : params)
      if (p->grad.is_cuda() && std::find(devs.begin(), devs.end(), p->grad.device()) == devs.end())
        devs.push_back(p->grad.device());
    for (const Device d : devs) {
      detail::DevGuard guard(d);
      double* acc = detail::dev_scratch(d);
      cudaStream_t st = detail::dev_stream(d);
      HERD_CUDA_CHECK(cudaMemsetAsync(acc, 0, sizeof(double), st));
      for (const Parameter* p : params)
        if (p->grad.device() == d)
          detail::dispatch(p->grad.dtype(), [&](auto tag) {
            using T = decltype(tag);
            cuda::sum_squares<T>(p->grad.data<T>(), acc, p->grad.numel(), st);
          });
      sq += detail::dev_read(d, acc);
    }
  }
#endif
  for (const Parameter* p : params) {
    if (p->grad.is_cuda()) continue;
    sq += detail::dispatch(p->grad.dtype(), [&](auto tag) {
      using T = decltype(tag);
      return CMapA<T>(p->grad.data<T>(), p->grad.numel()).template cast<double>().square().sum();
    });
  }
  const double norm = std::sqrt(sq);
  const double coef = max_norm / (norm + 1e-6);
  if (coef < 1) {
    for (Parameter* p : params) {
#if HERD_HAVE_CUDA
      if (p->grad.is_cuda()) {
        detail::DevGuard guard(p->grad.device());
        detail::dispatch(p->grad.dtype(), [&](auto tag) {
          using T = decltype(tag);
          cuda::scale(p->grad.data<T>(), coef, p->grad.numel(), detail::dev_stream(p->grad.device()));
        });
        continue;
      }
#endif
      detail::dispatch(p->grad.dtype(), [&](auto tag) {
        using T = decltype(tag);
        MapA<T>(p->grad.data<T>(), p->grad.numel()) *= static_cast<T>(coef);
      });
    }
  }
  return norm;
}

double clip_grad_norm(const std::vector<NamedParameter>& params, double max_norm) {
  std::vector<Parameter*> ps;
  for (const auto& p : params) ps.push_back(p.param);
  return clip_grad_norm(ps, max_norm);
}

void clip_grad_norm_on_device(const std::vector<NamedParameter>& params, double max_norm, double* sum_sq) {
  HERD_REQUIRE(max_norm > 0, "nn::clip_grad_norm_on_device: max_norm is {}, but must be positive", max_norm);
  if (params.empty()) return;
  const Device d = params.front().param->grad.device();
  for (const auto& p : params)
    HERD_REQUIRE(p.param->grad.is_cuda() && p.param->grad.device() == d,
                 "nn::clip_grad_norm_on_device: the gradient of '{}' is on {}, but all must be on one CUDA device ({})",
                 p.name, p.param->grad.device().str(), d.str());
#if HERD_HAVE_CUDA
  detail::DevGuard guard(d);
  cudaStream_t st = detail::dev_stream(d);
  HERD_CUDA_CHECK(cudaMemsetAsync(sum_sq, 0, sizeof(double), st));
  for (const auto& p : params)
    detail::dispatch(p.param->grad.dtype(), [&](auto tag) {
      using T = decltype(tag);
      cuda::sum_squares<T>(p.param->grad.data<T>(), sum_sq, p.param->grad.numel(), st);
    });
  for (const auto& p : params)
    detail::dispatch(p.param->grad.dtype(), [&](auto tag) {
      using T = decltype(tag);
      cuda::clip_by_norm<T>(p.param->grad.data<T>(), sum_sq, p.param->grad.numel(), max_norm, st);
    });
#else
  (void)sum_sq;
  throw InputError("nn::clip_grad_norm_on_device: this build of herd has no CUDA support");
#endif
}

LinearSchedule::LinearSchedule(double start, double end, std::int64_t total_steps)
    : start_(start), end_(end), total_(total_steps) {
  HERD_REQUIRE(total_steps > 0, "nn::LinearSchedule: total_steps is {}, but must be positive", total_steps);
}

double LinearSchedule::at(std::int64_t step) const {
  const double f = std::clamp(static_cast<double>(step) / static_cast<double>(total_), 0.0, 1.0);
  return start_ + (end_ - start_) * f;
}

}  // namespace herd::nn
