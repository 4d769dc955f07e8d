// Acrobot-v1. Compiled with -ffp-contract=off -fno-builtin-pow and no -march: the
// operations below follow Gymnasium 1.4.0's acrobot.py ("book" dynamics, RK4) in order,
// with glibc's pow where Python squares with `**`, so results are bit-identical with it.
#include <cmath>
#include <numbers>

#include "herd/rl/envs.hpp"

namespace herd::rl {
namespace {

constexpr double kPi = std::numbers::pi;
constexpr double kDt = 0.2;
constexpr double kL1 = 1.0;   // LINK_LENGTH_1
constexpr double kM1 = 1.0;   // LINK_MASS_1
constexpr double kM2 = 1.0;   // LINK_MASS_2
constexpr double kLc1 = 0.5;  // LINK_COM_POS_1
constexpr double kLc2 = 0.5;  // LINK_COM_POS_2
constexpr double kI1 = 1.0;   // LINK_MOI
constexpr double kI2 = 1.0;
constexpr double kG = 9.8;
constexpr double kMaxVel1 = 4 * kPi;
constexpr double kMaxVel2 = 9 * kPi;
constexpr double kTorques[3] = {-1.0, 0.0, 1.0};

/// Python's `x ** 2` on a float: glibc pow, kept from being folded to x * x.
inline double sq(double x) { return std::pow(x, 2.0); }

/// Time derivative of (theta1, theta2, dtheta1, dtheta2) under torque `a`.
void dsdt(const double* s, double a, double* out) {
  const double theta1 = s[0], theta2 = s[1], dtheta1 = s[2], dtheta2 = s[3];
  const double d1 =
      kM1 * sq(kLc1) + kM2 * (sq(kL1) + sq(kLc2) + 2 * kL1 * kLc2 * std::cos(theta2)) + kI1 + kI2;
  const double d2 = kM2 * (sq(kLc2) + kL1 * kLc2 * std::cos(theta2)) + kI2;
  const double phi2 = kM2 * kLc2 * kG * std::cos(theta1 + theta2 - kPi / 2.0);
  const double phi1 = -kM2 * kL1 * kLc2 * sq(dtheta2) * std::sin(theta2) -
                      2 * kM2 * kL1 * kLc2 * dtheta2 * dtheta1 * std::sin(theta2) +
                      (kM1 * kLc1 + kM2 * kL1) * kG * std::cos(theta1 - kPi / 2) + phi2;
  const double ddtheta2 =
      (a + d2 / d1 * phi1 - kM2 * kL1 * kLc2 * sq(dtheta1) * std::sin(theta2) - phi2) /
      (kM2 * sq(kLc2) + kI2 - sq(d2) / d1);
  const double ddtheta1 = -(d2 * ddtheta2 + phi1) / d1;
  out[0] = dtheta1;
  out[1] = dtheta2;
  out[2] = ddtheta1;
  out[3] = ddtheta2;
}

double wrap(double x, double m, double big_m) {
  const double diff = big_m - m;
  while (x > big_m) x = x - diff;
  while (x < m) x = x + diff;
  return x;
}

/// Python's min(max(x, m), M).
double bound(double x, double m, double big_m) {
  const double y = (m > x) ? m : x;
  return (big_m < y) ? big_m : y;
}

Space acrobot_obs_space() {
  const double v1 = static_cast<float>(kMaxVel1), v2 = static_cast<float>(kMaxVel2);
  return Space::box({-1, -1, -1, -1, -v1, -v2}, {1, 1, 1, 1, v1, v2});
}

}  // namespace

Acrobot::Acrobot() : Env("Acrobot-v1", acrobot_obs_space(), Space::discrete(3), 4, 500) {}

std::vector<double> Acrobot::get_state() const { return {s_[0], s_[1], s_[2], s_[3]}; }

void Acrobot::observe(float* obs) const {
  obs[0] = static_cast<float>(std::cos(s_[0]));
  obs[1] = static_cast<float>(std::sin(s_[0]));
  obs[2] = static_cast<float>(std::cos(s_[1]));
  obs[3] = static_cast<float>(std::sin(s_[1]));
  obs[4] = static_cast<float>(s_[2]);
  obs[5] = static_cast<float>(s_[3]);
}

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
  r.terminated = -std::cos(s_[0]) - std::cos(s_[1] + s_[0]) > 1.0;
  r.reward = r.terminated ? 0.0 : -1.0;
  observe(obs);
  return r;
}

void Acrobot::set_state_impl(const double* state) {
  for (int i = 0; i < 4; ++i) s_[i] = state[i];
}

}  // namespace herd::rl
