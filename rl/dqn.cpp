#include "herd/rl/dqn.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <span>
#include <sstream>

#include "herd/core/config.hpp"
#include "herd/core/error.hpp"
#if HERD_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "cuda_memory.hpp"
#include "herd/core/cuda/cuda_check.hpp"
#include "herd/nn/cuda/kernels.hpp"
#include "herd/rl/cuda/dqn_kernels.hpp"
#endif

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
                   std::int64_t num_actions, bool dueling, const RngStream& rng, std::uint64_t init_index,
                   Device device)
    : nn::Module(nn::DType::kFloat32, device),
      encoder_(std::move(encoder)),
      obs_shape_(std::move(obs_shape)),
      features_(features),
      actions_(num_actions),
      dueling_(dueling) {
  HERD_REQUIRE(encoder_ != nullptr, "rl::QNetwork: the encoder is null");
  HERD_REQUIRE(features >= 1, "rl::QNetwork: features is {}, but must be >= 1", features);
  HERD_REQUIRE(num_actions >= 1, "rl::QNetwork: num_actions is {}, but must be >= 1", num_actions);
  HERD_REQUIRE(!obs_shape_.empty() && obs_shape_.size() <= 3,
               "rl::QNetwork: obs_shape has {} dimensions, but must have 1 to 3", obs_shape_.size());
  HERD_REQUIRE(encoder_->device() == device, "rl::QNetwork: the encoder is on {}, but the network on {}",
               encoder_->device().str(), device.str());
  encoder_->set_input_grad(false);  // observations are data
  register_module("encoder", encoder_.get());
  head_ = std::make_unique<nn::Linear>(features, num_actions, nn::DType::kFloat32, device, true, rng, init_index);
  if (dueling_) {
    value_ = std::make_unique<nn::Linear>(features, 1, nn::DType::kFloat32, device, true, rng, init_index + 1);
    register_module("value", value_.get());
    register_module("advantage", head_.get());
  } else {
    register_module("q", head_.get());
  }
}

#if HERD_HAVE_CUDA
struct QNetwork::ActingBuffers {
  detail::PinnedMemory in, out;  // observations up, actions down
  nn::Tensor dev_in, dev_out;    // [n, obs_dim] floats; [n] int64 argmax (in float64 slots)
};
#else
struct QNetwork::ActingBuffers {};
#endif

QNetwork::~QNetwork() = default;

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
  HERD_REQUIRE(h.ndim() == 2 && h.dim(1) == features_,
               "rl::QNetwork::forward: the encoder gave {}, but the heads take [n, {}]", h.shape().str(), features_);
  const nn::Tensor& a = head_->forward(h);
  if (!dueling_) return a;
  const nn::Tensor& v = value_->forward(h);
  q_.resize(a.shape(), nn::DType::kFloat32, device());
#if HERD_HAVE_CUDA
  if (device().is_cuda()) {
    cuda::dueling_forward(a.data<float>(), v.data<float>(), q_.data<float>(), n, actions_,
                          nn::compute_stream(device()));
    return q_;
  }
#endif
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
  grad_adv_.resize(grad_q.shape(), nn::DType::kFloat32, device());
  grad_val_.resize(nn::Shape{n, 1}, nn::DType::kFloat32, device());
#if HERD_HAVE_CUDA
  if (device().is_cuda()) {
    cudaStream_t st = nn::compute_stream(device());
    cuda::dueling_backward(grad_q.data<float>(), grad_adv_.data<float>(), grad_val_.data<float>(), n, A, st);
    const nn::Tensor& dh_a = head_->backward(grad_adv_);
    grad_h_.resize(dh_a.shape(), nn::DType::kFloat32, device());
    grad_h_.copy_from_async(dh_a, st);
    const nn::Tensor& dh_v = value_->backward(grad_val_);
    nn::cuda::add<float>(grad_h_.data<float>(), dh_v.data<float>(), grad_h_.data<float>(), grad_h_.numel(), st);
    encoder_->backward(grad_h_);
    return none_;
  }
#endif
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
    HERD_REQUIRE(mine[k].name == theirs[k].name && dst.shape() == src.shape() && dst.device() == src.device(),
                 "rl::QNetwork::update_from: parameter {} {} on {} differs from the online network's {} {} on {}",
                 mine[k].name, dst.shape().str(), dst.device().str(), theirs[k].name, src.shape().str(),
                 src.device().str());
