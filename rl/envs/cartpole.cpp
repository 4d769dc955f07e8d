// CartPole-v1. Compiled with -ffp-contract=off and no -march: the operations below follow
// Gymnasium 1.4.0's cartpole.py in order, so results are bit-identical with it.
#include <algorithm>
#include <bit>
#include <cmath>
#include <numbers>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include "classic_simd.hpp"
#include "herd/core/error.hpp"
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

namespace {

/// The start state from four uniforms in (0, 1), drawn in this order.
inline CartPoleState reset_state_of(double u0, double u1, double u2, double u3) {
  return {reset_component(u0), reset_component(u1), reset_component(u2), reset_component(u3)};
}

}  // namespace

CartPoleState cartpole_reset_state(RngCursor& rng) {
  const double u0 = rng.uniform();
  const double u1 = rng.uniform();
  const double u2 = rng.uniform();
  const double u3 = rng.uniform();
  return reset_state_of(u0, u1, u2, u3);
}

CartPole::CartPole() : Env("CartPole-v1", cartpole_obs_space(), Space::discrete(2), 4, 500) {}

std::vector<double> CartPole::get_state() const {
  const CartPoleState s = state();
  return {s.x, s.x_dot, s.theta, s.theta_dot};
}

void CartPole::observe(float* obs) const { cartpole_observe(state(), obs); }

void CartPole::reset_impl(RngCursor& rng, float* obs) {
  const CartPoleState s = cartpole_reset_state(rng);
  put_state(s);
  *after_terminal_ = 0;
  cartpole_observe(s, obs);
}

StepResult CartPole::step_impl(const double* action, float* obs) {
  StepResult r;
  CartPoleState s = state();
  r.terminated = transition(s, static_cast<std::int64_t>(action[0]));
  put_state(s);
  // Reward 1 per step, including the terminating one; 0 for steps after it (Gymnasium's
  // steps_beyond_terminated rule for callers that step on after termination).
  r.reward = (r.terminated && *after_terminal_ != 0) ? 0.0 : 1.0;
  if (r.terminated) *after_terminal_ = 1;
  cartpole_observe(s, obs);
  return r;
}

namespace {

constexpr std::size_t kChunk = 256;

/// Lanes [0, m) (m <= kChunk) of SoA CartPoles at a vector level: glibc's sincos bits of
/// theta (vector lanes in extra precision, glibc's sincos where the rounding is close to
/// ambiguous; the scalar path's function, see `transition`), then the vector kernel, the
/// lanes that fill no vector by the scalar kernel.
void cartpole_chunk(double* x, double* x_dot, double* theta, double* theta_dot, std::size_t m, const double* actions,
                    float* obs, std::uint8_t* terminated, EnvSimd level) {
  struct alignas(64) SinCos {
    double sin[kChunk], cos[kChunk];
  };
  thread_local SinCos sc;
  detail::sincos_lanes(theta, sc.sin, sc.cos, m, level, nullptr);
  const std::size_t lanes = detail::simd_lanes(level);
  const detail::CartPoleLanes l{x, x_dot, theta, theta_dot, sc.sin, sc.cos, actions, obs, terminated};
  const std::size_t vec = m - m % lanes;
  if (level == EnvSimd::kAvx512) detail::cartpole_lanes_avx512(l, vec);
  else detail::cartpole_lanes_avx2(l, vec);
  if (vec < m) {
    const detail::CartPoleLanes t{x + vec,      x_dot + vec,   theta + vec,   theta_dot + vec, sc.sin + vec,
                                  sc.cos + vec, actions + vec, obs + 4 * vec, terminated + vec};
    detail::cartpole_lanes_scalar(t, m - vec);
  }
}

}  // namespace

