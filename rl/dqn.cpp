#include "herd/rl/dqn.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

#include "herd/core/error.hpp"

namespace herd::rl {

double exploration_epsilon(std::int64_t steps, std::int64_t total_steps, double initial, double final_eps,
                           double fraction) {
  const double progress = total_steps > 0 ? static_cast<double>(steps) / static_cast<double>(total_steps) : 1.0;
  if (!(fraction > 0.0) || progress > fraction) return final_eps;
  return initial + progress * (final_eps - initial) / fraction;
}

// ---------------------------------------------------------------------------------------
// QNetwork

QNetwork::QNetwork(std::unique_ptr<nn::Module> encoder, std::int64_t features, std::vector<std::int64_t> obs_shape,
                   std::int64_t num_actions, bool dueling, const RngStream& rng, std::uint64_t init_index)
    : nn::Module(nn::DType::kFloat32, Device::cpu()),
      encoder_(std::move(encoder)),
      obs_shape_(std::move(obs_shape)),
      features_(features),
      actions_(num_actions),
      dueling_(dueling) {
  HERD_REQUIRE(encoder_ != nullptr, "rl::QNetwork: the encoder is null");
  HERD_REQUIRE(features >= 1, "rl::QNetwork: features is {}, but must be >= 1", features);
  HERD_REQUIRE(num_actions >= 1, "rl::QNetwork: num_actions is {}, but must be >= 1", num_actions);
  HERD_REQUIRE(!obs_shape_.empty() && obs_shape_.size() <= 3, "rl::QNetwork: obs_shape has {} dimensions, but must have 1 to 3",
               obs_shape_.size());
  encoder_->set_input_grad(false);  // observations are data
  register_module("encoder", encoder_.get());
  head_ = std::make_unique<nn::Linear>(features, num_actions, nn::DType::kFloat32, Device::cpu(), true, rng,
                                       init_index);
  if (dueling_) {
    value_ = std::make_unique<nn::Linear>(features, 1, nn::DType::kFloat32, Device::cpu(), true, rng, init_index + 1);
    register_module("value", value_.get());
    register_module("advantage", head_.get());
  } else {
    register_module("q", head_.get());
  }
}

nn::Linear& QNetwork::value_head() {
  HERD_CHECK(value_ != nullptr, "rl::QNetwork::value_head: the network is not dueling");
  return *value_;
}

const nn::Tensor& QNetwork::forward(const nn::Tensor& obs) {
  check_input(obs, -1, "rl::QNetwork::forward");
  const std::int64_t n = obs.dim(0);
  std::vector<std::int64_t> dims = {n};
  dims.insert(dims.end(), obs_shape_.begin(), obs_shape_.end());
  in_ = obs.reshape(nn::Shape(std::span<const std::int64_t>(dims)));
  const nn::Tensor& h = encoder_->forward(in_);
  HERD_REQUIRE(h.ndim() == 2 && h.dim(1) == features_, "rl::QNetwork::forward: the encoder gave {}, but the heads take [n, {}]",
               h.shape().str(), features_);
  const nn::Tensor& a = head_->forward(h);
  if (!dueling_) return a;
  const nn::Tensor& v = value_->forward(h);
  q_.resize(a.shape(), nn::DType::kFloat32);
  const float* pa = a.data<float>();
  const float* pv = v.data<float>();
  float* pq = q_.data<float>();
  const std::int64_t A = actions_;
  for (std::int64_t i = 0; i < n; ++i) {
    double mean = 0;
    for (std::int64_t j = 0; j < A; ++j) mean += pa[i * A + j];
    mean /= static_cast<double>(A);
    for (std::int64_t j = 0; j < A; ++j)
      pq[i * A + j] = static_cast<float>(static_cast<double>(pv[i]) + static_cast<double>(pa[i * A + j]) - mean);
  }
  return q_;
}

const nn::Tensor& QNetwork::backward(const nn::Tensor& grad_q) {
  if (!dueling_) {
    encoder_->backward(head_->backward(grad_q));
    return none_;
  }
  // dQ_j/dV = 1, dQ_j/dA_k = [j == k] - 1/A.
  const std::int64_t n = grad_q.dim(0), A = actions_;
  grad_adv_.resize(grad_q.shape(), nn::DType::kFloat32);
  grad_val_.resize(nn::Shape{n, 1}, nn::DType::kFloat32);
  const float* g = grad_q.data<float>();
  float* ga = grad_adv_.data<float>();
  float* gv = grad_val_.data<float>();
  for (std::int64_t i = 0; i < n; ++i) {
    double s = 0;
    for (std::int64_t j = 0; j < A; ++j) s += g[i * A + j];
    gv[i] = static_cast<float>(s);
    const double mean = s / static_cast<double>(A);
    for (std::int64_t j = 0; j < A; ++j) ga[i * A + j] = static_cast<float>(static_cast<double>(g[i * A + j]) - mean);
  }
  const nn::Tensor& dh_a = head_->backward(grad_adv_);
  grad_h_.resize(dh_a.shape(), nn::DType::kFloat32);
  std::copy(dh_a.data<float>(), dh_a.data<float>() + dh_a.numel(), grad_h_.data<float>());
  const nn::Tensor& dh_v = value_->backward(grad_val_);
  float* gh = grad_h_.data<float>();
  const float* pv = dh_v.data<float>();
  for (std::int64_t k = 0; k < grad_h_.numel(); ++k) gh[k] += pv[k];
  encoder_->backward(grad_h_);
  return none_;
}

void QNetwork::update_from(QNetwork& online, double tau) {
  if (!(tau > 0.0 && tau <= 1.0)) {
    std::ostringstream m;
    m << "rl::QNetwork::update_from: tau is " << tau << ", but must be in (0, 1]";
    throw InputError(m.str());
  }
  auto mine = named_parameters();
  auto theirs = online.named_parameters();
  HERD_REQUIRE(mine.size() == theirs.size(), "rl::QNetwork::update_from: {} parameters here, {} in the online network",
               mine.size(), theirs.size());
  const auto t = static_cast<float>(tau), keep = static_cast<float>(1.0 - tau);
  for (std::size_t k = 0; k < mine.size(); ++k) {
    nn::Tensor& dst = mine[k].param->value;
    const nn::Tensor& src = theirs[k].param->value;
    HERD_REQUIRE(mine[k].name == theirs[k].name && dst.shape() == src.shape(),
                 "rl::QNetwork::update_from: parameter {} {} differs from the online network's {} {}", mine[k].name,
                 dst.shape().str(), theirs[k].name, src.shape().str());
    float* d = dst.data<float>();
    const float* s = src.data<float>();
    if (tau == 1.0) std::copy(s, s + src.numel(), d);
    else
      for (std::int64_t i = 0; i < src.numel(); ++i) d[i] = d[i] * keep + t * s[i];
  }
}

// ---------------------------------------------------------------------------------------
// Dqn

Dqn::Dqn(QNetwork& online, QNetwork& target, const DqnOptions& o)
    : online_(online), target_(target), opt_options_(o), params_(online.named_parameters()) {
  HERD_REQUIRE(o.learning_rate > 0, "rl::Dqn: learning_rate is {}, but must be > 0", o.learning_rate);
  HERD_REQUIRE(o.batch_size >= 1, "rl::Dqn: batch_size is {}, but must be >= 1", o.batch_size);
  HERD_REQUIRE(o.huber_delta > 0, "rl::Dqn: huber_delta is {}, but must be > 0", o.huber_delta);
  if (o.optimizer == OptimizerKind::kAdam)
    opt_ = std::make_unique<nn::Adam>(params_, o.learning_rate, 0.9, 0.999, o.optimizer_eps);
  else
    opt_ = std::make_unique<nn::RmsProp>(params_, o.learning_rate, o.rmsprop_alpha, o.optimizer_eps,
                                         o.rmsprop_centered);
}

std::vector<double> Dqn::targets(const ReplaySample& b) {
  const auto n = static_cast<std::int64_t>(b.actions.size());
  const auto D = static_cast<std::int64_t>(b.next_obs.size()) / std::max<std::int64_t>(n, 1);
  const std::int64_t A = target_.num_actions();
  next_t_.resize(nn::Shape{n, D}, nn::DType::kFloat32);
  std::copy(b.next_obs.begin(), b.next_obs.end(), next_t_.data<float>());
  std::vector<std::int64_t> best(static_cast<std::size_t>(n));
  if (opt_options_.double_q) {
    const float* qo = online_.forward(next_t_).data<float>();
    for (std::int64_t i = 0; i < n; ++i)
      best[static_cast<std::size_t>(i)] = std::max_element(qo + i * A, qo + (i + 1) * A) - (qo + i * A);
  }
  const float* qt = target_.forward(next_t_).data<float>();
  std::vector<double> y(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    const auto k = static_cast<std::size_t>(i);
    if (!opt_options_.double_q) best[k] = std::max_element(qt + i * A, qt + (i + 1) * A) - (qt + i * A);
    y[k] = b.returns[k] + b.discounts[k] * static_cast<double>(qt[i * A + best[k]]);
  }
  return y;
}

DqnStepStats Dqn::train_step(const ReplaySample& b, std::vector<double>* td_errors) {
  const std::vector<double> y = targets(b);
  const auto n = static_cast<std::int64_t>(b.actions.size());
  const auto D = static_cast<std::int64_t>(b.obs.size()) / std::max<std::int64_t>(n, 1);
  const std::int64_t A = online_.num_actions();
  obs_t_.resize(nn::Shape{n, D}, nn::DType::kFloat32);
  std::copy(b.obs.begin(), b.obs.end(), obs_t_.data<float>());
  const nn::Tensor& q = online_.forward(obs_t_);
  const float* pq = q.data<float>();
  grad_q_.resize(nn::Shape{n, A}, nn::DType::kFloat32);
  grad_q_.zero();
  float* g = grad_q_.data<float>();
  const double delta = opt_options_.huber_delta;
  DqnStepStats st;
  if (td_errors) td_errors->resize(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    const auto k = static_cast<std::size_t>(i);
    const std::int64_t a = b.actions[k];
    HERD_REQUIRE(a >= 0 && a < A, "rl::Dqn::train_step: action {} of sample {} is outside [0, {})", a, i, A);
    const double qsa = static_cast<double>(pq[i * A + a]);
    const double d = qsa - y[k];
    const double ad = std::abs(d);
    const double w = b.weights[k];
    st.loss += w * (ad < delta ? 0.5 * d * d : delta * (ad - 0.5 * delta));
    g[i * A + a] = static_cast<float>(w * std::clamp(d, -delta, delta) / static_cast<double>(n));
    st.q_mean += qsa;
    st.target_mean += y[k];
    if (td_errors) (*td_errors)[k] = d;
  }
  st.loss /= static_cast<double>(n);
  st.q_mean /= static_cast<double>(n);
  st.target_mean /= static_cast<double>(n);
  if (!std::isfinite(st.loss)) {
    std::ostringstream m;
    m << "rl::Dqn::train_step: the TD loss is " << st.loss << " (not finite)";
    throw NumericalError(m.str());
  }
  opt_->zero_grad();
  online_.backward(grad_q_);
  st.grad_norm = opt_options_.max_grad_norm > 0 ? nn::clip_grad_norm(params_, opt_options_.max_grad_norm)
                                                : std::numeric_limits<double>::quiet_NaN();
  opt_->step();
  return st;
}

}  // namespace herd::rl
