#pragma once
/// @file envs.hpp
/// Gymnasium 1.4.0's classic-control environments, bit-exact with its Python source given
/// the same start state and float64 actions (observations, internal state, rewards, flags).
///
/// Exactness needs the environment sources compiled with `-ffp-contract=off`, without
/// `-march`, and glibc's `sin`, `cos` and `pow` (NumPy 1.24 on x86-64 uses the same libm
/// results for float64 scalars). Operations follow Gymnasium's order of evaluation.
/// Reset distributions are Gymnasium's, with uniforms drawn from herd's RNG streams
/// (`low + (high - low) * u`, u in (0, 1), as NumPy's `Generator.uniform`).
/// Thread-safety: as `Env`.

#include <cstdint>
#include <memory>
#include <vector>

#include "herd/rl/env.hpp"

namespace herd::rl {

/// Instruction set of the batched (`step_batch`) CartPole and Acrobot steps, which step
/// several environments per vector instruction over structure-of-arrays copies of their
/// states. Every level gives results bit-identical with the scalar `step` (the reference):
/// the same IEEE-754 double operations per environment in the same order, no fused
/// multiply-add, and the bits of the same glibc `sincos`/`cos`/`pow` calls per environment
/// (Acrobot calls them per environment; CartPole's `sincos` comes from `env_sincos`; vector
/// math libraries, which round differently, are not used).
enum class EnvSimd : std::uint8_t {
  kScalar,  ///< one environment at a time (the portable path)
  kAvx2,    ///< 4 environments per 256-bit vector
  kAvx512,  ///< 8 environments per 512-bit vector (AVX-512F and DQ)
};

/// The widest level this CPU supports (checked at run time with cpuid). Thread-safe.
EnvSimd env_simd_supported();
/// The level batched steps use: `env_simd_supported()` unless set. Thread-safe.
EnvSimd env_simd();
/// Sets the level of all later batched steps, process-wide (tests and benchmarks compare
/// them). Thread-safe, but steps already running keep their level.
/// @throws herd::InputError when the CPU does not support `level`.
void set_env_simd(EnvSimd level);
/// "scalar", "avx2" or "avx512".
const char* env_simd_name(EnvSimd level);

/// Arguments of `env_sincos`'s vector path: 2^-26 <= |x| <= kEnvSincosBound [rad]; other
/// arguments (and NaN, infinities) take glibc's `sincos`.
inline constexpr double kEnvSincosBound = 0.5;
/// The rounding-ambiguity margins of `env_sincos`'s sin and cos, in units in the last place
/// of the result: a lane whose extra-precision sin (cos) lies within this distance of a
/// rounding midpoint takes glibc's `sincos` (docs/rl.md, "SIMD-across-envs stepping").
inline constexpr double kEnvSinMargin = 1.0 / 16;
inline constexpr double kEnvCosMargin = 1.0 / 128;

/// sin and cos of `n` angles `x[i]` into `sin[i]`, `cos[i]`, the bits of glibc's `sincos`.
/// At the scalar level, and for lanes outside [2^-26, kEnvSincosBound] in magnitude, it
/// calls glibc's `sincos`; otherwise it evaluates 4 (avx2, with FMA) or 8 (avx512) angles
/// per vector in double-double precision (Taylor polynomials, error below 0.0035 units in
/// the last place), rounds to double, and calls glibc's `sincos` for any lane whose sin or
/// cos lies within `kEnvSinMargin` or `kEnvCosMargin` units in the last place of a rounding
/// midpoint (conservatively below a power of two). The other lanes are correctly rounded,
/// which is glibc's result wherever glibc's error is below 0.5 + margin - 0.0035 units in
/// the last place (0.559 for sin, 0.5076 for cos); on 10^9 arguments of the range glibc's
/// FMA variants erred by at most 0.5156 and 0.5019, its others (10^8 arguments) by 0.5231
/// and 0.5027 (docs/rl.md). `fell_back`, when not
/// null, receives 1 for lanes computed by glibc and 0 for the others. Returns the number of
/// lanes computed by glibc. Thread-safe; arrays of `n` elements, the outputs not overlapping
/// the input or each other.
/// @throws herd::InputError when the CPU does not support `level`.
std::size_t env_sincos(const double* x, double* sin, double* cos, std::size_t n, EnvSimd level,
                       std::uint8_t* fell_back = nullptr);

/// Internal state of one CartPole: x [m], x_dot [m/s], theta [rad], theta_dot [rad/s].
struct CartPoleState {
  double x, x_dot, theta, theta_dot;
};

/// One CartPole transition (Euler integrator, tau = 0.02 s, force +-10 N) of `s` under
/// action 0 (push left) or 1 (push right); returns whether the new state is terminal
/// (|x| > 2.4 or |theta| > 12 degrees). The shared kernel of `CartPole` and of the
/// pool's batched CartPole path, so both are bit-identical.
bool cartpole_transition(CartPoleState& s, std::int64_t action);

/// Writes the float32 observation of a CartPole state (the state cast to float32).
inline void cartpole_observe(const CartPoleState& s, float* obs) {
  obs[0] = static_cast<float>(s.x);
  obs[1] = static_cast<float>(s.x_dot);
  obs[2] = static_cast<float>(s.theta);
  obs[3] = static_cast<float>(s.theta_dot);
}

/// Draws a CartPole start state: four uniforms in (-0.05, 0.05).
CartPoleState cartpole_reset_state(RngCursor& rng);

/// CartPole-v1 (Barto, Sutton & Anderson 1983; Gymnasium `cartpole.py`): Discrete(2),
/// observation Box(4), reward 1 per step including the terminating one, 500-step limit.
/// State: `[x, x_dot, theta, theta_dot]`.
class CartPole final : public Env {
 public:
  /// A fresh instance (reset before stepping) with Gymnasium's registered time limit.
  CartPole();
  /// The internal state (see the class summary for the layout).
  std::vector<double> get_state() const override;
  /// Writes the float32 observation of the current state.
  void observe(float* obs) const override;
  /// The state as the batched kernel sees it.
  CartPoleState state() const { return {s_[0], s_[stride_], s_[2 * stride_], s_[3 * stride_]}; }
  /// Steps a batch at the `env_simd()` level (chunks of environments copied to
  /// structure-of-arrays form and stepped 4 or 8 per vector; the scalar level is a tight
  /// loop over `cartpole_transition`), bit-identical with `step_unchecked` at every level.
  void step_batch(Env* const* envs, std::size_t n, const double* actions, float* obs, double* rewards,
                  std::uint8_t* terminated, std::uint8_t* truncated) const override;
  /// A store keeping the states, after-termination flags, step counts and time limits of
  /// `envs[0..n)` (all CartPoles) in dense arrays; its `step` runs the `step_batch` kernels
  /// on them in place (no copies), at the `env_simd()` level, bit-identical with
  /// `step_unchecked`. @throws herd::InputError when an env is already in a store.
  std::unique_ptr<EnvStore> make_store(Env* const* envs, std::size_t n) const override;

