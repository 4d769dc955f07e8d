// nn CUDA kernels; launchers declared in herd/nn/cuda/kernels.hpp. CPU
// references: the CPU modules and optimizers of nn (see the header).
#include <cmath>

#include "herd/core/cuda/cuda_check.hpp"
#include "herd/core/cuda/launch.hpp"
#include "herd/nn/cuda/kernels.hpp"

namespace herd::nn::cuda {
namespace {

constexpr unsigned kThreads = 256;

unsigned blocks_for(std::int64_t n) {
  const std::int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 65535 * 16 ? b : 65535 * 16);
}

template <class T>
__global__ void bias_add_kernel(T* y, const T* b, std::int64_t n, std::int64_t cols) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    y[i] += b[i % cols];
}

// Block (32, 8): threadIdx.x picks a column of a 32-wide tile, threadIdx.y strides rows.
// Deterministic (no atomics): only the blocks of row 0 of the grid work, each covering all
// rows of its 32 columns; the 8 partial sums of a column meet in shared memory and are
// added in a fixed order, then written once. The other blocks return.
template <class T>
__global__ void bias_grad_kernel(const T* gy, T* gb, std::int64_t rows, std::int64_t cols) {
  if (blockIdx.y != 0) return;
  __shared__ T part[8][32];
  const std::int64_t c = blockIdx.x * 32 + static_cast<std::int64_t>(threadIdx.x);
  T acc = 0;
  if (c < cols)
    for (std::int64_t r = threadIdx.y; r < rows; r += 8) acc += gy[r * cols + c];
  part[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && c < cols) {
    T s = 0;
    for (int k = 0; k < 8; ++k) s += part[k][threadIdx.x];
    gb[c] += s;
  }
}

template <class T>
__device__ T act_f(int act, T x, T alpha) {
  if (act == 0) return x > T(0) ? x : T(0);
  if (act == 1) return tanh(x);
  return x > T(0) ? x : alpha * (exp(x) - T(1));
}

template <class T>
__global__ void act_forward_kernel(int act, const T* x, T* y, std::int64_t n, T alpha) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    y[i] = act_f(act, x[i], alpha);
}

template <class T>
__global__ void act_backward_kernel(int act, const T* x, const T* y, const T* gy, T* gx, std::int64_t n, T alpha) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    T d;
    if (act == 0) d = y[i] > T(0) ? T(1) : T(0);
    else if (act == 1) d = T(1) - y[i] * y[i];
    else d = x[i] > T(0) ? T(1) : y[i] + alpha;
    gx[i] = act == 0 && d == T(0) ? T(0) : gy[i] * d;
  }
}

template <class T>
__device__ T block_reduce(T v, bool is_max, T* shared) {
  const unsigned lane = threadIdx.x;
  shared[lane] = v;
  __syncthreads();
  for (unsigned stride = blockDim.x / 2; stride > 0; stride /= 2) {
    if (lane < stride) {
      const T o = shared[lane + stride];
      shared[lane] = is_max ? (o > shared[lane] ? o : shared[lane]) : shared[lane] + o;
    }
    __syncthreads();
  }
  const T r = shared[0];
  __syncthreads();
  return r;
}

// One block (kThreads, a power of two) per row.
template <class T>
__global__ void softmax_kernel(const T* x, T* y, std::int64_t cols, bool take_log) {
  __shared__ T shared[kThreads];
  const T* xr = x + blockIdx.x * cols;
  T* yr = y + blockIdx.x * cols;
  T mx = -INFINITY;
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) mx = xr[c] > mx ? xr[c] : mx;
  mx = block_reduce(mx, true, shared);
  T sum = 0;
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) sum += exp(xr[c] - mx);
  sum = block_reduce(sum, false, shared);
  const T lse = ::log(sum);
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x)
    yr[c] = take_log ? xr[c] - mx - lse : exp(xr[c] - mx) / sum;
}

// Deterministic (no atomics): block 0 alone sums all n terms in a fixed order (block
// stride, then the fixed tree of block_reduce) and adds the total once; the other blocks
// of the launch return.
template <class T>
__global__ void sq_err_kernel(const T* p, const T* t, double* sum, std::int64_t n) {
  if (blockIdx.x != 0) return;
  __shared__ double shared[kThreads];
  double acc = 0;
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const double d = static_cast<double>(p[i]) - static_cast<double>(t[i]);
    acc += d * d;
  }
  acc = block_reduce(acc, false, shared);
  if (threadIdx.x == 0) *sum += acc;
}

