#pragma once
// Internal CPU kernels of herd::nn (Eigen; compiled with -march=x86-64-v3). Not installed:
// Eigen stays out of the public headers, so users need not be built with AVX.

#include <Eigen/Core>

#include <cstdint>
#include <vector>

#include "herd/nn/module.hpp"
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

void set_pool_threads(int n);
int pool_threads();

/// Validates names and shapes, then copies `state` into `targets` (see load_state_dict).
void load_named(const std::vector<NamedParameter>& targets, const std::vector<NamedTensor>& state, bool strict,
                const char* who);

}  // namespace herd::nn::detail
