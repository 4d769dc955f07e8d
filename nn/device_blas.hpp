#pragma once
// cuBLAS in the nn CUDA backend (CUDA builds only; internal, not installed): the one place
// nn calls cuBLAS. Per-thread handles bound to each device's nn stream and the row-major
// GEMM that `Linear` and `Conv2d` use on a device (the CPU counterpart is `gemm` in
// cpu_compute.hpp). The host backend (label host-emu) runs the same calls on the CPU
// (herd::gpu::reference_gemm).

#include "herd/core/config.hpp"

#if HERD_HAVE_CUDA
#include <cublas_v2.h>

#include <cstdint>

#include "herd/core/device.hpp"

namespace herd::nn::detail {

/// The calling thread's cuBLAS handle for `d`, bound to `dev_stream(d)` (pointer mode host,
/// default math: no TF32). Thread-safe (one handle per thread and device).
/// @throws InputError for a device that is not CUDA; Error when cuBLAS fails.
cublasHandle_t dev_blas(Device d);

/// C[M,N] (=|+=) op(A) op(B) on device `d`, row-major like the CPU `gemm` (trans_a: A is
/// stored [K,M]; trans_b: B is stored [N,K]), via cuBLAS on the column-major view
/// (C^T = op(B)^T op(A)^T, so the operands swap and no data moves). Enqueued on
/// `dev_stream(d)`; returns at once. Instantiated for float and double.
/// @throws Error when cuBLAS fails.
template <class T>
void dev_gemm(Device d, bool trans_a, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K, const T* A,
              const T* B, T* C, bool accumulate);

}  // namespace herd::nn::detail
#endif
