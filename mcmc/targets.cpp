// Built-in analytic targets (targets.hpp).
#include "herd/mcmc/targets.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "herd/core/error.hpp"

namespace herd::mcmc {

namespace {
constexpr double kLog2Pi = 1.8378770664093454836;

template <class T>
void batch_rows(const T& t, const double* x, int n, int d, double* out) {
  for (int i = 0; i < n; ++i) out[i] = t(x + static_cast<std::size_t>(i) * d, d);
}
}  // namespace

MultivariateNormal::MultivariateNormal(Eigen::VectorXd mean, const Eigen::MatrixXd& cov)
    : mean_(std::move(mean)), cov_(cov) {
  const int d = static_cast<int>(mean_.size());
  HERD_REQUIRE(d > 0, "MultivariateNormal: mean has size 0, but must be non-empty");
  HERD_REQUIRE(cov.rows() == d && cov.cols() == d,
               "MultivariateNormal: cov is {}x{}, but must be {}x{}", cov.rows(), cov.cols(), d, d);
  Eigen::LLT<Eigen::MatrixXd> llt(cov);
  HERD_REQUIRE(llt.info() == Eigen::Success, "MultivariateNormal: cov is not positive definite");
  const Eigen::MatrixXd prec = llt.solve(Eigen::MatrixXd::Identity(d, d));
  prec2_.assign(static_cast<std::size_t>(d) * d, 0.0);
  for (int i = 0; i < d; ++i)
    for (int j = 0; j < d; ++j) {
      const double v = 0.5 * (prec(i, j) + prec(j, i));
      // Strict lower triangle doubled, diagonal as is (for the symmetric quadratic form).
      if (j < i) prec2_[static_cast<std::size_t>(i) * d + j] = 2.0 * v;
      if (j == i) prec2_[static_cast<std::size_t>(i) * d + j] = v;
    }
  double logdet = 0.0;
  for (int i = 0; i < d; ++i) logdet += 2.0 * std::log(llt.matrixL()(i, i));
  log_norm_ = -0.5 * (d * kLog2Pi + logdet);
}

MultivariateNormal MultivariateNormal::ar1(int d, double rho) {
  HERD_REQUIRE(d > 0 && std::abs(rho) < 1.0, "MultivariateNormal::ar1: d = {}, rho = {}; need d > 0, |rho| < 1",
               d, rho);
  Eigen::MatrixXd c(d, d);
  for (int i = 0; i < d; ++i)
    for (int j = 0; j < d; ++j) c(i, j) = std::pow(rho, std::abs(i - j));
  return MultivariateNormal(Eigen::VectorXd::Zero(d), c);
}

double MultivariateNormal::operator()(const double* x, int d) const {
  // Small fixed-size work: a plain loop beats Eigen's expression setup here.
  double diff[64];
  std::vector<double> big;
  double* r = diff;
  if (d > 64) {
    big.resize(d);
    r = big.data();
  }
  const double* m = mean_.data();
  for (int i = 0; i < d; ++i) r[i] = x[i] - m[i];
  // Symmetric form: q = sum_i r_i (P_ii r_i + 2 sum_{j<i} P_ij r_j), half the products,
  // with two accumulators per row (short sums are latency-bound).
  double q0 = 0.0, q1 = 0.0;
  for (int i = 0; i < d; ++i) {
    const double* p = prec2_.data() + static_cast<std::size_t>(i) * d;
    double s0 = p[i] * r[i], s1 = 0.0;
    int j = 0;
    for (; j + 2 <= i; j += 2) {
      s0 += p[j] * r[j];
      s1 += p[j + 1] * r[j + 1];
    }
    if (j < i) s0 += p[j] * r[j];
    const double t = r[i] * (s0 + s1);
    if (i & 1)
      q1 += t;
    else
      q0 += t;
  }
  return log_norm_ - 0.5 * (q0 + q1);
}

void MultivariateNormal::batch(const double* x, int n, int d, double* out) const {
  batch_rows(*this, x, n, d, out);
}

Banana::Banana(int d, double b) : d_(d), b_(b) {
  HERD_REQUIRE(d >= 2, "Banana: d is {}, but must be >= 2", d);
}

double Banana::operator()(const double* x, int d) const {
  const double y1 = x[0];
  const double y2 = x[1] + b_ * x[0] * x[0] - 100.0 * b_;
  double q = y1 * y1 / 100.0 + y2 * y2;
  for (int i = 2; i < d; ++i) q += x[i] * x[i];
  return -0.5 * q - 0.5 * d * kLog2Pi - std::log(10.0);
}

void Banana::batch(const double* x, int n, int d, double* out) const { batch_rows(*this, x, n, d, out); }

Rosenbrock::Rosenbrock(int d, double a, double b, double s) : d_(d), a_(a), b_(b), s_(s) {
  HERD_REQUIRE(d >= 2, "Rosenbrock: d is {}, but must be >= 2", d);
  HERD_REQUIRE(b > 0 && s > 0, "Rosenbrock: b = {}, s = {}; both must be positive", b, s);
}

double Rosenbrock::operator()(const double* x, int d) const {
  double q = 0.0;
  for (int i = 0; i + 1 < d; ++i) {
    const double u = a_ - x[i];
    const double v = x[i + 1] - x[i] * x[i];
    q += u * u + b_ * v * v;
  }
  return -q / s_;
}

void Rosenbrock::batch(const double* x, int n, int d, double* out) const { batch_rows(*this, x, n, d, out); }

GaussianMixture::GaussianMixture(std::vector<double> weights, std::vector<double> means,
                                 std::vector<double> sigmas, int d)
    : d_(d), means_(std::move(means)), sigmas_(std::move(sigmas)) {
  const std::size_t k = weights.size();
  HERD_REQUIRE(d > 0 && k > 0, "GaussianMixture: d = {}, {} components; both must be positive", d, k);
  HERD_REQUIRE(means_.size() == k * d, "GaussianMixture: means has {} values, but must have K*d = {}",
               means_.size(), k * d);
  HERD_REQUIRE(sigmas_.size() == k, "GaussianMixture: sigmas has {} values, but must have {}", sigmas_.size(), k);
  double total = 0.0;
  for (std::size_t i = 0; i < k; ++i) {
    HERD_REQUIRE(weights[i] > 0 && sigmas_[i] > 0,
                 "GaussianMixture: component {} has weight {} and sigma {}; both must be positive", i,
                 weights[i], sigmas_[i]);
    total += weights[i];
  }
  for (std::size_t i = 0; i < k; ++i)
    logw_.push_back(std::log(weights[i] / total) - d * std::log(sigmas_[i]) - 0.5 * d * kLog2Pi);
}

double GaussianMixture::operator()(const double* x, int d) const {
  const std::size_t k = logw_.size();
  double terms[64];
  std::vector<double> big;
  double* t = terms;
  if (k > 64) {
    big.resize(k);
    t = big.data();
  }
  double mx = -std::numeric_limits<double>::infinity();
  for (std::size_t c = 0; c < k; ++c) {
    const double* m = means_.data() + c * d;
    double q = 0.0;
    for (int i = 0; i < d; ++i) q += (x[i] - m[i]) * (x[i] - m[i]);
    t[c] = logw_[c] - 0.5 * q / (sigmas_[c] * sigmas_[c]);
    mx = std::max(mx, t[c]);
  }
  if (!std::isfinite(mx)) return mx;
  double s = 0.0;
  for (std::size_t c = 0; c < k; ++c) s += std::exp(t[c] - mx);
  return mx + std::log(s);
}

void GaussianMixture::batch(const double* x, int n, int d, double* out) const {
  batch_rows(*this, x, n, d, out);
}

NealFunnel::NealFunnel(int d) : d_(d) { HERD_REQUIRE(d >= 2, "NealFunnel: d is {}, but must be >= 2", d); }

double NealFunnel::operator()(const double* x, int d) const {
  const double v = x[0];
  double q = 0.0;
  for (int i = 1; i < d; ++i) q += x[i] * x[i];
  // log N(v; 0, 9) + sum log N(x_i; 0, e^v)
  return -0.5 * v * v / 9.0 - std::log(3.0) - 0.5 * kLog2Pi - 0.5 * (d - 1) * (kLog2Pi + v) -
         0.5 * q * std::exp(-v);
}

void NealFunnel::batch(const double* x, int n, int d, double* out) const { batch_rows(*this, x, n, d, out); }

}  // namespace herd::mcmc
