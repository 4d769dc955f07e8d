#pragma once
#include "herd/core/cxx20.hpp"  // C++20 or one clear error
/// @file proposal_setup.hpp
/// The option checks and the start proposal shared by the serial DRAM kernel (dram.hpp,
/// `DramSampler`) and the batched one (batched_dram.hpp, `detail::BatchedEngine`): the same
/// option gives the same error on both paths, the caller's name (`who`: "dram",
/// "batched_dram") first, and the same start proposal factor bit for bit.
///
/// Host only; every function is pure (thread-safe). Errors are herd::InputError with one
/// line naming the option, its value and what was expected.

#include <cstdint>
#include <string>
#include <vector>

namespace herd::mcmc::detail {

/// The start proposal of adaptive Metropolis (Haario, Saksman & Tamminen 2001): the
/// covariance C0 `[d, d]` row-major and its lower Cholesky factor L0 `[d, d]` (upper
/// triangle zero), C0 = L0 L0^T.
struct StartProposal {
  std::vector<double> cov;
  std::vector<double> chol;
};

/// The start proposal covariance C0 `[d, d]` row-major of already checked options:
/// `proposal_start_cov` when given, else diag(`proposal_start_std`^2) when given, else the
/// identity. What `start_proposal` factors, and what the engines' HTML reports show as the
/// start proposal. Performs no checks (a `proposal_start_cov` must hold d*d values).
std::vector<double> start_covariance(const std::vector<double>& proposal_start_cov,
                                     const std::vector<double>& proposal_start_std, int d);

/// Checks `proposal_start_cov` (`[d, d]` row-major, symmetric to 1e-12 of its largest
/// entry, positive definite) and `proposal_start_std` (`[d]`, positive and finite; at most
/// one of the two given) and builds the start proposal: C0 = proposal_start_cov, or
/// diag(proposal_start_std^2), or the identity when neither is given; L0 by Eigen's LLT.
/// @throws herd::InputError naming the option ("<who>: proposal_start_cov has 3 values,
///   but must have d*d = 4", "... is not symmetric", "... is not positive definite", ...).
StartProposal start_proposal(const std::vector<double>& proposal_start_cov,
                             const std::vector<double>& proposal_start_std, int d, const std::string& who);

/// Checks `delayed_rejection_count` (in [0, max_stages - 1]) and
/// `delayed_rejection_scale_factors` (0, 1 or delayed_rejection_count values, positive and
/// finite) and returns the stage scales c_1 = 1, c_{s+1} = c_s f_s (1 + count values;
/// f_s = (1/2)^(1/d) when no factor is given, ParaDRAM's default; one factor serves every
/// stage).
/// @throws herd::InputError naming the option.
std::vector<double> stage_scales(int delayed_rejection_count, const std::vector<double>& scale_factors, int d,
                                 int max_stages, const std::string& who);

/// Checks `adaptive_update_period` (>= 0) and returns it, or 4 d for 0.
/// @throws herd::InputError naming the option.
std::int64_t adaptive_update_period(std::int64_t adaptive_update_period, int d, const std::string& who);

/// The domain box: `domain_lower` / `domain_upper` (`[d]` each, or empty: -inf / +inf),
/// checked for size and lower < upper (NaN fails) in every coordinate, into `lower`, `upper`
/// (`[d]` each).
/// @throws herd::InputError naming the option and coordinate.
void domain_box(const std::vector<double>& domain_lower, const std::vector<double>& domain_upper, int d,
                const std::string& who, std::vector<double>& lower, std::vector<double>& upper);

}  // namespace herd::mcmc::detail
