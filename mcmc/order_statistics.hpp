#pragma once
// Internal helper shared by the quantile code of diagnostics.cpp and posterior_report.cpp
// (not installed). Only standard headers: posterior_report.cpp is compiled without the
// diagnostics' -march, so it must not see their Eigen-holding workspace.

#include <cstddef>
#include <span>
#include <vector>

namespace herd::mcmc::detail {

/// The 0-based order statistics that type-7 quantiles of `n` draws at `probs` interpolate
/// between (floor and ceil of 1 + (n - 1) p, minus 1), ascending and distinct. Needs n >= 1
/// and probs in [0, 1] (checked by the callers). Pure; thread-safe.
std::vector<std::size_t> type7_ranks(std::size_t n, std::span<const double> probs);

}  // namespace herd::mcmc::detail
