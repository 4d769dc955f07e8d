// glibc's sin/cos error on env_sincos's range against an extra-precision reference, and
// env_sincos's agreement with glibc and its fallback rate (docs/rl.md, "SIMD-across-envs
// stepping"). By hand, not a test:
//   bench_sincos_error [--n 1e9] [--threads 2] [--seed 1] [--quad-every 100]
// Arguments: 9 in 10 uniform on [-B, B] (B = kEnvSincosBound), 1 in 10 with log-uniform
// magnitude on [2^-30, B] and a random sign. The reference is a double-double Taylor sum
// (relative error below 2^-100); libquadmath's 113-bit sincosq checks it on every
// `quad-every`-th argument and replaces it wherever glibc is not correctly rounded or the
// value lies within 2^-10 ulp of a rounding midpoint, so every figure that decides the
// margin comes from sincosq.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "herd/rl/envs.hpp"
#include "sincos_hard_cases.hpp"

// libquadmath's sincosq (GCC's quadmath.h lies in GCC's private include directory, which
// other compilers and clang-tidy do not see).
extern "C" void sincosq(__float128 x, __float128* s, __float128* c);

namespace {

struct DD {
  double h, l;
};
DD fast_two_sum(double a, double b) {
  const double s = a + b;
  return {s, b - (s - a)};
}
DD two_sum(double a, double b) {
  const double s = a + b, bb = s - a;
  return {s, (a - (s - bb)) + (b - bb)};
}
DD add(DD a, DD b) {
  DD s = two_sum(a.h, b.h);
  return fast_two_sum(s.h, s.l + (a.l + b.l));
}
DD mul(DD a, DD b) {
  const double p = a.h * b.h;
  return fast_two_sum(p, std::fma(a.h, b.h, -p) + (a.h * b.l + a.l * b.h));
}
DD div(DD a, double b) {
  const double q1 = a.h / b;
  const double r = (std::fma(-q1, b, a.h)) + a.l;  // a - q1 b (the product's error exact)
  return fast_two_sum(q1, r / b);
}

// 1/k! as double-doubles, k = 0..29.
struct Factorials {
  DD inv[30];
  Factorials() {
    inv[0] = {1.0, 0.0};
    for (int k = 1; k < 30; ++k) inv[k] = div(inv[k - 1], k);
  }
};
const Factorials kF;

// sin and cos of x (|x| <= 0.5) in double-double: Taylor sums through x^27 and x^26.
void ref_sincos(double x, DD& s, DD& c) {
  const double x2h = x * x;
  const DD x2{x2h, std::fma(x, x, -x2h)};
  DD ps{-kF.inv[27].h, -kF.inv[27].l};  // (-1)^13 / 27!
  DD pc{-kF.inv[26].h, -kF.inv[26].l};  // (-1)^13 / 26!
  for (int k = 12; k >= 0; --k) {
    const double sg = (k % 2) ? -1.0 : 1.0;
    ps = add(mul(ps, x2), DD{sg * kF.inv[2 * k + 1].h, sg * kF.inv[2 * k + 1].l});
    pc = add(mul(pc, x2), DD{sg * kF.inv[2 * k].h, sg * kF.inv[2 * k].l});
  }
  s = mul(ps, DD{x, 0.0});
  c = pc;
}

// Units in the last place at the reference value h + l (h = RN(h + l)): half of h's when h
// is a power of two and l points towards zero.
double ulp_at(double h, double l) {
  int e;
  const double m = std::frexp(std::fabs(h), &e);  // |h| = m 2^e, m in [0.5, 1)
  double u = std::ldexp(1.0, e - 53);
  if (m == 0.5 && l != 0 && (l < 0) != (h < 0)) u *= 0.5;
  return u;
}

struct Stats {
  std::uint64_t n = 0, misrounded = 0, quad_checked = 0, quad_replaced = 0;
  double max_err = 0, max_err_x = 0;  // glibc's largest error [ulp] and its argument
  double max_excess_mis = -1;         // largest (error - 0.5) among misrounded
  double min_mid = 1, min_mid_x = 0;  // smallest distance of a value to a midpoint [ulp]
  double max_ref_diff = 0;            // |double-double - sincosq| [ulp]
  std::uint64_t ours_mismatch_glibc = 0, ours_mismatch_cr = 0;
  std::uint64_t hist[8] = {};  // distance to midpoint < 2^-1..2^-8 (ulp)
  void merge(const Stats& o) {
    n += o.n;
    misrounded += o.misrounded;
    quad_checked += o.quad_checked;
    quad_replaced += o.quad_replaced;
    if (o.max_err > max_err) max_err = o.max_err, max_err_x = o.max_err_x;
    max_excess_mis = std::max(max_excess_mis, o.max_excess_mis);
    if (o.min_mid < min_mid) min_mid = o.min_mid, min_mid_x = o.min_mid_x;
    max_ref_diff = std::max(max_ref_diff, o.max_ref_diff);
    ours_mismatch_glibc += o.ours_mismatch_glibc;
    ours_mismatch_cr += o.ours_mismatch_cr;
    for (int i = 0; i < 8; ++i) hist[i] += o.hist[i];
  }
};

// One function's value: glibc's y, ours (or NaN when it fell back), the double-double
// reference; `quad` computes the 113-bit value on demand.
template <class Quad>
void account(Stats& st, double x, double y, bool ours_valid, double ours, DD ref, bool check_quad, Quad quad) {
  ++st.n;
  auto measure = [](double y, double rh, double rl, double& err, double& mid) {
    const double u = ulp_at(rh, rl);
    err = std::fabs((y - rh) - rl) / u;
    mid = 0.5 - std::fabs(rl) / u;
  };
  double err, mid;
  measure(y, ref.h, ref.l, err, mid);
  const bool mis = y != ref.h;
  if (check_quad || mis || mid < 0x1p-10) {
    const __float128 q = quad();
    const double qh = static_cast<double>(q), ql = static_cast<double>(q - static_cast<__float128>(qh));
    const double u = ulp_at(qh, ql);
    const double diff = std::fabs(static_cast<double>((static_cast<__float128>(ref.h) + ref.l) - q)) / u;
    st.max_ref_diff = std::max(st.max_ref_diff, diff);
    ++st.quad_checked;
    if (mis || mid < 0x1p-10) {
      ++st.quad_replaced;
      ref = {qh, ql};
      measure(y, qh, ql, err, mid);
    }
  }
  const bool misq = y != ref.h;
  st.misrounded += misq;
  if (misq) st.max_excess_mis = std::max(st.max_excess_mis, err - 0.5);
  if (err > st.max_err) st.max_err = err, st.max_err_x = x;
  if (mid < st.min_mid) st.min_mid = mid, st.min_mid_x = x;
  for (int i = 0; i < 8; ++i)
    if (mid < std::ldexp(1.0, -1 - i)) ++st.hist[i];
  if (ours_valid) {
    if (ours != y) ++st.ours_mismatch_glibc;
    if (ours != ref.h) ++st.ours_mismatch_cr;
  }
}

double arg_value(const char* s) { return std::strtod(s, nullptr); }

// Hard cases for rounding sin below 0.5: tests/support/sincos_hard_cases.hpp.
constexpr const auto& kHard = herd_test::kSinHardCases;

}  // namespace

