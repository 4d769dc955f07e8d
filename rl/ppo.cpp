#include "herd/rl/ppo.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>

#include "herd/core/config.hpp"
#include "herd/core/error.hpp"
#include "herd/core/rng.hpp"
#include "herd/rl/advantage.hpp"

namespace herd::rl {

Ppo::Ppo(ActorCriticAgent& agent, const PpoOptions& o, Communicator* comm, Communicator* grad_comm)
    : agent_(agent), opt_options_(o), comm_(comm && comm->size() > 1 ? comm : nullptr) {
  if (!(o.learning_rate > 0)) throw InputError("rl::Ppo: learning_rate must be > 0");
  if (!(o.clip_range > 0)) throw InputError("rl::Ppo: clip_range must be > 0");
  if (o.epochs < 1) throw InputError("rl::Ppo: epochs must be >= 1");
  if (o.lr_warmup_iterations < 0) throw InputError("rl::Ppo: lr_warmup_iterations must be >= 0");
  if (!(o.lr_warmup_start > 0 && o.lr_warmup_start <= 1))
    throw InputError("rl::Ppo: lr_warmup_start is " + std::to_string(o.lr_warmup_start) + ", but must be in (0, 1]");
  if (o.minibatch_size < 0) throw InputError("rl::Ppo: minibatch_size must be >= 0");
  if (comm_ && o.minibatch_size % comm_->size() != 0)
    throw InputError("rl::Ppo: algo.minibatch_size is " + std::to_string(o.minibatch_size) + ", but with " +
                     std::to_string(comm_->size()) + " ranks it must be divisible by " + std::to_string(comm_->size()) +
                     " (each rank takes an equal share)");
  if (comm_ && grad_comm && grad_comm->size() != comm_->size())
    throw InputError("rl::Ppo: grad_comm has " + std::to_string(grad_comm->size()) + " ranks, but comm has " +
                     std::to_string(comm_->size()) + "; they must be the same ranks");
  if (comm_) dp_ = std::make_unique<nn::DataParallel>(agent.module(), grad_comm ? *grad_comm : *comm_);
  params_ = agent.named_parameters();
  if (o.optimizer == OptimizerKind::kAdam)
    opt_ = std::make_unique<nn::Adam>(params_, o.learning_rate, 0.9, 0.999, o.optimizer_eps);
  else opt_ = std::make_unique<nn::RmsProp>(params_, o.learning_rate, 0.99, o.optimizer_eps);
  device_update_ = HERD_HAVE_CUDA && agent.device().is_cuda() && !comm_;
}

UpdateStats Ppo::learn(RolloutBuffer& buf, double gamma, double lambda, double progress, std::int64_t iteration) {
  if (device_update_) {
    HERD_REQUIRE(gamma >= 0.0 && gamma <= 1.0, "rl::Ppo::learn: gamma is {}, but must be in [0, 1]", gamma);
    HERD_REQUIRE(lambda >= 0.0 && lambda <= 1.0, "rl::Ppo::learn: lambda is {}, but must be in [0, 1]", lambda);
    return update_on_device(buf, true, gamma, lambda, progress, iteration);
  }
  buf.compute_advantages(gamma, lambda);
  return update(buf, progress, iteration);
}

void Ppo::draw_permutations(std::uint32_t n, std::uint32_t mb, std::int64_t iteration) {
  const PpoOptions& o = opt_options_;
  const std::size_t E = static_cast<std::size_t>(o.epochs);
  perm_.resize(E * n);
  const RngStream shuffle(o.seed, comm_ ? static_cast<std::uint32_t>(comm_->rank()) : 0u, RngPurpose::kShuffle);
  for (std::size_t e = 0; e < E; ++e) {
    std::uint32_t* p = perm_.data() + e * n;
    for (std::uint32_t i = 0; i < n; ++i) p[i] = i;
    if (mb < n) {
      RngCursor c = shuffle.at(static_cast<std::uint64_t>(iteration) * static_cast<std::uint64_t>(o.epochs) + e);
      for (std::uint32_t i = n - 1; i > 0; --i) std::swap(p[i], p[c.below(i + 1)]);
    }
  }
}

Ppo::~Ppo() = default;

MinibatchLoss Ppo::minibatch_loss(const RolloutBuffer& buf, std::span<const std::uint32_t> idx, double clip,
                                  bool accumulate_grad) {
  const std::size_t n = idx.size(), D = buf.obs_dim, A = buf.action_dim;
  obs_.resize(n * D);
  act_.resize(n * A);
  adv_.resize(n);
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t j = idx[i];
    std::memcpy(obs_.data() + i * D, buf.obs.data() + j * D, D * sizeof(float));
    std::memcpy(act_.data() + i * A, buf.actions.data() + j * A, A * sizeof(double));
    adv_[i] = buf.advantages[j];
  }
  if (opt_options_.normalize_advantage && comm_) {
    // Statistics of the union minibatch over ranks (see the class comment); `update`
    // all-reduces those of all its minibatches at once beforehand.
    double s[3] = {static_cast<double>(n), 0.0, 0.0};
    if (adv_stats_) {
      std::copy(adv_stats_, adv_stats_ + 3, s);
    } else {
      for (std::size_t i = 0; i < n; ++i) {
        s[1] += adv_[i];
        s[2] += static_cast<double>(adv_[i]) * adv_[i];
      }
      comm_->allreduce(s, 3, DataType::kFloat64, ReduceOp::kSum);
    }
    // A union minibatch of one sample is left as is (its normalised advantage would be 0
    // and the policy would never change), as Stable-Baselines3 does.
    if (s[0] > 1.0) {
      const double mean = s[1] / s[0];
      const double var = std::max(0.0, s[2] / s[0] - mean * mean);
      const double inv = 1.0 / (std::sqrt(var) + 1e-8);
      for (std::size_t i = 0; i < n; ++i) adv_[i] = static_cast<float>((adv_[i] - mean) * inv);
    }
  } else if (opt_options_.normalize_advantage && n > 1) {
    normalize_advantages(adv_.data(), n);
  }
  agent_.evaluate(obs_.data(), act_.data(), n);
  const auto& logp = agent_.log_probs();
  const auto& ent = agent_.entropies();
  const auto& val = agent_.values();
  g_logp_.resize(n);
  g_ent_.resize(n);
  g_val_.resize(n);
  const double inv_n = 1.0 / static_cast<double>(n);
  const double cvf = opt_options_.clip_range_vf;
  const double vf = opt_options_.vf_coef, ec = opt_options_.ent_coef;
  MinibatchLoss L;
  for (std::size_t i = 0; i < n; ++i) {
    const std::size_t j = idx[i];
    const double a = adv_[i];
    const double log_ratio = static_cast<double>(logp[i]) - buf.log_probs[j];
    const double ratio = std::exp(log_ratio);
    const double s1 = ratio * a;
    const double s2 = std::clamp(ratio, 1.0 - clip, 1.0 + clip) * a;
    L.policy -= std::min(s1, s2);
    // d(-min(s1, s2))/d log pi: the unclipped branch carries the gradient r A.
    g_logp_[i] = static_cast<float>(s1 <= s2 ? -a * ratio * inv_n : 0.0);
    L.entropy += ent[i];
    g_ent_[i] = static_cast<float>(-ec * inv_n);
    double v = val[i], dv = 1.0;
    if (cvf > 0) {
      const double old = buf.values[j];
      const double d = v - old;
      if (d > cvf || d < -cvf) dv = 0.0;
      v = old + std::clamp(d, -cvf, cvf);
    }
    const double err = v - buf.returns[j];
    L.value += err * err;
    g_val_[i] = static_cast<float>(vf * 2.0 * err * dv * inv_n);
    L.approx_kl += (ratio - 1.0) - log_ratio;
    if (std::abs(ratio - 1.0) > clip) L.clip_fraction += 1.0;
  }
  L.policy *= inv_n;
  L.value *= inv_n;
  L.entropy *= inv_n;
  L.approx_kl *= inv_n;
  L.clip_fraction *= inv_n;
  L.total = L.policy + vf * L.value - ec * L.entropy;
  if (accumulate_grad && dp_) {
    // Loss terms averaged over ranks alongside the gradients (one synchronisation).
    terms_ = {L.total, L.policy, L.value, L.entropy, L.approx_kl, L.clip_fraction};
    auto req = comm_->allreduce_async(std::span<double>(terms_), ReduceOp::kSum);
    agent_.backward(g_logp_.data(), g_ent_.data(), g_val_.data());
    dp_->finish();  // gradients averaged over ranks
    req->wait();
    const double inv = 1.0 / comm_->size();
    return {terms_[0] * inv, terms_[1] * inv, terms_[2] * inv, terms_[3] * inv, terms_[4] * inv, terms_[5] * inv};
  }
  if (accumulate_grad) agent_.backward(g_logp_.data(), g_ent_.data(), g_val_.data());
  return L;
}

