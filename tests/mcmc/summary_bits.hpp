#pragma once
// The bits of every field of a DiagnosticSummary, for tests that require two summaries to be
// the same numbers bit for bit (NaN payloads included).
#include <bit>
#include <cstdint>
#include <vector>

#include "herd/mcmc/diagnostics.hpp"

namespace herd::mcmc::testing {

/// The 17 fields of `s` in declaration order, each as its 64 bits.
inline std::vector<std::uint64_t> summary_bits(const DiagnosticSummary& s) {
  const double f[] = {s.mean,    s.sd,      s.q5,        s.q50,       s.q95,       s.mcse_mean,
                      s.mcse_sd, s.mcse_q5, s.mcse_q95,  s.ess_bulk,  s.ess_tail,  s.ess_mean,
                      s.ess_sd,  s.rhat,    s.rhat_bulk, s.rhat_tail, s.rhat_basic};
  std::vector<std::uint64_t> b;
  for (double v : f) b.push_back(std::bit_cast<std::uint64_t>(v));
  return b;
}

}  // namespace herd::mcmc::testing