 protected:
  void reset_impl(RngCursor& rng, float* obs) override;
  StepResult step_impl(const double* action, float* obs) override;
  void set_state_impl(const double* state) override;

 private:
  friend class CartPoleStore;
  void put_state(const CartPoleState& s) {
    s_[0] = s.x;
    s_[stride_] = s.x_dot;
    s_[2 * stride_] = s.theta;
    s_[3 * stride_] = s.theta_dot;
  }
  // Moves the state to component arrays (component j at state[j * stride]), the flag to
  // *after_terminal and the episode bookkeeping to *clock, *stream; null state: back into
  // the object.
  void bind(double* state, std::size_t stride, std::uint8_t* after_terminal, EpisodeClock* clock, ResetStream* stream);

  double own_state_[4] = {0, 0, 0, 0};
  std::uint8_t own_after_terminal_ = 0;
  // The state (component j at s_[j * stride_]) and Gymnasium's "steps_beyond_terminated is
  // not None" flag: the members above, or a CartPoleStore's elements.
  double* s_ = own_state_;
  std::size_t stride_ = 1;
  std::uint8_t* after_terminal_ = &own_after_terminal_;
};

/// The `EnvStore` of CartPoles (made by `CartPole::make_store`): arrays x, x_dot, theta,
/// theta_dot, after-termination flags and episode bookkeeping, element k for env k.
class CartPoleStore final : public EnvStore {
 public:
  /// Binds `envs[0..n)` (CartPoles, none in a store) to a new store, their values copied in.
  /// @throws herd::InputError when an env is already in a store.
  CartPoleStore(Env* const* envs, std::size_t n);
  /// Moves the values back into the environments.
  ~CartPoleStore() override;
  /// Steps envs [b, e) in place (see `EnvStore::step`).
  void step(std::size_t b, std::size_t e, const double* actions, float* obs, double* rewards, std::uint8_t* terminated,
            std::uint8_t* truncated) override;
  /// Resets the ended envs of [b, e) in place (see `EnvStore::reset_done`).
  void reset_done(std::size_t b, std::size_t e, const std::uint8_t* terminated, const std::uint8_t* truncated,
                  float* obs, float* final_obs) override;

