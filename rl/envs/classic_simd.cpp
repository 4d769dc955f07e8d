// SIMD-across-envs kernels of the classic-control environments and the run-time choice of
// the instruction set. Compiled with -ffp-contract=off (as the scalar environments): GCC
// would otherwise fuse a vector multiply and add into an FMA, which rounds once instead of
// twice. The AVX2/AVX-512 functions carry target attributes, so the library still runs on
// any x86-64 and the level is chosen with cpuid at run time.
#include "classic_simd.hpp"

#include <atomic>
#include <cmath>
#include <cstddef>
#include <type_traits>
#include <utility>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HERD_RL_X86_SIMD 1
#endif

#include "herd/core/error.hpp"

namespace herd::rl {
namespace {

EnvSimd detect() {
#ifdef HERD_RL_X86_SIMD
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq")) return EnvSimd::kAvx512;
  if (__builtin_cpu_supports("avx2")) return EnvSimd::kAvx2;
#endif
  return EnvSimd::kScalar;
}

// 0xFF: not chosen yet (the supported level is used).
std::atomic<std::uint8_t> g_level{0xFF};

}  // namespace

EnvSimd env_simd_supported() {
  static const EnvSimd best = detect();
  return best;
}

EnvSimd env_simd() {
  const std::uint8_t v = g_level.load(std::memory_order_relaxed);
  return v == 0xFF ? env_simd_supported() : static_cast<EnvSimd>(v);
}

const char* env_simd_name(EnvSimd level) {
  switch (level) {
    case EnvSimd::kScalar:
      return "scalar";
    case EnvSimd::kAvx2:
      return "avx2";
    case EnvSimd::kAvx512:
      return "avx512";
  }
  return "?";
}

void set_env_simd(EnvSimd level) {
  HERD_REQUIRE(static_cast<int>(level) <= static_cast<int>(env_simd_supported()),
               "set_env_simd: level {} is not supported by this CPU (the widest supported is {})", env_simd_name(level),
               env_simd_name(env_simd_supported()));
  g_level.store(static_cast<std::uint8_t>(level), std::memory_order_relaxed);
}

namespace detail {

using namespace cartpole;

std::size_t simd_lanes(EnvSimd level) {
  switch (level) {
    case EnvSimd::kAvx512:
      return 8;
    case EnvSimd::kAvx2:
      return 4;
    case EnvSimd::kScalar:
      break;
  }
  return 1;
}

// Bytes 0/1 of a 4-bit mask: byte j is bit j.
constexpr std::uint32_t kMaskBytes[16] = {0x00000000, 0x00000001, 0x00000100, 0x00000101, 0x00010000, 0x00010001,
                                          0x00010100, 0x00010101, 0x01000000, 0x01000001, 0x01000100, 0x01000101,
                                          0x01010000, 0x01010001, 0x01010100, 0x01010101};

void cartpole_lanes_scalar(const CartPoleLanes& l, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    const double x = l.x[i], x_dot = l.x_dot[i], theta = l.theta[i], theta_dot = l.theta_dot[i];
    const double sintheta = l.sin_theta[i], costheta = l.cos_theta[i];
    const double force = l.action[i] == 1.0 ? kForceMag : -kForceMag;
    const double temp = (force + kPoleMassLength * (theta_dot * theta_dot) * sintheta) / kTotalMass;
    const double thetaacc = (kGravity * sintheta - costheta * temp) /
                            (kLength * (4.0 / 3.0 - kMassPole * (costheta * costheta) / kTotalMass));
    const double xacc = temp - kPoleMassLength * thetaacc * costheta / kTotalMass;
    const double nx = x + kTau * x_dot, nxd = x_dot + kTau * xacc;
    const double nt = theta + kTau * theta_dot, ntd = theta_dot + kTau * thetaacc;
    l.x[i] = nx;
    l.x_dot[i] = nxd;
    l.theta[i] = nt;
    l.theta_dot[i] = ntd;
    l.terminated[i] = nx < -kXThreshold || nx > kXThreshold || nt < -kThetaThreshold || nt > kThetaThreshold;
    float* o = l.obs + 4 * i;
    o[0] = static_cast<float>(nx);
    o[1] = static_cast<float>(nxd);
    o[2] = static_cast<float>(nt);
    o[3] = static_cast<float>(ntd);
  }
}

#ifdef HERD_RL_X86_SIMD

// GCC 12's AVX-512 headers pass _mm256_undefined_ps() as the unused merge source of
// cvtpd2ps/insert and then warn that it "may be used uninitialized" (all mask bits are set,
// so it is never read). Clang has no such warning group (and would report the unknown name).
#pragma GCC diagnostic push
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
__attribute__((target("avx512f,avx512dq"))) void cartpole_lanes_avx512(const CartPoleLanes& l, std::size_t n) {
  const __m512d pml = _mm512_set1_pd(kPoleMassLength), total = _mm512_set1_pd(kTotalMass);
  const __m512d grav = _mm512_set1_pd(kGravity), len = _mm512_set1_pd(kLength);
  const __m512d four_thirds = _mm512_set1_pd(4.0 / 3.0), mpole = _mm512_set1_pd(kMassPole);
  const __m512d tau = _mm512_set1_pd(kTau), one = _mm512_set1_pd(1.0);
  const __m512d fpos = _mm512_set1_pd(kForceMag), fneg = _mm512_set1_pd(-kForceMag);
  const __m512d xlo = _mm512_set1_pd(-kXThreshold), xhi = _mm512_set1_pd(kXThreshold);
  const __m512d tlo = _mm512_set1_pd(-kThetaThreshold), thi = _mm512_set1_pd(kThetaThreshold);
  // Rows of 4 floats (x, x_dot, theta, theta_dot) from a = [x | x_dot], b = [theta | theta_dot].
  const __m512i rows_lo = _mm512_setr_epi32(0, 8, 16, 24, 1, 9, 17, 25, 2, 10, 18, 26, 3, 11, 19, 27);
  const __m512i rows_hi = _mm512_setr_epi32(4, 12, 20, 28, 5, 13, 21, 29, 6, 14, 22, 30, 7, 15, 23, 31);
  for (std::size_t i = 0; i < n; i += 8) {
    const __m512d x = _mm512_loadu_pd(l.x + i), xd = _mm512_loadu_pd(l.x_dot + i);
    const __m512d th = _mm512_loadu_pd(l.theta + i), thd = _mm512_loadu_pd(l.theta_dot + i);
    const __m512d s = _mm512_loadu_pd(l.sin_theta + i), c = _mm512_loadu_pd(l.cos_theta + i);
    const __mmask8 right = _mm512_cmp_pd_mask(_mm512_loadu_pd(l.action + i), one, _CMP_EQ_OQ);
    const __m512d force = _mm512_mask_blend_pd(right, fneg, fpos);
    // temp = (force + pml * (thd * thd) * s) / total
    const __m512d temp =
        _mm512_div_pd(_mm512_add_pd(force, _mm512_mul_pd(_mm512_mul_pd(pml, _mm512_mul_pd(thd, thd)), s)), total);
    // thetaacc = (g * s - c * temp) / (len * (4/3 - mpole * (c * c) / total))
    const __m512d num = _mm512_sub_pd(_mm512_mul_pd(grav, s), _mm512_mul_pd(c, temp));
    const __m512d den =
        _mm512_mul_pd(len, _mm512_sub_pd(four_thirds, _mm512_div_pd(_mm512_mul_pd(mpole, _mm512_mul_pd(c, c)), total)));
    const __m512d thetaacc = _mm512_div_pd(num, den);
    // xacc = temp - pml * thetaacc * c / total
    const __m512d xacc = _mm512_sub_pd(temp, _mm512_div_pd(_mm512_mul_pd(_mm512_mul_pd(pml, thetaacc), c), total));
    const __m512d nx = _mm512_add_pd(x, _mm512_mul_pd(tau, xd));
    const __m512d nxd = _mm512_add_pd(xd, _mm512_mul_pd(tau, xacc));
    const __m512d nt = _mm512_add_pd(th, _mm512_mul_pd(tau, thd));
    const __m512d ntd = _mm512_add_pd(thd, _mm512_mul_pd(tau, thetaacc));
    _mm512_storeu_pd(l.x + i, nx);
    _mm512_storeu_pd(l.x_dot + i, nxd);
    _mm512_storeu_pd(l.theta + i, nt);
    _mm512_storeu_pd(l.theta_dot + i, ntd);
    const __mmask8 term =
        static_cast<__mmask8>(_mm512_cmp_pd_mask(nx, xlo, _CMP_LT_OQ) | _mm512_cmp_pd_mask(nx, xhi, _CMP_GT_OQ) |
                              _mm512_cmp_pd_mask(nt, tlo, _CMP_LT_OQ) | _mm512_cmp_pd_mask(nt, thi, _CMP_GT_OQ));
    for (std::size_t j = 0; j < 8; ++j) l.terminated[i + j] = static_cast<std::uint8_t>((term >> j) & 1u);
    const __m512 a = _mm512_insertf32x8(_mm512_zextps256_ps512(_mm512_cvtpd_ps(nx)), _mm512_cvtpd_ps(nxd), 1);
    const __m512 b = _mm512_insertf32x8(_mm512_zextps256_ps512(_mm512_cvtpd_ps(nt)), _mm512_cvtpd_ps(ntd), 1);
    _mm512_storeu_ps(l.obs + 4 * i, _mm512_permutex2var_ps(a, rows_lo, b));
    _mm512_storeu_ps(l.obs + 4 * i + 16, _mm512_permutex2var_ps(a, rows_hi, b));
  }
}

#pragma GCC diagnostic pop

// The step in three passes over blocks of 64 lanes (16 vectors), each lane's operations
// those of the scalar code in its order: one pass holds a chain of four dependent
// divisions and ~80 cycles of latency per vector, more than the out-of-order window covers,
// so the passes (1: temp and the denominator; 2: thetaacc; 3: xacc, the new state, flags
// and observations) keep the dividers busy instead.
__attribute__((target("avx2"))) void cartpole_lanes_avx2(const CartPoleLanes& l, std::size_t n) {
  const __m256d pml = _mm256_set1_pd(kPoleMassLength), total = _mm256_set1_pd(kTotalMass);
  const __m256d grav = _mm256_set1_pd(kGravity), len = _mm256_set1_pd(kLength);
  const __m256d four_thirds = _mm256_set1_pd(4.0 / 3.0), mpole = _mm256_set1_pd(kMassPole);
  const __m256d tau = _mm256_set1_pd(kTau), one = _mm256_set1_pd(1.0);
  const __m256d fpos = _mm256_set1_pd(kForceMag), fneg = _mm256_set1_pd(-kForceMag);
  const __m256d xlo = _mm256_set1_pd(-kXThreshold), xhi = _mm256_set1_pd(kXThreshold);
  const __m256d tlo = _mm256_set1_pd(-kThetaThreshold), thi = _mm256_set1_pd(kThetaThreshold);
  constexpr std::size_t kBlock = 64;
  alignas(32) double temp_b[kBlock], den_b[kBlock], acc_b[kBlock];
  for (std::size_t b0 = 0; b0 < n; b0 += kBlock) {
    const std::size_t bn = n - b0 < kBlock ? n - b0 : kBlock;
    const double* const s_b = l.sin_theta + b0;
    const double* const c_b = l.cos_theta + b0;
    for (std::size_t i = 0; i < bn; i += 4) {
      const __m256d thd = _mm256_loadu_pd(l.theta_dot + b0 + i);
      const __m256d s = _mm256_loadu_pd(s_b + i), c = _mm256_loadu_pd(c_b + i);
      const __m256d right = _mm256_cmp_pd(_mm256_loadu_pd(l.action + b0 + i), one, _CMP_EQ_OQ);
      const __m256d force = _mm256_blendv_pd(fneg, fpos, right);
      // temp = (force + pml * (thd * thd) * s) / total
      _mm256_store_pd(
          temp_b + i,
          _mm256_div_pd(_mm256_add_pd(force, _mm256_mul_pd(_mm256_mul_pd(pml, _mm256_mul_pd(thd, thd)), s)), total));
      // len * (4/3 - mpole * (c * c) / total)
      _mm256_store_pd(
          den_b + i,
          _mm256_mul_pd(len,
                        _mm256_sub_pd(four_thirds, _mm256_div_pd(_mm256_mul_pd(mpole, _mm256_mul_pd(c, c)), total))));
    }
    for (std::size_t i = 0; i < bn; i += 4) {
      // thetaacc = (g * s - c * temp) / den
      const __m256d s = _mm256_loadu_pd(s_b + i), c = _mm256_loadu_pd(c_b + i);
      const __m256d num = _mm256_sub_pd(_mm256_mul_pd(grav, s), _mm256_mul_pd(c, _mm256_load_pd(temp_b + i)));
      _mm256_store_pd(acc_b + i, _mm256_div_pd(num, _mm256_load_pd(den_b + i)));
    }
    for (std::size_t i = 0; i < bn; i += 4) {
      const std::size_t k = b0 + i;
      const __m256d x = _mm256_loadu_pd(l.x + k), xd = _mm256_loadu_pd(l.x_dot + k);
      const __m256d th = _mm256_loadu_pd(l.theta + k), thd = _mm256_loadu_pd(l.theta_dot + k);
      const __m256d c = _mm256_loadu_pd(c_b + i), thetaacc = _mm256_load_pd(acc_b + i);
      // xacc = temp - pml * thetaacc * c / total
      const __m256d xacc = _mm256_sub_pd(_mm256_load_pd(temp_b + i),
                                         _mm256_div_pd(_mm256_mul_pd(_mm256_mul_pd(pml, thetaacc), c), total));
      const __m256d nx = _mm256_add_pd(x, _mm256_mul_pd(tau, xd));
      const __m256d nxd = _mm256_add_pd(xd, _mm256_mul_pd(tau, xacc));
      const __m256d nt = _mm256_add_pd(th, _mm256_mul_pd(tau, thd));
      const __m256d ntd = _mm256_add_pd(thd, _mm256_mul_pd(tau, thetaacc));
      _mm256_storeu_pd(l.x + k, nx);
      _mm256_storeu_pd(l.x_dot + k, nxd);
      _mm256_storeu_pd(l.theta + k, nt);
      _mm256_storeu_pd(l.theta_dot + k, ntd);
      const __m256d term =
          _mm256_or_pd(_mm256_or_pd(_mm256_cmp_pd(nx, xlo, _CMP_LT_OQ), _mm256_cmp_pd(nx, xhi, _CMP_GT_OQ)),
                       _mm256_or_pd(_mm256_cmp_pd(nt, tlo, _CMP_LT_OQ), _mm256_cmp_pd(nt, thi, _CMP_GT_OQ)));
      const std::uint32_t bytes = kMaskBytes[_mm256_movemask_pd(term)];
      __builtin_memcpy(l.terminated + k, &bytes, 4);
      __m128 r0 = _mm256_cvtpd_ps(nx), r1 = _mm256_cvtpd_ps(nxd), r2 = _mm256_cvtpd_ps(nt), r3 = _mm256_cvtpd_ps(ntd);
      _MM_TRANSPOSE4_PS(r0, r1, r2, r3);
      _mm_storeu_ps(l.obs + 4 * k, r0);
      _mm_storeu_ps(l.obs + 4 * k + 4, r1);
      _mm_storeu_ps(l.obs + 4 * k + 8, r2);
      _mm_storeu_ps(l.obs + 4 * k + 12, r3);
    }
  }
}

#else

void cartpole_lanes_avx512(const CartPoleLanes& l, std::size_t n) { cartpole_lanes_scalar(l, n); }
void cartpole_lanes_avx2(const CartPoleLanes& l, std::size_t n) { cartpole_lanes_scalar(l, n); }

#endif

// ---------------------------------------------------------------------------------------
// Acrobot: RK4 arithmetic W lanes at a time (GCC vector extensions, compiled for the
// caller's target), every libm call per lane; the expressions are acrobot.cpp's, operand
// for operand, with V = double for the lanes left over.

// The vector helpers below pass vectors by value; they are always inlined into functions
// with the matching target, so no call with the changed ABI exists (GCC warns regardless).
#pragma GCC diagnostic ignored "-Wpsabi"

namespace {

template <int W>
struct Vec {
  typedef double type __attribute__((vector_size(W * sizeof(double))));
};
template <>
struct Vec<1> {
  using type = double;
};

template <class V>
[[gnu::always_inline]] inline V ld(const double* p) {
  V v;
  __builtin_memcpy(&v, p, sizeof(V));
  return v;
}
template <class V>
[[gnu::always_inline]] inline void st(double* p, const V& v) {
  __builtin_memcpy(p, &v, sizeof(V));
}

struct AcrobotScratch {
  static constexpr std::size_t kC = kAcrobotChunk;
  double sin2[kC], cos2[kC], cos_phi2[kC], cos1[kC], sq_dt1[kC], sq_dt2[kC];
  double d1[kC], d2[kC], phi1[kC], phi2[kC], sq_d2[kC], a[kC], torque[kC];
  double y[4][kC], k[4][4][kC];
};

// glibc pow of the constants, called once: the values the scalar path's calls return.
struct PowConstants {
  double lc1 = acrobot::sq(acrobot::kLc1), l1 = acrobot::sq(acrobot::kL1), lc2 = acrobot::sq(acrobot::kLc2);
};

// Calls f.template operator()<V>(i) for vector blocks of W lanes, then V = double.
template <int W, class F>
[[gnu::always_inline]] inline void for_lanes(std::size_t n, F&& f) {
  std::size_t i = 0;
  if constexpr (W > 1)
    for (; i + W <= n; i += W) f.template operator()<typename Vec<W>::type>(i);
  for (; i < n; ++i) f.template operator()<double>(i);
}

template <int W>
[[gnu::always_inline]] inline void acrobot_dsdt_lanes(const double* const* y, const double* a, double* const* out,
                                                      std::size_t n, AcrobotScratch& sc, const PowConstants& p) {
  using namespace acrobot;
  for (std::size_t i = 0; i < n; ++i) {
    const double theta1 = y[0][i], theta2 = y[1][i];
    ::sincos(theta2, &sc.sin2[i], &sc.cos2[i]);
    sc.cos_phi2[i] = std::cos(theta1 + theta2 - kPi / 2.0);
    sc.cos1[i] = std::cos(theta1 - kPi / 2);
    sc.sq_dt2[i] = sq(y[3][i]);
    sc.sq_dt1[i] = sq(y[2][i]);
  }
  for_lanes<W>(
      n, [&]<class V>(std::size_t i) __attribute__((always_inline)) {
        const V dtheta1 = ld<V>(y[2] + i), dtheta2 = ld<V>(y[3] + i);
        const V sin2 = ld<V>(sc.sin2 + i), cos2 = ld<V>(sc.cos2 + i);
        const V d1 = kM1 * p.lc1 + kM2 * (p.l1 + p.lc2 + 2 * kL1 * kLc2 * cos2) + kI1 + kI2;
        const V d2 = kM2 * (p.lc2 + kL1 * kLc2 * cos2) + kI2;
        const V phi2 = kM2 * kLc2 * kG * ld<V>(sc.cos_phi2 + i);
        const V phi1 = -kM2 * kL1 * kLc2 * ld<V>(sc.sq_dt2 + i) * sin2 -
                       2 * kM2 * kL1 * kLc2 * dtheta2 * dtheta1 * sin2 +
                       (kM1 * kLc1 + kM2 * kL1) * kG * ld<V>(sc.cos1 + i) + phi2;
        st(sc.d1 + i, d1);
        st(sc.d2 + i, d2);
        st(sc.phi1 + i, phi1);
        st(sc.phi2 + i, phi2);
      });
  for (std::size_t i = 0; i < n; ++i) sc.sq_d2[i] = sq(sc.d2[i]);
  for_lanes<W>(
      n, [&]<class V>(std::size_t i) __attribute__((always_inline)) {
        const V d1 = ld<V>(sc.d1 + i), d2 = ld<V>(sc.d2 + i), phi1 = ld<V>(sc.phi1 + i), phi2 = ld<V>(sc.phi2 + i);
        const V ddtheta2 =
            (ld<V>(a + i) + d2 / d1 * phi1 - kM2 * kL1 * kLc2 * ld<V>(sc.sq_dt1 + i) * ld<V>(sc.sin2 + i) - phi2) /
            (kM2 * p.lc2 + kI2 - ld<V>(sc.sq_d2 + i) / d1);
        const V ddtheta1 = -(d2 * ddtheta2 + phi1) / d1;
        st(out[0] + i, ld<V>(y[2] + i));
        st(out[1] + i, ld<V>(y[3] + i));
        st(out[2] + i, ddtheta1);
        st(out[3] + i, ddtheta2);
      });
}

template <int W>
[[gnu::always_inline]] inline void acrobot_lanes_impl(const AcrobotLanes& l, std::size_t n) {
  using namespace acrobot;
  thread_local AcrobotScratch sc;
  static const PowConstants p;
  const double dt = kDt - 0;
  const double dt2 = dt / 2.0;
  double* const s[4] = {l.s[0], l.s[1], l.s[2], l.s[3]};
  double* const y[4] = {sc.y[0], sc.y[1], sc.y[2], sc.y[3]};
  double* const k[4][4] = {{sc.k[0][0], sc.k[0][1], sc.k[0][2], sc.k[0][3]},
                           {sc.k[1][0], sc.k[1][1], sc.k[1][2], sc.k[1][3]},
                           {sc.k[2][0], sc.k[2][1], sc.k[2][2], sc.k[2][3]},
                           {sc.k[3][0], sc.k[3][1], sc.k[3][2], sc.k[3][3]}};
  for (std::size_t i = 0; i < n; ++i) sc.torque[i] = kTorques[static_cast<int>(l.action[i])];
  // k1 = dsdt(s, torque); y = s + dt2 k1; k2 = dsdt(y, torque + dt2 * 0); y = s + dt2 k2;
  // k3 = dsdt(y, torque + dt2 * 0); y = s + dt k3; k4 = dsdt(y, torque + dt * 0).
  acrobot_dsdt_lanes<W>(s, sc.torque, k[0], n, sc, p);
  for (int stage = 1; stage < 4; ++stage) {
    const double h = stage == 3 ? dt : dt2;
    for_lanes<W>(
        n, [&]<class V>(std::size_t i) __attribute__((always_inline)) {
          for (int j = 0; j < 4; ++j) st(y[j] + i, ld<V>(s[j] + i) + h * ld<V>(k[stage - 1][j] + i));
          st(sc.a + i, ld<V>(sc.torque + i) + h * 0.0);
        });
    acrobot_dsdt_lanes<W>(y, sc.a, k[stage], n, sc, p);
  }
  // ns = s + dt / 6 * (k1 + 2 k2 + 2 k3 + k4), into y.
  for_lanes<W>(
      n, [&]<class V>(std::size_t i) __attribute__((always_inline)) {
        for (int j = 0; j < 4; ++j)
          st(y[j] + i, ld<V>(s[j] + i) + dt / 6.0 *
                                             (ld<V>(k[0][j] + i) + 2 * ld<V>(k[1][j] + i) + 2 * ld<V>(k[2][j] + i) +
                                              ld<V>(k[3][j] + i)));
      });
  for (std::size_t i = 0; i < n; ++i) {
    double ns[4];
    ns[0] = wrap(y[0][i], -kPi, kPi);
    ns[1] = wrap(y[1][i], -kPi, kPi);
    ns[2] = bound(y[2][i], -kMaxVel1, kMaxVel1);
    ns[3] = bound(y[3][i], -kMaxVel2, kMaxVel2);
    for (int j = 0; j < 4; ++j) s[j][i] = ns[j];
    const bool term = terminal(ns);
    l.terminated[i] = term;
    l.reward[i] = term ? 0.0 : -1.0;
    observe(ns, l.obs + 6 * i);
  }
}

#ifdef HERD_RL_X86_SIMD
__attribute__((target("avx512f,avx512dq"))) void acrobot_lanes_avx512(const AcrobotLanes& l, std::size_t n) {
  acrobot_lanes_impl<8>(l, n);
}
__attribute__((target("avx2"))) void acrobot_lanes_avx2(const AcrobotLanes& l, std::size_t n) {
  acrobot_lanes_impl<4>(l, n);
}
#endif

}  // namespace

void acrobot_lanes(const AcrobotLanes& l, std::size_t n, EnvSimd level) {
  HERD_REQUIRE(n <= kAcrobotChunk, "acrobot_lanes: {} lanes, but at most {}", n, kAcrobotChunk);
#ifdef HERD_RL_X86_SIMD
  if (level == EnvSimd::kAvx512) return acrobot_lanes_avx512(l, n);
  if (level == EnvSimd::kAvx2) return acrobot_lanes_avx2(l, n);
#endif
  (void)level;
  acrobot_lanes_impl<1>(l, n);
}

}  // namespace detail

