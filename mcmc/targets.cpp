// Built-in analytic targets (targets.hpp): parameter checks and arrays around the formulas
// of analytic_targets.hpp.
#include "herd/mcmc/targets.hpp"

#include <cmath>

#include "herd/core/error.hpp"

namespace herd::mcmc {

namespace {
using target_detail::kLog2Pi;

template <class T>
void batch_rows(const T& t, const double* x, int n, int d, double* out) {
  for (int i = 0; i < n; ++i) out[i] = t(x + static_cast<std::size_t>(i) * d, d);
}
}  // namespace

target_detail::GaussianForm target_detail::gaussian_form(const double* cov, int d, const std::string& who) {
  Eigen::MatrixXd c(d, d);
  for (int i = 0; i < d; ++i)
    for (int j = 0; j < d; ++j) c(i, j) = cov[static_cast<std::size_t>(i) * d + j];
  Eigen::LLT<Eigen::MatrixXd> llt(c);
  HERD_REQUIRE(llt.info() == Eigen::Success, "{}: cov is not positive definite", who);
  const Eigen::MatrixXd p = llt.solve(Eigen::MatrixXd::Identity(d, d));
  GaussianForm g;
  const auto dd = static_cast<std::size_t>(d) * static_cast<std::size_t>(d);
  g.prec.assign(dd, 0.0);
  g.prec2.assign(dd, 0.0);
  for (int i = 0; i < d; ++i)
    for (int j = 0; j < d; ++j) {
      const double v = 0.5 * (p(i, j) + p(j, i));
      const std::size_t q = static_cast<std::size_t>(i) * d + j;
      g.prec[q] = v;
      // Strict lower triangle doubled, diagonal as is (for the symmetric quadratic form).
      if (j < i) g.prec2[q] = 2.0 * v;
      if (j == i) g.prec2[q] = v;
    }
  double logdet = 0.0;
  for (int i = 0; i < d; ++i) logdet += 2.0 * std::log(llt.matrixL()(i, i));
  g.log_norm = -0.5 * (d * kLog2Pi + logdet);
  return g;
}

MultivariateNormal::MultivariateNormal(Eigen::VectorXd mean, const Eigen::MatrixXd& cov)
    : mean_(std::move(mean)), cov_(cov) {
  const int d = static_cast<int>(mean_.size());
  HERD_REQUIRE(d > 0, "MultivariateNormal: mean has size 0, but must be non-empty");
  HERD_REQUIRE(cov.rows() == d && cov.cols() == d, "MultivariateNormal: cov is {}x{}, but must be {}x{}", cov.rows(),
               cov.cols(), d, d);
  std::vector<double> c(static_cast<std::size_t>(d) * d);
  for (int i = 0; i < d; ++i)
    for (int j = 0; j < d; ++j) c[static_cast<std::size_t>(i) * d + j] = cov(i, j);
  auto g = target_detail::gaussian_form(c.data(), d, "MultivariateNormal");
  prec2_ = std::move(g.prec2);
  log_norm_ = g.log_norm;
}

MultivariateNormal MultivariateNormal::ar1(int d, double rho) {
  HERD_REQUIRE(d > 0 && std::abs(rho) < 1.0, "MultivariateNormal::ar1: d = {}, rho = {}; need d > 0, |rho| < 1", d,
               rho);
  Eigen::MatrixXd c(d, d);
  for (int i = 0; i < d; ++i)
    for (int j = 0; j < d; ++j) c(i, j) = std::pow(rho, std::abs(i - j));
  return MultivariateNormal(Eigen::VectorXd::Zero(d), c);
}

double MultivariateNormal::operator()(const double* x, int d) const { return view()(x, d); }

void MultivariateNormal::batch(const double* x, int n, int d, double* out) const { batch_rows(view(), x, n, d, out); }

Banana::Banana(int d, double b) : f_{d, b} { HERD_REQUIRE(d >= 2, "Banana: d is {}, but must be >= 2", d); }

double Banana::operator()(const double* x, int d) const { return f_(x, d); }

void Banana::batch(const double* x, int n, int d, double* out) const { batch_rows(f_, x, n, d, out); }

Rosenbrock::Rosenbrock(int d, double a, double b, double s) : f_{d, a, b, s} {
  HERD_REQUIRE(d >= 2, "Rosenbrock: d is {}, but must be >= 2", d);
  HERD_REQUIRE(b > 0 && s > 0, "Rosenbrock: b = {}, s = {}; both must be positive", b, s);
}

double Rosenbrock::operator()(const double* x, int d) const { return f_(x, d); }

void Rosenbrock::batch(const double* x, int n, int d, double* out) const { batch_rows(f_, x, n, d, out); }

GaussianMixture::GaussianMixture(std::vector<double> weights, std::vector<double> means, std::vector<double> sigmas,
                                 int d)
    : d_(d), means_(std::move(means)), sigmas_(std::move(sigmas)) {
  const std::size_t k = weights.size();
  HERD_REQUIRE(d > 0 && k > 0, "GaussianMixture: d = {}, {} components; both must be positive", d, k);
  HERD_REQUIRE(means_.size() == k * d, "GaussianMixture: means has {} values, but must have K*d = {}", means_.size(),
               k * d);
  HERD_REQUIRE(sigmas_.size() == k, "GaussianMixture: sigmas has {} values, but must have {}", sigmas_.size(), k);
  double total = 0.0;
  for (std::size_t i = 0; i < k; ++i) {
    HERD_REQUIRE(weights[i] > 0 && sigmas_[i] > 0,
                 "GaussianMixture: component {} has weight {} and sigma {}; both must be positive", i, weights[i],
                 sigmas_[i]);
    total += weights[i];
  }
  for (std::size_t i = 0; i < k; ++i)
    logw_.push_back(std::log(weights[i] / total) - d * std::log(sigmas_[i]) - 0.5 * d * kLog2Pi);
}

double GaussianMixture::operator()(const double* x, int d) const { return view()(x, d); }

void GaussianMixture::batch(const double* x, int n, int d, double* out) const { batch_rows(view(), x, n, d, out); }

NealFunnel::NealFunnel(int d) : f_{d} { HERD_REQUIRE(d >= 2, "NealFunnel: d is {}, but must be >= 2", d); }

double NealFunnel::operator()(const double* x, int d) const { return f_(x, d); }

void NealFunnel::batch(const double* x, int n, int d, double* out) const { batch_rows(f_, x, n, d, out); }

}  // namespace herd::mcmc
