#include "herd/rl/alternating_sampler.hpp"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "herd/core/error.hpp"
#include "sampler_state.hpp"

namespace herd::rl {

AlternatingSampler::AlternatingSampler(const SamplerOptions& o)
    : opt_(o), obs_rms_(1), rew_norm_(static_cast<std::size_t>(o.num_envs < 1 ? 1 : o.num_envs), o.gamma) {
  if (o.num_envs < 1 || o.num_steps < 1 || o.num_threads < 1)
    throw InputError("rl::AlternatingSampler: num_envs, num_steps and num_threads must be >= 1");
  if (o.num_envs % 2 != 0)
    throw InputError("rl::AlternatingSampler: sampler.num_envs is " + std::to_string(o.num_envs) +
                     ", but the alternating sampler needs an even number of envs (two groups of num_envs / 2)");
  half_ = static_cast<std::size_t>(o.num_envs) / 2;
  for (int g = 0; g < 2; ++g) {
    EnvPoolOptions po;
    po.env_id = o.env_id;
    po.num_envs = half_;
    po.batch_size = half_;    // one recv returns the whole group
    po.async_workers = true;  // num_threads workers: send returns at once
    po.num_threads = static_cast<std::size_t>(o.num_threads);
    po.seed = o.seed;
    po.first_global_id = o.first_global_id + static_cast<std::uint32_t>(g * half_);
    po.max_episode_steps = o.max_episode_steps;
    po.obs_dtype = o.obs_dtype;
    pools_[static_cast<std::size_t>(g)] = std::make_unique<EnvPool>(po);
  }
  rew_norm_.set_communicator(o.comm);
  const std::size_t B = 2 * half_;
  obs_dim_ = pools_[0]->obs_dim();
  action_dim_ = pools_[0]->action_dim();
  discrete_ = pools_[0]->action_space().is_discrete();
  action_start_ = discrete_ ? pools_[0]->action_space().start() : 0;
  const std::size_t D = obs_dim_;
  ids_.resize(half_);
  std::iota(ids_.begin(), ids_.end(), 0);
  obs_rms_ = RunningMeanStd(D);
  raw_obs_.resize(B * D);
  norm_obs_.resize(B * D);
  final_raw_.resize(B * D);
  final_norm_.resize(B * D);
  final_vals_.resize(B);
  rew_tmp_.resize(B);
  rewards_.resize(B);
  dones_.resize(B);
  term_.resize(B);
  trunc_.resize(B);
  ep_ret_.assign(B, 0.0);
  ep_len_.assign(B, 0);
  send_act_.resize(half_ * action_dim_);
  for (std::size_t g = 0; g < 2; ++g) {
    pools_[g]->reset();  // sync call (nothing in flight): seeded episode 0
    if (o.obs_dtype == ObsDtype::kUint8)
      obs_to_f32(pools_[g]->obs_u8().data(), half_ * D, raw_obs_.data() + g * half_ * D);
    else std::memcpy(raw_obs_.data() + g * half_ * D, pools_[g]->obs().data(), half_ * D * sizeof(float));
  }
  // As EnvPoolSampler: the first observations of all B envs update the statistics at once.
  if (opt_.normalize_obs) {
    obs_rms_.update(raw_obs_.data(), B, opt_.comm);
    obs_rms_.normalize(raw_obs_.data(), norm_obs_.data(), B, opt_.clip_obs);
  } else {
    norm_obs_ = raw_obs_;
  }
}

AlternatingSampler::~AlternatingSampler() = default;

void AlternatingSampler::normalize_group(int g, bool update) {
  const std::size_t D = obs_dim_, off = static_cast<std::size_t>(g) * half_;
  const float* raw = raw_obs_.data() + off * D;
  float* out = norm_obs_.data() + off * D;
  if (opt_.normalize_obs) {
    if (update) obs_rms_.update(raw, half_, opt_.comm);
    obs_rms_.normalize(raw, out, half_, opt_.clip_obs);
  } else {
    std::memcpy(out, raw, half_ * D * sizeof(float));
  }
}

void AlternatingSampler::act_and_send(int g, ActorCriticAgent& agent, RolloutBuffer& buf, int t) {
  const std::size_t B = 2 * half_, D = obs_dim_, A = action_dim_, off = static_cast<std::size_t>(g) * half_;
  const std::size_t row = static_cast<std::size_t>(t) * B + off;
  std::memcpy(buf.obs.data() + row * D, norm_obs_.data() + off * D, half_ * D * sizeof(float));
  double* act = buf.actions.data() + row * A;
  // Row j of this group is env off + j: its draws come from stream first_global_id + off + j.
  const RngStream rng(opt_.seed, opt_.first_global_id + static_cast<std::uint32_t>(off), RngPurpose::kPolicy);
  agent.act(norm_obs_.data() + off * D, half_, &rng, step_count_, act, buf.log_probs.data() + row,
            buf.values.data() + row);
  for (std::size_t i = 0; i < half_ * A; ++i)
    send_act_[i] = discrete_ ? static_cast<double>(static_cast<std::int64_t>(act[i]) + action_start_) : act[i];
  pools_[static_cast<std::size_t>(g)]->send(std::span<const double>(send_act_), std::span<const std::int32_t>(ids_));
  in_flight_[static_cast<std::size_t>(g)] = true;
}

void AlternatingSampler::receive(int g, ActorCriticAgent& agent, RolloutBuffer& buf, int t) {
  const std::size_t B = 2 * half_, D = obs_dim_, off = static_cast<std::size_t>(g) * half_;
  in_flight_[static_cast<std::size_t>(g)] = false;
  const EnvBatch r = pools_[static_cast<std::size_t>(g)]->recv();
  for (std::size_t j = 0; j < r.size(); ++j) {  // completion order -> env order
    const std::size_t k = off + static_cast<std::size_t>(r.env_ids[j]);
    if (!r.obs_u8.empty()) {
      obs_to_f32(r.obs_u8.data() + j * D, D, raw_obs_.data() + k * D);
      obs_to_f32(r.final_obs_u8.data() + j * D, D, final_raw_.data() + k * D);
    } else {
      std::memcpy(raw_obs_.data() + k * D, r.obs.data() + j * D, D * sizeof(float));
      std::memcpy(final_raw_.data() + k * D, r.final_obs.data() + j * D, D * sizeof(float));
    }
    rewards_[k] = r.rewards[j];
    term_[k] = r.terminated[j];
    trunc_[k] = r.truncated[j];
  }
  const std::size_t row = static_cast<std::size_t>(t) * B;
  bool any_trunc = false;
  for (std::size_t k = off; k < off + half_; ++k) {
    rew_tmp_[k] = static_cast<float>(rewards_[k]);
    dones_[k] = term_[k] || trunc_[k];
    any_trunc = any_trunc || trunc_[k];
    ep_ret_[k] += rewards_[k];
    ++ep_len_[k];
    if (dones_[k]) {
      episodes_.push_back({ep_ret_[k], ep_len_[k]});
      ep_ret_[k] = 0;
      ep_len_[k] = 0;
    }
    buf.terminated[row + k] = term_[k];
    buf.truncated[row + k] = trunc_[k];
    buf.final_values[row + k] = 0.0f;
  }
  if (any_trunc) {
    // Bootstrap truncated episodes from V(final observation) (Pardo et al. 2018), with the
    // statistics before this group's new observations, as EnvPoolSampler does.
    const float* fin = final_raw_.data() + off * D;
    float* fn = final_norm_.data() + off * D;
    if (opt_.normalize_obs) obs_rms_.normalize(fin, fn, half_, opt_.clip_obs);
    else std::memcpy(fn, fin, half_ * D * sizeof(float));
    agent.value(fn, half_, final_vals_.data() + off);
    for (std::size_t k = off; k < off + half_; ++k)
      if (trunc_[k]) buf.final_values[row + k] = final_vals_[k];
  }
  normalize_group(g, true);
}

void AlternatingSampler::finish_row(RolloutBuffer& buf, int t) {
  const std::size_t B = 2 * half_;
  float* r = buf.rewards.data() + static_cast<std::size_t>(t) * B;
  if (opt_.normalize_reward) rew_norm_.step(rew_tmp_.data(), dones_.data(), r, opt_.clip_reward);
  else std::memcpy(r, rew_tmp_.data(), B * sizeof(float));
}

void AlternatingSampler::collect(ActorCriticAgent& agent, RolloutBuffer& buf) {
  const std::size_t B = 2 * half_;
  const int T = opt_.num_steps;
  buf.resize(T, static_cast<int>(B), obs_dim_, action_dim_);
  for (int t = 0; t < T; ++t) {
    for (int g = 0; g < 2; ++g) {
      // Group g's step t-1 ends here; its inference for step t then overlaps the other
      // group's step (t - 1 for g = 0, t for g = 1).
      if (in_flight_[static_cast<std::size_t>(g)]) receive(g, agent, buf, t - 1);
      if (g == 1 && t > 0) finish_row(buf, t - 1);
      act_and_send(g, agent, buf, t);
    }
    ++step_count_;
  }
  receive(0, agent, buf, T - 1);
  receive(1, agent, buf, T - 1);
  finish_row(buf, T - 1);
  // Both groups re-normalised with the final statistics: the sampler's state is then a
  // function of (raw observations, statistics), as EnvPoolSampler's, so checkpoints hold it.
  if (opt_.normalize_obs)
    for (int g = 0; g < 2; ++g) normalize_group(g, false);
  agent.value(norm_obs_.data(), B, buf.last_values.data());
}

detail::SamplerStateRefs AlternatingSampler::state_refs() const {
  auto& self = const_cast<AlternatingSampler&>(*this);  // save reads through the same references
  return {"rl::AlternatingSampler",
          2 * half_,
          [this](std::size_t k) -> Env& { return env(k); },
          self.raw_obs_,
          self.obs_rms_,
          self.rew_norm_,
          self.ep_ret_,
          self.ep_len_,
          self.step_count_};
}

void AlternatingSampler::save(io::CheckpointWriter& w, const std::string& p) const {
  detail::save_sampler_state(w, p, state_refs());
}

void AlternatingSampler::load(const io::CheckpointReader& r, const std::string& p) {
  detail::load_sampler_state(r, p, state_refs());
  for (int g = 0; g < 2; ++g) normalize_group(g, false);
  episodes_.clear();
}

}  // namespace herd::rl
