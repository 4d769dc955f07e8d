// CartPole-v1. Compiled with -ffp-contract=off and no -march: the operations below follow
// Gymnasium 1.4.0's cartpole.py in order, so results are bit-identical with it.
#include <cmath>
#include <numbers>

#include "herd/rl/envs.hpp"

namespace herd::rl {
namespace {

constexpr double kGravity = 9.8;
constexpr double kMassCart = 1.0;
constexpr double kMassPole = 0.1;
constexpr double kTotalMass = kMassPole + kMassCart;
constexpr double kLength = 0.5;  // half the pole's length
constexpr double kPoleMassLength = kMassPole * kLength;
constexpr double kForceMag = 10.0;
constexpr double kTau = 0.02;  // seconds between state updates
constexpr double kThetaThreshold = 12 * 2 * std::numbers::pi / 360;
constexpr double kXThreshold = 2.4;

Space cartpole_obs_space() {
  const double high[4] = {static_cast<float>(kXThreshold * 2), HUGE_VAL,
                          static_cast<float>(kThetaThreshold * 2), HUGE_VAL};
  return Space::box({-high[0], -high[1], -high[2], -high[3]},
                    {high[0], high[1], high[2], high[3]});
}

/// The transition, inlined into both the exported function and the batched loop.
inline bool transition(CartPoleState& s, std::int64_t action) {
  const double force = action == 1 ? kForceMag : -kForceMag;
  const double costheta = std::cos(s.theta);
  const double sintheta = std::sin(s.theta);
  const double temp =
      (force + kPoleMassLength * (s.theta_dot * s.theta_dot) * sintheta) / kTotalMass;
  const double thetaacc = (kGravity * sintheta - costheta * temp) /
                          (kLength * (4.0 / 3.0 - kMassPole * (costheta * costheta) / kTotalMass));
  const double xacc = temp - kPoleMassLength * thetaacc * costheta / kTotalMass;
  s.x = s.x + kTau * s.x_dot;
  s.x_dot = s.x_dot + kTau * xacc;
  s.theta = s.theta + kTau * s.theta_dot;
  s.theta_dot = s.theta_dot + kTau * thetaacc;
  return s.x < -kXThreshold || s.x > kXThreshold || s.theta < -kThetaThreshold ||
         s.theta > kThetaThreshold;
}

}  // namespace

bool cartpole_transition(CartPoleState& s, std::int64_t action) { return transition(s, action); }

CartPoleState cartpole_reset_state(RngCursor& rng) {
  constexpr double kLow = -0.05, kHigh = 0.05;
  CartPoleState s;
  s.x = kLow + (kHigh - kLow) * rng.uniform();
  s.x_dot = kLow + (kHigh - kLow) * rng.uniform();
  s.theta = kLow + (kHigh - kLow) * rng.uniform();
  s.theta_dot = kLow + (kHigh - kLow) * rng.uniform();
  return s;
}

CartPole::CartPole() : Env("CartPole-v1", cartpole_obs_space(), Space::discrete(2), 4, 500) {}

std::vector<double> CartPole::get_state() const { return {s_.x, s_.x_dot, s_.theta, s_.theta_dot}; }

void CartPole::observe(float* obs) const { cartpole_observe(s_, obs); }

void CartPole::reset_impl(RngCursor& rng, float* obs) {
  s_ = cartpole_reset_state(rng);
  after_terminal_ = false;
  cartpole_observe(s_, obs);
}

StepResult CartPole::step_impl(const double* action, float* obs) {
  StepResult r;
  r.terminated = cartpole_transition(s_, static_cast<std::int64_t>(action[0]));
  // Reward 1 per step, including the terminating one; 0 for steps after it (Gymnasium's
  // steps_beyond_terminated rule for callers that step on after termination).
  r.reward = (r.terminated && after_terminal_) ? 0.0 : 1.0;
  if (r.terminated) after_terminal_ = true;
  cartpole_observe(s_, obs);
  return r;
}

void CartPole::step_batch(Env* const* envs, std::size_t n, const double* actions, float* obs,
                          double* rewards, std::uint8_t* terminated,
                          std::uint8_t* truncated) const {
  for (std::size_t i = 0; i < n; ++i) {
    auto* e = static_cast<CartPole*>(envs[i]);
    const bool term = transition(e->s_, static_cast<std::int64_t>(actions[i]));
    rewards[i] = (term && e->after_terminal_) ? 0.0 : 1.0;
    if (term) e->after_terminal_ = true;
    terminated[i] = term;
    truncated[i] = e->count_step();
    cartpole_observe(e->s_, obs + 4 * i);
  }
}

void CartPole::set_state_impl(const double* state) {
  s_ = {state[0], state[1], state[2], state[3]};
  after_terminal_ = false;
}

}  // namespace herd::rl
