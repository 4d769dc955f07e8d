#include "herd/core/device.hpp"

#include <fmt/format.h>

#include "herd/core/config.hpp"
#include "herd/core/error.hpp"

#if HERD_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace herd {

std::string Device::str() const { return is_cpu() ? std::string("cpu") : fmt::format("cuda:{}", index); }

Device parse_device(const std::string& s) {
  if (s == "cpu") return Device::cpu();
  if (s == "cuda") return Device::cuda(0);
  if (s.rfind("cuda:", 0) == 0) {
    const std::string n = s.substr(5);
    if (!n.empty() && n.find_first_not_of("0123456789") == std::string::npos && n.size() < 6)
      return Device::cuda(std::stoi(n));
  }
  throw InputError(fmt::format("device is \"{}\", but must be \"cpu\", \"cuda\" or \"cuda:<n>\"", s));
}

namespace {
std::string& no_device_reason() {
  static std::string r;
  return r;
}
}  // namespace

int cuda_device_count() {
#if HERD_HAVE_CUDA
  int n = 0;
  const cudaError_t rc = cudaGetDeviceCount(&n);
  if (rc != cudaSuccess) {
    // cudaErrorInsufficientDriver without a driver (CUDA 13), cudaErrorNoDevice without a GPU.
    no_device_reason() = cudaGetErrorString(rc);
    cudaGetLastError();  // clear the sticky-free error state
    return 0;
  }
  if (n == 0) no_device_reason() = "no CUDA device visible";
  return n;
#else
  no_device_reason() = "built without CUDA";
  return 0;
#endif
}

std::vector<CudaDeviceInfo> cuda_devices() {
  std::vector<CudaDeviceInfo> out;
#if HERD_HAVE_CUDA
  const int n = cuda_device_count();
  for (int i = 0; i < n; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
    out.push_back({i, p.name, p.totalGlobalMem, p.major, p.minor, p.multiProcessorCount});
  }
#endif
  return out;
}

std::string describe_devices() {
  const auto devs = cuda_devices();
  if (devs.empty()) {
    cuda_device_count();
    return fmt::format("CUDA: none ({})", no_device_reason());
  }
  std::string s;
  for (const auto& d : devs) {
    s += fmt::format("CUDA device {}: {} (sm_{}{}, {} SMs, {:.1f} GiB)\n", d.index, d.name, d.compute_major,
                     d.compute_minor, d.multiprocessors,
                     static_cast<double>(d.total_memory) / (1024.0 * 1024.0 * 1024.0));
  }
  s.pop_back();
  return s;
}

}  // namespace herd