void CartPole::step_batch(Env* const* envs, std::size_t n, const double* actions, float* obs, double* rewards,
                          std::uint8_t* terminated, std::uint8_t* truncated) const {
  const EnvSimd level = env_simd();
  if (level == EnvSimd::kScalar) {
    for (std::size_t i = 0; i < n; ++i) {
      auto* e = static_cast<CartPole*>(envs[i]);
      CartPoleState s = e->state();
      const bool term = transition(s, static_cast<std::int64_t>(actions[i]));
      e->put_state(s);
      rewards[i] = (term && *e->after_terminal_ != 0) ? 0.0 : 1.0;
      if (term) *e->after_terminal_ = 1;
      terminated[i] = term;
      truncated[i] = e->count_step();
      cartpole_observe(s, obs + 4 * i);
    }
    return;
  }
  // Chunks of structure-of-arrays copies of the states (they stay in L1), stepped by the
  // vector kernel. (A pool steps through a CartPoleStore instead, without the copies.)
  struct alignas(64) Soa {
    double x[kChunk], x_dot[kChunk], theta[kChunk], theta_dot[kChunk];
  };
  thread_local Soa soa;
  for (std::size_t b = 0; b < n; b += kChunk) {
    const std::size_t m = std::min(kChunk, n - b);
    for (std::size_t i = 0; i < m; ++i) {
      // The env objects are separate allocations: fetch a few ahead.
      if (b + i + 16 < n) __builtin_prefetch(envs[b + i + 16], 1);
      const CartPoleState s = static_cast<const CartPole*>(envs[b + i])->state();
      soa.x[i] = s.x;
      soa.x_dot[i] = s.x_dot;
      soa.theta[i] = s.theta;
      soa.theta_dot[i] = s.theta_dot;
    }
    cartpole_chunk(soa.x, soa.x_dot, soa.theta, soa.theta_dot, m, actions + b, obs + 4 * b, terminated + b, level);
    for (std::size_t i = 0; i < m; ++i) {
      auto* e = static_cast<CartPole*>(envs[b + i]);
      e->put_state({soa.x[i], soa.x_dot[i], soa.theta[i], soa.theta_dot[i]});
      const bool term = terminated[b + i] != 0;
      rewards[b + i] = (term && *e->after_terminal_ != 0) ? 0.0 : 1.0;
      if (term) *e->after_terminal_ = 1;
      truncated[b + i] = e->count_step();
    }
  }
}

void CartPole::set_state_impl(const double* state) {
  put_state({state[0], state[1], state[2], state[3]});
  *after_terminal_ = 0;
}

void CartPole::bind(double* state, std::size_t stride, std::uint8_t* after_terminal, EpisodeClock* clock,
                    ResetStream* stream) {
  const CartPoleState s = this->state();
  const std::uint8_t after = *after_terminal_;
  if (state == nullptr) {
    s_ = own_state_;
    stride_ = 1;
    after_terminal_ = &own_after_terminal_;
  } else {
    s_ = state;
    stride_ = stride;
    after_terminal_ = after_terminal;
  }
  put_state(s);
  *after_terminal_ = after;
  bind_episode(clock, stream);
}

std::unique_ptr<EnvStore> CartPole::make_store(Env* const* envs, std::size_t n) const {
  return std::make_unique<CartPoleStore>(envs, n);
}

CartPoleStore::CartPoleStore(Env* const* envs, std::size_t n)
    : EnvStore(n), envs_(n), state_(4 * n), after_terminal_(n), clocks_(n), streams_(n) {
  for (std::size_t k = 0; k < n; ++k) {
    auto* e = dynamic_cast<CartPole*>(envs[k]);
    HERD_REQUIRE(e != nullptr, "CartPoleStore: environment {} is not a CartPole", k);
    HERD_REQUIRE(e->s_ == e->own_state_, "CartPoleStore: environment {} ({} env {}) is already in a store", k, e->id(),
                 e->global_id());
    envs_[k] = e;
  }
  for (std::size_t k = 0; k < n; ++k)
    envs_[k]->bind(state_.data() + k, n, &after_terminal_[k], &clocks_[k], &streams_[k]);
}

CartPoleStore::~CartPoleStore() {
  for (CartPole* e : envs_) e->bind(nullptr, 1, nullptr, nullptr, nullptr);
}

void CartPoleStore::step(std::size_t b, std::size_t e, const double* actions, float* obs, double* rewards,
                         std::uint8_t* terminated, std::uint8_t* truncated) {
  const std::size_t n = size();
  double* const x = state_.data();
  double* const x_dot = x + n;
  double* const theta = x + 2 * n;
  double* const theta_dot = x + 3 * n;
  const EnvSimd level = env_simd();
  for (std::size_t c = b; c < e; c += kChunk) {
    const std::size_t m = std::min(kChunk, e - c), j = c - b;
    if (level == EnvSimd::kScalar) {
      for (std::size_t i = 0; i < m; ++i) {
        CartPoleState s{x[c + i], x_dot[c + i], theta[c + i], theta_dot[c + i]};
        terminated[j + i] = transition(s, static_cast<std::int64_t>(actions[j + i]));
        x[c + i] = s.x;
        x_dot[c + i] = s.x_dot;
        theta[c + i] = s.theta;
        theta_dot[c + i] = s.theta_dot;
        cartpole_observe(s, obs + 4 * (j + i));
      }
    } else {
      cartpole_chunk(x + c, x_dot + c, theta + c, theta_dot + c, m, actions + j, obs + 4 * j, terminated + j, level);
    }
    detail::cartpole_finish(m, terminated + j, after_terminal_.data() + c, clocks_.data() + c, rewards + j,
                            truncated + j, level);
  }
}

