#pragma once
/// @file network.hpp
/// Observation encoders of RL agents: an optional stack of 2-D convolutions over an image
/// observation `[channels, height, width]`, flattened, then dense layers. The policy, value
/// and Q-function heads of the agents sit on top. With no convolutions this is the MLP
/// torso of the vector-observation agents (same layers, names and initialisation).
/// References: Young & Tian 2019 (MinAtar: one 3x3 convolution with 16 channels, stride 1,
/// ReLU, then 128 ReLU units); Mnih et al. 2015 (the Atari DQN stack); initialisation as in
/// Andrychowicz et al. 2021 and SB3 (orthogonal, gain sqrt(2), zero biases).

#include <cstdint>
#include <memory>
#include <vector>

#include "herd/core/device.hpp"
#include "herd/core/rng.hpp"
#include "herd/nn/mlp.hpp"
#include "herd/nn/module.hpp"
#include "herd/nn/sequential.hpp"

namespace herd::rl {

/// One convolution of an encoder: `channels` output channels, a square `kernel` x `kernel`
/// window moved by `stride`, `padding` zeros on every border (PyTorch `nn.Conv2d`).
struct ConvLayerSpec {
  std::int64_t channels = 16;  ///< output channels (>= 1)
  std::int64_t kernel = 3;     ///< kernel height and width (>= 1)
  std::int64_t stride = 1;     ///< step in both directions (>= 1)
  std::int64_t padding = 0;    ///< zero padding on each border (>= 0)
};

/// How an encoder's weighted layers (and an agent's output heads) are initialised.
enum class EncoderInit {
  /// Orthogonal weights (Saxe et al. 2014) with gain sqrt(2), zero biases: the default of
  /// SB3's actor-critic policies (`ortho_init=True`) and of Andrychowicz et al. 2021.
  kOrthogonal,
  /// PyTorch's default for `nn.Linear` and `nn.Conv2d`: weights and biases uniform in
  /// +-1/sqrt(fan_in) (`kaiming_uniform_` with a = sqrt(5)); what SB3's DQN and the MinAtar
  /// paper's DQN (Young & Tian 2019) use.
  kPyTorch,
};

/// The layers of an encoder (see `make_encoder`).
struct EncoderSpec {
  /// Convolutions in order; empty: none (vector observations).
  std::vector<ConvLayerSpec> conv;
  /// Dense widths after the flatten, in order (each >= 1; may be empty after convolutions).
  std::vector<std::int64_t> hidden = {64, 64};
  /// Nonlinearity after every convolution and every dense layer.
  nn::Activation activation = nn::Activation::kTanh;
  /// Initialisation of every convolution and dense layer.
  EncoderInit init = EncoderInit::kOrthogonal;
};

/// Builds the encoder `[Conv2d, act]* -> Flatten -> [Linear, act]*` (float32, on `device`).
///
/// Input: `[N, prod(obs_shape)]` float32 rows; with convolutions each row is the C-order
/// (row-major) layout of an array of `obs_shape = {C, H, W}` (what `Space::shape()` of an
/// image observation gives), and the returned container views it as `[N, C, H, W]` before
/// the first convolution (an `[N, C, H, W]` input is taken as is). Output: `[N,
/// *out_features]`, where `*out_features` is the last dense width, or the flattened
/// convolution output `C_last * H_last * W_last` when `hidden` is empty. Without
/// convolutions the input is `[N, prod(obs_shape)]` (any shape, flattened) and no
/// Flatten is added: the layers are exactly an `nn::Mlp` of `{prod(obs_shape), hidden...}`
/// with the activation also after the last layer.
///
/// Children are numbered from "0" as in PyTorch's `nn.Sequential` (e.g. "0.weight" is the
/// first convolution's or, without convolutions, the first Linear layer's weight). More
/// layers may be appended to the returned container (`add`/`emplace`), e.g. a head.
///
/// Initialisation (`spec.init`): every Conv2d and Linear weight orthogonal with gain sqrt(2)
/// (the weight viewed as `[out, in * kernel^2]`) and biases zero, or PyTorch's default
/// (weights, then biases, uniform in +-1/sqrt(fan_in)); the k-th weighted layer (0-based,
/// in order, convolutions first) draws from `rng.at(init_index + k)`. Deterministic.
///
/// Host or CUDA device (the nn layers' backends); thread-safety as `nn::Module`.
/// @param out_features receives the output width (may be null).
/// @throws herd::InputError when `obs_shape` is empty or has a dimension < 1; when
///         convolutions are asked for and `obs_shape` is not 3-D `{C, H, W}`; for a
///         channel count, kernel or stride < 1 or a padding < 0; when a convolution would
///         shrink the height or width below 1 (the message names the layer and sizes); for
///         a dense width < 1; when there are neither convolutions nor dense layers; or for
///         a CUDA device in a CPU-only build.
std::unique_ptr<nn::Sequential> make_encoder(const std::vector<std::int64_t>& obs_shape, const EncoderSpec& spec,
                                             Device device, const RngStream& rng, std::uint64_t init_index,
                                             std::int64_t* out_features);

/// Overwrites a layer's `weight` with orthogonal values of gain `gain` (`nn::orthogonal_`, the
/// weight viewed as `[out, numel / out]`) drawn from `rng.at(index)`, and zeroes its `bias`:
/// the `EncoderInit::kOrthogonal` initialisation of an encoder layer or an agent's head.
/// Host or CUDA parameters; one layer per call.
void init_orthogonal(nn::Parameter& weight, nn::Parameter& bias, double gain, const RngStream& rng,
                     std::uint64_t index);

/// The output width `*out_features` of `make_encoder(obs_shape, spec, ...)`, computed
/// without building the layers (to check a configuration before a run starts).
/// @throws herd::InputError exactly where `make_encoder` would, with the same message.
std::int64_t encoder_output_features(const std::vector<std::int64_t>& obs_shape, const EncoderSpec& spec);

}  // namespace herd::rl
