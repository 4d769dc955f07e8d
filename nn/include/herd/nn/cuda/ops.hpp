#pragma once
/// @file ops.hpp
/// Kept for source compatibility: the launchers once declared here are in
/// herd/nn/cuda/kernels.hpp with the rest of the nn CUDA kernels. Include that instead.

#include "herd/nn/cuda/kernels.hpp"
