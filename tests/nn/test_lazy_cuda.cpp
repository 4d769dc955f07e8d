// cuBLAS and NCCL are opened at their first use (herd/core/cuda/lazy_library.hpp): a process
// that links herd::nn and computes on the CPU maps neither; the first cuBLAS or NCCL call
// maps it; a library that cannot be loaded is a clear error.
#include <catch2/catch.hpp>

#include <fstream>
#include <string>

#include "herd/core/config.hpp"
#include "herd/core/error.hpp"
#include "herd/nn/losses.hpp"
#include "herd/nn/mlp.hpp"

#if HERD_HAVE_CUDA
#include <cublas_v2.h>

#include "herd/core/cuda/lazy_library.hpp"
#endif
#if HERD_HAVE_NCCL
#include <nccl.h>
#endif

using Catch::Matchers::Contains;

namespace {

// Whether a mapping of this process names a file whose path contains `name`.
bool mapped(const std::string& name) {
  std::ifstream maps("/proc/self/maps");
  REQUIRE(maps.good());
  std::string line;
  while (std::getline(maps, line))
    if (line.find(name) != std::string::npos) return true;
  return false;
}

}  // namespace

TEST_CASE("A CPU forward and backward map no cuBLAS or NCCL; their first call does", "[nn]") {
  herd::nn::MlpOptions o;
  o.sizes = {10, 32, 32, 2};
  herd::nn::Mlp mlp(o);
  herd::nn::Tensor x({8, 10}, herd::nn::DType::kFloat32);
  for (int i = 0; i < 80; ++i) x.set_item(i, 0.01 * i);
  herd::nn::Tensor y({8, 2}, herd::nn::DType::kFloat32);
  herd::nn::MseLoss mse;
  mse.forward(mlp.forward(x), y);
  mlp.backward(mse.backward());
  CHECK(mlp.forward(x).shape() == herd::nn::Shape{8, 2});

  CHECK_FALSE(mapped("libcublas"));  // libcublas.so.N and libcublasLt.so.N
  CHECK_FALSE(mapped("libnccl"));

#if HERD_HAVE_CUDA
  // Without a GPU cublasCreate fails with a status (not an exception); the library is open.
  cublasHandle_t h = nullptr;
  const cublasStatus_t st = cublasCreate(&h);
  if (st == CUBLAS_STATUS_SUCCESS) CHECK(cublasDestroy(h) == CUBLAS_STATUS_SUCCESS);
  CHECK(mapped("libcublas.so"));
  CHECK(mapped("libcublasLt.so"));
  CHECK(herd::detail::cublas_library() == herd::detail::cublas_library());
#endif
#if HERD_HAVE_NCCL
  CHECK(std::string(ncclGetErrorString(ncclSuccess)) == "no error");
  CHECK(mapped("libnccl.so"));
#endif
}

#if HERD_HAVE_CUDA
TEST_CASE("A CUDA library that cannot be loaded is an error naming it and the loader's message", "[nn]") {
  using herd::detail::LazyLibraryError;
  using herd::detail::open_cuda_library;
  const auto open = [](LazyLibraryError e) {
    open_cuda_library("cuBLAS", "libherd_no_such_library.so.7", "/nonexistent", e);
  };
  CHECK_THROWS_AS(open(LazyLibraryError::kCuda), herd::CudaError);
  CHECK_THROWS_AS(open(LazyLibraryError::kCommunication), herd::CommunicationError);
  CHECK_THROWS_WITH(open(LazyLibraryError::kCuda), Contains("cuBLAS: cannot load 'libherd_no_such_library.so.7'") &&
                                                       Contains("cannot open shared object file") &&
                                                       Contains("/nonexistent/libherd_no_such_library.so.7") &&
                                                       Contains("LD_LIBRARY_PATH"));
  void* h = herd::detail::cublas_library();
  CHECK_THROWS_WITH(
      herd::detail::cuda_library_symbol(h, "cuBLAS", "libcublas", "herdNoSuchFunction", LazyLibraryError::kCuda),
      Contains("cuBLAS: 'libcublas' has no symbol 'herdNoSuchFunction'"));
}
#endif
