// CartPole-v1. Compiled with -ffp-contract=off and no -march: the operations below follow
// Gymnasium 1.4.0's cartpole.py in order, so results are bit-identical with it.
#include <algorithm>
#include <cmath>
#include <numbers>

#include "classic_simd.hpp"
#include "herd/rl/envs.hpp"

namespace herd::rl {
namespace {

using namespace detail::cartpole;

Space cartpole_obs_space() {
  const double high[4] = {static_cast<float>(kXThreshold * 2), HUGE_VAL, static_cast<float>(kThetaThreshold * 2),
                          HUGE_VAL};
  return Space::box({-high[0], -high[1], -high[2], -high[3]}, {high[0], high[1], high[2], high[3]});
}

/// The transition, inlined into both the exported function and the batched loop.
inline bool transition(CartPoleState& s, std::int64_t action) {
  const double force = action == 1 ? kForceMag : -kForceMag;
  // glibc's sincos: what GCC makes of Gymnasium's math.cos/math.sin pair anyway, named here
  // so that the batched kernels provably call the same function.
  double sintheta, costheta;
  ::sincos(s.theta, &sintheta, &costheta);
  const double temp = (force + kPoleMassLength * (s.theta_dot * s.theta_dot) * sintheta) / kTotalMass;
  const double thetaacc = (kGravity * sintheta - costheta * temp) /
                          (kLength * (4.0 / 3.0 - kMassPole * (costheta * costheta) / kTotalMass));
  const double xacc = temp - kPoleMassLength * thetaacc * costheta / kTotalMass;
  s.x = s.x + kTau * s.x_dot;
  s.x_dot = s.x_dot + kTau * xacc;
  s.theta = s.theta + kTau * s.theta_dot;
  s.theta_dot = s.theta_dot + kTau * thetaacc;
  return s.x < -kXThreshold || s.x > kXThreshold || s.theta < -kThetaThreshold || s.theta > kThetaThreshold;
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

void CartPole::step_batch(Env* const* envs, std::size_t n, const double* actions, float* obs, double* rewards,
                          std::uint8_t* terminated, std::uint8_t* truncated) const {
  const EnvSimd level = env_simd();
  if (level == EnvSimd::kScalar) {
    for (std::size_t i = 0; i < n; ++i) {
      auto* e = static_cast<CartPole*>(envs[i]);
      const bool term = transition(e->s_, static_cast<std::int64_t>(actions[i]));
      rewards[i] = (term && e->after_terminal_) ? 0.0 : 1.0;
      if (term) e->after_terminal_ = true;
      terminated[i] = term;
      truncated[i] = e->count_step();
      cartpole_observe(e->s_, obs + 4 * i);
    }
    return;
  }
  // Chunks of structure-of-arrays copies of the states (they stay in L1), stepped by the
  // vector kernel; the remainder of a chunk that fills no vector takes the scalar kernel.
  constexpr std::size_t kChunk = 256;
  struct alignas(64) Soa {
    double x[kChunk], x_dot[kChunk], theta[kChunk], theta_dot[kChunk], sin[kChunk], cos[kChunk];
  };
  thread_local Soa soa;
  const std::size_t lanes = detail::simd_lanes(level);
  for (std::size_t b = 0; b < n; b += kChunk) {
    const std::size_t m = std::min(kChunk, n - b);
    for (std::size_t i = 0; i < m; ++i) {
      // The env objects are separate allocations: fetch a few ahead (thousands of envs
      // exceed L2, and the scatter below touches the same lines again).
      if (b + i + 16 < n) {
        const Env* ahead = envs[b + i + 16];
        __builtin_prefetch(ahead, 1);  // the base's step count
        __builtin_prefetch(&static_cast<const CartPole*>(ahead)->s_, 1);
      }
      const CartPoleState& s = static_cast<const CartPole*>(envs[b + i])->s_;
      soa.x[i] = s.x;
      soa.x_dot[i] = s.x_dot;
      soa.theta[i] = s.theta;
      soa.theta_dot[i] = s.theta_dot;
    }
    // The bits of glibc's sincos (the scalar path's function, see `transition`): vector
    // lanes in extra precision, glibc's sincos where the rounding is close to ambiguous.
    detail::sincos_lanes(soa.theta, soa.sin, soa.cos, m, level, nullptr);
    const detail::CartPoleLanes l{soa.x,   soa.x_dot,   soa.theta,   soa.theta_dot, soa.sin,
                                  soa.cos, actions + b, obs + 4 * b, terminated + b};
    const std::size_t vec = m - m % lanes;
    if (level == EnvSimd::kAvx512) detail::cartpole_lanes_avx512(l, vec);
    else detail::cartpole_lanes_avx2(l, vec);
    if (vec < m) {
      const detail::CartPoleLanes t{soa.x + vec,         soa.x_dot + vec,     soa.theta + vec,
                                    soa.theta_dot + vec, soa.sin + vec,       soa.cos + vec,
                                    actions + b + vec,   obs + 4 * (b + vec), terminated + b + vec};
      detail::cartpole_lanes_scalar(t, m - vec);
    }
    for (std::size_t i = 0; i < m; ++i) {
      auto* e = static_cast<CartPole*>(envs[b + i]);
      e->s_ = {soa.x[i], soa.x_dot[i], soa.theta[i], soa.theta_dot[i]};
      const bool term = terminated[b + i] != 0;
      rewards[b + i] = (term && e->after_terminal_) ? 0.0 : 1.0;
      e->after_terminal_ = e->after_terminal_ || term;
      truncated[b + i] = e->count_step();
    }
  }
}

void CartPole::set_state_impl(const double* state) {
  s_ = {state[0], state[1], state[2], state[3]};
  after_terminal_ = false;
}

}  // namespace herd::rl
