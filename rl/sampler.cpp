#include "herd/rl/sampler.hpp"

#include <cstring>

#include "herd/core/error.hpp"
#include "herd/rl/alternating_sampler.hpp"
#include "sampler_state.hpp"

namespace herd::rl {

EnvPoolSampler::EnvPoolSampler(const SamplerOptions& o)
    : opt_(o), obs_rms_(1), rew_norm_(static_cast<std::size_t>(o.num_envs < 1 ? 1 : o.num_envs), o.gamma) {
  if (o.num_envs < 1 || o.num_steps < 1 || o.num_threads < 1)
    throw InputError("rl::EnvPoolSampler: num_envs, num_steps and num_threads must be >= 1");
  EnvPoolOptions po;
  po.env_id = o.env_id;
  po.num_envs = static_cast<std::size_t>(o.num_envs);
  po.num_threads = static_cast<std::size_t>(o.num_threads);
  po.seed = o.seed;
  po.first_global_id = o.first_global_id;
  po.max_episode_steps = o.max_episode_steps;
  po.obs_dtype = o.obs_dtype;
  pool_ = std::make_unique<EnvPool>(po);
  rew_norm_.set_communicator(o.comm);
  const std::size_t B = pool_->num_envs(), D = pool_->obs_dim();
  obs_rms_ = RunningMeanStd(D);
  raw_obs_.resize(B * D);
  norm_obs_.resize(B * D);
  final_norm_.resize(B * D);
  final_vals_.resize(B);
  rew_tmp_.resize(B);
  dones_.resize(B);
  ep_ret_.assign(B, 0.0);
  ep_len_.assign(B, 0);
  act_tmp_.resize(B * pool_->action_dim());
  act_int_.resize(B);
  pool_->reset();
  new_obs(pool_obs(false), true);
}

const float* EnvPoolSampler::pool_obs(bool final) {
  if (pool_->obs_dtype() == ObsDtype::kFloat32) return final ? pool_->final_obs().data() : pool_->obs().data();
  const auto bytes = final ? pool_->final_obs_u8() : pool_->obs_u8();
  u8_obs_.resize(bytes.size());
  obs_to_f32(bytes.data(), bytes.size(), u8_obs_.data());
  return u8_obs_.data();
}

void EnvPoolSampler::new_obs(const float* raw, bool update) {
  const std::size_t B = pool_->num_envs(), D = pool_->obs_dim();
  std::memcpy(raw_obs_.data(), raw, B * D * sizeof(float));
  if (opt_.normalize_obs) {
    if (update) obs_rms_.update(raw_obs_.data(), B, opt_.comm);
    obs_rms_.normalize(raw_obs_.data(), norm_obs_.data(), B, opt_.clip_obs);
  } else {
    norm_obs_ = raw_obs_;
  }
}

void EnvPoolSampler::collect(ActorCriticAgent& agent, RolloutBuffer& buf) {
  const std::size_t B = pool_->num_envs(), D = pool_->obs_dim(), A = pool_->action_dim();
  const int T = opt_.num_steps;
  buf.resize(T, static_cast<int>(B), D, A);
  const RngStream policy_rng(opt_.seed, opt_.first_global_id, RngPurpose::kPolicy);
  const bool discrete = pool_->action_space().is_discrete();
  const std::int64_t start = discrete ? pool_->action_space().start() : 0;
  for (int t = 0; t < T; ++t) {
    const std::size_t row = static_cast<std::size_t>(t) * B;
    std::memcpy(buf.obs.data() + row * D, norm_obs_.data(), B * D * sizeof(float));
    double* act = buf.actions.data() + row * A;
    agent.act(norm_obs_.data(), B, &policy_rng, step_count_++, act, buf.log_probs.data() + row,
              buf.values.data() + row);
    if (discrete) {
      for (std::size_t b = 0; b < B; ++b) act_int_[b] = static_cast<std::int64_t>(act[b]) + start;
      pool_->step(std::span<const std::int64_t>(act_int_));
    } else {
      pool_->step(std::span<const double>(act, B * A));
    }
    const auto rewards = pool_->rewards();
    const auto term = pool_->terminated();
    const auto trunc = pool_->truncated();
    bool any_trunc = false;
    for (std::size_t b = 0; b < B; ++b) {
      rew_tmp_[b] = static_cast<float>(rewards[b]);
      dones_[b] = term[b] || trunc[b];
      any_trunc = any_trunc || trunc[b];
      ep_ret_[b] += rewards[b];
      ++ep_len_[b];
      if (dones_[b]) {
        episodes_.push_back({ep_ret_[b], ep_len_[b]});
        ep_ret_[b] = 0;
        ep_len_[b] = 0;
      }
    }
    float* r = buf.rewards.data() + row;
    if (opt_.normalize_reward) rew_norm_.step(rew_tmp_.data(), dones_.data(), r, opt_.clip_reward);
    else std::memcpy(r, rew_tmp_.data(), B * sizeof(float));
    std::memcpy(buf.terminated.data() + row, term.data(), B);
    std::memcpy(buf.truncated.data() + row, trunc.data(), B);
    float* fv = buf.final_values.data() + row;
    std::fill(fv, fv + B, 0.0f);
    if (any_trunc) {
      // Bootstrap truncated episodes from V(final observation) (Pardo et al. 2018).
      const float* fin = pool_obs(true);
      if (opt_.normalize_obs) obs_rms_.normalize(fin, final_norm_.data(), B, opt_.clip_obs);
      else std::memcpy(final_norm_.data(), fin, B * D * sizeof(float));
      agent.value(final_norm_.data(), B, final_vals_.data());
      for (std::size_t b = 0; b < B; ++b)
        if (trunc[b]) fv[b] = final_vals_[b];
    }
    new_obs(pool_obs(false), true);
  }
  agent.value(norm_obs_.data(), B, buf.last_values.data());
}

detail::SamplerStateRefs EnvPoolSampler::state_refs() const {
  auto& self = const_cast<EnvPoolSampler&>(*this);  // save reads through the same references
  return {"rl::EnvPoolSampler", pool_->num_envs(), [&self](std::size_t k) -> Env& { return self.pool_->env(k); },
          self.raw_obs_,        self.obs_rms_,     self.rew_norm_,
          self.ep_ret_,         self.ep_len_,      self.step_count_};
}

void EnvPoolSampler::save(io::CheckpointWriter& w, const std::string& p) const {
  detail::save_sampler_state(w, p, state_refs());
}

void EnvPoolSampler::load(const io::CheckpointReader& r, const std::string& p) {
  detail::load_sampler_state(r, p, state_refs());
  const std::vector<float> raw = raw_obs_;
  new_obs(raw.data(), false);
  episodes_.clear();
}

std::unique_ptr<Sampler> make_sampler(const std::string& kind, const SamplerOptions& o) {
  if (kind == "serial") return std::make_unique<SerialSampler>(o);
  if (kind == "parallel") return std::make_unique<ParallelSampler>(o);
  if (kind == "alternating") return std::make_unique<AlternatingSampler>(o);
  throw InputError("rl::make_sampler: sampler is \"" + kind +
                   "\", but must be \"serial\", \"parallel\" or \"alternating\"");
}

}  // namespace herd::rl
