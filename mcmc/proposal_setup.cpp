// Option checks and the start proposal shared by the serial and batched DRAM kernels
// (proposal_setup.hpp).
#include "herd/mcmc/proposal_setup.hpp"

#include <cmath>
#include <limits>

#include <Eigen/Dense>

#include "herd/core/error.hpp"

namespace herd::mcmc::detail {

std::vector<double> start_covariance(const std::vector<double>& proposal_start_cov,
                                     const std::vector<double>& proposal_start_std, int d) {
  if (!proposal_start_cov.empty()) return proposal_start_cov;
  const auto du = static_cast<std::size_t>(d);
  std::vector<double> c(du * du, 0.0);
  for (std::size_t i = 0; i < du; ++i)
    c[i * du + i] = proposal_start_std.empty() ? 1.0 : proposal_start_std[i] * proposal_start_std[i];
  return c;
}

StartProposal start_proposal(const std::vector<double>& proposal_start_cov,
                             const std::vector<double>& proposal_start_std, int d, const std::string& who) {
  const auto du = static_cast<std::size_t>(d);
  const std::vector<double>& cov = proposal_start_cov;
  const std::vector<double>& sd = proposal_start_std;
  if (!cov.empty()) {
    HERD_REQUIRE(cov.size() == du * du, "{}: proposal_start_cov has {} values, but must have d*d = {}", who, cov.size(),
                 du * du);
    HERD_REQUIRE(sd.empty(), "{}: give proposal_start_cov or proposal_start_std, not both", who);
  }
  if (!sd.empty()) {
    HERD_REQUIRE(sd.size() == du, "{}: proposal_start_std has {} values, but must have d = {}", who, sd.size(), d);
    for (int i = 0; i < d; ++i)
      HERD_REQUIRE(sd[i] > 0 && std::isfinite(sd[i]),
                   "{}: proposal_start_std[{}] is {}, but must be positive and finite", who, i, sd[i]);
  }
  StartProposal s;
  s.cov = start_covariance(cov, sd, d);
  Eigen::MatrixXd c(d, d);
  for (int i = 0; i < d; ++i)
    for (int j = 0; j < d; ++j) c(i, j) = s.cov[static_cast<std::size_t>(i) * du + j];
  if (!cov.empty())
    HERD_REQUIRE((c - c.transpose()).cwiseAbs().maxCoeff() <= 1e-12 * c.cwiseAbs().maxCoeff(),
                 "{}: proposal_start_cov is not symmetric", who);
  Eigen::LLT<Eigen::MatrixXd> llt(c);
  HERD_REQUIRE(llt.info() == Eigen::Success, "{}: proposal_start_cov is not positive definite", who);
  const Eigen::MatrixXd l = llt.matrixL();
  s.chol.assign(du * du, 0.0);
  for (int i = 0; i < d; ++i)
    for (int j = 0; j <= i; ++j) s.chol[static_cast<std::size_t>(i) * du + j] = l(i, j);
  return s;
}

std::vector<double> stage_scales(int delayed_rejection_count, const std::vector<double>& scale_factors, int d,
                                 int max_stages, const std::string& who) {
  const int n = delayed_rejection_count;
  HERD_REQUIRE(n >= 0 && n < max_stages, "{}: delayed_rejection_count is {}, but must be in [0, {}]", who, n,
               max_stages - 1);
  const auto& f = scale_factors;
  HERD_REQUIRE(f.empty() || f.size() == 1 || static_cast<int>(f.size()) == n,
               "{}: delayed_rejection_scale_factors has {} values, but must have 0, 1 or "
               "delayed_rejection_count = {}",
               who, f.size(), n);
  for (std::size_t i = 0; i < f.size(); ++i)
    HERD_REQUIRE(f[i] > 0 && std::isfinite(f[i]),
                 "{}: delayed_rejection_scale_factors[{}] is {}, but must be positive and finite", who, i, f[i]);
  std::vector<double> scale(1, 1.0);
  for (int s = 0; s < n; ++s) {
    const double fs = f.empty() ? std::pow(0.5, 1.0 / d) : (f.size() == 1 ? f[0] : f[static_cast<std::size_t>(s)]);
    scale.push_back(scale.back() * fs);
  }
  return scale;
}

std::int64_t adaptive_update_period(std::int64_t adaptive_update_period, int d, const std::string& who) {
  HERD_REQUIRE(adaptive_update_period >= 0, "{}: adaptive_update_period is {}, but must be >= 0 (0: 4*d)", who,
               adaptive_update_period);
  return adaptive_update_period == 0 ? 4 * static_cast<std::int64_t>(d) : adaptive_update_period;
}

void domain_box(const std::vector<double>& domain_lower, const std::vector<double>& domain_upper, int d,
                const std::string& who, std::vector<double>& lower, std::vector<double>& upper) {
  const auto du = static_cast<std::size_t>(d);
  lower.assign(du, -std::numeric_limits<double>::infinity());
  upper.assign(du, std::numeric_limits<double>::infinity());
  if (!domain_lower.empty()) {
    HERD_REQUIRE(domain_lower.size() == du, "{}: domain_lower has {} values, but must have d = {}", who,
                 domain_lower.size(), d);
    lower = domain_lower;
  }
  if (!domain_upper.empty()) {
    HERD_REQUIRE(domain_upper.size() == du, "{}: domain_upper has {} values, but must have d = {}", who,
                 domain_upper.size(), d);
    upper = domain_upper;
  }
  for (std::size_t i = 0; i < du; ++i)
    HERD_REQUIRE(lower[i] < upper[i], "{}: domain_lower[{}] = {} and domain_upper[{}] = {}, but lower must be < upper",
                 who, i, lower[i], i, upper[i]);
}

}  // namespace herd::mcmc::detail
