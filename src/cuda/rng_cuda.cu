#include "herd/core/cuda/cuda_check.hpp"
#include "herd/core/cuda/launch.hpp"
#include "herd/core/cuda/rng_cuda.hpp"

namespace herd::cuda {

namespace {
__global__ void rng_fill_kernel(RngStream stream, std::uint64_t first, std::size_t n, std::uint32_t* words,
                                double* uniforms, double* normals) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const RngBlock b = stream.block(first + i);
  for (int k = 0; k < 4; ++k) words[4 * i + k] = b.v[k];
  uniforms[i] = stream.at(first + i).uniform();
  normals[i] = stream.at(first + i).normal();
}
}  // namespace

void rng_fill(const RngStream& stream, std::uint64_t first_index, std::size_t n, std::uint32_t* words, double* uniforms,
              double* normals, cudaStream_t cuda_stream) {
  if (n == 0) return;
  const unsigned threads = 256;
  const unsigned blocks = static_cast<unsigned>((n + threads - 1) / threads);
  herd::gpu::launch(rng_fill_kernel, blocks, threads, 0, cuda_stream, stream, first_index, n, words, uniforms, normals);
  HERD_CUDA_CHECK(cudaGetLastError());
}

}  // namespace herd::cuda
