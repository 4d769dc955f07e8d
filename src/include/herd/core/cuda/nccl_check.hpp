#pragma once
/// @file nccl_check.hpp
/// Status check for NCCL calls (NCCL builds only): throws `herd::CommunicationError` naming
/// the call, NCCL's error string and file:line.

#include <nccl.h>

namespace herd::detail {
/// Throws `herd::CommunicationError` for a failed NCCL call (defined out of line).
[[noreturn]] void throw_nccl_error(const char* call, const char* error_string, const char* file, int line);
}  // namespace herd::detail

/// Evaluates an NCCL call; throws `herd::CommunicationError` when it does not return
/// ncclSuccess. Host code only.
#define HERD_NCCL_CHECK(call)                                                                         \
  do {                                                                                                \
    const ncclResult_t herd_nccl_rc_ = (call);                                                        \
    if (herd_nccl_rc_ != ncclSuccess)                                                                 \
      ::herd::detail::throw_nccl_error(#call, ncclGetErrorString(herd_nccl_rc_), __FILE__, __LINE__); \
  } while (0)
