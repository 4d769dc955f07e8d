#pragma once
// One categorical draw by inversion, shared by the CPU `Categorical::sample`
// (nn/distributions.cpp) and its device kernel (nn/cuda/kernels.cu, also built by the host
// backend), so that both pick the same class from the same uniform. Internal (not
// installed); host and device code, no fmt or Eigen (nvcc includes it).

#include <cstdint>

#include "herd/core/host_device.hpp"

namespace herd::nn::detail {

/// The first class whose running sum of the probabilities `p[0, cols)` (added in double,
/// in class order) exceeds the uniform `u`; the last class when none does. `cols` >= 1.
template <class T>
HERD_HOST_DEVICE inline std::int64_t categorical_draw(const T* p, std::int64_t cols, double u) {
  double c = 0;
  std::int64_t k = 0;
  for (; k < cols - 1; ++k) {
    c += static_cast<double>(p[k]);
    if (u < c) break;
  }
  return k;
}

}  // namespace herd::nn::detail