void CartPoleStore::reset_done(std::size_t b, std::size_t e, const std::uint8_t* terminated,
                               const std::uint8_t* truncated, float* obs, float* final_obs) {
  const std::size_t n = size();
  double* const x = state_.data();
  // Env::reset(obs) and CartPole::reset_impl on the store's elements. The ended envs are
  // listed first (16 flags per SSE2 mask), then their start states are drawn together:
  // each takes four uniforms, words 0-3 of blocks 0 and 1 of its episode's counter (what
  // `RngCursor::uniform` reads), several envs per vector (`detail::cartpole_start_states`).
  struct Scratch {
    std::vector<std::uint32_t> ids, words;
    std::vector<double> starts;
  };
  thread_local Scratch sc;
  const std::size_t len = e - b;
  if (sc.ids.size() < len) {
    sc.ids.resize(len);
    sc.words.resize(5 * len);
    sc.starts.resize(4 * len);
  }
  std::uint32_t* const ids = sc.ids.data();
  std::size_t ended = 0, i0 = 0;
#if defined(__SSE2__)
  // 16 flags at a time: a bit mask of the nonzero ones, its set bits appended.
  for (; i0 + 16 <= len; i0 += 16) {
    const __m128i t = _mm_loadu_si128(reinterpret_cast<const __m128i*>(terminated + i0));
    const __m128i u = _mm_loadu_si128(reinterpret_cast<const __m128i*>(truncated + i0));
    auto bits =
        static_cast<unsigned>(_mm_movemask_epi8(_mm_cmpeq_epi8(_mm_or_si128(t, u), _mm_setzero_si128()))) ^ 0xffffu;
    for (; bits != 0; bits &= bits - 1) ids[ended++] = static_cast<std::uint32_t>(i0 + std::countr_zero(bits));
  }
#endif
  for (std::size_t i = i0; i < len; ++i) {
    ids[ended] = static_cast<std::uint32_t>(i);
    ended += (terminated[i] | truncated[i]) != 0;
  }
  std::uint32_t* const c1 = sc.words.data();
  std::uint32_t *const c2 = c1 + len, *const c3 = c2 + len, *const k0 = c3 + len, *const k1 = k0 + len;
  std::size_t m = 0;  // envs drawing their next episode's start state
  for (std::size_t t = 0; t < ended; ++t) {
    const std::size_t i = ids[t], k = b + i;
    float* const row = obs + 4 * i;
    if (final_obs != nullptr) std::copy(row, row + 4, final_obs + 4 * i);
    ResetStream& rs = streams_[k];
    if (!rs.has_reset) {  // never reset: Env::reset's seeded first reset
      envs_[k]->reset(row);
      continue;
    }
    clocks_[k].elapsed = 0;
    ++rs.episode;  // ResetStream::next_episode
    std::uint32_t ctr[4], key[2];
    rs.stream.block_input(rs.episode, 0, ctr, key);
    c1[m] = ctr[1];
    c2[m] = ctr[2];
    c3[m] = ctr[3];
    k0[m] = key[0];
    k1[m] = key[1];
    ids[m++] = static_cast<std::uint32_t>(i);
  }
  double* const sx = sc.starts.data();
  double *const sxd = sx + len, *const st = sxd + len, *const std_ = st + len;
  detail::cartpole_start_states({c1, c2, c3, k0, k1, sx, sxd, st, std_}, m, env_simd());
  for (std::size_t t = 0; t < m; ++t) {
    const std::size_t i = ids[t], k = b + i;
    const CartPoleState s{sx[t], sxd[t], st[t], std_[t]};
    x[k] = s.x;
    x[n + k] = s.x_dot;
    x[2 * n + k] = s.theta;
    x[3 * n + k] = s.theta_dot;
    after_terminal_[k] = 0;
    cartpole_observe(s, obs + 4 * i);
  }
}

}  // namespace herd::rl
