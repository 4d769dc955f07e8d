// Targets of the batched DRAM sampler (batched_targets.hpp).
#include "herd/mcmc/batched_targets.hpp"

#include <cmath>

#include "herd/core/error.hpp"
#include "herd/nn/mlp.hpp"
#include "herd/nn/tensor.hpp"

namespace herd::mcmc {

GaussianTarget::GaussianTarget(std::vector<double> mean, const std::vector<double>& cov)
    : d_(static_cast<int>(mean.size())), mean_(std::move(mean)), cov_(cov) {
  const int d = d_;
  HERD_REQUIRE(d > 0, "GaussianTarget: mean is empty, but must hold d values");
  HERD_REQUIRE(cov.size() == static_cast<std::size_t>(d) * d,
               "GaussianTarget: cov has {} values, but must have d*d = {}", cov.size(), d * d);
  auto g = target_detail::gaussian_form(cov.data(), d, "GaussianTarget");
  prec_ = std::move(g.prec);
  prec2_ = std::move(g.prec2);
  log_norm_ = g.log_norm;
}

GaussianTarget GaussianTarget::ar1(int d, double rho) {
  HERD_REQUIRE(d > 0 && std::abs(rho) < 1.0, "GaussianTarget::ar1: d = {}, rho = {}; need d > 0, |rho| < 1", d, rho);
  std::vector<double> c(static_cast<std::size_t>(d) * d);
  for (int i = 0; i < d; ++i)
    for (int j = 0; j < d; ++j) c[static_cast<std::size_t>(i) * d + j] = std::pow(rho, std::abs(i - j));
  return GaussianTarget(std::vector<double>(static_cast<std::size_t>(d), 0.0), c);
}

MlpLogDensity::MlpLogDensity(nn::Mlp& model, int d, std::vector<double> shift, std::vector<double> width, double scale,
                             double offset)
    : model_(&model), d_(d), shift_(std::move(shift)), width_(std::move(width)), scale_(scale), offset_(offset) {
  auto params = model.parameters();
  HERD_REQUIRE(!params.empty(), "MlpLogDensity: the model has no parameters");
  const auto& w0 = params.front()->value.shape();
  const auto& bl = params.back()->value.shape();
  HERD_REQUIRE(w0.ndim() == 2 && w0[1] == d, "MlpLogDensity: the model's first layer has input size {}, but d is {}",
               w0.ndim() == 2 ? w0[1] : -1, d);
  HERD_REQUIRE(bl.numel() == 1, "MlpLogDensity: the model has {} outputs, but must have 1 (the log density)",
               bl.numel());
  HERD_REQUIRE(shift_.empty() || shift_.size() == static_cast<std::size_t>(d),
               "MlpLogDensity: shift has {} values, but must have 0 or d = {}", shift_.size(), d);
  HERD_REQUIRE(width_.empty() || width_.size() == static_cast<std::size_t>(d),
               "MlpLogDensity: width has {} values, but must have 0 or d = {}", width_.size(), d);
  for (double w : width_) HERD_REQUIRE(w > 0, "MlpLogDensity: a width is {}, but must be positive", w);
}

void MlpLogDensity::operator()(const double* x, int n, int d, double* out) const {
  HERD_REQUIRE(d == d_, "MlpLogDensity: d is {}, but the surrogate has {}", d, d_);
  if (n <= 0) return;
  const auto nd = static_cast<std::size_t>(n) * static_cast<std::size_t>(d);
  in_.assign(x, x + nd);
  if (!shift_.empty() || !width_.empty())
    for (std::size_t q = 0; q < nd; ++q) {
      const std::size_t j = q % static_cast<std::size_t>(d);
      in_[q] = (in_[q] - (shift_.empty() ? 0.0 : shift_[j])) / (width_.empty() ? 1.0 : width_[j]);
    }
  const nn::DType dt = model_->parameters().front()->value.dtype();
  const nn::Tensor xin = nn::Tensor::from_vector(nn::Shape{n, d}, in_, dt);
  const nn::Tensor& y = model_->forward(xin);
  for (int i = 0; i < n; ++i) {
    double v = scale_ * y.item(i) + offset_;
    if (prior_) v += prior_(x + static_cast<std::size_t>(i) * d, d);
    out[i] = v;
  }
  evals_ += n;
}

}  // namespace herd::mcmc
