#pragma once
#include "herd/core/cxx20.hpp"  // C++20 or one clear error
/// @file host_device.hpp
/// `HERD_HOST_DEVICE` marks functions shared by host code and CUDA device code
/// (DESIGN.md §3). It expands to `__host__ __device__` under nvcc and to nothing in a
/// CPU-only compilation, so the CPU build runs exactly the same source.

#if defined(__CUDACC__)
#define HERD_HOST_DEVICE __host__ __device__
#define HERD_FORCE_INLINE __forceinline__
#else
#define HERD_HOST_DEVICE
#define HERD_FORCE_INLINE inline __attribute__((always_inline))
#endif