// ---------------------------------------------------------------------------------------
// sin and cos in double-double precision, W lanes per vector (env_sincos).
//
// For 2^-26 <= |x| <= 0.5 (nothing underflows):
//   sin x = x - x^3/6 + x^5 (1/5! - x^2/7! + ... + x^12/17!)
//   cos x = 1 - x^2/2 + x^4/24 + x^6 (-1/6! + x^2/8! - ... + x^10/16!)
// x^2, x^3, x^4 and the terms x^3/6, x^4/24 are double-doubles (products split exactly
// with FMA; 1/6 and 1/24 as double-doubles); the tails (at most 2^-10.9 |x| and 2^-15.5)
// are FMA Horner sums in double. The value is v = hi + lo with hi = RN(v) and lo exact
// (Fast2Sum). Error of v against sin x, in units in the last place (ulp) of the result, at
// |x| = 0.5 (it shrinks as x^4): the tail's about 6 roundings (x^3, x^2 and their product,
// the coefficients, the Horner sum, the final FMA) times 2^-53 |x^5 / 120| / (2^-53 sin x)
// = 0.0034; truncation 2^-21; the double-double terms 2^-45; so below 0.0035 ulp. For
// cos x: 6 2^-53 x^6/720 / (2^-53 cos x) = 0.00015, the rest below 2^-40; below 0.0002.
// The lane is correctly rounded when v lies farther than that from a rounding midpoint;
// it is glibc's result when, in addition, glibc's error is below 0.5 + (margin - 0.0035)
// ulp (sin) or 0.5 + (margin - 0.0002) ulp (cos). Other lanes take glibc's sincos.
namespace {

template <int W>
struct SincosVec {
  typedef double d __attribute__((vector_size(W * sizeof(double))));
  typedef std::int64_t i __attribute__((vector_size(W * sizeof(double))));
};

// The tails' Horner sums in x^2 = RN(x x): q for sin (x^5 q), r for cos (x^6 r).
template <class D, class Fma>
[[gnu::always_inline]] inline void sincos_tails(D x, D& q, D& r, Fma fma) {
  auto k = [](double v) { return D{} + v; };
  const D x2h = x * x;
  q = fma(k(0x1.952c77030ad4ap-49), x2h, k(-0x1.ae7f3e733b81fp-41));
  q = fma(q, x2h, k(0x1.6124613a86d09p-33));
  q = fma(q, x2h, k(-0x1.ae64567f544e4p-26));
  q = fma(q, x2h, k(0x1.71de3a556c734p-19));
  q = fma(q, x2h, k(-0x1.a01a01a01a01ap-13));
  q = fma(q, x2h, k(0x1.1111111111111p-7));
  r = fma(k(0x1.ae7f3e733b81fp-45), x2h, k(-0x1.93974a8c07c9dp-37));
  r = fma(r, x2h, k(0x1.1eed8eff8d898p-29));
  r = fma(r, x2h, k(-0x1.27e4fb7789f5cp-22));
  r = fma(r, x2h, k(0x1.a01a01a01a01ap-16));
  r = fma(r, x2h, k(-0x1.6c16c16c16c17p-10));
}

// Lane comparisons as vectors of all-ones (true) or zero elements, as GCC's vector operators
// give them: the operators themselves for 4 lanes (GCC compiles them to vcmppd);
// for 8 lanes, Cmp512 below (GCC 12 splits 512-bit vector comparisons into one scalar
// comparison per element).
struct GenericCmp {
  template <class V>
  [[gnu::always_inline]] auto lt(V a, V b) const {
    return a < b;
  }
  template <class V>
  [[gnu::always_inline]] auto le(V a, V b) const {
    return a <= b;
  }
  template <class V>
  [[gnu::always_inline]] auto ne(V a, V b) const {
    return a != b;
  }
};

// sin/cos of x into s, c, given its tails q, r (sincos_tails); returns a lane mask (-1:
// glibc must compute this lane).
template <class D, class I, class Fma, class Cmp = GenericCmp>
[[gnu::always_inline]] inline I sincos_dd(D x, D q, D r, D& s, D& c, Fma fma, Cmp cmp = {}) {
  constexpr double kC6h = 0x1.5555555555555p-3, kC6l = 0x1.5555555555555p-57;    // 1/6
  constexpr double kC24h = 0x1.5555555555555p-5, kC24l = 0x1.5555555555555p-59;  // 1/24
  constexpr std::int64_t kAbs = 0x7fffffffffffffff;
  const D ax = (D)((I)x & kAbs);
  auto k = [](double v) { return D{} + v; };
  const D x2h = x * x, x2l = fma(x, x, -x2h);
  // sin
  const D x3h = x * x2h, x3l = fma(x, x2l, fma(x, x2h, -x3h));
  const D t3h = x3h * kC6h, t3l = fma(x3l, k(kC6h), fma(x3h, k(kC6l), fma(x3h, k(kC6h), -t3h)));
  const D sh = x - t3h, sl = (x - sh) - t3h;  // exact: |t3h| <= |x|
  const D lo_s = fma(x3h * x2h, q, sl - t3l);
  s = sh + lo_s;
  const D es = lo_s - (s - sh);  // exact: s + es = sh + lo_s
  // cos
  const D h = 0.5 * x2h, hl = 0.5 * x2l;
  const D ch = 1.0 - h, cl = (1.0 - ch) - h;  // exact: h <= 1
  const D x4h = x2h * x2h, x4l = fma(x2h + x2h, x2l, fma(x2h, x2h, -x4h));
  const D qh = x4h * kC24h, ql = fma(x4l, k(kC24h), fma(x4h, k(kC24l), fma(x4h, k(kC24h), -qh)));
  const D th = ch + qh, tl = qh - (th - ch);  // exact: qh <= ch
  const D lo_c = fma(x4h * x2h, r, ((cl + tl) - hl) + ql);
  c = th + lo_c;
  const D ec = lo_c - (c - th);
  // Ambiguous when v + e K rounds away from v (K = 1/2 / (1/2 - margin), rounded up):
  // |e| >= (1/2 - margin) of the gap on e's side, i.e. the value lies within `margin`
  // units in the last place of a midpoint. Below a power of two the gap is half as wide,
  // so the test is conservative there.
  constexpr double kKs = 0.5 / (0.5 - kEnvSinMargin) * (1 + 0x1p-40);
  constexpr double kKc = 0.5 / (0.5 - kEnvCosMargin) * (1 + 0x1p-40);
  // (NaN lanes: ~(ax <= bound) and != are true, so they fall back.)
  return cmp.lt(ax, k(0x1p-26)) | ~cmp.le(ax, k(kEnvSincosBound)) | cmp.ne(s + es * kKs, s) | cmp.ne(c + ec * kKc, c);
}

}  // namespace

