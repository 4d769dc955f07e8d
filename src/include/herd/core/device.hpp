#pragma once
#include "herd/core/cxx20.hpp"  // C++20 or one clear error
/// @file device.hpp
/// Where tensors and batched chains live, and the run-time CUDA device query.

#include <cstddef>
#include <string>
#include <vector>

namespace herd {

/// Kind of memory a buffer lives in.
enum class DeviceKind { kCpu, kCuda };

/// A device: the host, or CUDA device `index`. A plain value; thread-safe.
struct Device {
  DeviceKind kind = DeviceKind::kCpu;
  int index = 0;

  static Device cpu() { return {}; }
  static Device cuda(int i = 0) { return {DeviceKind::kCuda, i}; }
  bool is_cpu() const { return kind == DeviceKind::kCpu; }
  bool is_cuda() const { return kind == DeviceKind::kCuda; }
  friend bool operator==(const Device&, const Device&) = default;
  /// "cpu" or "cuda:<index>".
  std::string str() const;
};

/// Parses "cpu", "cuda" or "cuda:<n>". @throws InputError naming the value otherwise.
Device parse_device(const std::string& s);

/// One CUDA device as the runtime reports it.
struct CudaDeviceInfo {
  int index = 0;
  std::string name;
  std::size_t total_memory = 0;  ///< bytes
  int compute_major = 0, compute_minor = 0;
  int multiprocessors = 0;
};

/// Number of usable CUDA devices: 0 in a CPU-only build, without a driver
/// (`cudaErrorInsufficientDriver`, `cudaErrorNoDevice`) or with CUDA_VISIBLE_DEVICES empty.
/// Never throws. Thread-safe.
int cuda_device_count();

/// Properties of every usable CUDA device (empty when `cuda_device_count()` is 0).
std::vector<CudaDeviceInfo> cuda_devices();

/// One line per device, or "CUDA: none (<reason>)".
std::string describe_devices();

/// Exit code of a `[gpu]` test program on a machine without a CUDA device; CTest maps it to
/// "Skipped" (`SKIP_RETURN_CODE 77`, DESIGN.md §5).
inline constexpr int kSkipReturnCode = 77;

}  // namespace herd
