// The built-in analytic targets: one set of formulas (analytic_targets.hpp) behind the
// serial targets (targets.hpp) and the batched/CUDA functors (batched_targets.hpp). The two
// paths must give the same bits at any point, and the formulas the textbook values.
#include <cmath>
#include <cstddef>
#include <random>
#include <type_traits>
#include <vector>

#include <Eigen/Dense>
#include <catch2/catch.hpp>

#include "herd/mcmc/analytic_targets.hpp"
#include "herd/mcmc/batched_targets.hpp"
#include "herd/mcmc/targets.hpp"

using namespace herd::mcmc;

namespace {

constexpr double kLog2Pi = 1.8378770664093454836;

// log N(x; mu, sigma^2), written out independently of the targets' formulas.
double log_normal(double x, double mu, double sigma) {
  const double z = (x - mu) / sigma;
  return -0.5 * z * z - std::log(sigma) - 0.5 * std::log(2.0 * M_PI);
}

std::vector<double> random_point(std::mt19937_64& rng, int d, double scale) {
  std::normal_distribution<double> n(0.0, scale);
  std::vector<double> x(static_cast<std::size_t>(d));
  for (double& v : x) v = n(rng);
  return x;
}

}  // namespace

static_assert(std::is_trivially_copyable_v<GaussianLogDensity> && std::is_trivially_copyable_v<BananaLogDensity> &&
                  std::is_trivially_copyable_v<RosenbrockLogDensity> &&
                  std::is_trivially_copyable_v<FunnelLogDensity> && std::is_trivially_copyable_v<MixtureLogDensity>,
              "the analytic functors are passed by value to CUDA kernels");

TEST_CASE("analytic targets: the multivariate normal gives the same bits on the serial and batched paths",
          "[mcmc][targets]") {
  std::mt19937_64 rng(20261202);
  std::normal_distribution<double> n01;
  for (int d : {1, 2, 3, 5, 8, 13}) {
    INFO("d = " << d);
    Eigen::MatrixXd a(d, d);
    for (int i = 0; i < d; ++i)
      for (int j = 0; j < d; ++j) a(i, j) = n01(rng);
    const Eigen::MatrixXd cov = a * a.transpose() + d * Eigen::MatrixXd::Identity(d, d);
    Eigen::VectorXd mean(d);
    for (int i = 0; i < d; ++i) mean(i) = n01(rng);
    const MultivariateNormal serial(mean, cov);
    std::vector<double> mv(mean.data(), mean.data() + d), cv(static_cast<std::size_t>(d) * d);
    for (int i = 0; i < d; ++i)
      for (int j = 0; j < d; ++j) cv[static_cast<std::size_t>(i) * d + j] = cov(i, j);
    const GaussianTarget owner(mv, cv);
    const GaussianLogDensity f = owner.view();
    CHECK(owner.quadratic_form().size() == cv.size());
    const Eigen::LDLT<Eigen::MatrixXd> ldlt(cov);
    const double log_det = ldlt.vectorD().array().log().sum();
    for (int t = 0; t < 40; ++t) {
      const auto x = random_point(rng, d, 3.0);
      const double v = serial(x.data(), d);
      CHECK(v == f(x.data(), d));  // same operations: exact
      CHECK(v == serial.view()(x.data(), d));
      double b = 0.0;
      serial.batch(x.data(), 1, d, &b);
      CHECK(b == v);
      // Known answer: -(d log 2 pi + log det C + r^T C^-1 r) / 2.
      const Eigen::VectorXd r = Eigen::Map<const Eigen::VectorXd>(x.data(), d) - mean;
      const double want = -0.5 * (d * std::log(2.0 * M_PI) + log_det + r.dot(ldlt.solve(r)));
      CHECK(v == Approx(want).epsilon(1e-11));
    }
  }
}

