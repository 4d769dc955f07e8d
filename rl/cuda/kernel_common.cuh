// Private to rl/cuda: what the kernels of rl/ (ppo_kernels.cu, dqn_kernels.cu) share: the
// block size, grid sizing, the launch check, grid-stride indices and the fixed-order block
// sum. Included by .cu files only (nvcc, or the host backend's C++ build of them).
#pragma once

#include <cstdint>

#include "herd/core/cuda/cuda_check.hpp"
#include "herd/core/cuda/launch.hpp"

namespace herd::rl::cuda::detail {

/// Threads per block: a power of two (the tree sums halve it).
inline constexpr unsigned kThreads = 256;

/// Blocks for `n` elements at one element per thread (at least 1, at most 65535 * 16; the
/// kernels stride over the rest).
inline unsigned blocks_for(std::int64_t n) {
  const std::int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 65535 * 16 ? (b > 0 ? b : 1) : 65535 * 16);
}

/// @throws herd::CudaError when the last launch failed.
inline void check_launch() { HERD_CUDA_CHECK(cudaGetLastError()); }

/// The thread's index in the grid, and the grid's size (grid-stride loops).
__device__ inline std::int64_t gid() { return blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; }
__device__ inline std::int64_t gstride() { return static_cast<std::int64_t>(gridDim.x) * blockDim.x; }

/// The sum of every thread's `x` over the block in a fixed pairwise tree (deterministic);
/// every thread gets the total. `buf` holds blockDim.x doubles of shared memory. Call from
/// all threads of the block.
__device__ inline double block_sum(double x, double* buf) {
  buf[threadIdx.x] = x;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) buf[threadIdx.x] += buf[threadIdx.x + s];
    __syncthreads();
  }
  const double total = buf[0];
  __syncthreads();
  return total;
}

}  // namespace herd::rl::cuda::detail
