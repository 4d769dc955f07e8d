#pragma once
#if defined(__cplusplus) && __cplusplus < 202002L && !defined(__CUDACC__) && !defined(_MSVC_LANG)
#error "herd's C++ headers need C++20: compile with -std=c++20 (CMake's herd:: targets add it)"
#endif
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