#if HERD_HAVE_CUDA
    if (dst.is_cuda()) {
      cudaStream_t st = nn::compute_stream(dst.device());
      if (tau == 1.0) dst.copy_from_async(src, st);
      else cuda::polyak_update(dst.data<float>(), src.data<float>(), src.numel(), keep, t, st);
      continue;
    }
#endif
    float* d = dst.data<float>();
    const float* s = src.data<float>();
    if (tau == 1.0) std::copy(s, s + src.numel(), d);
    else
      for (std::int64_t i = 0; i < src.numel(); ++i) d[i] = d[i] * keep + t * s[i];
  }
}

void QNetwork::greedy_actions(const float* obs, std::int64_t n, std::int64_t* actions) {
  const std::int64_t D = std::accumulate(obs_shape_.begin(), obs_shape_.end(), std::int64_t{1}, std::multiplies<>());
  const std::int64_t A = actions_;
  if (device().is_cpu()) {
    act_in_.resize(nn::Shape{n, D}, nn::DType::kFloat32);
    std::copy(obs, obs + n * D, act_in_.data<float>());
    const float* q = forward(act_in_).data<float>();
    for (std::int64_t i = 0; i < n; ++i) actions[i] = std::max_element(q + i * A, q + (i + 1) * A) - (q + i * A);
    return;
  }
#if HERD_HAVE_CUDA
  if (!acting_) acting_ = std::make_unique<ActingBuffers>();
  ActingBuffers& b = *acting_;
  cudaStream_t st = nn::compute_stream(device());
  const auto in_bytes = static_cast<std::size_t>(n * D) * sizeof(float);
  const auto out_bytes = static_cast<std::size_t>(n) * sizeof(std::int64_t);
  b.in.reserve(in_bytes);
  b.out.reserve(out_bytes);
  std::memcpy(b.in.p, obs, in_bytes);  // the previous call waited for its copies: free
  b.dev_in.resize(nn::Shape{n, D}, nn::DType::kFloat32, device());
  HERD_CUDA_CHECK(cudaMemcpyAsync(b.dev_in.raw(), b.in.p, in_bytes, cudaMemcpyHostToDevice, st));
  const nn::Tensor& q = forward(b.dev_in);
  b.dev_out.resize(nn::Shape{n}, nn::DType::kFloat64, device());  // int64 indices in 8-byte slots
  nn::cuda::argmax_rows<float>(q.data<float>(), static_cast<std::int64_t*>(b.dev_out.raw()), n, A, st);
  HERD_CUDA_CHECK(cudaMemcpyAsync(b.out.p, b.dev_out.raw(), out_bytes, cudaMemcpyDeviceToHost, st));
  nn::synchronize(device());
  std::memcpy(actions, b.out.p, out_bytes);
#endif
}

// ---------------------------------------------------------------------------------------
// Dqn

#if HERD_HAVE_CUDA

// The batch upload `up` (float32 elements; byte layout: obs [n, D] and next_obs [n, D]
// floats, then from an 8-byte boundary actions (int64), returns, discounts, weights
// (double) [n] each, then the argmax scratch (int64 [n], not uploaded)); the read-back
// `back` (doubles: loss, q_mean, target_mean, the squared gradient norm, the skip flag
// (an int32 in the fifth slot), then the TD errors [n]).
struct Dqn::DeviceState {
  nn::Tensor up, back;
  detail::PinnedMemory up_host, back_host;
};
#else
struct Dqn::DeviceState {};
#endif

Dqn::~Dqn() = default;

