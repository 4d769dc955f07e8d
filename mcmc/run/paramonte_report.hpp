#pragma once
// The part of `<prefix>_report.txt` in the layout of ParaMonte's ParaDRAM report (private to
// herd::mcmc), so that ParaMonte's readers (Python `readReport`, MATLAB) parse the file.

#include <cstdint>
#include <string>
#include <vector>

#include "herd/mcmc/paradram_run.hpp"

namespace herd::mcmc::detail {

/// Run figures for the ParaMonte-layout part of the report: counts of accepted states,
/// proposals and log-density evaluations (all chains), the burn-in rows (compact index,
/// single chain), the posterior and refined sample sizes, the mean acceptance rate, the
/// run's seconds, and the dimension.
struct ParamonteStats {
  std::int64_t accepted = 0, proposals = 0, evaluations = 0, burnin_likelihood = 0, burnin_adaptation = 0;
  std::int64_t posterior_draws = 0, sample_size = 0;
  double acceptance = 0.0, seconds = 0.0;
  bool single_chain = true;
  int ndim = 0;
};

/// The part of `<prefix>_report.txt` in ParaMonte's report layout (ParaMonte 1.x/2.x): a
/// banner of lines holding "****"; sections whose framed title names the topic ("ParaMonte
/// library interface specifications", "Runtime platform specifications", "simulation
/// environment", "simulation specifications"), each followed by its text; then records
/// `stats.<a>.<b>` with the value indented by 8 blanks and a description of lines
/// "        ParaDRAM - NOTE: ...". Descriptions hold no quote or backslash (ParaMonte's Python
/// reader evaluates them inside raw string literals). `target` is the target's description,
/// `paths` the run's outputs. Thread-safe (reads `uname`).
std::string paramonte_report_part(const std::string& target, const SampleRunOptions& options, const ParamonteStats& ps,
                                  const std::vector<std::string>& paths);

}  // namespace herd::mcmc::detail
