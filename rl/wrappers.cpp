// Environment wrappers (wrappers.hpp): time limit, episodic life, reward clipping, frame stack.
#include "herd/rl/wrappers.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include <fmt/format.h>

#include "herd/core/error.hpp"
#include "herd/rl/registry.hpp"

namespace herd::rl {
namespace {

void check_options(const Env& env, const WrapperOptions& o) {
  HERD_REQUIRE(o.frame_stack >= 1 && o.frame_stack <= 64, "{}: frame_stack is {}, but must be in [1, 64]", env.id(),
               o.frame_stack);
  HERD_REQUIRE(o.max_episode_steps >= -1, "{}: max_episode_steps is {}, but must be >= 0 (or -1: the registered limit)",
               env.id(), o.max_episode_steps);
  HERD_REQUIRE(!o.episodic_life || env.has_lives(),
               "{}: episodic_life is true, but this environment has no lives (episodic life applies to games with "
               "several lives, such as Atari's; none of the MinAtar games has)",
               env.id());
}

/// `space` with k observations stacked along its first axis.
Space stacked_space(const Space& space, int k) {
  if (k == 1) return space;
  std::vector<double> lo, hi;
  for (int i = 0; i < k; ++i) {
    lo.insert(lo.end(), space.low().begin(), space.low().end());
    hi.insert(hi.end(), space.high().begin(), space.high().end());
  }
  std::vector<std::int64_t> shape = space.shape();
  shape[0] *= k;
  return Space::box(std::move(lo), std::move(hi), std::move(shape), space.values());
}

/// The wrappers of wrappers.hpp over one environment, in their order.
class WrappedEnv final : public Env {
 public:
  WrappedEnv(std::unique_ptr<Env> inner, const WrapperOptions& o)
      : Env(inner->id(), stacked_space(inner->observation_space(), o.frame_stack), inner->action_space(),
            inner->state_dim() + (o.frame_stack > 1 ? static_cast<std::size_t>(o.frame_stack) * inner->obs_dim() : 0) +
                4,
            o.max_episode_steps >= 0 ? o.max_episode_steps : inner->max_episode_steps()),
        inner_(std::move(inner)),
        k_(static_cast<std::size_t>(o.frame_stack)),
        d_(inner_->obs_dim()),
        clip_(o.clip_reward),
        life_(o.episodic_life),
        frames_(k_ > 1 ? k_ * d_ : 0, 0.0f) {
    inner_->set_max_episode_steps(0);  // the time limit counts here (game steps, not lives)
    const Space& a = inner_->action_space();
    if (a.is_discrete()) {
      noop_.assign(1, static_cast<double>(a.start()));
    } else {
      noop_.assign(a.dim(), 0.0);
      for (std::size_t i = 0; i < noop_.size(); ++i) noop_[i] = std::clamp(0.0, a.low()[i], a.high()[i]);
    }
  }

  std::vector<double> get_state() const override {
    std::vector<double> s = inner_->get_state();
    s.insert(s.end(), frames_.begin(), frames_.end());
    s.push_back(static_cast<double>(lives_));
    s.push_back(game_over_ ? 1.0 : 0.0);
    s.push_back(static_cast<double>(game_steps_));
    s.push_back(static_cast<double>(inner_->episode()));
    return s;
  }

  void observe(float* obs) const override {
    if (k_ > 1) std::copy(frames_.begin(), frames_.end(), obs);
    else inner_->observe(obs);
  }

  bool has_lives() const override { return inner_->has_lives(); }
  std::int64_t lives() const override { return inner_->lives(); }

 protected:
  void reset_impl(RngCursor& rng, float* obs) override {
    float* frame = k_ > 1 ? frames_.data() + (k_ - 1) * d_ : obs;
    bool continued = false;
    if (life_ && !game_over_ && episode() != 0) {
      // A life was lost, the game goes on: one no-op step (SB3's EpisodicLifeEnv.reset).
      if (k_ > 1) std::memmove(frames_.data(), frames_.data() + d_, (k_ - 1) * d_ * sizeof(float));
      const StepResult r = inner_->step_unchecked(noop_.data(), frame);
      ++game_steps_;
      const bool limit = max_episode_steps() > 0 && game_steps_ >= max_episode_steps();
      if (!(r.terminated || r.truncated || limit)) {
        continued = true;
        lives_ = inner_->lives();
        set_elapsed_steps(game_steps_);
      }
    }
    if (!continued) {
      reset_wrapped(*inner_, *this, rng, frame);
      game_over_ = false;
      game_steps_ = 0;
      lives_ = life_ ? inner_->lives() : 0;
    }
    if (k_ > 1) {
      // Gymnasium's FrameStackObservation (padding_type "reset"): every slot is the first frame.
      for (std::size_t i = 0; i + 1 < k_; ++i) std::memcpy(frames_.data() + i * d_, frame, d_ * sizeof(float));
      std::copy(frames_.begin(), frames_.end(), obs);
    }
  }

