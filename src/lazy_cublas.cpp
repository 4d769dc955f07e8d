// The cuBLAS functions herd calls, forwarded to libcublas opened at the first call
// (herd/core/cuda/lazy_library.hpp). Same names and signatures as cublas_api.h, so call sites
// use cuBLAS as usual. The host backend (cuda/host_runtime.cpp) defines the same functions; a
// host-emu executable links its objects first, so this archive member stays out of it.
//
// To call another cuBLAS function, add it to Cublas and below (the names are the `_v2` ones
// that cublas_v2.h's macros select).
#include <cublas_v2.h>

#include "herd/core/cuda/lazy_library.hpp"

#ifndef HERD_CUBLAS_FALLBACK_DIR
#define HERD_CUBLAS_FALLBACK_DIR ""
#endif

#define HERD_LAZY_STR2(x) #x
#define HERD_LAZY_STR(x) HERD_LAZY_STR2(x)

namespace {

constexpr const char* kWhat = "cuBLAS";
constexpr const char* kSoname = "libcublas.so." HERD_LAZY_STR(CUBLAS_VER_MAJOR);

// cuBLAS's entry points, resolved together on first use.
struct Cublas {
  decltype(&cublasCreate_v2) create = nullptr;
  decltype(&cublasDestroy_v2) destroy = nullptr;
  decltype(&cublasSetStream_v2) set_stream = nullptr;
  decltype(&cublasSgemm_v2) sgemm = nullptr;
  decltype(&cublasDgemm_v2) dgemm = nullptr;
};

template <class F>
void resolve(void* handle, F& f, const char* name) {
  herd::detail::resolve_cuda_symbol(handle, f, kWhat, kSoname, name, herd::detail::LazyLibraryError::kCuda);
}

// Loaded once; a failed load throws herd::CudaError and is tried again at the next call.
const Cublas& cublas() {
  static const Cublas table = [] {
    void* h = herd::detail::cublas_library();
    Cublas t;
    resolve(h, t.create, "cublasCreate_v2");
    resolve(h, t.destroy, "cublasDestroy_v2");
    resolve(h, t.set_stream, "cublasSetStream_v2");
    resolve(h, t.sgemm, "cublasSgemm_v2");
    resolve(h, t.dgemm, "cublasDgemm_v2");
    return t;
  }();
  return table;
}

}  // namespace

namespace herd::detail {

void* cublas_library() {
  static void* const handle = open_cuda_library(kWhat, kSoname, HERD_CUBLAS_FALLBACK_DIR, LazyLibraryError::kCuda);
  return handle;
}

}  // namespace herd::detail

extern "C" {

cublasStatus_t CUBLASWINAPI cublasCreate_v2(cublasHandle_t* handle) { return cublas().create(handle); }

// A handle exists only once cuBLAS is loaded; destructors call this, so it never throws.
cublasStatus_t CUBLASWINAPI cublasDestroy_v2(cublasHandle_t handle) {
  try {
    return cublas().destroy(handle);
  } catch (...) {
    return CUBLAS_STATUS_NOT_INITIALIZED;
  }
}

cublasStatus_t CUBLASWINAPI cublasSetStream_v2(cublasHandle_t handle, cudaStream_t stream) {
  return cublas().set_stream(handle, stream);
}

cublasStatus_t CUBLASWINAPI cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                           int m, int n, int k, const float* alpha, const float* A, int lda,
                                           const float* B, int ldb, const float* beta, float* C, int ldc) {
  return cublas().sgemm(handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}

cublasStatus_t CUBLASWINAPI cublasDgemm_v2(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                           int m, int n, int k, const double* alpha, const double* A, int lda,
                                           const double* B, int ldb, const double* beta, double* C, int ldc) {
  return cublas().dgemm(handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
}
}  // extern "C"
