// Self-test input of scripts/check_device_code.py: kernels over its stack and
// registers x block limits (an 8 KB thread-local array indexed at run time; 64+ registers
// with a 1024-thread launch bound). The checker must reject this object.

__global__ void large_stack_kernel(double* out, int n) {
  double a[1024];
  for (int i = 0; i < 1024; ++i) a[i] = out[(i * n) & 1023];
  out[threadIdx.x] = a[static_cast<int>(out[1]) & 1023];
}

__global__ void __launch_bounds__(1024) wide_block_kernel(double* out, int n) {
  double a[24];
#pragma unroll
  for (int i = 0; i < 24; ++i) a[i] = out[i * n + threadIdx.x];
  double s = 0;
#pragma unroll
  for (int i = 0; i < 24; ++i)
#pragma unroll
    for (int j = 0; j < 24; ++j) s += a[i] * a[j] * out[(i * j) & 1023];
  out[threadIdx.x] = s;
}

// 32 KB of static shared memory: over a lowered --max-shared (ptxas itself refuses more
// than 48 KB of static shared memory, so the default limit is tested by this one, lowered).
__global__ void shared_tile_kernel(double* out) {
  __shared__ double tile[4096];
  for (int i = static_cast<int>(threadIdx.x); i < 4096; i += static_cast<int>(blockDim.x)) tile[i] = out[i];
  __syncthreads();
  out[threadIdx.x] = tile[(threadIdx.x * 7) & 4095];
}
