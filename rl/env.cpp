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
      state_dim_(state_dim),
      own_limit_(max_episode_steps) {
  HERD_REQUIRE(max_episode_steps >= 0, "{}: max_episode_steps is {}, but must be >= 0", id_, max_episode_steps);
}

void Env::set_max_episode_steps(std::int64_t steps) {
  HERD_REQUIRE(steps >= 0, "{}: max_episode_steps is {}, but must be >= 0", id_, steps);
  *limit_ = steps;
}

void Env::set_elapsed_steps(std::int64_t steps) {
  HERD_REQUIRE(steps >= 0, "{}: elapsed_steps is {}, but must be >= 0", id_, steps);
  *elapsed_ = steps;
}

void Env::bind_episode_counters(std::int64_t* elapsed, std::int64_t* limit) {
  if (elapsed == nullptr || limit == nullptr) {
    own_elapsed_ = *elapsed_;
    own_limit_ = *limit_;
    elapsed_ = &own_elapsed_;
    limit_ = &own_limit_;
    return;
  }
  *elapsed = *elapsed_;
  *limit = *limit_;
  elapsed_ = elapsed;
  limit_ = limit;
}

std::unique_ptr<EnvStore> Env::make_store(Env* const* /*envs*/, std::size_t /*n*/) const { return nullptr; }

void Env::reset(std::uint64_t seed, float* obs) {
  stream_ = RngStream(seed, global_id_, RngPurpose::kEnvReset);
  episode_ = 0;
  has_reset_ = true;
  *elapsed_ = 0;
  RngCursor rng = stream_.at(episode_);
  reset_impl(rng, obs);
}

void Env::restore_stream(std::uint64_t seed, std::uint64_t episode) {
  stream_ = RngStream(seed, global_id_, RngPurpose::kEnvReset);
  episode_ = episode;
  has_reset_ = true;
}

void Env::reset(float* obs) {
  if (!has_reset_) {
    reset(0, obs);
    return;
  }
  ++episode_;
  *elapsed_ = 0;
  RngCursor rng = stream_.at(episode_);
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
  HERD_REQUIRE(has_reset_, "{} (env {}): step called before reset", id_, global_id_);
  return step_unchecked(action.data(), obs);
}

StepResult Env::step(std::int64_t action, float* obs) {
  HERD_REQUIRE(action_space_.is_discrete(), "{} (env {}): an integer action was given, but the action space is {}", id_,
               global_id_, action_space_.to_string());
  HERD_REQUIRE(action >= action_space_.start() && action < action_space_.start() + action_space_.n(),
               "{} (env {}): action is {}, but must be an integer in [{}, {})", id_, global_id_, action,
               action_space_.start(), action_space_.start() + action_space_.n());
  HERD_REQUIRE(has_reset_, "{} (env {}): step called before reset", id_, global_id_);
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
  inner.stream_ = outer.stream_;
  inner.episode_ = outer.episode_;
  inner.has_reset_ = true;
}

void Env::reset_wrapped(Env& inner, const Env& outer, RngCursor& rng, float* obs) {
  sync_stream(inner, outer);
  *inner.elapsed_ = 0;
  inner.reset_impl(rng, obs);
}

void Env::set_state(std::span<const double> state) {
  HERD_REQUIRE(state.size() == state_dim_, "{} (env {}): state has {} values, but must have {}", id_, global_id_,
               state.size(), state_dim_);
  set_state_impl(state.data());
  has_reset_ = true;
}

}  // namespace herd::rl
