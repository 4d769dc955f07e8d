#include "herd/nn/mlp.hpp"

#include "herd/nn/activations.hpp"
#include "herd/nn/init.hpp"
#include "herd/nn/linear.hpp"

namespace herd::nn {
namespace {

void add_activation(Sequential& s, const MlpOptions& o) {
  switch (o.activation) {
    case Activation::kTanh:
      s.emplace<Tanh>(o.dtype, o.device);
      break;
    case Activation::kReLU:
      s.emplace<ReLU>(o.dtype, o.device);
      break;
    case Activation::kELU:
      s.emplace<ELU>(1.0, o.dtype, o.device);
      break;
  }
}

}  // namespace

Mlp::Mlp(const MlpOptions& o) : Sequential(o.dtype, o.device) {
  HERD_REQUIRE(o.sizes.size() >= 2, "nn::Mlp: sizes has {} entries, but needs at least 2 (in, out)", o.sizes.size());
  for (std::size_t i = 0; i < o.sizes.size(); ++i)
    HERD_REQUIRE(o.sizes[i] > 0, "nn::Mlp: sizes[{}] is {}, but must be positive", i, o.sizes[i]);
  const std::size_t layers = o.sizes.size() - 1;
  for (std::size_t k = 0; k < layers; ++k) {
    auto& lin = emplace<Linear>(o.sizes[k], o.sizes[k + 1], o.dtype, o.device, true, o.rng, k);
    if (o.init == MlpInit::kOrthogonal) {
      RngCursor cur = o.rng.at(k);
      orthogonal_(lin.weight().value, k + 1 == layers ? o.output_gain : o.hidden_gain, cur);
      lin.bias().value.zero();
    }
    if (k + 1 < layers || o.activate_output) add_activation(*this, o);
  }
}

}  // namespace herd::nn
