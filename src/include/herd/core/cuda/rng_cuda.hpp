#pragma once
/// @file rng_cuda.hpp
/// Device-side generation of `RngStream` draws (CUDA builds only), for differential tests
/// of the host and device RNG and for bulk generation.

#include <cstddef>
#include <cstdint>

#include <cuda_runtime_api.h>

#include "herd/core/rng.hpp"

namespace herd::cuda {

/// For i in [0, n): writes the first Philox block of index `first_index + i` of `stream` to
/// `words[4*i .. 4*i+4)` and the cursor's first uniform double and first normal of that
/// index to `uniforms[i]` and `normals[i]`. All pointers are device memory (`[n*4]`, `[n]`,
/// `[n]`); asynchronous on `cuda_stream`. @throws CudaError if the launch fails.
void rng_fill(const RngStream& stream, std::uint64_t first_index, std::size_t n, std::uint32_t* words, double* uniforms,
              double* normals, cudaStream_t cuda_stream);

}  // namespace herd::cuda