namespace {

// glibc's sincos, out of line: inlined into the functions with target attributes, GCC
// splits the call into separate sin and cos calls (the same bits, but slower).
[[gnu::noinline]] void glibc_sincos(double x, double* s, double* c) { ::sincos(x, s, c); }

// Lanes [0, n) of x through the W-wide kernel (the last partial vector padded), then
// glibc's sincos for the lanes it flagged; returns their number. The vector loop has no
// data-dependent branch (flagged lanes are appended to a list without one), so its
// iterations overlap.
template <int W, class Fma, class Movemask, class Cmp = GenericCmp>
[[gnu::always_inline]] inline std::size_t sincos_lanes_impl(const double* x, double* s, double* c, std::size_t n,
                                                            std::uint8_t* fell_back, Fma fma, Movemask movemask,
                                                            Cmp cmp = {}) {
  using D = typename SincosVec<W>::d;
  using I = typename SincosVec<W>::i;
  constexpr std::size_t kW = W, kPart = 512;
  std::uint32_t list[kPart];
  std::size_t count = 0;
  for (std::size_t p = 0; p < n; p += kPart) {
    const std::size_t pn = n - p < kPart ? n - p : kPart;
    const std::size_t full = pn - pn % kW;
    std::size_t k = 0;
    // Blocks of 64 lanes in two passes, the tails' Horner chains first, so that each pass's
    // dependency chain is short enough for the out-of-order window to overlap vectors.
    constexpr std::size_t kBlock = 64;
    for (std::size_t b0 = p; b0 < p + full; b0 += kBlock) {
      const std::size_t be = b0 + kBlock < p + full ? b0 + kBlock : p + full;
      D qs[kBlock / kW], rs[kBlock / kW];
      for (std::size_t i = b0, v = 0; i < be; i += kW, ++v) {
        D xv;
        __builtin_memcpy(&xv, x + i, sizeof(D));
        sincos_tails(xv, qs[v], rs[v], fma);
      }
      for (std::size_t i = b0, v = 0; i < be; i += kW, ++v) {
        D xv, sv, cv;
        __builtin_memcpy(&xv, x + i, sizeof(D));
        const unsigned bits = movemask(sincos_dd<D, I>(xv, qs[v], rs[v], sv, cv, fma, cmp));
        __builtin_memcpy(s + i, &sv, sizeof(D));
        __builtin_memcpy(c + i, &cv, sizeof(D));
        for (std::size_t j = 0; j < kW; ++j) {
          list[k] = static_cast<std::uint32_t>(i - p + j);
          k += (bits >> j) & 1u;
        }
      }
    }
    if (full < pn) {  // the partial last vector, padded with a vector-path argument
      const std::size_t i = p + full, m = pn - full;
      double xs[W], ss[W], cs[W];
      for (std::size_t j = 0; j < kW; ++j) xs[j] = j < m ? x[i + j] : 0.25;
      D xv, sv, cv, qv, rv;
      __builtin_memcpy(&xv, xs, sizeof(D));
      sincos_tails(xv, qv, rv, fma);
      const unsigned bits = movemask(sincos_dd<D, I>(xv, qv, rv, sv, cv, fma, cmp));
      __builtin_memcpy(ss, &sv, sizeof(D));
      __builtin_memcpy(cs, &cv, sizeof(D));
      for (std::size_t j = 0; j < m; ++j) {
        s[i + j] = ss[j];
        c[i + j] = cs[j];
        list[k] = static_cast<std::uint32_t>(full + j);
        k += (bits >> j) & 1u;
      }
    }
    if (fell_back) {
      for (std::size_t i = p; i < p + pn; ++i) fell_back[i] = 0;
      for (std::size_t t = 0; t < k; ++t) fell_back[p + list[t]] = 1;
    }
    for (std::size_t t = 0; t < k; ++t) {
      const std::size_t i = p + list[t];
      glibc_sincos(x[i], &s[i], &c[i]);
    }
    count += k;
  }
  return count;
}

#ifdef HERD_RL_X86_SIMD
struct Fma256 {
  __attribute__((target("avx2,fma"))) inline SincosVec<4>::d operator()(SincosVec<4>::d a, SincosVec<4>::d b,
                                                                        SincosVec<4>::d c) const {
    return (SincosVec<4>::d)_mm256_fmadd_pd((__m256d)a, (__m256d)b, (__m256d)c);
  }
};
struct Mask256 {
  __attribute__((target("avx2,fma"))) inline unsigned operator()(SincosVec<4>::i m) const {
    return static_cast<unsigned>(_mm256_movemask_pd((__m256d)m));
  }
};
struct Fma512 {
  __attribute__((target("avx512f,avx512dq"))) inline SincosVec<8>::d operator()(SincosVec<8>::d a, SincosVec<8>::d b,
                                                                                SincosVec<8>::d c) const {
    return (SincosVec<8>::d)_mm512_fmadd_pd((__m512d)a, (__m512d)b, (__m512d)c);
  }
};
struct Mask512 {
  __attribute__((target("avx512f,avx512dq"))) inline unsigned operator()(SincosVec<8>::i m) const {
    return static_cast<unsigned>(_mm512_movepi64_mask((__m512i)m));
  }
};
// GenericCmp's comparisons of 8 doubles through a mask register: vcmppd with the predicates
// of C's <, <= (ordered, false for NaN) and != (unordered, true for NaN), then vpmovm2q.
struct Cmp512 {
  using D = SincosVec<8>::d;
  using I = SincosVec<8>::i;
  __attribute__((target("avx512f,avx512dq"))) inline I lt(D a, D b) const {
    return (I)_mm512_movm_epi64(_mm512_cmp_pd_mask((__m512d)a, (__m512d)b, _CMP_LT_OQ));
  }
  __attribute__((target("avx512f,avx512dq"))) inline I le(D a, D b) const {
    return (I)_mm512_movm_epi64(_mm512_cmp_pd_mask((__m512d)a, (__m512d)b, _CMP_LE_OQ));
  }
  __attribute__((target("avx512f,avx512dq"))) inline I ne(D a, D b) const {
    return (I)_mm512_movm_epi64(_mm512_cmp_pd_mask((__m512d)a, (__m512d)b, _CMP_NEQ_UQ));
  }
};

__attribute__((target("avx2,fma"), flatten)) std::size_t sincos_avx2(const double* x, double* s, double* c,
                                                                     std::size_t n, std::uint8_t* fell_back) {
  return sincos_lanes_impl<4>(x, s, c, n, fell_back, Fma256{}, Mask256{});
}
__attribute__((target("avx512f,avx512dq"), flatten)) std::size_t sincos_avx512(const double* x, double* s, double* c,
                                                                               std::size_t n, std::uint8_t* fell_back) {
  return sincos_lanes_impl<8>(x, s, c, n, fell_back, Fma512{}, Mask512{}, Cmp512{});
}
#endif

bool cpu_has_fma() {
#ifdef HERD_RL_X86_SIMD
  static const bool fma = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("fma") != 0;
  }();
  return fma;
#else
  return false;
#endif
}

}  // namespace

