#include "device_context.hpp"

#include <array>
#include <cstring>
#include <mutex>
#include <string>

#include <fmt/format.h>

#include "herd/core/cuda/cuda_check.hpp"
#include "herd/core/error.hpp"

namespace herd::nn::detail {

int device_slot(Device d) {
  HERD_REQUIRE(d.is_cuda() && d.index >= 0 && d.index < kMaxDevices,
               "nn: device {} is not a CUDA device index in [0, {})", d.str(), kMaxDevices);
  return d.index;
}

namespace {

// Per-thread scratch doubles, one per device.
struct ThreadScratch {
  std::array<double*, kMaxDevices> scratch{};
  ~ThreadScratch() {
    // Best effort at thread exit (the driver may already be shut down at process exit).
    for (auto* p : scratch)
      if (p) cudaFree(p);
  }
};

ThreadScratch& thread_scratch() {
  thread_local ThreadScratch h;
  return h;
}

}  // namespace

namespace {

// A failed cudaGetDevice/cudaSetDevice for device `d`: an InputError that says the device
// is not there (no driver, no GPU, an index past the last device) and what the runtime
// found, rather than the runtime call's name and herd's source line; a CudaError for
// other failures of a device that exists.
[[noreturn]] void throw_device_failure(Device d, cudaError_t rc, const char* call, int line) {
  const int n = cuda_device_count();
  if (d.index >= n) {
    const std::string found = n == 0 ? describe_devices()
                                     : fmt::format("{} CUDA device{}: cuda:0{}", n, n == 1 ? "" : "s",
                                                   n == 1 ? std::string() : fmt::format(" to cuda:{}", n - 1));
    throw InputError(fmt::format(
        "nn: device {} is not available on this machine ({}); build modules and tensors on Device::cpu(), or on "
        "a device below herd::cuda_device_count()",
        d.str(), found));
  }
  herd::detail::throw_cuda_error(call, cudaGetErrorName(rc), cudaGetErrorString(rc), __FILE__, line);
}

}  // namespace

DevGuard::DevGuard(Device d) {
  device_slot(d);
  if (const cudaError_t rc = cudaGetDevice(&previous_); rc != cudaSuccess) {
    cudaGetLastError();
    throw_device_failure(d, rc, "cudaGetDevice(&previous_)", __LINE__);
  }
  changed_ = previous_ != d.index;
  if (changed_) {
    if (const cudaError_t rc = cudaSetDevice(d.index); rc != cudaSuccess) {
      cudaGetLastError();
      throw_device_failure(d, rc, "cudaSetDevice(d.index)", __LINE__);
    }
  }
}
DevGuard::~DevGuard() {
  if (changed_) cudaSetDevice(previous_);
}

namespace {

// The nn stream and the error record of each device, created together on first use (so
// the record exists before any stream capture).
struct DeviceState {
  cudaStream_t stream = nullptr;
  std::int64_t* record_host = nullptr;  // mapped pinned memory, 4 int64
  std::int64_t* record_dev = nullptr;   // its device address
};

DeviceState& device_state(Device d) {
  static std::mutex mu;
  static std::array<DeviceState, kMaxDevices> states{};
  const int i = device_slot(d);
  std::lock_guard<std::mutex> lock(mu);
  DeviceState& st = states[static_cast<std::size_t>(i)];
  if (!st.stream) {
    DevGuard g(d);
    void* host = nullptr;
    HERD_CUDA_CHECK(cudaHostAlloc(&host, 4 * sizeof(std::int64_t), cudaHostAllocMapped | cudaHostAllocPortable));
    std::memset(host, 0, 4 * sizeof(std::int64_t));
    void* dev = nullptr;
    HERD_CUDA_CHECK(cudaHostGetDevicePointer(&dev, host, 0));
    st.record_host = static_cast<std::int64_t*>(host);
    st.record_dev = static_cast<std::int64_t*>(dev);
    HERD_CUDA_CHECK(cudaStreamCreate(&st.stream));
  }
  return st;
}

}  // namespace

cudaStream_t dev_stream(Device d) { return device_state(d).stream; }

std::int64_t* dev_error_record(Device d) { return device_state(d).record_dev; }

void check_dev_errors(Device d) {
  volatile std::int64_t* r = device_state(d).record_host;
  const std::int64_t code = r[0];
  if (code == kDevErrNone) return;
  const std::int64_t index = r[1], value = r[2], bound = r[3];
  r[1] = 0;
  r[2] = 0;
  r[3] = 0;
  r[0] = 0;
  const char* who = code == kDevErrCrossEntropyTarget ? "nn::CrossEntropyLoss::forward" : "nn::Categorical::log_prob";
  const char* what = code == kDevErrCrossEntropyTarget ? "targets" : "actions";
  throw InputError(
      fmt::format("{}: {}[{}] is {}, but must be in [0, {}) (found on {} and reported at the next "
                  "synchronisation)",
                  who, what, index, value, bound, d.str()));
}

double* dev_scratch(Device d) {
  auto& p = thread_scratch().scratch[static_cast<std::size_t>(device_slot(d))];
  if (!p) {
    DevGuard g(d);
    HERD_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p), 8 * sizeof(double)));
  }
  return p;
}

double dev_read(Device d, const double* p) {
  double v = 0;
  cudaStream_t s = dev_stream(d);
  HERD_CUDA_CHECK(cudaMemcpyAsync(&v, p, sizeof(double), cudaMemcpyDeviceToHost, s));
  HERD_CUDA_CHECK(cudaStreamSynchronize(s));
  check_dev_errors(d);
  return v;
}

void require_device(const Tensor& t, Device d, const char* who) {
  HERD_REQUIRE(t.defined() && t.device() == d, "{}: tensor {} must be on {}", who, t.str(), d.str());
}

}  // namespace herd::nn::detail
