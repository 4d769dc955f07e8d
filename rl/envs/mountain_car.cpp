// MountainCar-v0 and MountainCarContinuous-v0. Compiled with -ffp-contract=off
// -fno-builtin-pow and no -march: operations follow Gymnasium 1.4.0's mountain_car.py and
// continuous_mountain_car.py in order, so results are bit-identical with them.
#include <cmath>

#include "herd/rl/envs.hpp"

namespace herd::rl {
namespace {

constexpr double kMinPosition = -1.2;
constexpr double kMaxPosition = 0.6;
constexpr double kMaxSpeed = 0.07;
constexpr double kResetLow = -0.6, kResetHigh = -0.4;

Space mountain_car_obs_space() {
  return Space::box({static_cast<float>(kMinPosition), static_cast<float>(-kMaxSpeed)},
                    {static_cast<float>(kMaxPosition), static_cast<float>(kMaxSpeed)});
}

/// np.clip(x, lo, hi) of a finite scalar.
inline double clip(double x, double lo, double hi) { return x < lo ? lo : (x > hi ? hi : x); }

}  // namespace

// --- MountainCar-v0 --------------------------------------------------------------------

MountainCar::MountainCar() : Env("MountainCar-v0", mountain_car_obs_space(), Space::discrete(3), 2, 200) {}

std::vector<double> MountainCar::get_state() const { return {position_, velocity_}; }

void MountainCar::observe(float* obs) const {
  obs[0] = static_cast<float>(position_);
  obs[1] = static_cast<float>(velocity_);
}

void MountainCar::reset_impl(RngCursor& rng, float* obs) {
  position_ = kResetLow + (kResetHigh - kResetLow) * rng.uniform();
  velocity_ = 0.0;
  observe(obs);
}

StepResult MountainCar::step_impl(const double* action, float* obs) {
  constexpr double kForce = 0.001, kGravity = 0.0025, kGoalPosition = 0.5, kGoalVelocity = 0;
  const double a = action[0];
  double position = position_, velocity = velocity_;
  velocity += (a - 1) * kForce + std::cos(3 * position) * -kGravity;
  velocity = clip(velocity, -kMaxSpeed, kMaxSpeed);
  position += velocity;
  position = clip(position, kMinPosition, kMaxPosition);
  if (position == kMinPosition && velocity < 0) velocity = 0;
  StepResult r;
  r.terminated = position >= kGoalPosition && velocity >= kGoalVelocity;
  r.reward = -1.0;
  position_ = position;
  velocity_ = velocity;
  observe(obs);
  return r;
}

void MountainCar::set_state_impl(const double* state) {
  position_ = state[0];
  velocity_ = state[1];
}

// --- MountainCarContinuous-v0 ------------------------------------------------------------

MountainCarContinuous::MountainCarContinuous()
    : Env("MountainCarContinuous-v0", mountain_car_obs_space(), Space::box({-1.0}, {1.0}), 2, 999) {}

std::vector<double> MountainCarContinuous::get_state() const { return {position_, velocity_}; }

void MountainCarContinuous::observe(float* obs) const {
  obs[0] = static_cast<float>(position_);
  obs[1] = static_cast<float>(velocity_);
}

void MountainCarContinuous::reset_impl(RngCursor& rng, float* obs) {
  position_ = kResetLow + (kResetHigh - kResetLow) * rng.uniform();
  velocity_ = 0.0;  // float64 until the first step, as in Gymnasium
  observe(obs);
}

StepResult MountainCarContinuous::step_impl(const double* action, float* obs) {
  constexpr double kMinAction = -1.0, kMaxAction = 1.0, kPower = 0.0015;
  constexpr double kGoalPosition = 0.45, kGoalVelocity = 0;
  const double a = action[0];
  double position = position_, velocity = velocity_;
  // force = min(max(action[0], min_action), max_action) with Python's min/max.
  double force = (kMinAction > a) ? kMinAction : a;
  force = (kMaxAction < force) ? kMaxAction : force;
  velocity += force * kPower - 0.0025 * std::cos(3 * position);
  if (velocity > kMaxSpeed) velocity = kMaxSpeed;
  if (velocity < -kMaxSpeed) velocity = -kMaxSpeed;
  position += velocity;
  if (position > kMaxPosition) position = kMaxPosition;
  if (position < kMinPosition) position = kMinPosition;
  if (position == kMinPosition && velocity < 0) velocity = 0;
  StepResult r;
  r.terminated = position >= kGoalPosition && velocity >= kGoalVelocity;
  double reward = 0.0;
  if (r.terminated) reward = 100.0;
  reward -= std::pow(a, 2.0) * 0.1;  // math.pow(action[0], 2) of the unclipped action
  r.reward = reward;
  position_ = static_cast<float>(position);  // Gymnasium stores the state as float32
  velocity_ = static_cast<float>(velocity);
  observe(obs);
  return r;
}

void MountainCarContinuous::set_state_impl(const double* state) {
  position_ = state[0];
  velocity_ = state[1];
}

}  // namespace herd::rl
