#include "herd/nn/init.hpp"

#include <Eigen/QR>

#include <cmath>

#include "cpu_compute.hpp"

namespace herd::nn {
namespace {

void check_float_host(const Tensor& t, const char* who) {
  HERD_REQUIRE(t.dtype() != DType::kInt64, "{}: tensor is int64, but must be float32 or float64", who);
}

struct Fans {
  double in, out;
};

Fans fans(const Tensor& t, const char* who) {
  HERD_REQUIRE(t.ndim() >= 2, "{}: tensor has shape {}, but needs at least 2 dimensions", who, t.shape().str());
  double receptive = 1;
  for (int i = 2; i < t.ndim(); ++i) receptive *= static_cast<double>(t.dim(i));
  return {static_cast<double>(t.dim(1)) * receptive, static_cast<double>(t.dim(0)) * receptive};
}

// Runs `init` on a host copy of a CUDA tensor and copies the result back (initialisation
// draws on the host RNG streams, so a module built for a GPU gets the CPU's values).
template <class F>
bool via_host(Tensor& t, F&& init) {
  if (!t.is_cuda()) return false;
  Tensor h(t.shape(), t.dtype());
  init(h);
  t.copy_from(h);
  return true;
}

}  // namespace

void uniform_(Tensor& t, double lo, double hi, RngCursor& rng) {
  check_float_host(t, "nn::uniform_");
  if (via_host(t, [&](Tensor& h) { uniform_(h, lo, hi, rng); })) return;
  for (std::int64_t i = 0; i < t.numel(); ++i) t.set_item(i, lo + (hi - lo) * rng.uniform());
}

void normal_(Tensor& t, double mean, double std, RngCursor& rng) {
  check_float_host(t, "nn::normal_");
  if (via_host(t, [&](Tensor& h) { normal_(h, mean, std, rng); })) return;
  for (std::int64_t i = 0; i < t.numel(); ++i) t.set_item(i, mean + std * rng.normal());
}

void constant_(Tensor& t, double value) {
  check_float_host(t, "nn::constant_");
  t.fill(value);
}

double calculate_gain(const std::string& nl, double param) {
  if (nl == "linear" || nl == "sigmoid" || nl.rfind("conv", 0) == 0) return 1.0;
  if (nl == "tanh") return 5.0 / 3.0;
  if (nl == "relu") return std::sqrt(2.0);
  if (nl == "leaky_relu") return std::sqrt(2.0 / (1.0 + param * param));
  if (nl == "selu") return 0.75;
  throw InputError("nn::calculate_gain: nonlinearity '" + nl +
                   "' is unknown (linear, conv*, sigmoid, tanh, relu, leaky_relu, selu)");
}

void xavier_uniform_(Tensor& t, double gain, RngCursor& rng) {
  const Fans f = fans(t, "nn::xavier_uniform_");
  const double a = gain * std::sqrt(6.0 / (f.in + f.out));
  uniform_(t, -a, a, rng);
}

void xavier_normal_(Tensor& t, double gain, RngCursor& rng) {
  const Fans f = fans(t, "nn::xavier_normal_");
  normal_(t, 0.0, gain * std::sqrt(2.0 / (f.in + f.out)), rng);
}

void kaiming_uniform_(Tensor& t, double gain, RngCursor& rng) {
  const Fans f = fans(t, "nn::kaiming_uniform_");
  const double b = gain * std::sqrt(3.0 / f.in);
  uniform_(t, -b, b, rng);
}

void kaiming_normal_(Tensor& t, double gain, RngCursor& rng) {
  const Fans f = fans(t, "nn::kaiming_normal_");
  normal_(t, 0.0, gain / std::sqrt(f.in), rng);
}

void orthogonal_(Tensor& t, double gain, RngCursor& rng) {
  check_float_host(t, "nn::orthogonal_");
  if (via_host(t, [&](Tensor& h) { orthogonal_(h, gain, rng); })) return;
  fans(t, "nn::orthogonal_");
  const Eigen::Index rows = t.dim(0);
  const Eigen::Index cols = t.numel() / rows;
  Eigen::MatrixXd a(rows, cols);
  for (Eigen::Index i = 0; i < rows; ++i)
    for (Eigen::Index j = 0; j < cols; ++j) a(i, j) = rng.normal();
  const bool transposed = rows < cols;
  if (transposed) a.transposeInPlace();
  Eigen::HouseholderQR<Eigen::MatrixXd> qr(a);
  const Eigen::Index m = a.rows(), n = a.cols();  // m >= n
  Eigen::MatrixXd q = qr.householderQ() * Eigen::MatrixXd::Identity(m, n);
  const Eigen::MatrixXd& r = qr.matrixQR();
  for (Eigen::Index j = 0; j < n; ++j)
    if (r(j, j) < 0) q.col(j) = -q.col(j);
  if (transposed) q.transposeInPlace();
  for (Eigen::Index i = 0; i < rows; ++i)
    for (Eigen::Index j = 0; j < cols; ++j) t.set_item(i * cols + j, gain * q(i, j));
}

}  // namespace herd::nn
