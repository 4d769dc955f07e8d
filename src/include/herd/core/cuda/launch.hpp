#pragma once
/// @file launch.hpp
/// The one way herd launches a kernel: `herd::gpu::launch(kernel, grid, block,
/// shared_bytes, stream, args...)` instead of `kernel<<<grid, block, shared_bytes,
/// stream>>>(args...)`. Include it in `.cu` files (instead of `<cuda_runtime.h>`).
///
/// Two backends, chosen when a `.cu` file is compiled:
/// - nvcc (the CUDA backend): the triple-chevron launch on the CUDA device, asynchronous on
///   `stream`; launch errors surface at the caller's `cudaGetLastError` check as before.
/// - a host C++ compiler with `HERD_HOST_EMU` defined (the host backend; the same `.cu`
///   source, see herd/core/cuda/host_emu.hpp): the kernel body runs on the CPU for every
///   thread of every block of the grid, with block-level `__shared__` memory and
///   `__syncthreads` (the threads of a block run as fibers), on the host runtime that
///   implements the CUDA runtime and cuBLAS calls herd uses (src/cuda/host_runtime.cpp).
///   A stream being captured records the launch into its graph instead.
/// Both count the launch (herd/core/launch.hpp). Arguments are converted to the kernel's
/// parameter types and copied, as a CUDA launch does. Host code only; thread-safe as the
/// CUDA launch is. @throws nothing itself; a bad configuration sets the last error.

#include <cstddef>
#include <utility>

#include "herd/core/launch.hpp"

#if defined(HERD_HOST_EMU)
#include "herd/core/cuda/host_emu.hpp"
#else
#include <cuda_runtime.h>
#endif

namespace herd::gpu {

/// Launches `kernel` over `grid` x `block` with `shared_bytes` of dynamic shared memory on
/// `stream` (see the file comment).
template <class... P, class... A>
void launch(void (*kernel)(P...), dim3 grid, dim3 block, std::size_t shared_bytes, cudaStream_t stream, A&&... args) {
  static_assert(sizeof...(P) == sizeof...(A), "herd::gpu::launch: wrong number of kernel arguments");
  detail::count(detail::Count::kKernel);
#if defined(HERD_HOST_EMU)
  emu::launch_on_host(grid, block, shared_bytes, stream,
                      [kernel, ... a = static_cast<P>(std::forward<A>(args))]() { kernel(a...); });
#else
  // CUDA's launch chevrons, in a .hpp that clang-format reads as C++ (it would split them).
  // clang-format off
  kernel<<<grid, block, shared_bytes, stream>>>(static_cast<P>(std::forward<A>(args))...);
  // clang-format on
#endif
}

}  // namespace herd::gpu