template <class T>
__global__ void mse_backward_kernel(const T* p, const T* t, T* gx, std::int64_t n, T k) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    gx[i] = k * (p[i] - t[i]);
}

template <class T>
__global__ void scale_kernel(T* x, T a, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    x[i] *= a;
}

template <class T>
__global__ void adam_kernel(T* w, const T* g, T* m, T* v, std::int64_t n, T b1, T b2, T step_size, T inv_bc2_sqrt,
                            T eps, const std::int32_t* skip) {
  if (skip && *skip) return;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const T gi = g[i];
    const T mi = b1 * m[i] + (T(1) - b1) * gi;
    const T vi = b2 * v[i] + (T(1) - b2) * gi * gi;
    m[i] = mi;
    v[i] = vi;
    w[i] -= step_size * mi / (sqrt(vi) * inv_bc2_sqrt + eps);
  }
}

template <class T>
__global__ void sgd_kernel(T* w, const T* g, T* buf, std::int64_t n, T lr, T mom, T damp_keep, bool nesterov,
                           bool first, const std::int32_t* skip) {
  if (skip && *skip) return;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const T gi = g[i];
    if (buf == nullptr) {
      w[i] -= lr * gi;
      continue;
    }
    const T b = first ? gi : mom * buf[i] + damp_keep * gi;
    buf[i] = b;
    w[i] -= nesterov ? lr * (gi + mom * b) : lr * b;
  }
}

void check_launch() { HERD_CUDA_CHECK(cudaGetLastError()); }

template <class T>
void bias_add_t(T* y, const T* b, std::int64_t rows, std::int64_t cols, cudaStream_t s) {
  const std::int64_t n = rows * cols;
  if (n == 0) return;
  herd::gpu::launch(bias_add_kernel<T>, blocks_for(n), kThreads, 0, s, y, b, n, cols);
  check_launch();
}

template <class T>
void bias_grad_t(const T* gy, T* gb, std::int64_t rows, std::int64_t cols, cudaStream_t s) {
  if (rows == 0 || cols == 0) return;
  const std::int64_t gy_blocks = (rows + 63) / 64;
  dim3 grid(static_cast<unsigned>((cols + 31) / 32), static_cast<unsigned>(gy_blocks < 256 ? gy_blocks : 256));
  herd::gpu::launch(bias_grad_kernel<T>, grid, dim3(32, 8), 0, s, gy, gb, rows, cols);
  check_launch();
}

template <class T>
void act_forward_t(Act act, const T* x, T* y, std::int64_t n, double alpha, cudaStream_t s) {
  if (n == 0) return;
  herd::gpu::launch(act_forward_kernel<T>, blocks_for(n), kThreads, 0, s, static_cast<int>(act), x, y, n,
                    static_cast<T>(alpha));
  check_launch();
}

template <class T>
void act_backward_t(Act act, const T* x, const T* y, const T* gy, T* gx, std::int64_t n, double alpha, cudaStream_t s) {
  if (n == 0) return;
  herd::gpu::launch(act_backward_kernel<T>, blocks_for(n), kThreads, 0, s, static_cast<int>(act), x, y, gy, gx, n,
                    static_cast<T>(alpha));
  check_launch();
}

template <class T>
void softmax_t(const T* x, T* y, std::int64_t rows, std::int64_t cols, bool log, cudaStream_t s) {
  if (rows == 0 || cols == 0) return;
  herd::gpu::launch(softmax_kernel<T>, static_cast<unsigned>(rows), kThreads, 0, s, x, y, cols, log);
  check_launch();
}

template <class T>
void sq_err_t(const T* p, const T* t, double* sum, std::int64_t n, cudaStream_t s) {
  HERD_CUDA_CHECK(cudaMemsetAsync(sum, 0, sizeof(double), s));
  if (n == 0) return;
  herd::gpu::launch(sq_err_kernel<T>, blocks_for(n) < 1024 ? blocks_for(n) : 1024, kThreads, 0, s, p, t, sum, n);
  check_launch();
}

template <class T>
void mse_backward_t(const T* p, const T* t, T* gx, std::int64_t n, double scale_, cudaStream_t s) {
  if (n == 0) return;
  herd::gpu::launch(mse_backward_kernel<T>, blocks_for(n), kThreads, 0, s, p, t, gx, n,
                    static_cast<T>(2 * scale_ / static_cast<double>(n)));
  check_launch();
}

