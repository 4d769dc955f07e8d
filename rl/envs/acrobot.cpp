// Acrobot-v1. Compiled with -ffp-contract=off -fno-builtin-pow and no -march: the
// operations below follow Gymnasium 1.4.0's acrobot.py ("book" dynamics, RK4) in order,
// with glibc's pow where Python squares with `**`, so results are bit-identical with it.
#include <algorithm>
#include <cmath>
#include <numbers>

#include "classic_simd.hpp"
#include "herd/core/error.hpp"
#include "herd/rl/envs.hpp"

namespace herd::rl {
namespace {

using namespace detail::acrobot;

/// Time derivative of (theta1, theta2, dtheta1, dtheta2) under torque `a`.
void dsdt(const double* s, double a, double* out) {
  const double theta1 = s[0], theta2 = s[1], dtheta1 = s[2], dtheta2 = s[3];
  // glibc's sincos for Python's cos(theta2), sin(theta2) (GCC merges them anyway; named so
  // that the batched kernel provably calls the same function).
  double sin2, cos2;
  ::sincos(theta2, &sin2, &cos2);
  const double d1 = kM1 * sq(kLc1) + kM2 * (sq(kL1) + sq(kLc2) + 2 * kL1 * kLc2 * cos2) + kI1 + kI2;
  const double d2 = kM2 * (sq(kLc2) + kL1 * kLc2 * cos2) + kI2;
  const double phi2 = kM2 * kLc2 * kG * std::cos(theta1 + theta2 - kPi / 2.0);
  const double phi1 = -kM2 * kL1 * kLc2 * sq(dtheta2) * sin2 - 2 * kM2 * kL1 * kLc2 * dtheta2 * dtheta1 * sin2 +
                      (kM1 * kLc1 + kM2 * kL1) * kG * std::cos(theta1 - kPi / 2) + phi2;
  const double ddtheta2 =
      (a + d2 / d1 * phi1 - kM2 * kL1 * kLc2 * sq(dtheta1) * sin2 - phi2) / (kM2 * sq(kLc2) + kI2 - sq(d2) / d1);
  const double ddtheta1 = -(d2 * ddtheta2 + phi1) / d1;
  out[0] = dtheta1;
  out[1] = dtheta2;
  out[2] = ddtheta1;
  out[3] = ddtheta2;
}

Space acrobot_obs_space() {
  const double v1 = static_cast<float>(kMaxVel1), v2 = static_cast<float>(kMaxVel2);
  return Space::box({-1, -1, -1, -1, -v1, -v2}, {1, 1, 1, 1, v1, v2});
}

}  // namespace

Acrobot::Acrobot() : Env("Acrobot-v1", acrobot_obs_space(), Space::discrete(3), 4, 500) {}

std::vector<double> Acrobot::get_state() const {
  double s[4];
  load(s);
  return {s[0], s[1], s[2], s[3]};
}

void Acrobot::observe(float* obs) const {
  double s[4];
  load(s);
  detail::acrobot::observe(s, obs);
}

namespace {

/// A start state drawn from `rng` (float32 values, as Gymnasium's).
inline void reset_state(RngCursor& rng, double* s) {
  constexpr double kLow = -0.1, kHigh = 0.1;
  for (int j = 0; j < 4; ++j) s[j] = static_cast<float>(kLow + (kHigh - kLow) * rng.uniform());
}

/// One transition of `s` (in place) under a valid action; writes the observation and
/// returns whether the new state is terminal.
inline bool transition(double* s, const double* action, float* obs) {
  const double torque = kTorques[static_cast<int>(action[0])];
  // rk4(_dsdt, [s, torque], [0, dt]); the torque component has derivative 0.
  const double dt = kDt - 0;
  const double dt2 = dt / 2.0;
  double k1[4], k2[4], k3[4], k4[4], y[4];
  dsdt(s, torque, k1);
  for (int i = 0; i < 4; ++i) y[i] = s[i] + dt2 * k1[i];
  dsdt(y, torque + dt2 * 0.0, k2);
  for (int i = 0; i < 4; ++i) y[i] = s[i] + dt2 * k2[i];
  dsdt(y, torque + dt2 * 0.0, k3);
  for (int i = 0; i < 4; ++i) y[i] = s[i] + dt * k3[i];
  dsdt(y, torque + dt * 0.0, k4);
  double ns[4];
  for (int i = 0; i < 4; ++i) ns[i] = s[i] + dt / 6.0 * (k1[i] + 2 * k2[i] + 2 * k3[i] + k4[i]);
  s[0] = wrap(ns[0], -kPi, kPi);
  s[1] = wrap(ns[1], -kPi, kPi);
  s[2] = bound(ns[2], -kMaxVel1, kMaxVel1);
  s[3] = bound(ns[3], -kMaxVel2, kMaxVel2);
  const bool term = detail::acrobot::terminal(s);
  detail::acrobot::observe(s, obs);
  return term;
}

}  // namespace

void Acrobot::reset_impl(RngCursor& rng, float* obs) {
  double s[4];
  reset_state(rng, s);
  put(s);
  detail::acrobot::observe(s, obs);
}

StepResult Acrobot::step_impl(const double* action, float* obs) {
  double s[4];
  load(s);
  StepResult r;
  r.terminated = transition(s, action, obs);
  put(s);
  r.reward = r.terminated ? 0.0 : -1.0;
  return r;
}

void Acrobot::step_batch(Env* const* envs, std::size_t n, const double* actions, float* obs, double* rewards,
                         std::uint8_t* terminated, std::uint8_t* truncated) const {
  const EnvSimd level = env_simd();
  if (level == EnvSimd::kScalar) {
    Env::step_batch(envs, n, actions, obs, rewards, terminated, truncated);
    return;
  }
  constexpr std::size_t kChunk = detail::kAcrobotChunk;
  struct alignas(64) Soa {
    double s[4][kChunk];
  };
  thread_local Soa soa;
  for (std::size_t b = 0; b < n; b += kChunk) {
    const std::size_t m = std::min(kChunk, n - b);
    for (std::size_t i = 0; i < m; ++i) {
      double s[4];
      static_cast<const Acrobot*>(envs[b + i])->load(s);
      for (int j = 0; j < 4; ++j) soa.s[j][i] = s[j];
    }
    const detail::AcrobotLanes l{
        {soa.s[0], soa.s[1], soa.s[2], soa.s[3]}, actions + b, obs + 6 * b, rewards + b, terminated + b};
    detail::acrobot_lanes(l, m, level);
    for (std::size_t i = 0; i < m; ++i) {
      auto* e = static_cast<Acrobot*>(envs[b + i]);
      const double s[4] = {soa.s[0][i], soa.s[1][i], soa.s[2][i], soa.s[3][i]};
      e->put(s);
      truncated[b + i] = e->count_step();
    }
  }
}

void Acrobot::set_state_impl(const double* state) { put(state); }

void Acrobot::bind(double* state, std::size_t stride, EpisodeClock* clock, ResetStream* stream) {
  double s[4];
  load(s);
  s_ = state != nullptr ? state : own_state_;
  stride_ = state != nullptr ? stride : 1;
  put(s);
  bind_episode(clock, stream);
}

std::unique_ptr<EnvStore> Acrobot::make_store(Env* const* envs, std::size_t n) const {
  return std::make_unique<AcrobotStore>(envs, n);
}

AcrobotStore::AcrobotStore(Env* const* envs, std::size_t n)
    : EnvStore(n), envs_(n), state_(4 * n), clocks_(n), streams_(n) {
  for (std::size_t k = 0; k < n; ++k) {
    auto* e = dynamic_cast<Acrobot*>(envs[k]);
    HERD_REQUIRE(e != nullptr, "AcrobotStore: environment {} is not an Acrobot", k);
    HERD_REQUIRE(e->s_ == e->own_state_, "AcrobotStore: environment {} ({} env {}) is already in a store", k, e->id(),
                 e->global_id());
    envs_[k] = e;
  }
  for (std::size_t k = 0; k < n; ++k) envs_[k]->bind(state_.data() + k, n, &clocks_[k], &streams_[k]);
}

AcrobotStore::~AcrobotStore() {
  for (Acrobot* e : envs_) e->bind(nullptr, 1, nullptr, nullptr);
}

void AcrobotStore::step(std::size_t b, std::size_t e, const double* actions, float* obs, double* rewards,
                        std::uint8_t* terminated, std::uint8_t* truncated) {
  const std::size_t n = size();
  double* const s0 = state_.data();
  const EnvSimd level = env_simd();
  constexpr std::size_t kChunk = detail::kAcrobotChunk;
  for (std::size_t c = b; c < e; c += kChunk) {
    const std::size_t m = std::min(kChunk, e - c), j = c - b;
    if (level == EnvSimd::kScalar) {
      for (std::size_t i = 0; i < m; ++i) {
        double s[4];
        for (std::size_t q = 0; q < 4; ++q) s[q] = s0[q * n + c + i];
        const bool term = transition(s, actions + j + i, obs + 6 * (j + i));
        for (std::size_t q = 0; q < 4; ++q) s0[q * n + c + i] = s[q];
        terminated[j + i] = term;
        rewards[j + i] = term ? 0.0 : -1.0;
      }
    } else {
      const detail::AcrobotLanes l{
          {s0 + c, s0 + n + c, s0 + 2 * n + c, s0 + 3 * n + c}, actions + j, obs + 6 * j, rewards + j, terminated + j};
      detail::acrobot_lanes(l, m, level);
    }
    for (std::size_t i = 0; i < m; ++i) truncated[j + i] = clocks_[c + i].count_step();
  }
}

void AcrobotStore::reset_done(std::size_t b, std::size_t e, const std::uint8_t* terminated,
                              const std::uint8_t* truncated, float* obs, float* final_obs) {
  const std::size_t n = size();
  double* const s0 = state_.data();
  for (std::size_t k = b; k < e; ++k) {
    if ((terminated[k - b] | truncated[k - b]) == 0) continue;
    float* row = obs + 6 * (k - b);
    if (final_obs != nullptr) std::copy(row, row + 6, final_obs + 6 * (k - b));
    ResetStream& rs = streams_[k];
    if (!rs.has_reset) {  // never reset: Env::reset's seeded first reset
      envs_[k]->reset(row);
      continue;
    }
    // Env::reset(obs) and Acrobot::reset_impl, on the store's elements.
    clocks_[k].elapsed = 0;
    RngCursor rng = rs.next_episode();
    double s[4];
    reset_state(rng, s);
    for (std::size_t q = 0; q < 4; ++q) s0[q * n + k] = s[q];
    detail::acrobot::observe(s, row);
  }
}

}  // namespace herd::rl
