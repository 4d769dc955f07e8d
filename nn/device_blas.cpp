#include "device_blas.hpp"

#include <array>
#include <type_traits>

#include "device_context.hpp"
#include "herd/core/error.hpp"

namespace herd::nn::detail {
namespace {

void check_blas(cublasStatus_t st, const char* what) {
  HERD_CHECK(st == CUBLAS_STATUS_SUCCESS, "nn: cuBLAS {} failed with status {}", what, static_cast<int>(st));
}

// Per-thread cuBLAS handles, one per device.
struct ThreadHandles {
  std::array<cublasHandle_t, kMaxDevices> blas{};
  ~ThreadHandles() {
    // Best effort at thread exit (the driver may already be shut down at process exit).
    for (auto& h : blas)
      if (h) cublasDestroy(h);
  }
};

ThreadHandles& thread_handles() {
  thread_local ThreadHandles h;
  return h;
}

}  // namespace

cublasHandle_t dev_blas(Device d) {
  auto& h = thread_handles().blas[static_cast<std::size_t>(device_slot(d))];
  if (!h) {
    DevGuard g(d);
    check_blas(cublasCreate(&h), "cublasCreate");
    check_blas(cublasSetStream(h, dev_stream(d)), "cublasSetStream");
  }
  return h;
}

template <class T>
void dev_gemm(Device d, bool trans_a, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K, const T* A,
              const T* B, T* C, bool accumulate) {
  if (M == 0 || N == 0) return;
  const T alpha = 1;
  const T beta = accumulate ? 1 : 0;
  cublasHandle_t h = dev_blas(d);
  // Row-major C[M,N] is column-major C^T[N,M] = op(B)^T op(A)^T: B's column-major view is
  // op(B)^T untransposed when B is stored [K,N] (ld N) and needs a transpose when stored
  // [N,K] (ld K); likewise A (ld K untransposed, M transposed).
  const int m = static_cast<int>(N), n = static_cast<int>(M), k = static_cast<int>(K);
  const int ldb = static_cast<int>(trans_b ? K : N), lda = static_cast<int>(trans_a ? M : K);
  const cublasOperation_t ob = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t oa = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  // With K == 0 cuBLAS scales C by beta, which is what an empty sum means.
  if constexpr (std::is_same_v<T, float>)
    check_blas(cublasSgemm(h, ob, oa, m, n, k, &alpha, B, ldb > 0 ? ldb : 1, A, lda > 0 ? lda : 1, &beta, C, m),
               "sgemm");
  else
    check_blas(cublasDgemm(h, ob, oa, m, n, k, &alpha, B, ldb > 0 ? ldb : 1, A, lda > 0 ? lda : 1, &beta, C, m),
               "dgemm");
}

template void dev_gemm<float>(Device, bool, bool, std::int64_t, std::int64_t, std::int64_t, const float*, const float*,
                              float*, bool);
template void dev_gemm<double>(Device, bool, bool, std::int64_t, std::int64_t, std::int64_t, const double*,
                               const double*, double*, bool);

}  // namespace herd::nn::detail