UpdateStats Ppo::update(const RolloutBuffer& buf, double progress, std::int64_t iteration) {
  if (device_update_) return update_on_device(buf, false, 0.0, 0.0, progress, iteration);
  const PpoOptions& o = opt_options_;
  progress = std::clamp(progress, 0.0, 1.0);
  UpdateStats st;
  st.learning_rate = (o.anneal_lr ? o.learning_rate * progress : o.learning_rate) * lr_warmup_factor(o, iteration);
  st.clip_range = o.anneal_clip ? o.clip_range * progress : o.clip_range;
  opt_->set_lr(st.learning_rate);
  const auto n = static_cast<std::uint32_t>(buf.size());
  // This rank's share of a minibatch (every rank has the same rollout size).
  const auto local_mb = static_cast<std::uint32_t>(o.minibatch_size / ranks());
  const std::uint32_t mb = local_mb > 0 ? std::min<std::uint32_t>(n, local_mb) : n;
  // Every epoch's permutation first: data-parallel advantage statistics of all minibatches
  // then take one all-reduce for the whole update.
  const std::size_t E = static_cast<std::size_t>(o.epochs);
  draw_permutations(n, mb, iteration);
  const std::size_t per_epoch = (n + mb - 1) / mb;
  stats_.clear();
  if (comm_ && o.normalize_advantage) {
    stats_.assign(3 * E * per_epoch, 0.0);
    for (std::size_t e = 0; e < E; ++e)
      for (std::size_t k = 0; k < per_epoch; ++k) {
        double* t = stats_.data() + 3 * (e * per_epoch + k);
        const std::uint32_t s = static_cast<std::uint32_t>(k) * mb, len = std::min(mb, n - s);
        t[0] = len;
        for (std::uint32_t i = 0; i < len; ++i) {
          const double a = buf.advantages[perm_[e * n + s + i]];
          t[1] += a;
          t[2] += a * a;
        }
      }
    comm_->allreduce(std::span<double>(stats_), ReduceOp::kSum);
  }
  std::int64_t count = 0;
  for (std::size_t e = 0; e < E; ++e) {
    for (std::uint32_t s = 0; s < n; s += mb) {
      const std::uint32_t len = std::min(mb, n - s);
      opt_->zero_grad();
      // Data-parallel: the terms come back averaged over ranks, so every rank sees the
      // same (and the same NaN).
      adv_stats_ = stats_.empty() ? nullptr : stats_.data() + 3 * (e * per_epoch + s / mb);
      const MinibatchLoss L =
          minibatch_loss(buf, std::span<const std::uint32_t>(perm_.data() + e * n + s, len), st.clip_range, true);
      adv_stats_ = nullptr;
      if (!std::isfinite(L.total)) {
        std::ostringstream m;
        m << "iteration " << iteration << ": the loss is " << L.total << " (policy " << L.policy << ", value "
          << L.value << ", entropy " << L.entropy << "), training stopped";
        throw NumericalError(m.str());
      }
      const double grad_norm =
          o.max_grad_norm > 0 ? nn::clip_grad_norm(params_, o.max_grad_norm) : std::numeric_limits<double>::quiet_NaN();
      opt_->step();
      if (observer_)
        observer_({iteration, static_cast<int>(e), s / mb,
                   std::span<const std::uint32_t>(perm_.data() + e * n + s, len), L, st.learning_rate, grad_norm});
      st.policy_loss += L.policy;
      st.value_loss += L.value;
      st.entropy += L.entropy;
      st.approx_kl += L.approx_kl;
      st.clip_fraction += L.clip_fraction;
      ++count;
    }
  }
  const double c = static_cast<double>(count);
  st.policy_loss /= c;
  st.value_loss /= c;
  st.entropy /= c;
  st.approx_kl /= c;
  st.clip_fraction /= c;
  st.explained_variance = explained_variance(buf.values.data(), buf.returns.data(), buf.size(), comm_);
  return st;
}

