#pragma once
/// @file mlp.hpp
/// `Mlp`: a multilayer perceptron builder, the usual RL policy/value torso.

#include <cmath>
#include <cstdint>
#include <vector>

#include "herd/core/rng.hpp"
#include "herd/nn/sequential.hpp"

namespace herd::nn {

/// Hidden-layer nonlinearity of an `Mlp`.
enum class Activation {
  kTanh,  ///< `Tanh`
  kReLU,  ///< `ReLU`
  kELU,   ///< `ELU` with alpha 1
};

/// How an `Mlp` initialises its Linear layers.
enum class MlpInit {
  kDefault,     ///< PyTorch's default (uniform +-1/sqrt(fan_in) for weight and bias)
  kOrthogonal,  ///< orthogonal weights with gains, zero biases (PPO/A2C practice)
};

/// Options of an `Mlp`.
struct MlpOptions {
  /// Layer widths: input, hidden..., output (at least 2 entries), e.g. {64, 256, 256, 16}.
  std::vector<std::int64_t> sizes;
  /// Nonlinearity between Linear layers.
  Activation activation = Activation::kTanh;
  /// Also apply the activation after the last Linear layer.
  bool activate_output = false;
  /// Parameter and activation dtype (float32 or float64).
  DType dtype = DType::kFloat32;
  /// Where the network lives (host, or a CUDA device in CUDA builds).
  Device device = Device::cpu();
  /// Initialisation of the Linear layers.
  MlpInit init = MlpInit::kDefault;
  double hidden_gain = std::sqrt(2.0);  ///< orthogonal gain of hidden layers
  double output_gain = 1.0;             ///< orthogonal gain of the last layer
  /// Initialisation draws: Linear layer k (0-based) draws from `rng.at(k)`.
  RngStream rng = RngStream(0, 0, RngPurpose::kInit);
};

/// A `Sequential` of Linear layers with activations between them: Linear, act, Linear,
/// act, ..., Linear [, act]. Children are numbered as in PyTorch ("0" Linear, "1" act,
/// "2" Linear, ...), so state dicts match `nn.Sequential` of the same layers.
/// Input `[batch, sizes.front()]`, output `[batch, sizes.back()]`.
class Mlp : public Sequential {
 public:
  /// @throws InputError for fewer than 2 sizes or a non-positive size.
  explicit Mlp(const MlpOptions& options);
  std::string type_name() const override { return "Mlp"; }
};

}  // namespace herd::nn
