#include "herd/rl/c_env.hpp"

#include <algorithm>
#include <cmath>
#include <mutex>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "herd/core/error.hpp"
#include "herd/core/memory.hpp"
#include "herd/rl/registry.hpp"

namespace herd::rl {
namespace {

void validate(const herd_env_spec& s, const std::string& id) {
  HERD_REQUIRE(s.obs_dim >= 1, "c_env \"{}\": obs_dim is {}, but must be >= 1", id, s.obs_dim);
  HERD_REQUIRE(s.action_kind == HERD_ACTION_DISCRETE || s.action_kind == HERD_ACTION_BOX,
               "c_env \"{}\": action_kind is {}, but must be HERD_ACTION_DISCRETE (0) or "
               "HERD_ACTION_BOX (1)",
               id, s.action_kind);
  if (s.action_kind == HERD_ACTION_DISCRETE) {
    HERD_REQUIRE(s.num_actions >= 1, "c_env \"{}\": num_actions is {}, but must be >= 1", id, s.num_actions);
  } else {
    HERD_REQUIRE(s.action_dim >= 1, "c_env \"{}\": action_dim is {}, but must be >= 1", id, s.action_dim);
    HERD_REQUIRE(s.action_low && s.action_high, "c_env \"{}\": action_low/action_high are NULL, but a Box needs bounds",
                 id);
    for (std::int32_t i = 0; i < s.action_dim; ++i)
      HERD_REQUIRE(s.action_low[i] <= s.action_high[i],
                   "c_env \"{}\": action_low[{}] is {} and action_high[{}] is {}, but low must not exceed high (nor be "
                   "NaN)",
                   id, i, s.action_low[i], i, s.action_high[i]);
  }
  // Observation bounds: either may be NULL (unbounded that side); where both are given each
  // pair is checked here, in the spec's terms, rather than by Space::box when an env is made.
  for (std::int32_t i = 0; i < s.obs_dim; ++i) {
    const double lo = s.obs_low ? s.obs_low[i] : -HUGE_VAL, hi = s.obs_high ? s.obs_high[i] : HUGE_VAL;
    HERD_REQUIRE(lo <= hi,
                 "c_env \"{}\": obs_low[{}] is {} and obs_high[{}] is {}, but low must not exceed high (nor be NaN)",
                 id, i, lo, i, hi);
  }
  // One environment holds its observation bounds and buffer (8 + 8 + 4 bytes per component)
  // and its state: an uninitialised obs_dim of a billion components is refused here with
  // its name, rather than ending the process in the kernel's out-of-memory killer.
  if (const auto avail = available_memory_bytes()) {
    const double need = 20.0 * s.obs_dim + 8.0 * std::max<std::int32_t>(s.state_dim, 0);
    HERD_REQUIRE(need <= static_cast<double>(*avail),
                 "c_env \"{}\": obs_dim is {} and state_dim {}: one environment would need {} for its observation "
                 "bounds, buffer and state, more than the {} available (is obs_dim set?)",
                 id, s.obs_dim, s.state_dim, format_bytes(need), format_bytes(static_cast<double>(*avail)));
  }
  HERD_REQUIRE(s.max_episode_steps >= 0, "c_env \"{}\": max_episode_steps is {}, but must be >= 0", id,
               s.max_episode_steps);
  HERD_REQUIRE(s.create && s.reset && s.step, "c_env \"{}\": create, reset and step callbacks are required", id);
  HERD_REQUIRE(s.state_dim >= 0, "c_env \"{}\": state_dim is {}, but must be >= 0", id, s.state_dim);
  HERD_REQUIRE(s.state_dim == 0 || (s.get_state && s.set_state),
               "c_env \"{}\": state_dim is {}, but get_state/set_state are NULL", id, s.state_dim);
  HERD_REQUIRE(s.obs_ndim >= 0 && s.obs_ndim <= 8, "c_env \"{}\": obs_ndim is {}, but must be in [0, 8]", id,
               s.obs_ndim);
  if (s.obs_ndim > 0) {
    HERD_REQUIRE(s.obs_shape != nullptr, "c_env \"{}\": obs_ndim is {}, but obs_shape is NULL", id, s.obs_ndim);
    std::int64_t n = 1;
    for (int i = 0; i < s.obs_ndim; ++i) {
      HERD_REQUIRE(s.obs_shape[i] >= 1 && s.obs_shape[i] <= s.obs_dim,
                   "c_env \"{}\": obs_shape[{}] is {}, but must be in [1, obs_dim = {}]", id, i, s.obs_shape[i],
                   s.obs_dim);
      n *= s.obs_shape[i];
    }
    HERD_REQUIRE(n == s.obs_dim, "c_env \"{}\": obs_shape [{}] holds {} values, but obs_dim is {}", id,
                 fmt::join(s.obs_shape, s.obs_shape + s.obs_ndim, ", "), n, s.obs_dim);
  }
}

Space spec_obs_space(const herd_env_spec& s) {
  std::vector<double> lo(s.obs_dim, -HUGE_VAL), hi(s.obs_dim, HUGE_VAL);
  if (s.obs_low) lo.assign(s.obs_low, s.obs_low + s.obs_dim);
  if (s.obs_high) hi.assign(s.obs_high, s.obs_high + s.obs_dim);
  // A flat vector's shape is {obs_dim}, as Space::box(low, high) gives it.
  std::vector<std::int64_t> shape{s.obs_dim};
  if (s.obs_ndim > 0) shape.assign(s.obs_shape, s.obs_shape + s.obs_ndim);
  return Space::box(std::move(lo), std::move(hi), std::move(shape),
                    s.obs_integer != 0 ? BoxValues::kInteger : BoxValues::kReal);
}

Space spec_action_space(const herd_env_spec& s) {
  if (s.action_kind == HERD_ACTION_DISCRETE) return Space::discrete(s.num_actions);
  return Space::box(std::vector<double>(s.action_low, s.action_low + s.action_dim),
                    std::vector<double>(s.action_high, s.action_high + s.action_dim));
}

/// An `Env` over C callbacks.
class CEnv final : public Env {
 public:
  CEnv(const herd_env_spec& spec, const std::string& id, std::shared_ptr<std::mutex> lock)
      : Env(id, spec_obs_space(spec), spec_action_space(spec), static_cast<std::size_t>(spec.state_dim),
            spec.max_episode_steps),
        spec_(spec),
        lock_(std::move(lock)),
        last_obs_(static_cast<std::size_t>(spec.obs_dim), 0.0f),
        action_(action_dim(), 0.0) {}

