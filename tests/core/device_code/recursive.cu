// Self-test input of scripts/check_device_code.py: a kernel that reaches real device
// recursion (a device function calling itself). The checker must reject this object.
#include <cstdint>

__device__ std::int64_t partitions(int n, int k) {
  if (n == 0) return 1;
  if (n < 0 || k == 0) return 0;
  return partitions(n - k, k) + partitions(n, k - 1);
}

__global__ void recursive_kernel(std::int64_t* out, int n) {
  out[threadIdx.x] = partitions(n + static_cast<int>(threadIdx.x), n);
}
