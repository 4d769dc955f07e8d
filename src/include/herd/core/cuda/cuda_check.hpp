#pragma once
/// @file cuda_check.hpp
/// Status checks for the CUDA runtime (CUDA builds only). Throw `herd::CudaError` naming
/// the call, the error name and string, and file:line.

#include <cuda_runtime_api.h>

namespace herd::detail {
/// Throws `herd::CudaError` for a failed CUDA runtime call (defined out of line so that
/// `.cu` files need no fmt).
[[noreturn]] void throw_cuda_error(const char* call, const char* error_name, const char* error_string, const char* file,
                                   int line);
}  // namespace herd::detail

/// Evaluates a CUDA runtime call; throws `herd::CudaError` naming the call, the error and
/// file:line when it fails. Host code only.
#define HERD_CUDA_CHECK(call)                                                                                     \
  do {                                                                                                            \
    const cudaError_t herd_cuda_rc_ = (call);                                                                     \
    if (herd_cuda_rc_ != cudaSuccess)                                                                             \
      ::herd::detail::throw_cuda_error(#call, cudaGetErrorName(herd_cuda_rc_), cudaGetErrorString(herd_cuda_rc_), \
                                       __FILE__, __LINE__);                                                       \
  } while (0)
