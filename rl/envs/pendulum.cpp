// Pendulum-v1. Compiled with -ffp-contract=off -fno-builtin-pow and no -march: operations
// follow Gymnasium 1.4.0's pendulum.py in order (glibc pow for `**`, Python's float `%`),
// so results are bit-identical with it.
#include <cmath>
#include <numbers>

#include "herd/rl/envs.hpp"

namespace herd::rl {
namespace {

constexpr double kPi = std::numbers::pi;
constexpr double kMaxSpeed = 8;
constexpr double kMaxTorque = 2.0;
constexpr double kDt = 0.05;
constexpr double kG = 10.0;
constexpr double kM = 1.0;
constexpr double kL = 1.0;

/// Python's float `%` (NumPy's remainder): the result has the sign of the divisor.
double py_mod(double x, double y) {
  double mod = std::fmod(x, y);
  if (mod != 0.0) {
    if ((y < 0) != (mod < 0)) mod += y;
  } else {
    mod = std::copysign(0.0, y);
  }
  return mod;
}

double angle_normalize(double x) { return py_mod(x + kPi, 2 * kPi) - kPi; }

inline double clip(double x, double lo, double hi) { return x < lo ? lo : (x > hi ? hi : x); }

}  // namespace

Pendulum::Pendulum()
    : Env("Pendulum-v1", Space::box({-1.0, -1.0, -kMaxSpeed}, {1.0, 1.0, kMaxSpeed}),
          Space::box({-kMaxTorque}, {kMaxTorque}), 2, 200) {}

std::vector<double> Pendulum::get_state() const { return {th_, thdot_}; }

void Pendulum::observe(float* obs) const {
  obs[0] = static_cast<float>(std::cos(th_));
  obs[1] = static_cast<float>(std::sin(th_));
  obs[2] = static_cast<float>(thdot_);
}

void Pendulum::reset_impl(RngCursor& rng, float* obs) {
  constexpr double kHighX = kPi, kHighY = 1.0;
  th_ = -kHighX + (kHighX - -kHighX) * rng.uniform();
  thdot_ = -kHighY + (kHighY - -kHighY) * rng.uniform();
  observe(obs);
}

StepResult Pendulum::step_impl(const double* action, float* obs) {
  const double th = th_, thdot = thdot_;
  const double u = clip(action[0], -kMaxTorque, kMaxTorque);
  const double costs = std::pow(angle_normalize(th), 2.0) + 0.1 * std::pow(thdot, 2.0) + 0.001 * std::pow(u, 2.0);
  double newthdot = thdot + (3 * kG / (2 * kL) * std::sin(th) + 3.0 / (kM * std::pow(kL, 2.0)) * u) * kDt;
  newthdot = clip(newthdot, -kMaxSpeed, kMaxSpeed);
  const double newth = th + newthdot * kDt;
  th_ = newth;
  thdot_ = newthdot;
  StepResult r;
  r.reward = -costs;
  r.terminated = false;
  observe(obs);
  return r;
}

void Pendulum::set_state_impl(const double* state) {
  th_ = state[0];
  thdot_ = state[1];
}

}  // namespace herd::rl