TEST_CASE("analytic targets: banana, Rosenbrock, funnel and mixture agree on both paths and with known answers",
          "[mcmc][targets]") {
  std::mt19937_64 rng(7);
  SECTION("banana") {
    for (int d : {2, 3, 6}) {
      const double b = 0.04;
      const Banana serial(d, b);
      const BananaLogDensity f{d, b};
      for (int t = 0; t < 40; ++t) {
        const auto x = random_point(rng, d, 4.0);
        const double v = serial(x.data(), d);
        CHECK(v == f(x.data(), d));
        // y = (x1, x2 + b x1^2 - 100 b, x3, ...) ~ N(0, diag(100, 1, ...)), unit Jacobian.
        double want = log_normal(x[0], 0.0, 10.0) + log_normal(x[1] + b * x[0] * x[0] - 100.0 * b, 0.0, 1.0);
        for (int i = 2; i < d; ++i) want += log_normal(x[static_cast<std::size_t>(i)], 0.0, 1.0);
        CHECK(v == Approx(want).epsilon(1e-12));
      }
    }
  }
  SECTION("Rosenbrock") {
    for (int d : {2, 4}) {
      const Rosenbrock serial(d, 1.0, 100.0, 20.0);
      const RosenbrockLogDensity f{d, 1.0, 100.0, 20.0};
      for (int t = 0; t < 40; ++t) {
        const auto x = random_point(rng, d, 2.0);
        CHECK(serial(x.data(), d) == f(x.data(), d));
      }
    }
    const Rosenbrock r3(3);
    const double ones[] = {1.0, 1.0, 1.0}, zeros[] = {0.0, 0.0, 0.0}, p[] = {0.5, 2.0, 0.0};
    CHECK(r3(ones, 3) == 0.0);                   // the mode
    CHECK(r3(zeros, 3) == Approx(-2.0 / 20.0));  // (1 - 0)^2 twice
    // (0.5)^2 + 100 (2 - 0.25)^2 + (1 - 2)^2 + 100 (0 - 4)^2, over s = 20.
    CHECK(r3(p, 3) == Approx(-(0.25 + 100.0 * 1.75 * 1.75 + 1.0 + 1600.0) / 20.0));
  }
  SECTION("funnel") {
    for (int d : {2, 5, 10}) {
      const NealFunnel serial(d);
      const FunnelLogDensity f{d};
      for (int t = 0; t < 40; ++t) {
        const auto x = random_point(rng, d, 1.5);
        const double v = serial(x.data(), d);
        CHECK(v == f(x.data(), d));
        double want = log_normal(x[0], 0.0, 3.0);
        for (int i = 1; i < d; ++i) want += log_normal(x[static_cast<std::size_t>(i)], 0.0, std::exp(0.5 * x[0]));
        CHECK(v == Approx(want).epsilon(1e-12));
      }
    }
  }
  SECTION("mixture, with fewer and more components than the functor keeps between its passes") {
    std::uniform_real_distribution<double> u(0.2, 2.0);
    for (int k : {3, target_detail::kMixtureKept + 6}) {
      const int d = 2;
      std::vector<double> w(static_cast<std::size_t>(k)), s(static_cast<std::size_t>(k)), m;
      for (int c = 0; c < k; ++c) {
        w[static_cast<std::size_t>(c)] = u(rng);
        s[static_cast<std::size_t>(c)] = u(rng);
        for (double v : random_point(rng, d, 2.0)) m.push_back(v);
      }
      const GaussianMixture serial(w, m, s, d);
      const MixtureLogDensity f = serial.view();
      double wsum = 0.0;
      for (double v : w) wsum += v;
      for (int t = 0; t < 30; ++t) {
        const auto x = random_point(rng, d, 2.0);
        const double v = serial(x.data(), d);
        CHECK(v == f(x.data(), d));
        double b = 0.0;
        serial.batch(x.data(), 1, d, &b);
        CHECK(b == v);
        double p = 0.0;  // the density summed directly (no underflow at these points)
        for (int c = 0; c < k; ++c) {
          double lc = std::log(w[static_cast<std::size_t>(c)] / wsum);
          for (int i = 0; i < d; ++i)
            lc += log_normal(x[static_cast<std::size_t>(i)],
                             m[static_cast<std::size_t>(c) * static_cast<std::size_t>(d) + static_cast<std::size_t>(i)],
                             s[static_cast<std::size_t>(c)]);
          p += std::exp(lc);
        }
        CHECK(v == Approx(std::log(p)).epsilon(1e-12));
      }
    }
    // Far from every component the log-sum-exp stays finite (the direct sum underflows).
    const GaussianMixture gm({1.0, 1.0}, {0.0, 10.0}, {1.0, 1.0}, 1);
    const double far[] = {-100.0};
    CHECK(gm(far, 1) == Approx(std::log(0.5) - 0.5 * kLog2Pi - 0.5 * 100.0 * 100.0));
  }
}
