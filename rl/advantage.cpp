#include "herd/rl/advantage.hpp"

#include <cmath>
#include <vector>

#include "herd/core/error.hpp"

namespace herd::rl {

void compute_gae(const GaeInputs& in, float* advantages, float* returns) {
  HERD_REQUIRE(in.steps > 0 && in.envs > 0, "compute_gae: steps is {} and envs is {}, but both must be positive",
               in.steps, in.envs);
  HERD_REQUIRE(in.rewards && in.values && in.terminated && in.truncated && in.last_values && advantages && returns,
               "compute_gae: rewards, values, terminated, truncated, last_values and the outputs must not be null");
  HERD_REQUIRE(in.gamma >= 0.0f && in.gamma <= 1.0f, "compute_gae: gamma is {}, but must be in [0, 1]", in.gamma);
  HERD_REQUIRE(in.lambda >= 0.0f && in.lambda <= 1.0f, "compute_gae: lambda is {}, but must be in [0, 1]", in.lambda);
  const std::size_t T = static_cast<std::size_t>(in.steps), B = static_cast<std::size_t>(in.envs);
  const double gamma = in.gamma, gl = static_cast<double>(in.gamma) * in.lambda;
  std::vector<double> carry(B, 0.0);  // A_{t+1}
  for (std::size_t t = T; t-- > 0;) {
    for (std::size_t b = 0; b < B; ++b) {
      const std::size_t i = t * B + b;
      const bool term = in.terminated[i] != 0, trunc = in.truncated[i] != 0;
      double next;
      if (term) {
        next = 0.0;
      } else if (trunc) {
        HERD_REQUIRE(in.final_values != nullptr,
                     "compute_gae: step {} of env {} is truncated, but final_values is null", t, b);
        next = in.final_values[i];
      } else {
        next = (t + 1 < T) ? in.values[i + B] : in.last_values[b];
      }
      const double a = gae_step(in.rewards[i], in.values[i], next, term || trunc, gamma, gl, carry[b]);
      carry[b] = a;
      advantages[i] = static_cast<float>(a);
      returns[i] = static_cast<float>(a + in.values[i]);
    }
  }
}

void normalize_advantages(float* x, std::size_t n, float eps) {
  if (n == 0) return;
  double mean = 0.0;
  for (std::size_t i = 0; i < n; ++i) mean += x[i];
  mean /= static_cast<double>(n);
  double var = 0.0;
  for (std::size_t i = 0; i < n; ++i) var += (x[i] - mean) * (x[i] - mean);
  var /= static_cast<double>(n);
  const double inv = 1.0 / (std::sqrt(var) + eps);
  for (std::size_t i = 0; i < n; ++i) x[i] = static_cast<float>((x[i] - mean) * inv);
}

}  // namespace herd::rl