template <class T>
void scale_t(T* x, double a, std::int64_t n, cudaStream_t s) {
  if (n == 0) return;
  herd::gpu::launch(scale_kernel<T>, blocks_for(n), kThreads, 0, s, x, static_cast<T>(a), n);
  check_launch();
}

template <class T>
void adam_t(T* w, const T* g, T* m, T* v, std::int64_t n, double lr, double beta1, double beta2, double eps,
            std::int64_t step, cudaStream_t s, const std::int32_t* skip) {
  if (n == 0) return;
  const double t = static_cast<double>(step);
  const double bc1 = 1 - std::pow(beta1, t), bc2 = 1 - std::pow(beta2, t);
  herd::gpu::launch(adam_kernel<T>, blocks_for(n), kThreads, 0, s, w, g, m, v, n, static_cast<T>(beta1),
                    static_cast<T>(beta2), static_cast<T>(lr / bc1), static_cast<T>(1 / std::sqrt(bc2)),
                    static_cast<T>(eps), skip);
  check_launch();
}

template <class T>
void sgd_t(T* w, const T* g, T* buf, std::int64_t n, double lr, double momentum, double dampening, bool nesterov,
           bool first, cudaStream_t s, const std::int32_t* skip) {
  if (n == 0) return;
  herd::gpu::launch(sgd_kernel<T>, blocks_for(n), kThreads, 0, s, w, g, momentum == 0 ? nullptr : buf, n,
                    static_cast<T>(lr), static_cast<T>(momentum), static_cast<T>(1 - dampening), nesterov, first, skip);
  check_launch();
}

}  // namespace

#define HERD_NN_CUDA_OVERLOADS(T)                                                                                   \
  void bias_add(T* y, const T* b, std::int64_t rows, std::int64_t cols, cudaStream_t s) {                           \
    bias_add_t(y, b, rows, cols, s);                                                                                \
  }                                                                                                                 \
  void bias_grad(const T* gy, T* gb, std::int64_t rows, std::int64_t cols, cudaStream_t s) {                        \
    bias_grad_t(gy, gb, rows, cols, s);                                                                             \
  }                                                                                                                 \
  void activation_forward(Act act, const T* x, T* y, std::int64_t n, double alpha, cudaStream_t s) {                \
    act_forward_t(act, x, y, n, alpha, s);                                                                          \
  }                                                                                                                 \
  void activation_backward(Act act, const T* x, const T* y, const T* gy, T* gx, std::int64_t n, double alpha,       \
                           cudaStream_t s) {                                                                        \
    act_backward_t(act, x, y, gy, gx, n, alpha, s);                                                                 \
  }                                                                                                                 \
  void softmax_rows(const T* x, T* y, std::int64_t rows, std::int64_t cols, bool log, cudaStream_t s) {             \
    softmax_t(x, y, rows, cols, log, s);                                                                            \
  }                                                                                                                 \
  void squared_error_sum(const T* p, const T* t, double* sum, std::int64_t n, cudaStream_t s) {                     \
    sq_err_t(p, t, sum, n, s);                                                                                      \
  }                                                                                                                 \
  void mse_backward(const T* p, const T* t, T* gx, std::int64_t n, double scale, cudaStream_t s) {                  \
    mse_backward_t(p, t, gx, n, scale, s);                                                                          \
  }                                                                                                                 \
  void scale(T* x, double a, std::int64_t n, cudaStream_t s) { scale_t(x, a, n, s); }                               \
  void adam_update(T* w, const T* g, T* m, T* v, std::int64_t n, double lr, double beta1, double beta2, double eps, \
                   std::int64_t step, cudaStream_t s, const std::int32_t* skip) {                                   \
    adam_t(w, g, m, v, n, lr, beta1, beta2, eps, step, s, skip);                                                    \
  }                                                                                                                 \
  void sgd_update(T* w, const T* g, T* buf, std::int64_t n, double lr, double momentum, double dampening,           \
                  bool nesterov, bool first, cudaStream_t s, const std::int32_t* skip) {                            \
    sgd_t(w, g, buf, n, lr, momentum, dampening, nesterov, first, s, skip);                                         \
  }

HERD_NN_CUDA_OVERLOADS(float)
HERD_NN_CUDA_OVERLOADS(double)

#undef HERD_NN_CUDA_OVERLOADS

}  // namespace herd::nn::cuda