double lr_warmup_factor(const PpoOptions& o, std::int64_t iteration) {
  if (o.lr_warmup_iterations <= 0 || iteration >= o.lr_warmup_iterations || iteration < 0) return 1.0;
  return o.lr_warmup_start +
         (1.0 - o.lr_warmup_start) * static_cast<double>(iteration) / static_cast<double>(o.lr_warmup_iterations);
}

double explained_variance(const float* yp, const float* y, std::size_t n) {
  double my = 0, md = 0;
  for (std::size_t i = 0; i < n; ++i) {
    my += y[i];
    md += static_cast<double>(y[i]) - yp[i];
  }
  my /= static_cast<double>(n);
  md /= static_cast<double>(n);
  double vy = 0, vd = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(y[i]) - yp[i] - md;
    vy += (y[i] - my) * (y[i] - my);
    vd += d * d;
  }
  return vy == 0 ? std::nan("") : 1.0 - vd / vy;
}

}  // namespace herd::rl

namespace herd::rl {

double explained_variance(const float* yp, const float* y, std::size_t n, Communicator* comm) {
  if (comm == nullptr || comm->size() == 1) return explained_variance(yp, y, n);
  double s[5] = {static_cast<double>(n), 0, 0, 0, 0};  // n, sum y, sum y^2, sum d, sum d^2
  for (std::size_t i = 0; i < n; ++i) {
    const double d = static_cast<double>(y[i]) - yp[i];
    s[1] += y[i];
    s[2] += static_cast<double>(y[i]) * y[i];
    s[3] += d;
    s[4] += d * d;
  }
  comm->allreduce(s, 5, DataType::kFloat64, ReduceOp::kSum);
  const double my = s[1] / s[0], md = s[3] / s[0];
  const double vy = s[2] / s[0] - my * my, vd = s[4] / s[0] - md * md;
  return vy <= 0 ? std::nan("") : 1.0 - vd / vy;
}

}  // namespace herd::rl
