#pragma once
// Internal to rl/envs: the SIMD-across-envs kernels of CartPole and Acrobot over
// structure-of-arrays state (one array per state component, lane i = env i of a chunk).
//
// Bit-exactness with the scalar path (the reference, `cartpole_transition` and
// `Acrobot::step_impl`): every lane performs the same IEEE-754 double operations in the same
// order as the scalar code (vector add/sub/mul/div/compare/convert round exactly as their
// scalar forms), the sources are compiled with -ffp-contract=off (no fused multiply-add,
// also not between intrinsics), and every transcendental value is the bits of the glibc
// function the scalar path calls: Acrobot's `sincos`, `cos`, `pow` are called once per
// lane; CartPole's `sincos` comes from `sincos_lanes`, correctly rounded vector lanes with
// glibc's `sincos` wherever the rounding is close to ambiguous (`env_sincos`). The kernels
// never use vector math libraries (libmvec/SVML round differently).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <numbers>

#include "herd/rl/envs.hpp"

namespace herd::rl::detail {

/// CartPole's constants (Gymnasium 1.4.0 cartpole.py), shared by both paths.
namespace cartpole {
inline constexpr double kGravity = 9.8;
inline constexpr double kMassCart = 1.0;
inline constexpr double kMassPole = 0.1;
inline constexpr double kTotalMass = kMassPole + kMassCart;
inline constexpr double kLength = 0.5;  // half the pole's length
inline constexpr double kPoleMassLength = kMassPole * kLength;
inline constexpr double kForceMag = 10.0;
inline constexpr double kTau = 0.02;  // seconds between state updates
inline constexpr double kThetaThreshold = 12 * 2 * std::numbers::pi / 360;
inline constexpr double kXThreshold = 2.4;
inline constexpr double kResetLow = -0.05, kResetHigh = 0.05;  // start-state components: uniform in (low, high)
/// A start-state component from a uniform `u` in (0, 1): low + (high - low) u (the vector
/// start states apply the same operations lane by lane).
constexpr double reset_component(double u) { return kResetLow + (kResetHigh - kResetLow) * u; }
}  // namespace cartpole

/// One chunk of CartPoles in SoA form. Inputs: state arrays, `sin`/`cos` of theta (glibc
/// `sincos`'s bits), actions (0 or 1 as float64). Outputs: the state arrays updated in place,
/// `obs` rows `[n, 4]` float32, `terminated` `[n]` 0/1.
struct CartPoleLanes {
  double* x;
  double* x_dot;
  double* theta;
  double* theta_dot;
  const double* sin_theta;
  const double* cos_theta;
  const double* action;
  float* obs;
  std::uint8_t* terminated;
};

/// Acrobot's constants (Gymnasium 1.4.0 acrobot.py), shared by both paths.
namespace acrobot {
inline constexpr double kPi = std::numbers::pi;
inline constexpr double kDt = 0.2;
inline constexpr double kL1 = 1.0;   // LINK_LENGTH_1
inline constexpr double kM1 = 1.0;   // LINK_MASS_1
inline constexpr double kM2 = 1.0;   // LINK_MASS_2
inline constexpr double kLc1 = 0.5;  // LINK_COM_POS_1
inline constexpr double kLc2 = 0.5;  // LINK_COM_POS_2
inline constexpr double kI1 = 1.0;   // LINK_MOI
inline constexpr double kI2 = 1.0;
inline constexpr double kG = 9.8;
inline constexpr double kMaxVel1 = 4 * kPi;
inline constexpr double kMaxVel2 = 9 * kPi;
inline constexpr double kTorques[3] = {-1.0, 0.0, 1.0};

/// Python's `x ** 2` on a float: glibc pow (the sources are compiled with
/// -fno-builtin-pow, so it is never folded to x * x).
inline double sq(double x) { return std::pow(x, 2.0); }

/// acrobot.py's wrap: x shifted by multiples of big_m - m into [m, big_m].
inline double wrap(double x, double m, double big_m) {
  const double diff = big_m - m;
  while (x > big_m) x = x - diff;
  while (x < m) x = x + diff;
  return x;
}

/// Python's min(max(x, m), M).
inline double bound(double x, double m, double big_m) {
  const double y = (m > x) ? m : x;
  return (big_m < y) ? big_m : y;
}

/// The float32 observation `[cos t1, sin t1, cos t2, sin t2, dt1, dt2]` of a state.
inline void observe(const double* s, float* obs) {
  double s0, c0, s1, c1;
  ::sincos(s[0], &s0, &c0);
  ::sincos(s[1], &s1, &c1);
  obs[0] = static_cast<float>(c0);
  obs[1] = static_cast<float>(s0);
  obs[2] = static_cast<float>(c1);
  obs[3] = static_cast<float>(s1);
  obs[4] = static_cast<float>(s[2]);
  obs[5] = static_cast<float>(s[3]);
}

/// Whether a state is terminal: -cos(t1) - cos(t2 + t1) > 1.
inline bool terminal(const double* s) { return -std::cos(s[0]) - std::cos(s[1] + s[0]) > 1.0; }
}  // namespace acrobot

/// One chunk of Acrobots in SoA form (at most `kAcrobotChunk` lanes): the state arrays
/// `theta1, theta2, dtheta1, dtheta2` are updated in place; actions are 0, 1, 2 as float64;
/// outputs `obs` rows `[n, 6]` float32, `reward` and `terminated` `[n]`.
inline constexpr std::size_t kAcrobotChunk = 256;
struct AcrobotLanes {
  double* s[4];
  const double* action;
  float* obs;
  double* reward;
  std::uint8_t* terminated;
};

/// One RK4 step of Acrobot lanes [0, n), n <= kAcrobotChunk, the arithmetic `lanes`
/// (1, 4 or 8) at a time; libm calls one lane at a time. Thread-safe (thread-local scratch).
void acrobot_lanes(const AcrobotLanes& l, std::size_t n, EnvSimd level);

/// Steps lanes [0, n) with 8-wide AVX-512 vectors (n a multiple of 8). Needs AVX-512F/DQ.
void cartpole_lanes_avx512(const CartPoleLanes& l, std::size_t n);
/// Steps lanes [0, n) with 4-wide AVX2 vectors (n a multiple of 4). Needs AVX2.
void cartpole_lanes_avx2(const CartPoleLanes& l, std::size_t n);
/// Steps lanes [0, n) one at a time (the portable form; the same operations).
void cartpole_lanes_scalar(const CartPoleLanes& l, std::size_t n);

/// Rewards, after-termination flags, step counts and truncation flags of CartPole lanes
/// [0, n) after the transition wrote `terminated` (0/1), as `CartPole::step_impl` and
/// `EpisodeClock::count_step` per env: reward 0 for a terminal step after an earlier
/// terminal one, else 1; `after_terminal |= terminated`; `++elapsed`; truncated when
/// `limit > 0 && elapsed >= limit`. Vector lanes 4 (avx2) or 8 (avx512) at a time, the
/// rest one at a time; the same values at every level. All arrays `[n]`.
void cartpole_finish(std::size_t n, const std::uint8_t* terminated, std::uint8_t* after_terminal, EpisodeClock* clocks,
                     double* rewards, std::uint8_t* truncated, EnvSimd level);

/// Inputs and outputs of `cartpole_start_states`, arrays of `m` elements (env i of a batch
/// of resets at element i): the Philox4x32-10 counter words 1-3 and key of block 0 of each
/// env's episode (`RngStream::block_input(episode, 0, ...)`; block 1 differs in counter
/// word 0 only), and the start states drawn from them.
struct CartPoleStarts {
  const std::uint32_t* c1;
  const std::uint32_t* c2;
  const std::uint32_t* c3;
  const std::uint32_t* k0;
  const std::uint32_t* k1;
  double* x;
  double* x_dot;
  double* theta;
  double* theta_dot;
};

/// CartPole start states of `m` envs from their reset streams, the values of
/// `cartpole_reset_state(stream.at(episode))`: uniforms u0, u1 from words 0-1 and 2-3 of
/// block 0, u2, u3 from block 1 (`RngCursor::uniform`, the first word low), each state
/// component -0.05 + 0.1 u. At the avx2 (avx512) level 4 (8) envs per group, both blocks
/// of each env in the 32-bit lanes of one vector (Philox4x32-10's rounds on 8 or 16 lanes
/// at once); the last group is padded. At the scalar level one env at a time. Integer
/// arithmetic and exact conversions, so every level gives the same bits. Thread-safe.
void cartpole_start_states(const CartPoleStarts& s, std::size_t m, EnvSimd level);

/// `env_sincos` without the level check: lanes [0, n) at `level` (the avx2 level needs FMA,
/// else every lane takes glibc's `sincos`). Thread-safe.
std::size_t sincos_lanes(const double* x, double* s, double* c, std::size_t n, EnvSimd level, std::uint8_t* fell_back);

/// Vector width (lanes) of a SIMD level: 1, 4 or 8.
std::size_t simd_lanes(EnvSimd level);

}  // namespace herd::rl::detail
