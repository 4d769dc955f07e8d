#pragma once
/// @file cuda_memory.hpp
/// Private to rl/ (CUDA builds only): grow-only device and pinned host buffers and a
/// current-device scope, used by the device paths of `ActorCriticAgent`, `Ppo` and `Dqn`.
/// Not installed. Not thread-safe (one owner).

#include <cstddef>

#include <cuda_runtime_api.h>

#include "herd/core/cuda/cuda_check.hpp"

namespace herd::rl::detail {

/// Device memory of at least `bytes` on the current device (grow-only; contents lost on
/// growth). @throws herd::CudaError when cudaMalloc fails.
struct DeviceMemory {
  void* p = nullptr;
  std::size_t cap = 0;
  DeviceMemory() = default;
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  ~DeviceMemory() {
    if (p) cudaFree(p);
  }
  void reserve(std::size_t bytes) {
    if (bytes <= cap) return;
    if (p) HERD_CUDA_CHECK(cudaFree(p));
    p = nullptr;
    cap = 0;
    HERD_CUDA_CHECK(cudaMalloc(&p, bytes));
    cap = bytes;
  }
  /// The memory at byte `offset`, as `T*`.
  template <class T>
  T* at(std::size_t offset) const {
    return reinterpret_cast<T*>(static_cast<char*>(p) + offset);
  }
};

/// Pinned (page-locked, portable) host memory of at least `bytes` (grow-only; contents lost
/// on growth), so that cudaMemcpyAsync from and to it is truly asynchronous.
/// @throws herd::CudaError when cudaHostAlloc fails.
struct PinnedMemory {
  void* p = nullptr;
  std::size_t cap = 0;
  PinnedMemory() = default;
  PinnedMemory(const PinnedMemory&) = delete;
  PinnedMemory& operator=(const PinnedMemory&) = delete;
  ~PinnedMemory() {
    if (p) cudaFreeHost(p);
  }
  void reserve(std::size_t bytes) {
    if (bytes <= cap) return;
    if (p) HERD_CUDA_CHECK(cudaFreeHost(p));
    p = nullptr;
    cap = 0;
    HERD_CUDA_CHECK(cudaHostAlloc(&p, bytes, cudaHostAllocPortable));
    cap = bytes;
  }
  /// The memory at byte `offset`, as `T*`.
  template <class T>
  T* at(std::size_t offset) const {
    return reinterpret_cast<T*>(static_cast<char*>(p) + offset);
  }
};

}  // namespace herd::rl::detail