  ~CEnv() override {
    if (handle_ && spec_.destroy) {
      auto g = guard();
      spec_.destroy(handle_);
    }
  }

  std::vector<double> get_state() const override {
    HERD_REQUIRE(spec_.state_dim > 0, "{} (env {}): get_state is not provided by the C spec", id(), global_id());
    const_cast<CEnv*>(this)->ensure_instance();
    std::vector<double> s(static_cast<std::size_t>(spec_.state_dim));
    auto g = guard();
    check(spec_.get_state(handle_, s.data()), "get_state");
    return s;
  }

  void observe(float* obs) const override { std::copy(last_obs_.begin(), last_obs_.end(), obs); }

  bool has_lives() const override { return spec_.lives != nullptr; }

  std::int64_t lives() const override {
    if (!spec_.lives) return 0;
    const_cast<CEnv*>(this)->ensure_instance();
    std::int64_t n = 0;
    auto g = guard();
    check(spec_.lives(handle_, &n), "lives");
    return n;
  }

 protected:
  void reset_impl(RngCursor& rng, float* obs) override {
    ensure_instance();
    const std::uint64_t episode_seed = rng.next_u64();
    {
      auto g = guard();
      check(spec_.reset(handle_, episode_seed, last_obs_.data()), "reset");
    }
    check_finite("reset", nullptr);
    observe(obs);
  }

  StepResult step_impl(const double* action, float* obs) override {
    const double* a = action;
    if (spec_.action_kind == HERD_ACTION_BOX) {
      for (std::size_t i = 0; i < action_.size(); ++i) {
        action_[i] = std::clamp(action[i], spec_.action_low[i], spec_.action_high[i]);
      }
      a = action_.data();
    }
    double reward = 0.0;
    std::int32_t term = 0, trunc = 0;
    {
      auto g = guard();
      check(spec_.step(handle_, a, last_obs_.data(), &reward, &term, &trunc), "step");
    }
    check_finite("step", &reward);
    observe(obs);
    StepResult r;
    r.reward = reward;
    r.terminated = term != 0;
    r.truncated = trunc != 0;  // the base class adds the time limit
    return r;
  }

  void set_state_impl(const double* state) override {
    HERD_REQUIRE(spec_.state_dim > 0, "{} (env {}): set_state is not provided by the C spec", id(), global_id());
    ensure_instance();
    auto g = guard();
    check(spec_.set_state(handle_, state), "set_state");
  }

 private:
  std::unique_lock<std::mutex> guard() const {
    return lock_ ? std::unique_lock<std::mutex>(*lock_) : std::unique_lock<std::mutex>();
  }

  void check(std::int32_t status, const char* what) const {
    if (status != 0) {
      throw Error(fmt::format("{} (env {}): the C callback {} returned status {}", id(), global_id(), what, status));
    }
  }

  /// A non-finite observation or reward from callback `what` stops the run here, naming it,
  /// instead of surfacing later as a NaN loss or a NaN action of the policy.
  void check_finite(const char* what, const double* reward) const {
    for (std::size_t i = 0; i < last_obs_.size(); ++i)
      if (!std::isfinite(last_obs_[i]))
        throw Error(fmt::format("{} (env {}): the C callback {} wrote obs[{}] = {} (observations must be finite)", id(),
                                global_id(), what, i, last_obs_[i]));
    if (reward && !std::isfinite(*reward))
      throw Error(fmt::format("{} (env {}): the C callback {} wrote reward = {} (rewards must be finite)", id(),
                              global_id(), what, *reward));
  }

  void ensure_instance() {
    if (handle_) return;
    const std::uint64_t s = RngStream(seed(), global_id(), RngPurpose::kEnvReset).u64(std::uint64_t{1} << 47);
    {
      auto g = guard();
      handle_ = spec_.create(spec_.user, s);
    }
    if (!handle_) {
      throw Error(fmt::format("{} (env {}): the C callback create returned NULL", id(), global_id()));
    }
  }

  herd_env_spec spec_;
  std::shared_ptr<std::mutex> lock_;
  void* handle_ = nullptr;
  std::vector<float> last_obs_;
  std::vector<double> action_;
};

/// The lock of every non-thread-safe C environment: their callbacks never run together.
std::shared_ptr<std::mutex> serial_lock() {
  static const auto lock = std::make_shared<std::mutex>();
  return lock;
}

}  // namespace

std::unique_ptr<Env> make_c_env(const herd_env_spec& spec, const std::string& id) {
  validate(spec, id);
  return std::make_unique<CEnv>(spec, id, spec.thread_safe ? nullptr : serial_lock());
}

void register_c_env(const std::string& id, const herd_env_spec& spec) {
  validate(spec, id);
  auto lock = spec.thread_safe ? nullptr : serial_lock();
  register_env(id, [spec, id, lock] { return std::make_unique<CEnv>(spec, id, lock); });
}

}  // namespace herd::rl
