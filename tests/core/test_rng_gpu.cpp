// [gpu] The device RNG gives bit-identical integers and uniforms to the host RNG, and
// normals equal to the last bits.
#include <cmath>
#include <vector>

#include <cuda_runtime_api.h>
#include <catch2/catch.hpp>

#include "herd/core/cuda/cuda_check.hpp"
#include "herd/core/cuda/rng_cuda.hpp"

TEST_CASE("device and host RNG agree", "[gpu][core][rng]") {
  const herd::RngStream s(0xdeadbeefcafef00dull, 123456, herd::RngPurpose::kProposal);
  const std::size_t n = 1 << 16;
  const std::uint64_t first = (std::uint64_t{1} << 40) - 1000;  // crosses the 32-bit index boundary
  std::uint32_t* dw = nullptr;
  double *du = nullptr, *dn = nullptr;
  HERD_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&dw), n * 4 * sizeof(std::uint32_t)));
  HERD_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&du), n * sizeof(double)));
  HERD_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&dn), n * sizeof(double)));
  cudaStream_t st;
  HERD_CUDA_CHECK(cudaStreamCreate(&st));
  herd::cuda::rng_fill(s, first, n, dw, du, dn, st);
  std::vector<std::uint32_t> w(n * 4);
  std::vector<double> u(n), z(n);
  HERD_CUDA_CHECK(cudaMemcpyAsync(w.data(), dw, w.size() * 4, cudaMemcpyDeviceToHost, st));
  HERD_CUDA_CHECK(cudaMemcpyAsync(u.data(), du, n * 8, cudaMemcpyDeviceToHost, st));
  HERD_CUDA_CHECK(cudaMemcpyAsync(z.data(), dn, n * 8, cudaMemcpyDeviceToHost, st));
  HERD_CUDA_CHECK(cudaStreamSynchronize(st));
  cudaStreamDestroy(st);
  cudaFree(dw);
  cudaFree(du);
  cudaFree(dn);
  std::size_t word_mismatch = 0, uniform_mismatch = 0;
  double max_normal_diff = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const auto b = s.block(first + i);
    for (int k = 0; k < 4; ++k) word_mismatch += (b.v[k] != w[4 * i + k]);
    uniform_mismatch += (s.at(first + i).uniform() != u[i]);
    max_normal_diff = std::max(max_normal_diff, std::abs(s.at(first + i).normal() - z[i]));
  }
  CHECK(word_mismatch == 0);
  CHECK(uniform_mismatch == 0);
  CHECK(max_normal_diff < 1e-12);
}
