#pragma once
#include "herd/core/cxx20.hpp"  // C++20 or one clear error
/// @file reference_gemm.hpp
/// The reference GEMM of the host backend (herd/core/cuda/launch.hpp): cuBLAS's `?gemm`
/// with its exact argument semantics, on the host, in plain loops.
///
/// `C = alpha op(A) op(B) + beta C`, all matrices column-major: element (i, j) of a matrix
/// with leading dimension `ld` is at `[i + j ld]`. `op(A)` is `m x k`: A is stored `m x k`
/// (`lda >= max(1, m)`) for `kN`, `k x m` (`lda >= max(1, k)`) for `kT`. `op(B)` is `k x n`:
/// stored `k x n` (`ldb >= max(1, k)`) for `kN`, `n x k` (`ldb >= max(1, n)`) for `kT`.
/// C is `m x n`, `ldc >= max(1, m)`. As in cuBLAS: when `beta == 0`, C is not read (NaN or
/// uninitialised values in C do not propagate); when `alpha == 0` or `k == 0`, A and B are
/// not read; `m == 0` or `n == 0` does nothing. Each C element sums its k products in order
/// l = 0..k-1 in `T` (cuBLAS's blocking may order them differently: equal to rounding).
/// Reference: cuBLAS documentation, cublas<t>gemm(). Thread-safe (no shared state).

#include <cstdint>

namespace herd::gpu {

/// cuBLAS's `cublasOperation_t` for real matrices (`CUBLAS_OP_C` is `kT` for real types).
enum class GemmOp { kN, kT };

/// Empty when the arguments are valid for cuBLAS's `?gemm`, else the name of the first
/// invalid one ("m", "n", "k", "lda", "ldb", "ldc"): cuBLAS returns
/// `CUBLAS_STATUS_INVALID_VALUE` for those.
inline const char* gemm_invalid_argument(GemmOp ta, GemmOp tb, std::int64_t m, std::int64_t n, std::int64_t k,
                                         std::int64_t lda, std::int64_t ldb, std::int64_t ldc) {
  auto at_least = [](std::int64_t v) { return v > 1 ? v : std::int64_t{1}; };
  if (m < 0) return "m";
  if (n < 0) return "n";
  if (k < 0) return "k";
  if (lda < at_least(ta == GemmOp::kN ? m : k)) return "lda";
  if (ldb < at_least(tb == GemmOp::kN ? k : n)) return "ldb";
  if (ldc < at_least(m)) return "ldc";
  return "";
}

/// `C = alpha op(A) op(B) + beta C` (see the file comment). The arguments must be valid
/// (`gemm_invalid_argument` empty); the pointers must cover the stored matrices.
template <class T>
void reference_gemm(GemmOp ta, GemmOp tb, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, const T* A,
                    std::int64_t lda, const T* B, std::int64_t ldb, T beta, T* C, std::int64_t ldc) {
  if (m == 0 || n == 0) return;
  const bool use_ab = alpha != T(0) && k > 0;
  for (std::int64_t j = 0; j < n; ++j)
    for (std::int64_t i = 0; i < m; ++i) {
      T acc = T(0);
      if (use_ab)
        for (std::int64_t l = 0; l < k; ++l) {
          const T a = ta == GemmOp::kN ? A[i + l * lda] : A[l + i * lda];
          const T b = tb == GemmOp::kN ? B[l + j * ldb] : B[j + l * ldb];
          acc += a * b;
        }
      T& c = C[i + j * ldc];
      c = beta == T(0) ? alpha * acc : alpha * acc + beta * c;
    }
}

}  // namespace herd::gpu
