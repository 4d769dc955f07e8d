#include "herd/rl/env.hpp"

#include <cmath>
#include <vector>

#include <fmt/format.h>

#include "herd/core/error.hpp"

namespace herd::rl {

Env::Env(std::string id, Space observation_space, Space action_space, std::size_t state_dim,
         std::int64_t max_episode_steps)
    : id_(std::move(id)),
      obs_space_(std::move(observation_space)),
      action_space_(std::move(action_space)),
      state_dim_(state_dim) {
  own_clock_.limit = max_episode_steps;
  HERD_REQUIRE(max_episode_steps >= 0, "{}: max_episode_steps is {}, but must be >= 0", id_, max_episode_steps);
}

void Env::set_max_episode_steps(std::int64_t steps) {
  HERD_REQUIRE(steps >= 0, "{}: max_episode_steps is {}, but must be >= 0", id_, steps);
  clock_->limit = steps;
}

void Env::set_elapsed_steps(std::int64_t steps) {
  HERD_REQUIRE(steps >= 0, "{}: elapsed_steps is {}, but must be >= 0", id_, steps);
  clock_->elapsed = steps;
}

void Env::bind_episode(EpisodeClock* clock, ResetStream* stream) {
  EpisodeClock* to_clock = clock != nullptr ? clock : &own_clock_;
  ResetStream* to_stream = stream != nullptr ? stream : &own_stream_;
  if (to_clock != clock_) {
    *to_clock = *clock_;
    clock_ = to_clock;
  }
  if (to_stream != rs_) {
    *to_stream = *rs_;
    rs_ = to_stream;
  }
}

std::unique_ptr<EnvStore> Env::make_store(Env* const* /*envs*/, std::size_t /*n*/) const { return nullptr; }

void Env::reset(std::uint64_t seed, float* obs) {
  rs_->stream = RngStream(seed, global_id_, RngPurpose::kEnvReset);
  rs_->episode = 0;
  rs_->has_reset = true;
  clock_->elapsed = 0;
  RngCursor rng = rs_->stream.at(rs_->episode);
  reset_impl(rng, obs);
}

void Env::restore_stream(std::uint64_t seed, std::uint64_t episode) {
  rs_->stream = RngStream(seed, global_id_, RngPurpose::kEnvReset);
  rs_->episode = episode;
  rs_->has_reset = true;
}

void Env::reset(float* obs) {
  if (!rs_->has_reset) {
    reset(0, obs);
    return;
  }
  clock_->elapsed = 0;
  RngCursor rng = rs_->next_episode();
  reset_impl(rng, obs);
}

std::string Env::check_action(const double* action) const {
  if (action_space_.is_discrete()) {
    const double v = action[0];
    if (action_space_.contains(&v)) return {};
    return fmt::format("{} (env {}): action is {}, but must be an integer in [{}, {})", id_, global_id_, v,
                       action_space_.start(), action_space_.start() + action_space_.n());
  }
  for (std::size_t i = 0; i < action_space_.dim(); ++i) {
    if (std::isnan(action[i])) {
      return fmt::format(
          "{} (env {}): action[{}] is NaN, but must be a number (out-of-bounds "
          "values are clipped)",
          id_, global_id_, i);
    }
  }
  return {};
}

StepResult Env::step(std::span<const double> action, float* obs) {
  HERD_REQUIRE(action.size() == action_dim(), "{} (env {}): action has {} components, but the action space {} has {}",
               id_, global_id_, action.size(), action_space_.to_string(), action_dim());
  const std::string msg = check_action(action.data());
  if (!msg.empty()) throw InputError(msg);
  HERD_REQUIRE(rs_->has_reset, "{} (env {}): step called before reset", id_, global_id_);
  return step_unchecked(action.data(), obs);
}

StepResult Env::step(std::int64_t action, float* obs) {
  HERD_REQUIRE(action_space_.is_discrete(), "{} (env {}): an integer action was given, but the action space is {}", id_,
               global_id_, action_space_.to_string());
  HERD_REQUIRE(action >= action_space_.start() && action < action_space_.start() + action_space_.n(),
               "{} (env {}): action is {}, but must be an integer in [{}, {})", id_, global_id_, action,
               action_space_.start(), action_space_.start() + action_space_.n());
  HERD_REQUIRE(rs_->has_reset, "{} (env {}): step called before reset", id_, global_id_);
  const double a = static_cast<double>(action);
  return step_unchecked(&a, obs);
}

void Env::step_batch(Env* const* envs, std::size_t n, const double* actions, float* obs, double* rewards,
                     std::uint8_t* terminated, std::uint8_t* truncated) const {
  const std::size_t ad = action_dim(), od = obs_dim();
  for (std::size_t i = 0; i < n; ++i) {
    const StepResult r = envs[i]->step_unchecked(actions + i * ad, obs + i * od);
    rewards[i] = r.reward;
    terminated[i] = r.terminated;
    truncated[i] = r.truncated;
  }
}

void obs_to_u8(const float* src, std::size_t n, std::uint8_t* dst) {
  // Branch-free (vectorised): NaN fails both comparisons and becomes 0.
  for (std::size_t i = 0; i < n; ++i) {
    float c = src[i];
    c = c > 0.0f ? c : 0.0f;
    c = c < 255.0f ? c : 255.0f;
    // Halves up without `c + 0.5f`, which rounds the float below 0.5 up to 1 (c - t is exact).
    const std::int32_t t = static_cast<std::int32_t>(c);
    dst[i] = static_cast<std::uint8_t>(t + (c - static_cast<float>(t) >= 0.5f ? 1 : 0));
  }
}

void obs_to_f32(const std::uint8_t* src, std::size_t n, float* dst, float scale) {
  for (std::size_t i = 0; i < n; ++i) dst[i] = scale * static_cast<float>(src[i]);
}

void Env::step_batch_u8(Env* const* envs, std::size_t n, const double* actions, std::uint8_t* obs, double* rewards,
                        std::uint8_t* terminated, std::uint8_t* truncated) const {
  const std::size_t ad = action_dim(), od = obs_dim();
  thread_local std::vector<float> row;
  row.resize(od);
  for (std::size_t i = 0; i < n; ++i) {
    const StepResult r = envs[i]->step_unchecked(actions + i * ad, row.data());
    obs_to_u8(row.data(), od, obs + i * od);
    rewards[i] = r.reward;
    terminated[i] = r.terminated;
    truncated[i] = r.truncated;
  }
}

void Env::sync_stream(Env& inner, const Env& outer) {
  inner.global_id_ = outer.global_id_;
  inner.rs_->stream = outer.rs_->stream;
  inner.rs_->episode = outer.rs_->episode;
  inner.rs_->has_reset = true;
}

void Env::reset_wrapped(Env& inner, const Env& outer, RngCursor& rng, float* obs) {
  sync_stream(inner, outer);
  inner.clock_->elapsed = 0;
  inner.reset_impl(rng, obs);
}

void Env::set_state(std::span<const double> state) {
  HERD_REQUIRE(state.size() == state_dim_, "{} (env {}): state has {} values, but must have {}", id_, global_id_,
               state.size(), state_dim_);
  set_state_impl(state.data());
  rs_->has_reset = true;
}

}  // namespace herd::rl
