#pragma once
// Internal to herd::mcmc (not installed): what the DRAM kernel (dram.cpp) shares with the run
// layer's checkpoint format (run/checkpoint_format.cpp), and the kernel's cheap acceptance
// bounds (inline, for its tests).

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>

#include "herd/mcmc/dram.hpp"

namespace herd::mcmc::detail {

/// The counters of a chain's result as its state `s` holds them: chain id, proposals
/// (`s.proposal_number`), chain size (`s.records_written`), acceptance rate (accepted /
/// proposals, 0 before the first proposal), per-stage acceptances, evaluations, NaN and
/// out-of-domain counts, adaptive updates (attempted, deferred) and Cholesky failures. The
/// burn-in, the covariances and `seconds` keep their defaults (`DramSampler::finish` computes
/// them; the checkpoint of a finished run stores them). Pure; thread-safe.
DramResult dram_result_counters(const DramState& s);

/// An upper bound of exp(x) for x in (-700, 0], and +inf (no bound) elsewhere and for NaN:
/// with t = x log2(e) = n + f (n an integer, 0 <= f < 1), e^x = 2^n 2^f <= 2^n (1 + f) (2^f
/// is convex, so below its chord on [0, 1]; at most 6.2% above e^x), times 1 + 1e-9 for the
/// rounding of t (relative 1e-16 of |t| < 1010) and of std::exp (< 1 ulp). So u >= the
/// bound implies u >= std::exp(x): the kernel decides most rejections `u < exp(la)` without
/// the libm call, the same way. No libm call: a multiply, a truncation and a power of two
/// built from its bits. Pure; thread-safe.
inline double exp_upper_bound(double x) {
  if (!(x > -700.0 && x <= 0.0)) return std::numeric_limits<double>::infinity();
  const double t = x * 1.4426950408889634;  // log2(e)
  auto n = static_cast<std::int64_t>(t);    // towards zero: n >= t, as t <= 0
  if (static_cast<double>(n) > t) --n;      // floor
  const double f = t - static_cast<double>(n);
  const std::uint64_t bits = static_cast<std::uint64_t>(n + 1023) << 52;
  double p2;
  __builtin_memcpy(&p2, &bits, sizeof p2);
  return p2 * ((1.0 + f) * (1.0 + 1e-9));
}

/// Whether the one-stage delayed-rejection test `u < exp(dr_log_acceptance(2, ...))` (Gaussian
/// proposal, exact rule) surely rejects, from an upper bound of its log ratio that needs no
/// libm call: false when unsure (the caller then computes the ratio). With b = lp1 - lp0 < 0
/// and lp1 < lp2, log alpha = num - den, num = lp2 - q12 / 2c^2 + log(1 - e^(lp1 - lp2)) <=
/// lp2 - q12 / 2c^2, and den = lp0 - q01 / 2c^2 + log(1 - e^b) >= lp0 - q01 / 2c^2 + L, as
/// 1 - e^b >= z = -b / (1 - b) (e^-b >= 1 - b) and log z >= L = e ln 2 for z = m 2^e, 1 <= m < 2.
/// The slack (1e-9 of the terms' magnitudes) covers the rounding of both computations, and
/// exp_upper_bound the step to alpha; so a rejection here is one of the exact test. `w`:
/// the path [3, d] in whitened coordinates, `lp`: its 3 log densities, `c`: the first
/// stage's scale. Pure; thread-safe.
inline bool dr2_surely_rejects(const double* w, const double* lp, double c, double u, int d) {
  const double lp0 = lp[0], lp1 = lp[1], lp2 = lp[2];
  if (!(lp2 > lp1 && lp1 < lp0 && lp1 > -std::numeric_limits<double>::infinity() &&
        lp0 < std::numeric_limits<double>::infinity()))
    return false;  // -inf ratios and 0 denominators are cheap for the exact path; NaN: unsure
  const double b = lp1 - lp0;
  const double z = -b / (1.0 - b);
  if (!(z >= 0x1p-1000)) return false;
  std::uint64_t zb;
  __builtin_memcpy(&zb, &z, sizeof zb);
  const double ell = static_cast<double>(static_cast<int>((zb >> 52) & 0x7ffu) - 1023) * 0.6931471805599453;
  const double* w0 = w;
  const double* w1 = w + d;
  const double* w2 = w + 2 * static_cast<std::ptrdiff_t>(d);
  double q12 = 0.0, q01 = 0.0;
  for (int i = 0; i < d; ++i) {
    q12 += (w1[i] - w2[i]) * (w1[i] - w2[i]);
    q01 += (w0[i] - w1[i]) * (w0[i] - w1[i]);
  }
  const double h12 = 0.5 * (q12 / (c * c)), h01 = 0.5 * (q01 / (c * c));
  const double slack = 1e-9 * (1.0 + std::fabs(lp2) + std::fabs(lp0) + h12 + h01 - ell);
  const double la_ub = (lp2 - h12) - (lp0 - h01 + ell) + slack;
  if (!(la_ub < 0.0)) return false;
  return u >= exp_upper_bound(la_ub);
}

}  // namespace herd::mcmc::detail
