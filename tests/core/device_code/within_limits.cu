// Self-test input of scripts/check_device_code.py: a small kernel with a non-inlined,
// non-recursive device function; the checker must accept it.

__device__ __noinline__ double square(double v) { return v * v; }

__global__ void within_limits_kernel(double* out, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) out[i] = square(out[i]);
}
