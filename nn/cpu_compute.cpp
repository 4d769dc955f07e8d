#include "cpu_compute.hpp"

#include <memory>

#include "herd/core/thread_pool.hpp"

namespace herd::nn::detail {
namespace {

int g_threads = 1;
std::unique_ptr<ThreadPool> g_pool;

// Products below this many multiply-adds run on the calling thread: the pool's hand-off
// costs a few microseconds.
constexpr double kParallelWork = 4e6;

template <class T, class AM, class BM>
void gemm_rows(const AM& a, const BM& b, T* C, std::int64_t N, std::int64_t r0, std::int64_t r1, bool accumulate) {
  MapRMu<T> c(C + r0 * N, r1 - r0, N);
  if (accumulate) c.noalias() += a.middleRows(r0, r1 - r0) * b;
  else c.noalias() = a.middleRows(r0, r1 - r0) * b;
}

template <class T, class AM, class BM>
void gemm_split(const AM& a, const BM& b, T* C, std::int64_t M, std::int64_t N, std::int64_t K, bool accumulate) {
  const double work = static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K);
  if (g_threads <= 1 || work < kParallelWork || M < 2 * g_threads) {
    gemm_rows<T>(a, b, C, N, 0, M, accumulate);
    return;
  }
  // Chunks aligned to 8 rows, one per thread.
  const std::int64_t per = ((M + g_threads - 1) / g_threads + 7) / 8 * 8;
  g_pool->parallel_for(
      0, static_cast<std::size_t>(M),
      [&](std::size_t r0, std::size_t r1) {
        gemm_rows<T>(a, b, C, N, static_cast<std::int64_t>(r0), static_cast<std::int64_t>(r1), accumulate);
      },
      static_cast<std::size_t>(per));
}

}  // namespace

template <class T>
void gemm(bool trans_a, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K, const T* A, const T* B, T* C,
          bool accumulate) {
  if (M == 0 || N == 0) return;
  if (K == 0) {
    if (!accumulate) MapRMu<T>(C, M, N).setZero();
    return;
  }
  if (!trans_a && !trans_b) gemm_split<T>(CMapRM<T>(A, M, K), CMapRM<T>(B, K, N), C, M, N, K, accumulate);
  else if (!trans_a && trans_b)
    gemm_split<T>(CMapRM<T>(A, M, K), CMapRM<T>(B, N, K).transpose(), C, M, N, K, accumulate);
  else if (trans_a && !trans_b)
    gemm_split<T>(CMapRM<T>(A, K, M).transpose(), CMapRM<T>(B, K, N), C, M, N, K, accumulate);
  else gemm_split<T>(CMapRM<T>(A, K, M).transpose(), CMapRM<T>(B, N, K).transpose(), C, M, N, K, accumulate);
}

template void gemm<float>(bool, bool, std::int64_t, std::int64_t, std::int64_t, const float*, const float*, float*,
                          bool);
template void gemm<double>(bool, bool, std::int64_t, std::int64_t, std::int64_t, const double*, const double*, double*,
                           bool);

void set_pool_threads(int n) {
  if (n == g_threads) return;
  g_pool.reset();
  g_threads = n;
  // The calling thread works too, so n threads need n - 1 workers.
  if (n > 1) g_pool = std::make_unique<ThreadPool>(static_cast<std::size_t>(n - 1));
}

int pool_threads() { return g_threads; }

bool overlaps(const Tensor& a, const Tensor& b) {
  if (!a.defined() || !b.defined() || a.device() != b.device()) return false;
  const auto pa = reinterpret_cast<std::uintptr_t>(a.raw());
  const auto pb = reinterpret_cast<std::uintptr_t>(b.raw());
  const auto na = static_cast<std::uintptr_t>(a.numel()) * dtype_size(a.dtype());
  const auto nb = static_cast<std::uintptr_t>(b.numel()) * dtype_size(b.dtype());
  return na != 0 && nb != 0 && pa < pb + nb && pb < pa + na;
}

void unalias_output(Tensor& out, const Tensor& in) {
  if (!overlaps(out, in)) return;
  // A captured CUDA graph may hold the old pointer: count it as a replacement.
  if (out.is_cuda()) note_storage_replacement();
  out = Tensor();
}

}  // namespace herd::nn::detail
