// Helpers of the [gpu] tests of tests/rl (a module on a CUDA device against the same on the
// CPU): host copies of tensors and a vector-level float32 tolerance.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "herd/nn/tensor.hpp"

namespace herd::rl::testing {

/// The values of `t` (copied to the host from a CUDA device).
inline std::vector<double> host_values(const nn::Tensor& t) {
  return t.is_cuda() ? t.to(Device::cpu()).to_vector() : t.to_vector();
}

/// Checks max |a - b| <= rel * max |a| + abs, naming `what` and both maxima.
inline void check_close(const std::vector<double>& a, const std::vector<double>& b, double rel, double abs,
                        const std::string& what) {
  REQUIRE(a.size() == b.size());
  double amax = 0, dmax = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    amax = std::max(amax, std::abs(a[i]));
    dmax = std::max(dmax, std::abs(a[i] - b[i]));
  }
  INFO(what << ": max |cpu - gpu| = " << dmax << ", max |cpu| = " << amax);
  CHECK(dmax <= rel * amax + abs);
}

}  // namespace herd::rl::testing
