#include "herd/rl/network.hpp"

#include <cmath>
#include <string>

#include "herd/core/error.hpp"
#include "herd/nn/activations.hpp"
#include "herd/nn/conv2d.hpp"
#include "herd/nn/init.hpp"
#include "herd/nn/linear.hpp"

namespace herd::rl {
namespace {

constexpr nn::DType kF32 = nn::DType::kFloat32;

void add_activation(nn::Sequential& s, nn::Activation a, Device device) {
  switch (a) {
    case nn::Activation::kTanh:
      s.emplace<nn::Tanh>(kF32, device);
      break;
    case nn::Activation::kReLU:
      s.emplace<nn::ReLU>(kF32, device);
      break;
    case nn::Activation::kELU:
      s.emplace<nn::ELU>(1.0, kF32, device);
      break;
  }
}

std::string shape_str(const std::vector<std::int64_t>& s) {
  std::string out = "{";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "}";
}

// A Sequential whose first child is a convolution: views flat observation rows
// [N, C*H*W] as [N, C, H, W] (no copy) and hands input gradients back in the caller's shape.
class ImageEncoder final : public nn::Sequential {
 public:
  ImageEncoder(std::int64_t c, std::int64_t h, std::int64_t w, Device device)
      : nn::Sequential(kF32, device), c_(c), h_(h), w_(w) {}

  const nn::Tensor& forward(const nn::Tensor& x) override {
    if (x.ndim() == 4) {
      HERD_REQUIRE(x.dim(1) == c_ && x.dim(2) == h_ && x.dim(3) == w_,
                   "rl::make_encoder: encoder input is {}, but must be [N, {}, {}, {}] or [N, {}]", x.str(), c_, h_, w_,
                   c_ * h_ * w_);
      flat_ = false;
      return nn::Sequential::forward(x);
    }
    HERD_REQUIRE(x.ndim() == 2 && x.dim(1) == c_ * h_ * w_,
                 "rl::make_encoder: encoder input is {}, but must be [N, {}] (rows of [{}, {}, {}] in C order) "
                 "or [N, {}, {}, {}]",
                 x.str(), c_ * h_ * w_, c_, h_, w_, c_, h_, w_);
    flat_ = true;
    view_ = x.reshape({x.dim(0), c_, h_, w_});
    return nn::Sequential::forward(view_);
  }

  const nn::Tensor& backward(const nn::Tensor& grad_output) override {
    const nn::Tensor& g = nn::Sequential::backward(grad_output);
    if (!flat_ || !g.defined()) return g;
    grad_input_ = g.reshape({g.dim(0), c_ * h_ * w_});
    return grad_input_;
  }

  std::string type_name() const override { return "ImageEncoder"; }

