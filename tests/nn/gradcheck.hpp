#pragma once
// Finite-difference gradient checks in float64 for the nn tests.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <string>

#include "herd/core/rng.hpp"
#include "herd/nn/module.hpp"

namespace herd::nn::test {

/// A float64 tensor of normals with the given scale (deterministic).
inline Tensor randn(const Shape& s, std::uint32_t stream, double scale = 1.0, double shift = 0.0) {
  Tensor t(s, DType::kFloat64);
  RngCursor c = RngStream(99, stream, RngPurpose::kUser).at(0);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.set_item(i, shift + scale * c.normal());
  return t;
}

/// Central differences of the scalar `loss()` with respect to every element of `x`,
/// compared with `analytic` (same shape): |a - n| <= atol + rtol |n|.
inline void compare_numeric(Tensor& x, const Tensor& analytic, const std::function<double()>& loss,
                            const std::string& what, double h = 1e-6, double rtol = 1e-5, double atol = 1e-7) {
  REQUIRE(x.shape() == analytic.shape());
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    const double v = x.item(i);
    x.set_item(i, v + h);
    const double lp = loss();
    x.set_item(i, v - h);
    const double lm = loss();
    x.set_item(i, v);
    const double num = (lp - lm) / (2 * h);
    const double ana = analytic.item(i);
    INFO(what << "[" << i << "]: analytic " << ana << " numeric " << num);
    CHECK(std::abs(ana - num) <= atol + rtol * std::abs(num));
  }
}

/// Checks d(sum(r * module(x)))/dx and /dparams, r a fixed random projection.
inline void gradcheck_module(Module& m, Tensor x, const std::string& what) {
  const Tensor& y0 = m.forward(x);
  const Tensor r = randn(y0.shape(), 7);
  auto loss = [&]() {
    const Tensor& y = m.forward(x);
    double s = 0;
    for (std::int64_t i = 0; i < y.numel(); ++i) s += y.item(i) * r.item(i);
    return s;
  };
  m.zero_grad();
  m.forward(x);
  const Tensor gx = m.backward(r).clone();
  std::vector<Tensor> pgrads;
  auto params = m.named_parameters();
  pgrads.reserve(params.size());
  for (auto& p : params) pgrads.push_back(p.param->grad.clone());
  compare_numeric(x, gx, loss, what + " input");
  for (std::size_t k = 0; k < params.size(); ++k)
    compare_numeric(params[k].param->value, pgrads[k], loss, what + " " + params[k].name);
}

}  // namespace herd::nn::test
