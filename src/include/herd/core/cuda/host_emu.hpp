#pragma once
/// @file host_emu.hpp
/// What a `.cu` file needs to compile as plain C++ for the host backend of the launch layer
/// (herd/core/cuda/launch.hpp; `HERD_HOST_EMU` defined, no nvcc): the CUDA function and
/// variable qualifiers as no-ops (`__shared__` as a per-OS-thread static, which the threads
/// of one block share because they run as fibers of one OS thread), the built-in index
/// variables, `__syncthreads`, the atomics and fences herd's kernels use, and the entry
/// point of the host grid runner. Kernel bodies stay the CUDA source, unchanged.
/// Thread-safety: blocks of different launches may run on different OS threads; the
/// atomics are real atomics (std::atomic_ref).

#include <cuda_runtime_api.h>

#include <math.h>

#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>

// NOLINTBEGIN(bugprone-reserved-identifier): CUDA's own qualifier and built-in names, on purpose
#undef __global__
#undef __device__
#undef __host__
#undef __shared__
#undef __forceinline__
#undef __launch_bounds__
#define __global__
#define __device__
#define __host__
#define __shared__ static thread_local
#define __forceinline__ inline
#define __launch_bounds__(...)
// NOLINTEND(bugprone-reserved-identifier)

namespace herd::gpu::emu {

/// Runs `body` once per thread of the `grid` x `block` launch on the host, in the order of
/// the stream (or records it into the graph being captured on `stream`). Counts nothing
/// (the launch layer counts). A bad configuration (no threads, more than 1024 threads per
/// block, more than 48 KiB of dynamic shared memory) sets `cudaErrorInvalidConfiguration`
/// as the last error and runs nothing.
void launch_on_host(dim3 grid, dim3 block, std::size_t shared_bytes, cudaStream_t stream, std::function<void()> body);

/// The barrier of the threads of the running block (`__syncthreads`).
void sync_block_threads();

}  // namespace herd::gpu::emu

// The built-in index variables of the running thread (set by the grid runner).
inline thread_local uint3 threadIdx{};
inline thread_local uint3 blockIdx{};
inline thread_local dim3 blockDim{};
inline thread_local dim3 gridDim{};

// NOLINTBEGIN(bugprone-reserved-identifier): CUDA's built-in function names, on purpose
inline void __syncthreads() { herd::gpu::emu::sync_block_threads(); }
inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void __threadfence_system() { std::atomic_thread_fence(std::memory_order_seq_cst); }
// NOLINTEND(bugprone-reserved-identifier)

/// `*p += v`, atomically; returns the old value.
template <class T>
inline T atomicAdd(T* p, T v) {
  return std::atomic_ref<T>(*p).fetch_add(v);
}

/// `*p = (*p == compare) ? value : *p`, atomically; returns the old value.
template <class T>
inline T atomicCAS(T* p, T compare, T value) {
  std::atomic_ref<T>(*p).compare_exchange_strong(compare, value);
  return compare;
}