 private:
  std::int64_t c_, h_, w_;
  bool flat_ = true;
  nn::Tensor view_, grad_input_;
};

}  // namespace

void init_orthogonal(nn::Parameter& weight, nn::Parameter& bias, double gain, const RngStream& rng,
                     std::uint64_t index) {
  RngCursor cur = rng.at(index);
  nn::orthogonal_(weight.value, gain, cur);
  bias.value.zero();
}

std::int64_t encoder_output_features(const std::vector<std::int64_t>& obs_shape, const EncoderSpec& spec) {
  HERD_REQUIRE(!obs_shape.empty(), "rl::make_encoder: the observation shape is empty, but needs >= 1 dimension");
  std::int64_t flat = 1;
  for (auto d : obs_shape) {
    HERD_REQUIRE(d >= 1, "rl::make_encoder: the observation shape is {}, but every dimension must be >= 1",
                 shape_str(obs_shape));
    flat *= d;
  }
  for (std::size_t i = 0; i < spec.hidden.size(); ++i)
    HERD_REQUIRE(spec.hidden[i] >= 1, "rl::make_encoder: hidden[{}] is {}, but dense widths must be >= 1", i,
                 spec.hidden[i]);
  HERD_REQUIRE(!spec.conv.empty() || !spec.hidden.empty(),
               "rl::make_encoder: no convolutions and no dense layers; the encoder needs at least one layer");
  std::int64_t width = flat;
  if (!spec.conv.empty()) {
    HERD_REQUIRE(obs_shape.size() == 3,
                 "rl::make_encoder: convolutions need an image observation of shape {{channels, height, width}}, "
                 "but the observation shape is {}",
                 shape_str(obs_shape));
    std::int64_t c = obs_shape[0], h = obs_shape[1], w = obs_shape[2];
    for (std::size_t i = 0; i < spec.conv.size(); ++i) {
      const ConvLayerSpec& l = spec.conv[i];
      HERD_REQUIRE(l.channels >= 1 && l.kernel >= 1 && l.stride >= 1 && l.padding >= 0,
                   "rl::make_encoder: conv layer {} has channels {}, kernel {}, stride {}, padding {}, but needs "
                   "channels, kernel and stride >= 1 and padding >= 0",
                   i, l.channels, l.kernel, l.stride, l.padding);
      const std::int64_t hp = h + 2 * l.padding, wp = w + 2 * l.padding;
      HERD_REQUIRE(hp >= l.kernel && wp >= l.kernel,
                   "rl::make_encoder: conv layer {} gets a {}x{} input (padding {} per border) but has a {}x{} "
                   "kernel: the spatial size would shrink below 1 (observation shape {})",
                   i, h, w, l.padding, l.kernel, l.kernel, shape_str(obs_shape));
      h = (hp - l.kernel) / l.stride + 1;
      w = (wp - l.kernel) / l.stride + 1;
      c = l.channels;
    }
    width = c * h * w;
  }
  if (!spec.hidden.empty()) width = spec.hidden.back();
  return width;
}

std::unique_ptr<nn::Sequential> make_encoder(const std::vector<std::int64_t>& obs_shape, const EncoderSpec& spec,
                                             Device device, const RngStream& rng, std::uint64_t init_index,
                                             std::int64_t* out_features) {
  // Validate everything before building anything (no half-built network on error).
  const std::int64_t out = encoder_output_features(obs_shape, spec);
  std::int64_t flat = 1;
  for (auto d : obs_shape) flat *= d;
  const double gain = std::sqrt(2.0);
  std::uint64_t k = init_index;  // index of the next weighted layer's draws
  std::unique_ptr<nn::Sequential> net;
  std::int64_t width = flat;
  if (!spec.conv.empty()) {
    std::int64_t c = obs_shape[0], h = obs_shape[1], w = obs_shape[2];
    net = std::make_unique<ImageEncoder>(obs_shape[0], obs_shape[1], obs_shape[2], device);
    for (const ConvLayerSpec& l : spec.conv) {
      auto& conv =
          net->emplace<nn::Conv2d>(c, l.channels, l.kernel, l.kernel, l.stride, l.padding, kF32, device, true, rng, k);
      // Else the constructor's PyTorch default, from the same draws.
      if (spec.init == EncoderInit::kOrthogonal) init_orthogonal(conv.weight(), conv.bias(), gain, rng, k);
      ++k;
      add_activation(*net, spec.activation, device);
      h = (h + 2 * l.padding - l.kernel) / l.stride + 1;
      w = (w + 2 * l.padding - l.kernel) / l.stride + 1;
      c = l.channels;
    }
    net->emplace<nn::Flatten>(kF32, device);
    width = c * h * w;
  } else {
    net = std::make_unique<nn::Sequential>(kF32, device);
  }
  for (auto hdim : spec.hidden) {
    auto& lin = net->emplace<nn::Linear>(width, hdim, kF32, device, true, rng, k);
    if (spec.init == EncoderInit::kOrthogonal) init_orthogonal(lin.weight(), lin.bias(), gain, rng, k);
    ++k;
    add_activation(*net, spec.activation, device);
    width = hdim;
  }
  if (out_features) *out_features = out;
  return net;
}

}  // namespace herd::rl
