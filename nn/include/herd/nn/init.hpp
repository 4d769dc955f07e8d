#pragma once
/// @file init.hpp
/// Parameter initialisation (PyTorch `nn.init` semantics), deterministic from the RNG
/// streams: every function draws sequentially, in row-major element order, from an
/// `RngCursor` (for example `RngStream(seed, stream, RngPurpose::kInit).at(index)`), so the
/// same (seed, stream, index) always gives the same parameters on any thread count.
///
/// Fans: a `[out, in]` matrix has fan_in = in, fan_out = out; a `[out, in, kh, kw]`
/// convolution kernel has fan_in = in*kh*kw, fan_out = out*kh*kw.
/// Host tensors only (float32 or float64); draws are made in double precision and rounded.
/// Thread-safety: one tensor and one cursor per call.

#include <string>

#include "herd/core/rng.hpp"
#include "herd/nn/tensor.hpp"

namespace herd::nn {

/// Fills with uniform values in (lo, hi).
void uniform_(Tensor& t, double lo, double hi, RngCursor& rng);
/// Fills with normal values of mean `mean` and standard deviation `std`.
void normal_(Tensor& t, double mean, double std, RngCursor& rng);
/// Fills with `value`.
void constant_(Tensor& t, double value);

/// Gain of a nonlinearity ("linear", "sigmoid", "tanh" = 5/3, "relu" = sqrt(2),
/// "leaky_relu" with `param` as the slope, "selu" = 3/4), as `torch.nn.init.calculate_gain`.
/// @throws InputError for an unknown name.
double calculate_gain(const std::string& nonlinearity, double param = 0.01);

/// Xavier/Glorot uniform: U(-a, a), a = gain sqrt(6 / (fan_in + fan_out))
/// (Glorot & Bengio 2010). @throws InputError for fewer than 2 dimensions.
void xavier_uniform_(Tensor& t, double gain, RngCursor& rng);
/// Xavier/Glorot normal: N(0, gain^2 2 / (fan_in + fan_out)).
void xavier_normal_(Tensor& t, double gain, RngCursor& rng);
/// Kaiming/He uniform with fan_in mode: U(-b, b), b = gain sqrt(3 / fan_in) (He et al. 2015;
/// gain sqrt(2) for ReLU). @throws InputError for fewer than 2 dimensions.
void kaiming_uniform_(Tensor& t, double gain, RngCursor& rng);
/// Kaiming/He normal with fan_in mode: N(0, gain^2 / fan_in).
void kaiming_normal_(Tensor& t, double gain, RngCursor& rng);
/// (Semi-)orthogonal with gain (Saxe et al. 2014), as `torch.nn.init.orthogonal_`: the
/// tensor viewed as `[dim0, numel/dim0]` is set to gain * Q, where Q R is the QR
/// factorisation of a standard normal matrix (transposed when it has fewer rows than
/// columns) and Q's columns are signed so that diag(R) > 0. The default of PPO/A2C
/// policies (gain sqrt(2) hidden, 0.01 policy output, 1 value output).
/// @throws InputError for fewer than 2 dimensions.
void orthogonal_(Tensor& t, double gain, RngCursor& rng);

}  // namespace herd::nn
