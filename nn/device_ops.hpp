#pragma once
// Internal helpers of the nn CUDA backend (CUDA builds only): the nn stream of a device,
// per-thread cuBLAS handles bound to it, row-major GEMM over cuBLAS and small scratch
// memory. Not installed.

#include "herd/core/config.hpp"

#if HERD_HAVE_CUDA
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "herd/core/device.hpp"
#include "herd/nn/tensor.hpp"

namespace herd::nn::detail {

/// The nn stream of CUDA device `d` (one per device and process, created on first use as
/// a blocking stream, so the legacy default stream also orders against it). Every module,
/// loss, head and optimizer enqueues its device work here. Thread-safe.
cudaStream_t dev_stream(Device d);
/// The calling thread's cuBLAS handle for `d`, bound to `dev_stream(d)` (pointer mode host,
/// default math: no TF32). Thread-safe (one handle per thread and device).
cublasHandle_t dev_blas(Device d);
/// Makes `d` the current CUDA device for the scope, restoring the previous one.
class DevGuard {
 public:
  explicit DevGuard(Device d);
  ~DevGuard();
  DevGuard(const DevGuard&) = delete;
  DevGuard& operator=(const DevGuard&) = delete;

 private:
  int previous_ = 0;
  bool changed_ = false;
};

/// C[M,N] (=|+=) op(A) op(B) on device `d`, row-major like the CPU `gemm` (trans_a: A is
/// stored [K,M]; trans_b: B is stored [N,K]), via cuBLAS on the column-major view
/// (C^T = op(B)^T op(A)^T, so the operands swap and no data moves).
template <class T>
void dev_gemm(Device d, bool trans_a, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K, const T* A,
              const T* B, T* C, bool accumulate);

/// One device double of scratch per thread and device (for reductions), valid until the
/// thread's next call.
double* dev_scratch(Device d);
/// Waits for the nn stream of `d`, reports deferred input errors (`check_dev_errors`) and
/// returns the device double `*p`.
double dev_read(Device d, const double* p);

/// Codes of the input errors that kernels find on the device (`dev_error_record`).
enum DevErrorCode : int { kDevErrNone = 0, kDevErrCrossEntropyTarget = 1, kDevErrCategoricalAction = 2 };

/// The deferred input-error record of device `d`: four int64 {code, index, value, bound}
/// in mapped pinned host memory (zero-copy), as a device pointer kernels write to. A
/// kernel that finds a bad input (a class index out of range) claims the record with
/// atomicCAS on `code` (the first finder wins) and fills the rest; the host reports it at
/// the next synchronisation of the nn stream (`check_dev_errors`), so input checks need no
/// host wait of their own. Allocated with the device's nn stream. Thread-safe.
std::int64_t* dev_error_record(Device d);
/// Reports and clears the error record of `d`; call after a synchronisation of its nn
/// stream. No-op when the record is clear.
/// @throws InputError naming the function, the argument entry, its value and the range,
///         e.g. "nn::CrossEntropyLoss::forward: targets[4] is 5, but must be in [0, 5)".
void check_dev_errors(Device d);

/// Throws InputError naming `who` unless `t` is on `d` (or undefined when `allow_empty`).
void require_device(const Tensor& t, Device d, const char* who);

}  // namespace herd::nn::detail
#endif