Dqn::Dqn(QNetwork& online, QNetwork& target, const DqnOptions& o, Communicator* comm, Communicator* grad_comm)
    : online_(online), target_(target), opt_options_(o), params_(online.named_parameters()) {
  HERD_REQUIRE(online.device() == target.device(), "rl::Dqn: the online network is on {}, but the target on {}",
               online.device().str(), target.device().str());
  HERD_REQUIRE(o.learning_rate > 0, "rl::Dqn: learning_rate is {}, but must be > 0", o.learning_rate);
  HERD_REQUIRE(o.batch_size >= 1, "rl::Dqn: batch_size is {}, but must be >= 1", o.batch_size);
  HERD_REQUIRE(o.huber_delta > 0, "rl::Dqn: huber_delta is {}, but must be > 0", o.huber_delta);
  if (o.optimizer == OptimizerKind::kAdam)
    opt_ = std::make_unique<nn::Adam>(params_, o.learning_rate, 0.9, 0.999, o.optimizer_eps);
  else
    opt_ =
        std::make_unique<nn::RmsProp>(params_, o.learning_rate, o.rmsprop_alpha, o.optimizer_eps, o.rmsprop_centered);
  if (comm && comm->size() > 1) {
    HERD_REQUIRE(!grad_comm || grad_comm->size() == comm->size(),
                 "rl::Dqn: grad_comm has {} ranks, but comm has {}; they must be the same ranks", grad_comm->size(),
                 comm->size());
    // Networks on a CUDA device average their gradients over an NCCL communicator on that
    // GPU (nn::DataParallel refuses a host communicator for them).
    HERD_REQUIRE(online.device().is_cpu() || grad_comm,
                 "rl::Dqn: data-parallel training over {} ranks on {} needs a device communicator "
                 "(grad_comm: an NcclCommunicator on that GPU)",
                 comm->size(), online.device().str());
    comm_ = comm;
    dp_ = std::make_unique<nn::DataParallel>(online_, grad_comm ? *grad_comm : *comm_);
  }
}

std::vector<double> Dqn::targets(const ReplaySample& b) {
  const auto n = static_cast<std::int64_t>(b.actions.size());
  const auto D = static_cast<std::int64_t>(b.next_obs.size()) / std::max<std::int64_t>(n, 1);
  const std::int64_t A = target_.num_actions();
  next_t_.resize(nn::Shape{n, D}, nn::DType::kFloat32);
  std::copy(b.next_obs.begin(), b.next_obs.end(), next_t_.data<float>());
  const Device dev = online_.device();
  const nn::Tensor next = dev.is_cpu() ? next_t_ : next_t_.to(dev);
  // Host values of a network's output (a copy from a CUDA device).
  auto host = [&](const nn::Tensor& t) { return dev.is_cpu() ? t : t.to(Device::cpu()); };
  std::vector<std::int64_t> best(static_cast<std::size_t>(n));
  if (opt_options_.double_q) {
    const nn::Tensor q_online = host(online_.forward(next));
    const float* qo = q_online.data<float>();
    for (std::int64_t i = 0; i < n; ++i)
      best[static_cast<std::size_t>(i)] = std::max_element(qo + i * A, qo + (i + 1) * A) - (qo + i * A);
  }
  const nn::Tensor q_target = host(target_.forward(next));
  const float* qt = q_target.data<float>();
  std::vector<double> y(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    const auto k = static_cast<std::size_t>(i);
    if (!opt_options_.double_q) best[k] = std::max_element(qt + i * A, qt + (i + 1) * A) - (qt + i * A);
    y[k] = b.returns[k] + b.discounts[k] * static_cast<double>(qt[i * A + best[k]]);
  }
  return y;
}

