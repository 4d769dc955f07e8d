#pragma once
/// @file cxx20.hpp
/// The language check of herd's C++ headers: every header that includes no other herd header
/// includes this one, so that a translation unit compiled below C++20 (g++ 12 defaults to
/// C++17) stops with one line saying so instead of an error deep in a header (`std::span`).
/// CUDA translation units (nvcc's own standard) and MSVC (`__cplusplus` stays 199711L unless
/// /Zc:__cplusplus) are not checked.
#if defined(__cplusplus) && __cplusplus < 202002L && !defined(__CUDACC__) && !defined(_MSVC_LANG)
#error "herd's C++ headers need C++20: compile with -std=c++20 (CMake's herd:: targets add it)"
#endif