int main(int argc, char** argv) {
  std::uint64_t n = 1000000000ULL, seed = 1, quad_every = 100;
  int threads = 2;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    std::uint64_t* target = a == "--n" ? &n : a == "--seed" ? &seed : a == "--quad-every" ? &quad_every : nullptr;
    if (target != nullptr) {
      *target = static_cast<std::uint64_t>(arg_value(argv[i + 1]));
    } else if (a == "--threads") {
      threads = std::atoi(argv[i + 1]);
    } else {
      std::fprintf(stderr, "unknown option %s\n", argv[i]);
      return 2;
    }
  }
  const double bound = herd::rl::kEnvSincosBound;
  const herd::rl::EnvSimd level = herd::rl::env_simd_supported();
  double (*volatile p_sin)(double) = &::sin;
  double (*volatile p_cos)(double) = &::cos;
  void (*volatile p_sincos)(double, double*, double*) = &::sincos;
  Stats total_s, total_c;
  std::uint64_t total_fallback = 0, total_sincos_vs_sin = 0;
  std::mutex mu;
  std::atomic<std::uint64_t> next{0};
  constexpr std::uint64_t kBlock = 4096;
  auto worker = [&](int) {
    Stats ss, sc;
    std::uint64_t fallback = 0, sincos_vs_sin = 0;
    std::vector<double> xs(kBlock), os(kBlock), oc(kBlock);
    std::vector<std::uint8_t> fb(kBlock);
    for (;;) {
      const std::uint64_t b = next.fetch_add(kBlock);
      if (b >= n) break;
      const std::uint64_t m = std::min(kBlock, n - b);
      std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ULL + b);
      for (std::uint64_t i = 0; i < m; ++i) {
        const double u = static_cast<double>(rng() >> 11) * 0x1p-53;  // [0, 1)
        if ((b + i) % 10 == 9) {
          const double mag = bound * std::exp2(-30.0 * static_cast<double>(rng() >> 11) * 0x1p-53);
          xs[i] = (rng() & 1) ? -mag : mag;
        } else {
          xs[i] = bound * (2.0 * u - 1.0);
        }
      }
      fallback += herd::rl::env_sincos(xs.data(), os.data(), oc.data(), m, level, fb.data());
      for (std::uint64_t i = 0; i < m; ++i) {
        const double x = xs[i];
        double gs, gc;
        p_sincos(x, &gs, &gc);
        const double s1 = p_sin(x), c1 = p_cos(x);
        if (s1 != gs || c1 != gc) ++sincos_vs_sin;
        DD rs, rc;
        ref_sincos(x, rs, rc);
        const bool chk = (b + i) % quad_every == 0;
        __float128 qs = 0, qc = 0;
        bool have_q = false;
        auto q = [&](bool want_sin) {
          if (!have_q) sincosq(x, &qs, &qc), have_q = true;
          return want_sin ? qs : qc;
        };
        account(ss, x, gs, fb[i] == 0, os[i], rs, chk, [&] { return q(true); });
        account(sc, x, gc, fb[i] == 0, oc[i], rc, chk, [&] { return q(false); });
      }
    }
    std::lock_guard<std::mutex> lock(mu);
    total_s.merge(ss);
    total_c.merge(sc);
    total_fallback += fallback;
    total_sincos_vs_sin += sincos_vs_sin;
  };
  std::vector<std::thread> pool;
  pool.reserve(static_cast<std::size_t>(threads));
  for (int t = 0; t < threads; ++t) pool.emplace_back(worker, t);
  for (auto& t : pool) t.join();
  std::printf("arguments %llu, |x| <= %g, level %s, margins %g (sin), %g (cos) ulp\n",
              static_cast<unsigned long long>(n), bound, herd::rl::env_simd_name(level), herd::rl::kEnvSinMargin,
              herd::rl::kEnvCosMargin);
  std::printf("glibc sincos differs from sin/cos on %llu arguments\n",
              static_cast<unsigned long long>(total_sincos_vs_sin));
  std::printf("env_sincos fell back to glibc on %llu lanes (%.4f%%)\n", static_cast<unsigned long long>(total_fallback),
              100.0 * static_cast<double>(total_fallback) / static_cast<double>(n));
  for (int f = 0; f < 2; ++f) {
    const Stats& st = f == 0 ? total_s : total_c;
    std::printf(
        "%s: max error %.6f ulp at x = %a; not correctly rounded: %llu (%.4g%%), their largest error 0.5 + %.6f ulp\n",
        f == 0 ? "sin" : "cos", st.max_err, st.max_err_x, static_cast<unsigned long long>(st.misrounded),
        100.0 * static_cast<double>(st.misrounded) / static_cast<double>(st.n), st.max_excess_mis);
    std::printf("  closest to a midpoint: %.3g ulp at x = %a\n", st.min_mid, st.min_mid_x);
    std::printf("  reference: %llu checked with sincosq (max |dd - quad| %.3g ulp), %llu replaced by it\n",
                static_cast<unsigned long long>(st.quad_checked), st.max_ref_diff,
                static_cast<unsigned long long>(st.quad_replaced));
    std::printf("  env_sincos (vector lanes): differs from glibc %llu, from the correctly rounded value %llu\n",
                static_cast<unsigned long long>(st.ours_mismatch_glibc),
                static_cast<unsigned long long>(st.ours_mismatch_cr));
    std::printf("  share within 2^-k ulp of a midpoint, k = 1..8:");
    for (int i = 0; i < 8; ++i)
      std::printf(" %.4g%%", 100.0 * static_cast<double>(st.hist[i]) / static_cast<double>(st.n));
    std::printf("\n");
  }
  // The hard cases, +-x, every value against sincosq.
  {
    Stats hs, hc;
    std::vector<double> xs;
    for (const double h : kHard) xs.push_back(h), xs.push_back(-h);
    std::vector<double> os(xs.size()), oc(xs.size());
    std::vector<std::uint8_t> fb(xs.size());
    const std::size_t fell = herd::rl::env_sincos(xs.data(), os.data(), oc.data(), xs.size(), level, fb.data());
    for (std::size_t i = 0; i < xs.size(); ++i) {
      double gs, gc;
      p_sincos(xs[i], &gs, &gc);
      DD rs, rc;
      ref_sincos(xs[i], rs, rc);
      __float128 qs, qc;
      sincosq(xs[i], &qs, &qc);
      account(hs, xs[i], gs, fb[i] == 0, os[i], rs, true, [&] { return qs; });
      account(hc, xs[i], gc, fb[i] == 0, oc[i], rc, true, [&] { return qc; });
    }
    std::printf("hard cases (%zu arguments): env_sincos fell back on %zu\n", xs.size(), fell);
    for (int f = 0; f < 2; ++f) {
      const Stats& st = f == 0 ? hs : hc;
      std::printf(
          "  %s: glibc max error %.6f ulp, not correctly rounded %llu, closest to a midpoint %.3g ulp at %a; "
          "env_sincos differs from glibc %llu\n",
          f == 0 ? "sin" : "cos", st.max_err, static_cast<unsigned long long>(st.misrounded), st.min_mid, st.min_mid_x,
          static_cast<unsigned long long>(st.ours_mismatch_glibc));
    }
  }
  return 0;
}
