// The neural-surrogate example (surrogate.hpp).
#include "herd/examples/surrogate.hpp"

#include <cmath>
#include <limits>
#include <random>

#include "herd/core/error.hpp"
#include "herd/nn/losses.hpp"
#include "herd/nn/optimizer.hpp"
#include "herd/nn/tensor.hpp"

namespace herd::examples {

std::vector<double> LogisticModel::predict(double r, double k, int n) const {
  std::vector<double> out(static_cast<std::size_t>(n));
  double y = 0.1;
  const double h = 1.0 / rk4_steps;
  auto f = [&](double v) { return r * v * (1.0 - v / k); };
  for (int t = 0; t < n; ++t) {
    for (int s = 0; s < rk4_steps; ++s) {
      const double k1 = f(y), k2 = f(y + 0.5 * h * k1), k3 = f(y + 0.5 * h * k2), k4 = f(y + h * k3);
      y += h / 6.0 * (k1 + 2 * k2 + 2 * k3 + k4);
    }
    out[static_cast<std::size_t>(t)] = y;
  }
  return out;
}

double LogisticModel::log_likelihood(const double* th) const {
  if (!(th[0] > 0) || !(th[1] > 0)) return -std::numeric_limits<double>::infinity();
  const auto p = predict(th[0], th[1], static_cast<int>(data.size()));
  double q = 0.0;
  for (std::size_t i = 0; i < data.size(); ++i) q += (data[i] - p[i]) * (data[i] - p[i]);
  return -0.5 * q / (sigma * sigma);
}

double LogisticModel::log_prior(const double* th) {
  return -0.5 * ((th[0] - 1.0) * (th[0] - 1.0) + (th[1] - 1.0) * (th[1] - 1.0)) / 0.25;
}

LogisticModel LogisticModel::synthetic(int n_obs, double sigma, std::uint64_t seed) {
  LogisticModel m;
  m.sigma = sigma;
  m.data = m.predict(0.8, 1.2, n_obs);
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> z;
  for (double& v : m.data) v += sigma * z(gen);
  return m;
}

Surrogate train_surrogate(const LogisticModel& model, const std::vector<double>& lo, const std::vector<double>& hi,
                          int design, int iterations, std::uint64_t seed) {
  HERD_REQUIRE(lo.size() == 2 && hi.size() == 2, "train_surrogate: lo and hi must have 2 values each");
  HERD_REQUIRE(design >= 16 && iterations >= 1, "train_surrogate: design is {} and iterations {}; need >= 16 and >= 1",
               design, iterations);
  Surrogate s;
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<double> x(static_cast<std::size_t>(design) * 2), y(static_cast<std::size_t>(design));
  for (int i = 0; i < design; ++i) {
    for (int j = 0; j < 2; ++j) x[2 * i + j] = lo[j] + (hi[j] - lo[j]) * u(gen);
    y[i] = model.log_likelihood(&x[2 * i]);
  }
  s.model_runs = design;
  s.shift = {0.5 * (lo[0] + hi[0]), 0.5 * (lo[1] + hi[1])};
  s.width = {0.5 * (hi[0] - lo[0]), 0.5 * (hi[1] - lo[1])};
  double mean = 0.0, var = 0.0;
  for (double v : y) mean += v;
  mean /= design;
  for (double v : y) var += (v - mean) * (v - mean);
  s.offset = mean;
  s.scale = std::sqrt(var / design);
  std::vector<double> xs(x.size()), ys(y.size());
  for (int i = 0; i < design; ++i) {
    for (int j = 0; j < 2; ++j) xs[2 * i + j] = (x[2 * i + j] - s.shift[j]) / s.width[j];
    ys[i] = (y[i] - s.offset) / s.scale;
  }
  nn::MlpOptions mo;
  mo.sizes = {2, 64, 64, 1};
  mo.activation = nn::Activation::kTanh;
  mo.dtype = nn::DType::kFloat64;
  mo.rng = RngStream(seed, 0, RngPurpose::kInit);
  s.net = std::make_unique<nn::Mlp>(mo);
  nn::Adam opt(s.net->named_parameters(), 2e-3);
  nn::MseLoss loss;
  const int batch = 256;
  std::vector<double> xb(static_cast<std::size_t>(batch) * 2), yb(batch);
  std::uniform_int_distribution<int> pick(0, design - 1);
  for (int it = 0; it < iterations; ++it) {
    for (int b = 0; b < batch; ++b) {
      const int i = pick(gen);
      xb[2 * b] = xs[2 * i];
      xb[2 * b + 1] = xs[2 * i + 1];
      yb[b] = ys[i];
    }
    s.net->zero_grad();
    loss.forward(s.net->forward(nn::Tensor::from_vector(nn::Shape{batch, 2}, xb, nn::DType::kFloat64)),
                 nn::Tensor::from_vector(nn::Shape{batch, 1}, yb, nn::DType::kFloat64));
    s.net->backward(loss.backward());
    opt.step();
  }
  // Fit on the design points, in log-likelihood units.
  mcmc::MlpLogDensity f(*s.net, 2, s.shift, s.width, s.scale, s.offset);
  std::vector<double> pred(y.size());
  f(x.data(), design, 2, pred.data());
  double se = 0.0;
  for (int i = 0; i < design; ++i) se += (pred[i] - y[i]) * (pred[i] - y[i]);
  s.train_rmse = std::sqrt(se / design);
  return s;
}

mcmc::BatchedDramResult sample_surrogate(Surrogate& s, const mcmc::BatchedDramOptions& options,
                                         mcmc::BatchedDrawSink& sink) {
  mcmc::MlpLogDensity f(*s.net, 2, s.shift, s.width, s.scale, s.offset);
  f.set_prior([](const double* x, int) { return LogisticModel::log_prior(x); });
  return mcmc::run_batched_dram(
      options, mcmc::BatchedLogDensity([&](const double* x, int n, int d, double* out) { f(x, n, d, out); }), sink);
}

}  // namespace herd::examples