 private:
  std::vector<CartPole*> envs_;
  std::vector<double> state_;  // [4, n]: x, x_dot, theta, theta_dot
  std::vector<std::uint8_t> after_terminal_;
  std::vector<EpisodeClock> clocks_;
  std::vector<ResetStream> streams_;
};

/// Acrobot-v1 (Sutton 1996; Sutton & Barto's book dynamics; Gymnasium `acrobot.py`, RK4
/// with dt = 0.2 s): Discrete(3) torques {-1, 0, +1}, observation
/// `[cos t1, sin t1, cos t2, sin t2, dt1, dt2]`, reward -1 per non-terminal step, 500-step
/// limit. State: `[theta1, theta2, dtheta1, dtheta2]`; reset states are float32 values.
/// The first observation of an episode is float32(cos(double(s))), where NumPy takes the
/// cosine of the float32 state in float32; the two agree on every reference reset, but
/// may differ in the last bit elsewhere (steps are float64 in both).
class Acrobot final : public Env {
 public:
  /// A fresh instance (reset before stepping) with Gymnasium's registered time limit.
  Acrobot();
  /// The internal state (see the class summary for the layout).
  std::vector<double> get_state() const override;
  /// Writes the float32 observation of the current state.
  void observe(float* obs) const override;
  /// Steps a batch at the `env_simd()` level (chunks of structure-of-arrays states, the RK4
  /// arithmetic 4 or 8 environments per vector, glibc's functions per environment; the
  /// scalar level steps one at a time), bit-identical with `step_unchecked` at every level.
  void step_batch(Env* const* envs, std::size_t n, const double* actions, float* obs, double* rewards,
                  std::uint8_t* terminated, std::uint8_t* truncated) const override;
  /// A store keeping the states, step counts, time limits and reset streams of `envs[0..n)`
  /// (all Acrobots) in dense arrays; its `step` runs the `step_batch` kernels on them in
  /// place, bit-identical with `step_unchecked`. @throws herd::InputError when an env is
  /// already in a store.
  std::unique_ptr<EnvStore> make_store(Env* const* envs, std::size_t n) const override;

 protected:
  void reset_impl(RngCursor& rng, float* obs) override;
  StepResult step_impl(const double* action, float* obs) override;
  void set_state_impl(const double* state) override;

 private:
  friend class AcrobotStore;
  void load(double* s) const {
    for (std::size_t j = 0; j < 4; ++j) s[j] = s_[j * stride_];
  }
  void put(const double* s) {
    for (std::size_t j = 0; j < 4; ++j) s_[j * stride_] = s[j];
  }
  // Moves the state to component arrays (component j at state[j * stride]) and the episode
  // bookkeeping to *clock, *stream; null state: back into the object.
  void bind(double* state, std::size_t stride, EpisodeClock* clock, ResetStream* stream);

