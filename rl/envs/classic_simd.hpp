#pragma once
// Internal to rl/envs: the SIMD-across-envs kernels of CartPole and Acrobot over
// structure-of-arrays state (one array per state component, lane i = env i of a chunk).
//
// Bit-exactness with the scalar path (the reference, `cartpole_transition` and
// `Acrobot::step_impl`): every lane performs the same IEEE-754 double operations in the same
// order as the scalar code (vector add/sub/mul/div/compare/convert round exactly as their
// scalar forms), the sources are compiled with -ffp-contract=off (no fused multiply-add,
// also not between intrinsics), and every transcendental value comes from the same glibc
// function as on the scalar path, called once per lane (`sincos`, `cos`, `pow`); the
// kernels never use vector math libraries (libmvec/SVML round differently).
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
}  // namespace cartpole

/// One chunk of CartPoles in SoA form. Inputs: state arrays, `sin`/`cos` of theta (glibc
/// `sincos`), actions (0 or 1 as float64). Outputs: the state arrays updated in place,
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

/// Steps lanes [0, n) with 8-wide AVX-512 vectors (n a multiple of 8). Needs AVX-512F/DQ.
void cartpole_lanes_avx512(const CartPoleLanes& l, std::size_t n);
/// Steps lanes [0, n) with 4-wide AVX2 vectors (n a multiple of 4). Needs AVX2.
void cartpole_lanes_avx2(const CartPoleLanes& l, std::size_t n);
/// Steps lanes [0, n) one at a time (the portable form; the same operations).
void cartpole_lanes_scalar(const CartPoleLanes& l, std::size_t n);

/// Vector width (lanes) of a SIMD level: 1, 4 or 8.
std::size_t simd_lanes(EnvSimd level);

}  // namespace herd::rl::detail
