#pragma once
#include "herd/core/cxx20.hpp"  // C++20 or one clear error
/// @file timer.hpp
/// Wall-clock timing in seconds (steady clock). Not thread-safe per object.

#include <chrono>

namespace herd {

/// A stopwatch on `std::chrono::steady_clock`; `seconds()` since construction or `reset()`.
class Timer {
 public:
  Timer() : start_(std::chrono::steady_clock::now()) {}
  void reset() { start_ = std::chrono::steady_clock::now(); }
  /// Elapsed wall time in seconds.
  double seconds() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count(); }

 private:
  std::chrono::steady_clock::time_point start_;
};

}  // namespace herd