  double own_state_[4] = {0, 0, 0, 0};
  // The state (component j at s_[j * stride_]): the member above, or an AcrobotStore's
  // elements.
  double* s_ = own_state_;
  std::size_t stride_ = 1;
};

/// The `EnvStore` of Acrobots (made by `Acrobot::make_store`): arrays theta1, theta2,
/// dtheta1, dtheta2 and episode bookkeeping, element k for env k.
class AcrobotStore final : public EnvStore {
 public:
  /// Binds `envs[0..n)` (Acrobots, none in a store) to a new store, their values copied in.
  /// @throws herd::InputError when an env is already in a store.
  AcrobotStore(Env* const* envs, std::size_t n);
  /// Moves the values back into the environments.
  ~AcrobotStore() override;
  /// Steps envs [b, e) in place (see `EnvStore::step`).
  void step(std::size_t b, std::size_t e, const double* actions, float* obs, double* rewards, std::uint8_t* terminated,
            std::uint8_t* truncated) override;
  /// Resets the ended envs of [b, e) in place (see `EnvStore::reset_done`).
  void reset_done(std::size_t b, std::size_t e, const std::uint8_t* terminated, const std::uint8_t* truncated,
                  float* obs, float* final_obs) override;

 private:
  std::vector<Acrobot*> envs_;
  std::vector<double> state_;  // [4, n]: theta1, theta2, dtheta1, dtheta2
  std::vector<EpisodeClock> clocks_;
  std::vector<ResetStream> streams_;
};

/// MountainCar-v0 (Moore 1990; Gymnasium `mountain_car.py`): Discrete(3) pushes, state and
/// observation `[position, velocity]`, reward -1 per step, 200-step limit.
class MountainCar final : public Env {
 public:
  /// A fresh instance (reset before stepping) with Gymnasium's registered time limit.
  MountainCar();
  /// The internal state (see the class summary for the layout).
  std::vector<double> get_state() const override;
  /// Writes the float32 observation of the current state.
  void observe(float* obs) const override;

 protected:
  void reset_impl(RngCursor& rng, float* obs) override;
  StepResult step_impl(const double* action, float* obs) override;
  void set_state_impl(const double* state) override;

 private:
  double position_ = 0, velocity_ = 0;
};

/// MountainCarContinuous-v0 (Gymnasium `continuous_mountain_car.py`): Box(1) force in
/// [-1, 1] (the force is clipped, the reward penalty 0.1 a^2 uses the action as given),
/// reward +100 on reaching the goal, 999-step limit. The state is stored as float32 after
/// each step, as Gymnasium stores it; arithmetic is float64 (Gymnasium under NumPy 1.x
/// semantics, where `3 * np.float32` is float64).
class MountainCarContinuous final : public Env {
 public:
  /// A fresh instance (reset before stepping) with Gymnasium's registered time limit.
  MountainCarContinuous();
  /// The internal state (see the class summary for the layout).
  std::vector<double> get_state() const override;
  /// Writes the float32 observation of the current state.
  void observe(float* obs) const override;

 protected:
  void reset_impl(RngCursor& rng, float* obs) override;
  StepResult step_impl(const double* action, float* obs) override;
  void set_state_impl(const double* state) override;

 private:
  double position_ = 0, velocity_ = 0;
};

/// Pendulum-v1 (Gymnasium `pendulum.py`, g = 10): Box(1) torque clipped to [-2, 2],
/// observation `[cos th, sin th, thdot]`, reward -(angle^2 + 0.1 thdot^2 + 0.001 u^2),
/// never terminates, 200-step limit. State: `[th, thdot]`.
class Pendulum final : public Env {
 public:
  /// A fresh instance (reset before stepping) with Gymnasium's registered time limit.
  Pendulum();
  /// The internal state (see the class summary for the layout).
  std::vector<double> get_state() const override;
  /// Writes the float32 observation of the current state.
  void observe(float* obs) const override;

 protected:
  void reset_impl(RngCursor& rng, float* obs) override;
  StepResult step_impl(const double* action, float* obs) override;
  void set_state_impl(const double* state) override;

 private:
  double th_ = 0, thdot_ = 0;
};

}  // namespace herd::rl