DqnStepStats Dqn::train_step(const ReplaySample& b, std::vector<double>* td_errors) {
  const auto n = static_cast<std::int64_t>(b.actions.size());
  const std::int64_t A = online_.num_actions();
  HERD_REQUIRE(n >= 1 && b.obs.size() == b.next_obs.size() && b.obs.size() % static_cast<std::size_t>(n) == 0 &&
                   b.returns.size() == b.actions.size() && b.discounts.size() == b.actions.size() &&
                   b.weights.size() == b.actions.size(),
               "rl::Dqn::train_step: the batch's arrays are not sized for {} samples", n);
  for (std::int64_t i = 0; i < n; ++i) {
    const std::int64_t a = b.actions[static_cast<std::size_t>(i)];
    HERD_REQUIRE(a >= 0 && a < A, "rl::Dqn::train_step: action {} of sample {} is outside [0, {})", a, i, A);
  }
  if (online_.device().is_cuda()) return train_step_device(b, td_errors);
  const std::vector<double> y = targets(b);
  const auto D = static_cast<std::int64_t>(b.obs.size()) / n;
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
  if (observer_) observed_td_.resize(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) {
    const auto k = static_cast<std::size_t>(i);
    const std::int64_t a = b.actions[k];
    const double qsa = static_cast<double>(pq[i * A + a]);
    const double d = qsa - y[k];
    const double ad = std::abs(d);
    const double w = b.weights[k];
    if (opt_options_.loss == DqnLoss::kMse) {
      st.loss += w * (d * d);
      g[i * A + a] = static_cast<float>(w * (2.0 * d) / static_cast<double>(n));
    } else {
      st.loss += w * (ad < delta ? 0.5 * d * d : delta * (ad - 0.5 * delta));
      g[i * A + a] = static_cast<float>(w * std::clamp(d, -delta, delta) / static_cast<double>(n));
    }
    st.q_mean += qsa;
    st.target_mean += y[k];
    if (td_errors) (*td_errors)[k] = d;
    if (observer_) observed_td_[k] = d;
  }
  st.loss /= static_cast<double>(n);
  st.q_mean /= static_cast<double>(n);
  st.target_mean /= static_cast<double>(n);
  const auto observe = [&] {
    if (observer_) observer_({&b, y, observed_td_, st});
  };
  const auto not_finite = [](double loss) {
    std::ostringstream m;
    m << "rl::Dqn::train_step: the TD loss is " << loss << " (not finite)";
    return NumericalError(m.str());
  };
  opt_->zero_grad();
  if (!dp_) {
    if (!std::isfinite(st.loss)) throw not_finite(st.loss);
    online_.backward(grad_q_);
    st.grad_norm = opt_options_.max_grad_norm > 0 ? nn::clip_grad_norm(params_, opt_options_.max_grad_norm)
                                                  : std::numeric_limits<double>::quiet_NaN();
    opt_->step();
    observe();
    return st;
  }
  // Data-parallel: one collective per step. A rank whose loss is not finite sends NaN
  // gradients, so the averaged gradient, the same on every rank, is not finite on every
  // rank: all stop here, before the optimizer step, without a collective of their own.
  const bool finite = std::isfinite(st.loss);
  if (!finite) grad_q_.fill(std::numeric_limits<double>::quiet_NaN());
  online_.backward(grad_q_);
  dp_->finish();
  double norm = 0;
  if (opt_options_.max_grad_norm > 0) {
    norm = st.grad_norm = nn::clip_grad_norm(params_, opt_options_.max_grad_norm);
  } else {
    st.grad_norm = std::numeric_limits<double>::quiet_NaN();
    for (const auto& p : params_)
      for (const double g : p.param->grad.to_vector()) norm += g * g;
  }
  if (!finite) throw not_finite(st.loss);
  if (!std::isfinite(norm))
    throw NumericalError(
        "rl::Dqn::train_step: the gradient averaged over the ranks is not finite (the TD loss of "
        "another rank is not finite, or a gradient overflowed)");
  opt_->step();
  observe();
  return st;
}

