#pragma once
#include "herd/core/cxx20.hpp"  // C++20 or one clear error
/// @file launch.hpp
/// The launch layer's backend query and counters (plain C++; every build). Every kernel of
/// herd is launched through `herd::gpu::launch` (herd/core/cuda/launch.hpp, CUDA builds),
/// which runs it on the CUDA device or, when the host backend is linked in (the `host-emu`
/// test executables, docs/nn.md "The launch layer"), on the CPU. The counters say how much
/// device work an operation issued and how often it made the host wait, so that tests can
/// hold budgets of host round trips without a GPU.

#include <cstdint>
#include <string>

namespace herd::gpu {

/// Which implementation runs kernels and the CUDA runtime calls of this process.
enum class Backend {
  kNone,  ///< CPU-only build: no CUDA path at all
  kCuda,  ///< the CUDA runtime and a CUDA device
  kHost,  ///< the host backend: kernels run on the CPU over the same grid (host emulation)
};

/// The backend of this process: `kHost` when the host backend is linked in (it registers
/// itself before `main`), else `kCuda` in a CUDA build, else `kNone`. Thread-safe.
Backend active_backend();

/// "none", "cuda" or "host".
std::string to_string(Backend b);

/// Counts of what host code asked of the device (monotonic since the start or the last
/// `reset_launch_counters`). Kernel and graph launches are counted by the launch layer in
/// both backends; host waits and transfers are counted by the host backend's runtime (the
/// CUDA backend leaves them 0), where the `host-emu` tests read them. A graph replay counts
/// one graph launch and the transfers its copy nodes make, not its kernels again.
struct LaunchCounters {
  std::uint64_t kernel_launches = 0;  ///< kernels enqueued (cuBLAS calls count one each)
  std::uint64_t graph_launches = 0;   ///< CUDA graph replays enqueued
  /// Times the host blocked on device work: stream, event and device synchronisations,
  /// blocking copies (`cudaMemcpy`, and `cudaMemcpyAsync` from the device into pageable
  /// host memory, which CUDA completes before returning).
  std::uint64_t host_waits = 0;
  std::uint64_t h2d_copies = 0;  ///< host-to-device copies
  std::uint64_t d2h_copies = 0;  ///< device-to-host copies
  std::uint64_t d2d_copies = 0;  ///< device-to-device copies
  std::uint64_t h2d_bytes = 0;   ///< bytes copied host to device
  std::uint64_t d2h_bytes = 0;   ///< bytes copied device to host
  std::uint64_t memsets = 0;     ///< device memsets

  /// Copies across the bus in either direction.
  std::uint64_t transfers() const { return h2d_copies + d2h_copies; }
  /// Field-wise difference (counts of the operations between two snapshots).
  LaunchCounters operator-(const LaunchCounters& o) const;
  /// One line: "launches=.. graphs=.. waits=.. h2d=..(..B) d2h=..(..B) d2d=.. memsets=..".
  std::string str() const;
};

/// A snapshot of the process-wide counters. Thread-safe (each field read atomically).
LaunchCounters launch_counters();

/// Sets every counter to 0. Thread-safe; counts of operations running concurrently on other
/// threads may land on either side of the reset.
void reset_launch_counters();

/// Counts of one operation: snapshots the counters at construction; `delta()` returns what
/// was counted since (process-wide, so keep other threads' device work out of the scope).
class CounterScope {
 public:
  CounterScope() : start_(launch_counters()) {}
  /// Counts since construction.
  LaunchCounters delta() const { return launch_counters() - start_; }

 private:
  LaunchCounters start_;
};

namespace detail {
/// What a backend counts (see `LaunchCounters`).
enum class Count { kKernel, kGraph, kWait, kH2D, kD2H, kD2D, kMemset };
/// Adds one event of `what` (and `bytes` to the byte count of a copy). Thread-safe.
void count(Count what, std::uint64_t bytes = 0);
/// Called once by the host backend's runtime before `main`.
void register_host_backend();
}  // namespace detail

}  // namespace herd::gpu
