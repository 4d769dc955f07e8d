#pragma once
// The device context of the nn CUDA backend (CUDA builds only; internal, not installed):
// the nn stream of each device, the current-device guard, per-thread scratch, the deferred
// input-error record and device checks of tensors. cuBLAS lives in device_blas.hpp, the
// kernels behind herd/nn/cuda/kernels.hpp; the modules' .cpp files choose between these and
// the CPU compute (cpu_compute.hpp) per call.

#include "herd/core/config.hpp"

#if HERD_HAVE_CUDA
#include <cuda_runtime_api.h>

#include <cstdint>

#include "herd/core/device.hpp"
#include "herd/nn/tensor.hpp"

namespace herd::nn::detail {

/// Devices the nn backend serves: indices [0, kMaxDevices).
inline constexpr int kMaxDevices = 64;
/// The index of CUDA device `d`, checked.
/// @throws InputError unless `d` is a CUDA device with an index in [0, kMaxDevices).
int device_slot(Device d);

/// The nn stream of CUDA device `d` (one per device and process, created on first use as
/// a blocking stream, so the legacy default stream also orders against it). Every module,
/// loss, head and optimizer enqueues its device work here. Thread-safe.
cudaStream_t dev_stream(Device d);

/// Makes `d` the current CUDA device for the scope, restoring the previous one.
/// @throws InputError naming `d` and what the runtime reports (no driver, no GPU, or how
///         many devices there are) when `d` is not a usable device of this machine;
///         CudaError on other CUDA failures.
class DevGuard {
 public:
  explicit DevGuard(Device d);
  ~DevGuard();
  DevGuard(const DevGuard&) = delete;
  DevGuard& operator=(const DevGuard&) = delete;

 private:
  int previous_ = 0;
  bool changed_ = false;
};

/// One device double of scratch per thread and device (for reductions), valid until the
/// thread's next call.
double* dev_scratch(Device d);
/// Waits for the nn stream of `d`, reports deferred input errors (`check_dev_errors`) and
/// returns the device double `*p`.
double dev_read(Device d, const double* p);

/// Codes of the input errors that kernels find on the device (`dev_error_record`).
enum DevErrorCode : int { kDevErrNone = 0, kDevErrCrossEntropyTarget = 1, kDevErrCategoricalAction = 2 };

/// The deferred input-error record of device `d`: four int64 {code, index, value, bound}
/// in mapped pinned host memory (zero-copy), as a device pointer kernels write to. A
/// kernel that finds a bad input (a class index out of range) claims the record with
/// atomicCAS on `code` (the first finder wins) and fills the rest; the host reports it at
/// the next synchronisation of the nn stream (`check_dev_errors`), so input checks need no
/// host wait of their own. Allocated with the device's nn stream. Thread-safe.
std::int64_t* dev_error_record(Device d);
/// Reports and clears the error record of `d`; call after a synchronisation of its nn
/// stream. No-op when the record is clear.
/// @throws InputError naming the function, the argument entry, its value and the range,
///         e.g. "nn::CrossEntropyLoss::forward: targets[4] is 5, but must be in [0, 5)".
void check_dev_errors(Device d);

/// Throws InputError naming `who` unless `t` is defined and on `d`.
void require_device(const Tensor& t, Device d, const char* who);

}  // namespace herd::nn::detail
#endif