  StepResult step_impl(const double* action, float* obs) override {
    float* frame = obs;
    if (k_ > 1) {
      std::memmove(frames_.data(), frames_.data() + d_, (k_ - 1) * d_ * sizeof(float));
      frame = frames_.data() + (k_ - 1) * d_;
    }
    StepResult r = inner_->step_unchecked(action, frame);
    game_steps_ = elapsed_steps() + 1;  // the base class counts this step after we return
    if (life_) {
      const bool limit = max_episode_steps() > 0 && game_steps_ >= max_episode_steps();
      game_over_ = r.terminated || r.truncated || limit;
      const std::int64_t l = inner_->lives();
      if (l > 0 && l < lives_) r.terminated = true;
      lives_ = l;
    }
    if (clip_ && !std::isnan(r.reward)) r.reward = r.reward > 0 ? 1.0 : r.reward < 0 ? -1.0 : 0.0;
    if (k_ > 1) std::copy(frames_.begin(), frames_.end(), obs);
    return r;
  }

  void set_state_impl(const double* state) override {
    const std::size_t s = inner_->state_dim(), f = frames_.size();
    const double* tail = state + s + f;
    const double lives = tail[0], over = tail[1], steps = tail[2], episode = tail[3];
    HERD_REQUIRE(lives == std::floor(lives) && lives >= 0 && (over == 0 || over == 1) && steps == std::floor(steps) &&
                     steps >= 0 && episode == std::floor(episode) && episode >= 0 && episode < 9007199254740992.0,
                 "{} (env {}): wrapper state [lives {}, game over {}, game steps {}, episode {}], but lives, game "
                 "steps and episode must be integers >= 0 and game over 0 or 1",
                 id(), global_id(), lives, over, steps, episode);
    // The inner env's stream: this env's seed and global id, the episode of its game.
    sync_stream(*inner_, *this);
    inner_->restore_stream(seed(), static_cast<std::uint64_t>(episode));
    inner_->set_state(std::span<const double>(state, s));
    for (std::size_t i = 0; i < f; ++i) frames_[i] = static_cast<float>(state[s + i]);
    lives_ = static_cast<std::int64_t>(lives);
    game_over_ = over != 0;
    game_steps_ = static_cast<std::int64_t>(steps);
  }

 private:
  std::unique_ptr<Env> inner_;
  std::size_t k_, d_;
  bool clip_, life_;
  std::vector<float> frames_;  // [k, obs_dim], oldest first (k > 1)
  std::vector<double> noop_;   // the action of the no-op step after a lost life
  std::int64_t lives_ = 0;
  bool game_over_ = true;
  std::int64_t game_steps_ = 0;  // steps of the game since its reset
};

}  // namespace

std::unique_ptr<Env> wrap_env(std::unique_ptr<Env> env, const WrapperOptions& o) {
  HERD_REQUIRE(env != nullptr, "wrap_env: env is null");
  check_options(*env, o);
  if (o.frame_stack == 1 && !o.clip_reward && !o.episodic_life) {
    if (o.max_episode_steps >= 0) env->set_max_episode_steps(o.max_episode_steps);
    return env;
  }
  return std::make_unique<WrappedEnv>(std::move(env), o);
}

std::string wrapped_env_id(const std::string& id, const WrapperOptions& o) {
  if (!o.any()) return id;
  std::vector<std::string> parts;
  if (o.frame_stack != 1) parts.push_back(fmt::format("frame_stack={}", o.frame_stack));
  if (o.clip_reward) parts.push_back("clip_reward");
  if (o.episodic_life) parts.push_back("episodic_life");
  if (o.max_episode_steps != -1) parts.push_back(fmt::format("max_episode_steps={}", o.max_episode_steps));
  return fmt::format("{}[{}]", id, fmt::join(parts, ","));
}

std::string register_wrapped_env(const std::string& id, const WrapperOptions& o) {
  std::string wid = wrapped_env_id(id, o);
  if (wid == id) return id;
  (void)wrap_env(make_env(id), o);  // checks the options (lives, sizes) now
  register_env(wid, [id, o] { return wrap_env(make_env(id), o); });
  return wid;
}

}  // namespace herd::rl