namespace detail {

std::size_t sincos_lanes(const double* x, double* s, double* c, std::size_t n, EnvSimd level, std::uint8_t* fell_back) {
#ifdef HERD_RL_X86_SIMD
  if (level == EnvSimd::kAvx512) return sincos_avx512(x, s, c, n, fell_back);
  if (level == EnvSimd::kAvx2 && cpu_has_fma()) return sincos_avx2(x, s, c, n, fell_back);
#endif
  (void)level;
  for (std::size_t i = 0; i < n; ++i) {
    glibc_sincos(x[i], &s[i], &c[i]);
    if (fell_back) fell_back[i] = 1;
  }
  return n;
}

}  // namespace detail

// ---------------------------------------------------------------------------------------
// CartPole's per-env bookkeeping after a step and its start states, W envs per vector
// (GCC vector extensions; the few ISA-specific operations come from the functors).
namespace {

using detail::CartPoleStarts;
using namespace detail::cartpole;

static_assert(std::is_trivially_copyable_v<EpisodeClock> && sizeof(EpisodeClock) == 16 &&
                  offsetof(EpisodeClock, elapsed) == 0 && offsetof(EpisodeClock, limit) == 8,
              "the vector bookkeeping reads EpisodeClock as pairs of int64 (elapsed, limit)");

// Vector types of W 64-bit elements (2W 32-bit lanes), and of W bytes.
template <int W>
struct StartVec {
  typedef std::uint32_t u32 __attribute__((vector_size(8 * W)));
  typedef std::uint64_t u64 __attribute__((vector_size(8 * W)));
  typedef double f64 __attribute__((vector_size(8 * W)));
  typedef std::uint8_t u8 __attribute__((vector_size(W)));
  typedef std::uint32_t half32 __attribute__((vector_size(4 * W)));  // W 32-bit lanes
};

// Writes bits [0, W) of `bits` as W bytes 0/1.
template <int W>
[[gnu::always_inline]] inline void store_mask_bytes(std::uint8_t* out, unsigned bits) {
  for (int q = 0; q < W / 4; ++q) {
    const std::uint32_t v = detail::kMaskBytes[(bits >> (4 * q)) & 15u];
    __builtin_memcpy(out + 4 * q, &v, 4);
  }
}

// Index sequences for __builtin_shufflevector: 2i + Off (even/odd elements of two vectors),
// and the interleaving of elements [Off, Off + N) of a with those of b (a's first), for two
// vectors of 2N elements.
template <std::size_t Off, std::size_t... I>
constexpr auto stride2(std::index_sequence<I...>) {
  return std::index_sequence<(2 * I + Off)...>{};
}
template <std::size_t N, std::size_t Off, std::size_t... I>
constexpr auto interleave(std::index_sequence<I...>) {
  return std::index_sequence<(I % 2 == 0 ? Off + I / 2 : 2 * N + Off + I / 2)...>{};
}
template <class V, std::size_t... I>
[[gnu::always_inline]] inline V pick(V a, V b, std::index_sequence<I...>) {
  return __builtin_shufflevector(a, b, static_cast<int>(I)...);
}
// Elements I of the one vector h into a vector R (as many as indices).
template <class R, class V, std::size_t... I>
[[gnu::always_inline]] inline R pick_wide(V h, std::index_sequence<I...>) {
  return __builtin_shufflevector(h, h, static_cast<int>(I)...);
}
// 0, 1, ..., N/2 - 1, 0, 1, ..., N/2 - 1.
template <std::size_t... I>
constexpr auto twice_ids(std::index_sequence<I...>) {
  return std::index_sequence<(I % (sizeof...(I) / 2))...>{};
}

void cartpole_finish_scalar(std::size_t n, const std::uint8_t* terminated, std::uint8_t* after_terminal,
                            EpisodeClock* clocks, double* rewards, std::uint8_t* truncated) {
  for (std::size_t i = 0; i < n; ++i) {
    const std::uint8_t term = terminated[i], after = after_terminal[i];
    rewards[i] = 1.0 - static_cast<double>(term & after);  // 0 for steps after termination
    after_terminal[i] = static_cast<std::uint8_t>(after | term);
    truncated[i] = clocks[i].count_step();
  }
}

// The truncation bits (limit > 0 && elapsed >= limit) of W clocks held as (elapsed, limit)
// pairs in lo (clocks [0, W/2)) and hi ([W/2, W)): GCC's vector shuffles and comparisons
// for 4 clocks; Truncated512 below for 8.
template <int W, class Movemask>
struct GenericTruncated {
  Movemask movemask;
  template <class I>
  [[gnu::always_inline]] unsigned operator()(I lo, I hi) const {
    const I elapsed = pick(lo, hi, stride2<0>(std::make_index_sequence<W>{}));
    const I limit = pick(lo, hi, stride2<1>(std::make_index_sequence<W>{}));
    return movemask((limit > 0) & (elapsed >= limit));
  }
};

template <int W, class Truncated>
[[gnu::always_inline]] inline void cartpole_finish_impl(std::size_t n, const std::uint8_t* terminated,
                                                        std::uint8_t* after_terminal, EpisodeClock* clocks,
                                                        double* rewards, std::uint8_t* truncated,
                                                        Truncated truncation) {
  using I = typename SincosVec<W>::i;
  using B = typename StartVec<W>::u8;
  constexpr std::int64_t kOneBits = 0x3ff0000000000000;  // 1.0
  I tick{};  // +1 on the elapsed counts (the even int64 elements of W/2 clocks)
  for (int j = 0; j < W; j += 2) tick[j] = 1;
  std::size_t i = 0;
  for (; i + W <= n; i += W) {
    B t, a;
    __builtin_memcpy(&t, terminated + i, W);
    __builtin_memcpy(&a, after_terminal + i, W);
    const B later = t & a, after = a | t;
    __builtin_memcpy(after_terminal + i, &after, W);
    // 1.0 - (terminated & after_terminal), as the scalar path: 1.0, or +0.0 for a step
    // after termination.
    const I rbits = (__builtin_convertvector(later, I) == 0) & kOneBits;
    __builtin_memcpy(rewards + i, &rbits, sizeof(I));
    I lo, hi;  // clocks [i, i + W/2) and [i + W/2, i + W) as (elapsed, limit) pairs
    void* const c0 = clocks + i;
    void* const c1 = clocks + i + W / 2;
    __builtin_memcpy(&lo, c0, sizeof(I));
    __builtin_memcpy(&hi, c1, sizeof(I));
    lo += tick;
    hi += tick;
    __builtin_memcpy(c0, &lo, sizeof(I));
    __builtin_memcpy(c1, &hi, sizeof(I));
    store_mask_bytes<W>(truncated + i, truncation(lo, hi));
  }
  cartpole_finish_scalar(n - i, terminated + i, after_terminal + i, clocks + i, rewards + i, truncated + i);
}

// Philox4x32-10's rounds on 2W independent blocks, one per 32-bit lane (as
// `philox4x32_10_sse2`, whose steps these are): `mul` is the unsigned 32 x 32 -> 64-bit
// product of the low halves of each 64-bit element (vpmuludq), so odd lanes are shifted down.
template <int W, class U32, class U64, class Mul>
[[gnu::always_inline]] inline void philox_lanes(U32& a, U32& b, U32& c, U32& d, U32 k0, U32 k1, Mul mul) {
  const U64 m0 = U64{} + 0xD2511F53u, m1 = U64{} + 0xCD9E8D57u;
  const U64 lo_mask = U64{} + 0xffffffffu;
  for (int r = 0; r < 10; ++r) {
    const U64 av = (U64)a, cv = (U64)c;
    const U64 pa_even = mul(av, m0), pa_odd = mul(av >> 32, m0);
    const U64 pc_even = mul(cv, m1), pc_odd = mul(cv >> 32, m1);
    const U64 lo0 = (pa_even & lo_mask) | (pa_odd << 32), hi0 = (pa_even >> 32) | (pa_odd & ~lo_mask);
    const U64 lo1 = (pc_even & lo_mask) | (pc_odd << 32), hi1 = (pc_even >> 32) | (pc_odd & ~lo_mask);
    a = (U32)hi1 ^ b ^ k0;
    b = (U32)lo1;
    c = (U32)hi0 ^ d ^ k1;
    d = (U32)lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
}

template <int W, class Mul>
[[gnu::always_inline]] inline void cartpole_starts_impl(const CartPoleStarts& s, std::size_t m, Mul mul) {
  using U32 = typename StartVec<W>::u32;
  using U64 = typename StartVec<W>::u64;
  using F = typename StartVec<W>::f64;
  // The uniform of each 64-bit element: (x >> 12) exactly as a double (below 2^52: the
  // exponent trick), then (k + 1/2) 2^-52, both exact as in u64_to_uniform.
  auto start = [](U64 x) {
    const F k = (F)((x >> 12) | 0x4330000000000000u) - 0x1p52;
    const F u = (k + 0.5) * 0x1p-52;
    return kResetLow + (kResetHigh - kResetLow) * u;  // reset_component's operations per lane
  };
  for (std::size_t g = 0; g < m; g += W) {
    const std::size_t cnt = m - g < W ? m - g : W;
    // Lanes [0, W): block 0 of envs g .. g + W - 1; lanes [W, 2W): their block 1. A
    // partial group repeats env g in the lanes past its end.
    U32 a{}, b{}, c{}, d{}, k0{}, k1{};
    for (std::size_t j = W; j < 2 * W; ++j) a[j] = 1;
    if (cnt == W) {  // W words of each array, twice
      using H = typename StartVec<W>::half32;
      constexpr auto twice = twice_ids(std::make_index_sequence<2 * W>{});
      auto load2 = [&](const std::uint32_t* p) {
        H h;
        __builtin_memcpy(&h, p + g, sizeof(H));
        return pick_wide<U32>(h, twice);
      };
      b = load2(s.c1);
      c = load2(s.c2);
      d = load2(s.c3);
      k0 = load2(s.k0);
      k1 = load2(s.k1);
    } else {
      for (std::size_t j = 0; j < 2 * W; ++j) {
        const std::size_t e = g + (j % W < cnt ? j % W : 0);
        b[j] = s.c1[e];
        c[j] = s.c2[e];
        d[j] = s.c3[e];
        k0[j] = s.k0[e];
        k1[j] = s.k1[e];
      }
    }
    philox_lanes<W, U32, U64>(a, b, c, d, k0, k1, mul);
    // Env j's uniforms: words (0, 1) and (2, 3) of block 0, then of block 1, the first low.
    constexpr auto block0 = interleave<W, 0>(std::make_index_sequence<2 * W>{});
    constexpr auto block1 = interleave<W, W>(std::make_index_sequence<2 * W>{});
    F out[4] = {start((U64)pick(a, b, block0)), start((U64)pick(c, d, block0)), start((U64)pick(a, b, block1)),
                start((U64)pick(c, d, block1))};
    double* const dst[4] = {s.x, s.x_dot, s.theta, s.theta_dot};
    for (int q = 0; q < 4; ++q) __builtin_memcpy(dst[q] + g, &out[q], cnt * sizeof(double));
  }
}

// One env at a time in the words' order (on x86-64, two envs per SSE2 Philox call: both
// blocks of each in the four 32-bit lanes, `philox4x32_10_sse2`).
void cartpole_starts_scalar(const CartPoleStarts& s, std::size_t m) {
  double* const dst[4] = {s.x, s.x_dot, s.theta, s.theta_dot};
  auto put = [&](std::size_t i, std::uint32_t sub, const std::uint32_t* w) {
    for (int h = 0; h < 2; ++h) {
      const std::uint64_t v = static_cast<std::uint64_t>(w[2 * h]) | (static_cast<std::uint64_t>(w[2 * h + 1]) << 32);
      dst[2 * sub + h][i] = reset_component(u64_to_uniform(v));
    }
  };
#if defined(__SSE2__)
  for (std::size_t i = 0; i < m; i += 2) {
    const std::size_t j = i + 1 < m ? i + 1 : i;  // lanes 2-3: env i + 1 (or env i again)
    auto lanes = [](std::uint32_t v0, std::uint32_t v1, std::uint32_t v2, std::uint32_t v3) {
      return _mm_set_epi32(static_cast<int>(v3), static_cast<int>(v2), static_cast<int>(v1), static_cast<int>(v0));
    };
    __m128i a = lanes(0, 1, 0, 1), b = lanes(s.c1[i], s.c1[i], s.c1[j], s.c1[j]);
    __m128i c = lanes(s.c2[i], s.c2[i], s.c2[j], s.c2[j]), d = lanes(s.c3[i], s.c3[i], s.c3[j], s.c3[j]);
    philox4x32_10_sse2(a, b, c, d, lanes(s.k0[i], s.k0[i], s.k0[j], s.k0[j]),
                       lanes(s.k1[i], s.k1[i], s.k1[j], s.k1[j]));
    alignas(16) std::uint32_t w[4][4];  // w[word][lane]
    _mm_store_si128(reinterpret_cast<__m128i*>(w[0]), a);
    _mm_store_si128(reinterpret_cast<__m128i*>(w[1]), b);
    _mm_store_si128(reinterpret_cast<__m128i*>(w[2]), c);
    _mm_store_si128(reinterpret_cast<__m128i*>(w[3]), d);
    for (std::size_t l = 0; l < (j > i ? 4u : 2u); ++l) {
      const std::uint32_t blk[4] = {w[0][l], w[1][l], w[2][l], w[3][l]};
      put(i + l / 2, static_cast<std::uint32_t>(l % 2), blk);
    }
  }
#else
  for (std::size_t i = 0; i < m; ++i) {
    for (std::uint32_t sub = 0; sub < 2; ++sub) {
      const std::uint32_t ctr[4] = {sub, s.c1[i], s.c2[i], s.c3[i]}, key[2] = {s.k0[i], s.k1[i]};
      put(i, sub, philox4x32_10(ctr, key).v);
    }
  }
#endif
}

#ifdef HERD_RL_X86_SIMD
// Mask256 without the FMA target (so that it inlines into avx2-only functions).
struct MaskBits256 {
  __attribute__((target("avx2"))) inline unsigned operator()(SincosVec<4>::i m) const {
    return static_cast<unsigned>(_mm256_movemask_pd((__m256d)m));
  }
};
struct MulEpu32x256 {
  template <class U>
  __attribute__((target("avx2"))) inline U operator()(U a, U b) const {
    return (U)_mm256_mul_epu32((__m256i)a, (__m256i)b);
  }
};
// GCC 12's AVX-512 headers: see cartpole_lanes_avx512.
#pragma GCC diagnostic push
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
struct MulEpu32x512 {
  template <class U>
  __attribute__((target("avx512f,avx512dq"))) inline U operator()(U a, U b) const {
    return (U)_mm512_mul_epu32((__m512i)a, (__m512i)b);
  }
};

// GenericTruncated for 8 clocks: vpermt2q gathers the elapsed counts and the limits, vpcmpq
// compares them into mask registers (GCC 12 would split the generic forms element by
// element).
struct Truncated512 {
  using I = SincosVec<8>::i;
  __attribute__((target("avx512f,avx512dq"))) inline unsigned operator()(I lo, I hi) const {
    const __m512i even = _mm512_setr_epi64(0, 2, 4, 6, 8, 10, 12, 14),
                  odd = _mm512_setr_epi64(1, 3, 5, 7, 9, 11, 13, 15);
    const __m512i elapsed = _mm512_permutex2var_epi64((__m512i)lo, even, (__m512i)hi);
    const __m512i limit = _mm512_permutex2var_epi64((__m512i)lo, odd, (__m512i)hi);
    return static_cast<unsigned>(_mm512_cmpgt_epi64_mask(limit, _mm512_setzero_si512()) &
                                 _mm512_cmpge_epi64_mask(elapsed, limit));
  }
};

__attribute__((target("avx2"), flatten)) void cartpole_finish_avx2(std::size_t n, const std::uint8_t* terminated,
                                                                   std::uint8_t* after_terminal, EpisodeClock* clocks,
                                                                   double* rewards, std::uint8_t* truncated) {
  cartpole_finish_impl<4>(n, terminated, after_terminal, clocks, rewards, truncated,
                          GenericTruncated<4, MaskBits256>{});
}
__attribute__((target("avx512f,avx512dq"), flatten)) void cartpole_finish_avx512(std::size_t n,
                                                                                 const std::uint8_t* terminated,
                                                                                 std::uint8_t* after_terminal,
                                                                                 EpisodeClock* clocks, double* rewards,
                                                                                 std::uint8_t* truncated) {
  cartpole_finish_impl<8>(n, terminated, after_terminal, clocks, rewards, truncated, Truncated512{});
}
__attribute__((target("avx2"), flatten)) void cartpole_starts_avx2(const CartPoleStarts& s, std::size_t m) {
  cartpole_starts_impl<4>(s, m, MulEpu32x256{});
}
__attribute__((target("avx512f,avx512dq"), flatten)) void cartpole_starts_avx512(const CartPoleStarts& s,
                                                                                 std::size_t m) {
  cartpole_starts_impl<8>(s, m, MulEpu32x512{});
}
#pragma GCC diagnostic pop
#endif

}  // namespace

namespace detail {

void cartpole_finish(std::size_t n, const std::uint8_t* terminated, std::uint8_t* after_terminal, EpisodeClock* clocks,
                     double* rewards, std::uint8_t* truncated, EnvSimd level) {
#ifdef HERD_RL_X86_SIMD
  if (level == EnvSimd::kAvx512)
    return cartpole_finish_avx512(n, terminated, after_terminal, clocks, rewards, truncated);
  if (level == EnvSimd::kAvx2) return cartpole_finish_avx2(n, terminated, after_terminal, clocks, rewards, truncated);
#endif
  (void)level;
  cartpole_finish_scalar(n, terminated, after_terminal, clocks, rewards, truncated);
}

void cartpole_start_states(const CartPoleStarts& s, std::size_t m, EnvSimd level) {
#ifdef HERD_RL_X86_SIMD
  if (level == EnvSimd::kAvx512) return cartpole_starts_avx512(s, m);
  if (level == EnvSimd::kAvx2) return cartpole_starts_avx2(s, m);
#endif
  (void)level;
  cartpole_starts_scalar(s, m);
}

}  // namespace detail

std::size_t env_sincos(const double* x, double* sin, double* cos, std::size_t n, EnvSimd level,
                       std::uint8_t* fell_back) {
  HERD_REQUIRE(static_cast<int>(level) <= static_cast<int>(env_simd_supported()),
               "env_sincos: level {} is not supported by this CPU (the widest supported is {})", env_simd_name(level),
               env_simd_name(env_simd_supported()));
  return detail::sincos_lanes(x, sin, cos, n, level, fell_back);
}

}  // namespace herd::rl
