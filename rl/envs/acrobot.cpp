// Acrobot-v1. Compiled with -ffp-contract=off -fno-builtin-pow and no -march: the
// operations below follow Gymnasium 1.4.0's acrobot.py ("book" dynamics, RK4) in order,
// with glibc's pow where Python squares with `**`, so results are bit-identical with it.
#include <algorithm>
#include <cmath>
#include <numbers>

#include "classic_simd.hpp"
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

std::vector<double> Acrobot::get_state() const { return {s_[0], s_[1], s_[2], s_[3]}; }

void Acrobot::observe(float* obs) const { detail::acrobot::observe(s_, obs); }

void Acrobot::reset_impl(RngCursor& rng, float* obs) {
  constexpr double kLow = -0.1, kHigh = 0.1;
  for (double& v : s_) v = static_cast<float>(kLow + (kHigh - kLow) * rng.uniform());
  observe(obs);
}

StepResult Acrobot::step_impl(const double* action, float* obs) {
  const double torque = kTorques[static_cast<int>(action[0])];
  // rk4(_dsdt, [s, torque], [0, dt]); the torque component has derivative 0.
  const double dt = kDt - 0;
  const double dt2 = dt / 2.0;
  double k1[4], k2[4], k3[4], k4[4], y[4];
  dsdt(s_, torque, k1);
  for (int i = 0; i < 4; ++i) y[i] = s_[i] + dt2 * k1[i];
  dsdt(y, torque + dt2 * 0.0, k2);
  for (int i = 0; i < 4; ++i) y[i] = s_[i] + dt2 * k2[i];
  dsdt(y, torque + dt2 * 0.0, k3);
  for (int i = 0; i < 4; ++i) y[i] = s_[i] + dt * k3[i];
  dsdt(y, torque + dt * 0.0, k4);
  double ns[4];
  for (int i = 0; i < 4; ++i) ns[i] = s_[i] + dt / 6.0 * (k1[i] + 2 * k2[i] + 2 * k3[i] + k4[i]);
  s_[0] = wrap(ns[0], -kPi, kPi);
  s_[1] = wrap(ns[1], -kPi, kPi);
  s_[2] = bound(ns[2], -kMaxVel1, kMaxVel1);
  s_[3] = bound(ns[3], -kMaxVel2, kMaxVel2);
  StepResult r;
  r.terminated = detail::acrobot::terminal(s_);
  r.reward = r.terminated ? 0.0 : -1.0;
  observe(obs);
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
      const double* s = static_cast<const Acrobot*>(envs[b + i])->s_;
      for (int j = 0; j < 4; ++j) soa.s[j][i] = s[j];
    }
    const detail::AcrobotLanes l{
        {soa.s[0], soa.s[1], soa.s[2], soa.s[3]}, actions + b, obs + 6 * b, rewards + b, terminated + b};
    detail::acrobot_lanes(l, m, level);
    for (std::size_t i = 0; i < m; ++i) {
      auto* e = static_cast<Acrobot*>(envs[b + i]);
      for (int j = 0; j < 4; ++j) e->s_[j] = soa.s[j][i];
      truncated[b + i] = e->count_step();
    }
  }
}

void Acrobot::set_state_impl(const double* state) {
  for (int i = 0; i < 4; ++i) s_[i] = state[i];
}

}  // namespace herd::rl
