#pragma once
// Internal to herd::mcmc (not installed): what the DRAM kernel (dram.cpp) shares with the run
// layer's checkpoint format (run/checkpoint_format.cpp).

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

}  // namespace herd::mcmc::detail