DqnStepStats Dqn::train_step_device(const ReplaySample& b, std::vector<double>* td_errors) {
#if HERD_HAVE_CUDA
  const Device dev = online_.device();
  const auto n = static_cast<std::int64_t>(b.actions.size());
  const auto D = static_cast<std::int64_t>(b.obs.size()) / n;
  const std::int64_t A = online_.num_actions();
  const auto N = static_cast<std::size_t>(n), ND = N * static_cast<std::size_t>(D);
  if (!dev_) dev_ = std::make_unique<DeviceState>();
  DeviceState& d = *dev_;
  cudaStream_t st = nn::compute_stream(dev);
  // Layout (bytes) of the upload; the argmax scratch follows it.
  const std::size_t obs_at = 0, next_at = ND * sizeof(float);
  const std::size_t act_at = (2 * ND * sizeof(float) + 7) / 8 * 8;
  const std::size_t ret_at = act_at + 8 * N, disc_at = ret_at + 8 * N, w_at = disc_at + 8 * N;
  const std::size_t up_bytes = w_at + 8 * N, best_at = up_bytes;
  const auto up_floats = static_cast<std::int64_t>((best_at + 8 * N) / sizeof(float));
  d.up.resize(nn::Shape{up_floats}, nn::DType::kFloat32, dev);
  d.back.resize(nn::Shape{5 + n}, nn::DType::kFloat64, dev);
  d.up_host.reserve(up_bytes);
  d.back_host.reserve(static_cast<std::size_t>(5 + n) * sizeof(double));
  // Pack and upload (the previous step's read-back waited for the stream: the pinned
  // buffer is free).
  std::memcpy(d.up_host.at<float>(obs_at), b.obs.data(), ND * sizeof(float));
  std::memcpy(d.up_host.at<float>(next_at), b.next_obs.data(), ND * sizeof(float));
  std::memcpy(d.up_host.at<std::int64_t>(act_at), b.actions.data(), 8 * N);
  std::memcpy(d.up_host.at<double>(ret_at), b.returns.data(), 8 * N);
  std::memcpy(d.up_host.at<double>(disc_at), b.discounts.data(), 8 * N);
  std::memcpy(d.up_host.at<double>(w_at), b.weights.data(), 8 * N);
  char* up = static_cast<char*>(d.up.raw());
  HERD_CUDA_CHECK(cudaMemcpyAsync(up, d.up_host.p, up_bytes, cudaMemcpyHostToDevice, st));
  const nn::Tensor obs = d.up.slice(0, static_cast<std::int64_t>(ND)).reshape(nn::Shape{n, D});
  const nn::Tensor next =
      d.up.slice(static_cast<std::int64_t>(ND), static_cast<std::int64_t>(2 * ND)).reshape(nn::Shape{n, D});
  auto* best = reinterpret_cast<std::int64_t*>(up + best_at);
  if (opt_options_.double_q) nn::cuda::argmax_rows<float>(online_.forward(next).data<float>(), best, n, A, st);
  const nn::Tensor& q_next = target_.forward(next);
  if (!opt_options_.double_q) nn::cuda::argmax_rows<float>(q_next.data<float>(), best, n, A, st);
  const nn::Tensor& q = online_.forward(obs);
  grad_q_.resize(nn::Shape{n, A}, nn::DType::kFloat32, dev);
  double* back = d.back.data<double>();
  auto* bad = reinterpret_cast<std::int32_t*>(back + 4);
  cuda::dqn_td_loss(q.data<float>(), q_next.data<float>(), best, reinterpret_cast<const std::int64_t*>(up + act_at),
                    reinterpret_cast<const double*>(up + ret_at), reinterpret_cast<const double*>(up + disc_at),
                    reinterpret_cast<const double*>(up + w_at), n, A, opt_options_.loss == DqnLoss::kMse,
                    opt_options_.huber_delta, grad_q_.data<float>(), back + 5, back, bad, st);
  opt_->zero_grad();
  if (dp_) {
    // Data-parallel: a rank whose loss is not finite sends NaN gradients, so the average,
    // the same bits on every rank, is not finite on every rank (the CPU path's rule).
    cuda::fill_if_flagged(bad, grad_q_.data<float>(), grad_q_.numel(), std::numeric_limits<float>::quiet_NaN(), st);
  }
  online_.backward(grad_q_);
  if (dp_) dp_->finish();  // NCCL all-reduces ordered on the streams: no host wait
  if (opt_options_.max_grad_norm > 0) {
    nn::clip_grad_norm_on_device(params_, opt_options_.max_grad_norm, back + 3);
  } else if (dp_) {
    HERD_CUDA_CHECK(cudaMemsetAsync(back + 3, 0, sizeof(double), st));
    for (const auto& p : params_)
      nn::cuda::sum_squares<float>(p.param->grad.data<float>(), back + 3, p.param->grad.numel(), st);
  }
  // Every rank vetoes the step when the averaged gradient is not finite (its own loss, or
  // another rank's NaN gradients).
  if (dp_) cuda::flag_if_not_finite(back + 3, bad, st);
  opt_->set_skip_flag(bad);  // a non-finite loss leaves the parameters unchanged
  opt_->step();
  opt_->set_skip_flag(nullptr);
  HERD_CUDA_CHECK(cudaMemcpyAsync(d.back_host.p, back, static_cast<std::size_t>(5 + n) * sizeof(double),
                                  cudaMemcpyDeviceToHost, st));
  nn::synchronize(dev);
  const double* h = d.back_host.at<double>(0);
  DqnStepStats s;
  s.loss = h[0];
  s.q_mean = h[1];
  s.target_mean = h[2];
  s.grad_norm = opt_options_.max_grad_norm > 0 ? std::sqrt(h[3]) : std::numeric_limits<double>::quiet_NaN();
  if (td_errors) td_errors->assign(h + 5, h + 5 + n);
  if (*d.back_host.at<std::int32_t>(4 * sizeof(double)) != 0) {
    if (dp_ && std::isfinite(s.loss))
      throw NumericalError(
          "rl::Dqn::train_step: the gradient averaged over the ranks is not finite (the TD loss of "
          "another rank is not finite, or a gradient overflowed)");
    std::ostringstream m;
    m << "rl::Dqn::train_step: the TD loss is " << s.loss << " (not finite)";
    throw NumericalError(m.str());
  }
  return s;
#else
  (void)b;
  (void)td_errors;
  throw InputError(
      "rl::Dqn::train_step: the networks are on a CUDA device, but this build of herd has no CUDA support");
#endif
}

}  // namespace herd::rl
