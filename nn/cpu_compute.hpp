#pragma once
// The CPU compute of herd::nn (internal, not installed): Eigen views of tensors, the
// float/double dispatch every module uses (host and device paths alike), and the row-major
// GEMM over the nn thread pool. Compiled with -march=x86-64-v3; Eigen stays out of the
// public headers, so users need not be built with AVX. The device counterparts:
// device_context.hpp (streams, error record), device_blas.hpp (cuBLAS GEMM) and
// herd/nn/cuda/kernels.hpp (kernel launchers).

#include <Eigen/Core>

#include <cstdint>

#include "herd/nn/tensor.hpp"

namespace herd::nn::detail {

template <class T>
using RowMat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using CMapRM = Eigen::Map<const RowMat<T>>;
template <class T>
using MapRMu = Eigen::Map<RowMat<T>>;
template <class T>
using ArrX = Eigen::Array<T, Eigen::Dynamic, 1>;
template <class T>
using ArrXT = ArrX<T>;
template <class T>
using MapA = Eigen::Map<ArrX<T>>;
template <class T>
using CMapA = Eigen::Map<const ArrX<T>>;

/// Calls f(T{}) with T = float or double according to `dt`.
template <class F>
decltype(auto) dispatch(DType dt, F&& f) {
  if (dt == DType::kFloat32) return f(float{});
  return f(double{});
}

/// Row-major matrix view of a tensor as [rows, numel/rows].
template <class T>
CMapRM<T> cmat(const Tensor& t, std::int64_t rows, std::int64_t cols) {
  return CMapRM<T>(t.data<T>(), rows, cols);
}

/// C[M,N] (=|+=) op(A) op(B), all row-major contiguous; op(A) is [M,K], op(B) is [K,N].
/// trans_a: A is stored [K,M]; trans_b: B is stored [N,K]. Splits rows of C over the nn
/// thread pool when it has more than one thread and the product is large.
template <class T>
void gemm(bool trans_a, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K, const T* A, const T* B, T* C,
          bool accumulate);

/// Sets the number of threads `gemm` uses (the calling thread included; 1: no pool).
/// Not thread-safe: call between steps (`nn::set_num_threads`).
void set_pool_threads(int n);
/// The number of threads `gemm` uses.
int pool_threads();

/// A module's forward, before it writes its output buffer `out`: when `in` overlaps the
/// memory `out` holds (the caller fed the module's own last output, or a view of it, back
/// in: `y = lin.forward(lin.forward(x))`), `out` lets go of that storage so the next resize
/// allocates anew, instead of the forward overwriting its input while reading it. The
/// input keeps the old storage alive (and `backward` reads it there). One comparison
/// otherwise. Host and device tensors alike.
void unalias_output(Tensor& out, const Tensor& in);
/// True when the elements of `a` and `b` share memory (both defined, on one device).
bool overlaps(const Tensor& a, const Tensor& b);

}  // namespace herd::nn::detail
