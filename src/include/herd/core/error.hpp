#pragma once
#include "herd/core/cxx20.hpp"  // C++20 or one clear error
/// @file error.hpp
/// The herd exception hierarchy and the `HERD_CHECK` family of checks (DESIGN.md §5).
///
/// Messages name the function, argument, value and requirement, for example
/// "dram: proposal_cov[2][2] is -1, but must be positive definite". Checks belong at API
/// boundaries, not in hot loops.

#include <stdexcept>
#include <string>

#include <fmt/format.h>

namespace herd {

/// Base class of every error herd throws. Thread-safe to construct and copy.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Bad user input: an input file, a key, a value, a shape or an API argument.
/// Applications map it to exit code 2.
class InputError : public Error {
 public:
  using Error::Error;
};

/// A numerical failure: a non-finite value where a finite one is required, a failed
/// factorisation, a diverging loss.
class NumericalError : public Error {
 public:
  using Error::Error;
};

/// A failure of a collective or of the MPI/NCCL library, or of another rank.
class CommunicationError : public Error {
 public:
  using Error::Error;
};

/// A failure reported by the CUDA runtime, cuBLAS, cuRAND or a kernel launch.
class CudaError : public Error {
 public:
  using Error::Error;
};

/// An I/O failure: a file that cannot be opened, read, written or renamed.
class IoError : public Error {
 public:
  using Error::Error;
};

namespace detail {

/// Builds "file:line: check `expr` failed: message" for the `HERD_CHECK` macros.
std::string check_message(const char* file, int line, const char* expr, const std::string& msg);

/// Throws `E` with the formatted check message; never returns.
template <class E>
[[noreturn]] void throw_check(const char* file, int line, const char* expr, const std::string& msg) {
  throw E(check_message(file, line, expr, msg));
}

}  // namespace detail
}  // namespace herd

/// Throws `herd::Error` with file:line, the failed expression and a fmt-formatted message
/// when `cond` is false: `HERD_CHECK(n > 0, "dram: ndim is {}, but must be positive", n)`.
#define HERD_CHECK(cond, ...)                                                                            \
  do {                                                                                                   \
    if (!(cond)) [[unlikely]]                                                                            \
      ::herd::detail::throw_check<::herd::Error>(__FILE__, __LINE__, #cond, ::fmt::format(__VA_ARGS__)); \
  } while (0)

/// As `HERD_CHECK`, but throws the given exception type (a subclass of `herd::Error`).
#define HERD_CHECK_AS(Type, cond, ...)                                                          \
  do {                                                                                          \
    if (!(cond)) [[unlikely]]                                                                   \
      ::herd::detail::throw_check<Type>(__FILE__, __LINE__, #cond, ::fmt::format(__VA_ARGS__)); \
  } while (0)

/// Checks an argument at an API boundary; throws `herd::InputError` with the plain message
/// (users see it, so no file:line).
#define HERD_REQUIRE(cond, ...)                             \
  do {                                                      \
    if (!(cond)) [[unlikely]]                               \
      throw ::herd::InputError(::fmt::format(__VA_ARGS__)); \
  } while (0)
