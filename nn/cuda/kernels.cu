// The nn CUDA kernels and their launchers (declared, with their CPU references, in
// herd/nn/cuda/kernels.hpp). nvcc compiles this file for the device; the host backend
// (label host-emu) compiles the same source as C++ through nn/cuda/host/kernels.cpp.
#include <cmath>
#include <utility>

#include "herd/core/cuda/cuda_check.hpp"
#include "herd/core/cuda/launch.hpp"
#include "herd/core/rng.hpp"
#include "herd/nn/cuda/kernels.hpp"

#include "../categorical_draw.hpp"

namespace herd::nn::cuda {
namespace {

constexpr unsigned kThreads = 256;
constexpr double kLog2Pi = 1.8378770664093454835606594728112;

unsigned blocks_for(std::int64_t n) {
  const std::int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 65535 * 16 ? (b > 0 ? b : 1) : 65535 * 16);
}

void check_launch() { HERD_CUDA_CHECK(cudaGetLastError()); }

// Enqueues `kernel` on `s` over `n` grid-stride items (blocks_for(n) blocks of kThreads;
// nothing when n is 0) and checks the launch.
template <class... P, class... A>
void launch_over(std::int64_t n, void (*kernel)(P...), cudaStream_t s, A&&... args) {
  if (n == 0) return;
  herd::gpu::launch(kernel, blocks_for(n), kThreads, 0, s, std::forward<A>(args)...);
  check_launch();
}

void zero_double(double* p, cudaStream_t s) { HERD_CUDA_CHECK(cudaMemsetAsync(p, 0, sizeof(double), s)); }

__device__ inline std::int64_t gid() { return blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; }
__device__ inline std::int64_t gstride() { return static_cast<std::int64_t>(gridDim.x) * blockDim.x; }

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

// Deterministic sums (no floating-point atomics, whose order of arrival varies from run to
// run): block 0 alone adds term(i) for i in [0, n) in a fixed order (thread t takes i = t,
// t + blockDim.x, ...; then a fixed pairwise tree over the threads) and thread 0 adds the
// total into *out; the other blocks of the launch return. The same inputs give the same
// bits on every run and launch. Call from every thread of a block (it has __syncthreads).
template <class F>
__device__ inline void block0_sum(std::int64_t n, double k, double* out, const F& term) {
  if (blockIdx.x != 0) return;
  __shared__ double buf[kThreads];
  double acc = 0;
  for (std::int64_t i = threadIdx.x; i < n; i += blockDim.x) acc += term(i);
  buf[threadIdx.x] = acc;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) buf[threadIdx.x] += buf[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) *out += buf[0] * k;
}

// Claims the error record `err` ({code, index, value, bound}) for the first offender.
__device__ inline void report_index_error(std::int64_t* err, int code, std::int64_t index, std::int64_t value,
                                          std::int64_t bound) {
  if (!err) return;
  auto* c = reinterpret_cast<unsigned long long*>(err);
  if (atomicCAS(c, 0ULL, static_cast<unsigned long long>(code)) == 0ULL) {
    err[1] = index;
    err[2] = value;
    err[3] = bound;
    __threadfence_system();
  }
}

// ---- Layers: Linear bias, activations, softmax, LayerNorm, Conv2d.

template <class T>
__global__ void bias_add_kernel(T* y, const T* b, std::int64_t n, std::int64_t cols) {
  for (std::int64_t i = gid(); i < n; i += gstride()) y[i] += b[i % cols];
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
  if (act == 1) return ::tanh(x);
  return x > T(0) ? x : alpha * (::exp(x) - T(1));
}

template <class T>
__global__ void act_forward_kernel(int act, const T* x, T* y, std::int64_t n, T alpha) {
  for (std::int64_t i = gid(); i < n; i += gstride()) y[i] = act_f(act, x[i], alpha);
}

template <class T>
__global__ void act_backward_kernel(int act, const T* x, const T* y, const T* gy, T* gx, std::int64_t n, T alpha) {
  for (std::int64_t i = gid(); i < n; i += gstride()) {
    T d;
    if (act == 0) d = y[i] > T(0) ? T(1) : T(0);
    else if (act == 1) d = T(1) - y[i] * y[i];
    else d = x[i] > T(0) ? T(1) : y[i] + alpha;
    gx[i] = act == 0 && d == T(0) ? T(0) : gy[i] * d;
  }
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
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x) sum += ::exp(xr[c] - mx);
  sum = block_reduce(sum, false, shared);
  const T lse = ::log(sum);
  for (std::int64_t c = threadIdx.x; c < cols; c += blockDim.x)
    yr[c] = take_log ? xr[c] - mx - lse : ::exp(xr[c] - mx) / sum;
}

template <class T>
__global__ void softmax_backward_kernel(const T* y, const T* gy, T* gx, std::int64_t rows, std::int64_t cols,
                                        bool log) {
  for (std::int64_t r = gid(); r < rows; r += gstride()) {
    const T* yr = y + r * cols;
    const T* gr = gy + r * cols;
    T* xr = gx + r * cols;
    T s = 0;
    if (log) {
      for (std::int64_t c = 0; c < cols; ++c) s += gr[c];
      for (std::int64_t c = 0; c < cols; ++c) xr[c] = gr[c] - ::exp(yr[c]) * s;
    } else {
      for (std::int64_t c = 0; c < cols; ++c) s += yr[c] * gr[c];
      for (std::int64_t c = 0; c < cols; ++c) xr[c] = yr[c] * (gr[c] - s);
    }
  }
}

template <class T>
__global__ void ln_forward_kernel(const T* x, const T* w, const T* b, T* y, T* xhat, T* rstd, std::int64_t rows,
                                  std::int64_t F, T eps) {
  for (std::int64_t r = gid(); r < rows; r += gstride()) {
    const T* xr = x + r * F;
    T* hr = xhat + r * F;
    T mean = 0;
    for (std::int64_t c = 0; c < F; ++c) mean += xr[c];
    mean /= static_cast<T>(F);
    T var = 0;
    for (std::int64_t c = 0; c < F; ++c) {
      hr[c] = xr[c] - mean;
      var += hr[c] * hr[c];
    }
    var /= static_cast<T>(F);
    const T rs = T(1) / ::sqrt(var + eps);
    rstd[r] = rs;
    for (std::int64_t c = 0; c < F; ++c) {
      hr[c] *= rs;
      y[r * F + c] = w ? hr[c] * w[c] + b[c] : hr[c];
    }
  }
}

template <class T>
__global__ void ln_backward_kernel(const T* gy, const T* xhat, const T* rstd, const T* w, T* gw, T* gb, T* gx,
                                   std::int64_t rows, std::int64_t F) {
  for (std::int64_t r = gid(); r < rows; r += gstride()) {
    const T* g = gy + r * F;
    const T* h = xhat + r * F;
    T* o = gx + r * F;
    T m1 = 0, m2 = 0;
    for (std::int64_t c = 0; c < F; ++c) {
      T d = g[c];
      if (w) d *= w[c];
      o[c] = d;
      m1 += d;
      m2 += d * h[c];
    }
    m1 /= static_cast<T>(F);
    m2 /= static_cast<T>(F);
    for (std::int64_t c = 0; c < F; ++c) o[c] = rstd[r] * (o[c] - m1 - h[c] * m2);
  }
  // Weight and bias gradients sum over rows: block 0, one thread per feature, rows in
  // order (deterministic; no atomics).
  if (!w || blockIdx.x != 0) return;
  for (std::int64_t c = threadIdx.x; c < F; c += blockDim.x) {
    T sw = 0, sb = 0;
    for (std::int64_t r = 0; r < rows; ++r) {
      sw += gy[r * F + c] * xhat[r * F + c];
      sb += gy[r * F + c];
    }
    gw[c] += sw;
    gb[c] += sb;
  }
}

template <class T>
__global__ void im2col_kernel(const T* x, T* col, std::int64_t C, std::int64_t H, std::int64_t W, std::int64_t kh,
                              std::int64_t kw, std::int64_t stride, std::int64_t pad, std::int64_t ho,
                              std::int64_t wo) {
  const std::int64_t P = ho * wo, total = C * kh * kw * P;
  for (std::int64_t e = gid(); e < total; e += gstride()) {
    const std::int64_t k = e / P, q = e % P;
    const std::int64_t c = k / (kh * kw), ij = k % (kh * kw), i = ij / kw, j = ij % kw;
    const std::int64_t y = q / wo, xo = q % wo;
    const std::int64_t iy = y * stride - pad + i, ix = xo * stride - pad + j;
    col[e] = (iy >= 0 && iy < H && ix >= 0 && ix < W) ? x[(c * H + iy) * W + ix] : T(0);
  }
}

template <class T>
__global__ void col2im_kernel(const T* col, T* x, std::int64_t C, std::int64_t H, std::int64_t W, std::int64_t kh,
                              std::int64_t kw, std::int64_t stride, std::int64_t pad, std::int64_t ho,
                              std::int64_t wo) {
  const std::int64_t P = ho * wo, total = C * H * W;
  for (std::int64_t e = gid(); e < total; e += gstride()) {
    const std::int64_t c = e / (H * W), iy = (e / W) % H, ix = e % W;
    T acc = 0;
    // Output row y reads input row iy through kernel row i when y stride - pad + i == iy.
    for (std::int64_t i = 0; i < kh; ++i) {
      const std::int64_t ty = iy + pad - i;
      if (ty < 0 || ty % stride != 0) continue;
      const std::int64_t y = ty / stride;
      if (y >= ho) continue;
      for (std::int64_t j = 0; j < kw; ++j) {
        const std::int64_t tx = ix + pad - j;
        if (tx < 0 || tx % stride != 0) continue;
        const std::int64_t xo = tx / stride;
        if (xo >= wo) continue;
        acc += col[((c * kh + i) * kw + j) * P + y * wo + xo];
      }
    }
    x[e] = acc;
  }
}

template <class T>
__global__ void conv_bias_add_kernel(T* y, const T* b, std::int64_t N, std::int64_t O, std::int64_t P) {
  for (std::int64_t e = gid(); e < N * O * P; e += gstride()) y[e] += b[(e / P) % O];
}

// One block per output channel o (grid-stride over channels); the block sums gy[n, o, :].
template <class T>
__global__ void conv_bias_grad_kernel(const T* gy, T* gb, std::int64_t N, std::int64_t O, std::int64_t P) {
  __shared__ double buf[kThreads];
  for (std::int64_t o = blockIdx.x; o < O; o += gridDim.x) {
    double acc = 0;
    for (std::int64_t e = threadIdx.x; e < N * P; e += blockDim.x) {
      const std::int64_t n = e / P, q = e % P;
      acc += static_cast<double>(gy[(n * O + o) * P + q]);
    }
    buf[threadIdx.x] = acc;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
      if (threadIdx.x < s) buf[threadIdx.x] += buf[threadIdx.x + s];
      __syncthreads();
    }
    if (threadIdx.x == 0) gb[o] += static_cast<T>(buf[0]);
    __syncthreads();
  }
}

// ---- Element-wise.

template <class T>
__global__ void add_kernel(const T* a, const T* b, T* y, std::int64_t n) {
  for (std::int64_t i = gid(); i < n; i += gstride()) y[i] = a[i] + b[i];
}

template <class T>
__global__ void exp_kernel(const T* x, T* y, std::int64_t n) {
  for (std::int64_t i = gid(); i < n; i += gstride()) y[i] = ::exp(x[i]);
}

template <class T>
__global__ void scale_kernel(T* x, T a, std::int64_t n) {
  for (std::int64_t i = gid(); i < n; i += gstride()) x[i] *= a;
}

// ---- Losses.

// Deterministic (no atomics): block 0 alone sums all n terms (block0_sum, fixed order).
template <class T>
__global__ void sq_err_kernel(const T* p, const T* t, double* sum, std::int64_t n) {
  block0_sum(n, 1.0, sum, [&](std::int64_t i) {
    const double d = static_cast<double>(p[i]) - static_cast<double>(t[i]);
    return d * d;
  });
}

template <class T>
__global__ void mse_backward_kernel(const T* p, const T* t, T* gx, std::int64_t n, T k) {
  for (std::int64_t i = gid(); i < n; i += gstride()) gx[i] = k * (p[i] - t[i]);
}

template <class T>
__global__ void diff_sq_kernel(const T* p, const T* t, T* d, double* sum, std::int64_t n, double k) {
  for (std::int64_t i = gid(); i < n; i += gstride()) d[i] = p[i] - t[i];
  block0_sum(n, k, sum, [&](std::int64_t i) {
    const T di = p[i] - t[i];
    return static_cast<double>(di) * static_cast<double>(di);
  });
}

template <class T>
__global__ void huber_kernel(const T* d, double* sum, std::int64_t n, double delta, double k) {
  block0_sum(n, k, sum, [&](std::int64_t i) {
    const double a = fabs(static_cast<double>(d[i]));
    return a < delta ? 0.5 * a * a : delta * (a - 0.5 * delta);
  });
}

template <class T>
__global__ void scaled_clamp_kernel(const T* d, T* g, std::int64_t n, T k, T delta) {
  for (std::int64_t i = gid(); i < n; i += gstride()) {
    T v = d[i];
    if (delta > T(0)) v = v < -delta ? -delta : (v > delta ? delta : v);
    g[i] = v * k;
  }
}

template <class T>
__global__ void gather_kernel(const T* lp, const std::int64_t* idx, T* out, double* sum, std::int64_t rows,
                              std::int64_t cols, double k, std::int64_t* err, int code) {
  for (std::int64_t r = gid(); r < rows; r += gstride()) {
    const std::int64_t c = idx[r];
    T v;
    if (c >= 0 && c < cols) {
      v = lp[r * cols + c];
    } else {
      v = static_cast<T>(nan(""));
      report_index_error(err, code, r, c, cols);
    }
    if (out) out[r] = v;
  }
  // Every thread of the block takes part in the reduction (it has __syncthreads).
  if (sum)
    block0_sum(rows, k, sum, [&](std::int64_t r) {
      const std::int64_t c = idx[r];
      return c >= 0 && c < cols ? static_cast<double>(lp[r * cols + c]) : static_cast<double>(nan(""));
    });
}

template <class T>
__global__ void ce_backward_kernel(const T* lp, const std::int64_t* t, T* g, std::int64_t rows, std::int64_t cols,
                                   T k) {
  for (std::int64_t i = gid(); i < rows * cols; i += gstride()) {
    const std::int64_t r = i / cols, c = i % cols;
    g[i] = ::exp(lp[i]) * k - (c == t[r] ? k : T(0));
  }
}

// ---- Heads: Categorical, Gaussian.

template <class T>
__global__ void argmax_rows_kernel(const T* x, std::int64_t* out, std::int64_t rows, std::int64_t cols) {
  for (std::int64_t r = gid(); r < rows; r += gstride()) {
    const T* xr = x + r * cols;
    std::int64_t best = 0;
    for (std::int64_t c = 1; c < cols; ++c)
      if (xr[c] > xr[best]) best = c;
    out[r] = best;
  }
}

template <class T>
__global__ void cat_entropy_kernel(const T* p, const T* lp, T* h, std::int64_t rows, std::int64_t cols) {
  for (std::int64_t r = gid(); r < rows; r += gstride()) {
    T s = 0;
    for (std::int64_t c = 0; c < cols; ++c) s += p[r * cols + c] * lp[r * cols + c];
    h[r] = -s;
  }
}

template <class T>
__global__ void cat_lp_backward_kernel(const T* p, const std::int64_t* a, const T* g, T* gl, std::int64_t rows,
                                       std::int64_t cols) {
  for (std::int64_t i = gid(); i < rows * cols; i += gstride()) {
    const std::int64_t r = i / cols, c = i % cols;
    gl[i] += g[r] * ((c == a[r] ? T(1) : T(0)) - p[i]);
  }
}

template <class T>
__global__ void cat_ent_backward_kernel(const T* p, const T* lp, const T* g, T* gl, std::int64_t rows,
                                        std::int64_t cols) {
  for (std::int64_t r = gid(); r < rows; r += gstride()) {
    const T* pr = p + r * cols;
    const T* lr = lp + r * cols;
    T h = 0;
    for (std::int64_t c = 0; c < cols; ++c) h -= pr[c] * lr[c];
    for (std::int64_t c = 0; c < cols; ++c) gl[r * cols + c] -= g[r] * pr[c] * (lr[c] + h);
  }
}

template <class T>
__global__ void gauss_lp_kernel(const T* a, const T* mu, const T* ls, T* out, std::int64_t rows, std::int64_t dim) {
  for (std::int64_t r = gid(); r < rows; r += gstride()) {
    T q = 0, sls = 0;
    for (std::int64_t d = 0; d < dim; ++d) {
      const T e = a[r * dim + d] - mu[r * dim + d];
      q += e * e * ::exp(T(-2) * ls[d]);
      sls += ls[d];
    }
    out[r] = T(-0.5) * q - (sls + static_cast<T>(0.5 * static_cast<double>(dim) * kLog2Pi));
  }
}

template <class T>
__global__ void gauss_entropy_kernel(const T* ls, T* out, std::int64_t rows, std::int64_t dim) {
  for (std::int64_t r = gid(); r < rows; r += gstride()) {
    T sls = 0;
    for (std::int64_t d = 0; d < dim; ++d) sls += ls[d];
    out[r] = sls + static_cast<T>(static_cast<double>(dim) * 0.5 * (1.0 + kLog2Pi));
  }
}

template <class T>
__global__ void gauss_lp_backward_kernel(const T* a, const T* mu, const T* ls, const T* g, T* gmu, T* gls,
                                         std::int64_t rows, std::int64_t dim) {
  for (std::int64_t i = gid(); i < rows * dim; i += gstride()) {
    const std::int64_t r = i / dim, d = i % dim;
    const T inv_var = ::exp(T(-2) * ls[d]);
    const T e = a[i] - mu[i];
    gmu[i] += g[r] * e * inv_var;
  }
  // The log-std gradient sums over rows: block 0, one thread per column, rows in order
  // (deterministic; no atomics).
  if (blockIdx.x != 0) return;
  for (std::int64_t d = threadIdx.x; d < dim; d += blockDim.x) {
    const T inv_var = ::exp(T(-2) * ls[d]);
    T acc = 0;
    for (std::int64_t r = 0; r < rows; ++r) {
      const T e = a[r * dim + d] - mu[r * dim + d];
      acc += g[r] * (e * e * inv_var - T(1));
    }
    gls[d] += acc;
  }
}

// Column sums over rows by block 0 alone, one thread per column, rows in order.
template <class T>
__global__ void gauss_ent_backward_kernel(const T* g, T* gls, std::int64_t rows, std::int64_t dim) {
  if (blockIdx.x != 0) return;
  for (std::int64_t d = threadIdx.x; d < dim; d += blockDim.x) {
    T acc = 0;
    for (std::int64_t r = 0; r < rows; ++r) acc += g[r];
    gls[d] += acc;
  }
}

template <class T>
__global__ void cat_sample_kernel(const T* p, std::int64_t* out, std::int64_t rows, std::int64_t cols,
                                  std::uint64_t seed, std::uint32_t stream, int purpose, std::uint64_t index) {
  for (std::int64_t r = gid(); r < rows; r += gstride()) {
    const RngStream rs(seed, stream + static_cast<std::uint32_t>(r), static_cast<RngPurpose>(purpose));
    out[r] = detail::categorical_draw(p + r * cols, cols, rs.uniform(index));
  }
}

template <class T>
__global__ void gauss_sample_kernel(const T* mu, const T* ls, T* out, std::int64_t rows, std::int64_t dim,
                                    std::uint64_t seed, std::uint32_t stream, int purpose, std::uint64_t index) {
  for (std::int64_t r = gid(); r < rows; r += gstride()) {
    RngCursor cur = RngStream(seed, stream + static_cast<std::uint32_t>(r), static_cast<RngPurpose>(purpose)).at(index);
    for (std::int64_t d = 0; d < dim; ++d)
      out[r * dim + d] =
          static_cast<T>(static_cast<double>(mu[r * dim + d]) + ::exp(static_cast<double>(ls[d])) * cur.normal());
  }
}

// ---- Optimizers and gradient clipping.

// One element of an Adam step (PyTorch's form, as `nn::Adam`): both Adam kernels.
template <class T>
__device__ inline void adam_element(T* w, const T* g, T* m, T* v, std::int64_t i, T b1, T b2, T step_size,
                                    T inv_bc2_sqrt, T eps) {
  const T gi = g[i];
  const T mi = b1 * m[i] + (T(1) - b1) * gi;
  const T vi = b2 * v[i] + (T(1) - b2) * gi * gi;
  m[i] = mi;
  v[i] = vi;
  w[i] -= step_size * mi / (::sqrt(vi) * inv_bc2_sqrt + eps);
}

template <class T>
__global__ void adam_kernel(T* w, const T* g, T* m, T* v, std::int64_t n, T b1, T b2, T step_size, T inv_bc2_sqrt,
                            T eps, const std::int32_t* skip) {
  if (skip && *skip) return;
  for (std::int64_t i = gid(); i < n; i += gstride()) adam_element(w, g, m, v, i, b1, b2, step_size, inv_bc2_sqrt, eps);
}

__global__ void adam_tick_kernel(double* hyper, double b1, double b2) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  const double t = hyper[1] + 1.0;
  hyper[1] = t;
  hyper[2] = hyper[0] / (1.0 - ::pow(b1, t));
  hyper[3] = 1.0 / ::sqrt(1.0 - ::pow(b2, t));
}

template <class T>
__global__ void adam_hyper_kernel(T* w, const T* g, T* m, T* v, std::int64_t n, const double* hyper, T b1, T b2, T eps,
                                  const std::int32_t* skip) {
  if (skip && *skip) return;
  const T step_size = static_cast<T>(hyper[2]);
  const T inv_bc2_sqrt = static_cast<T>(hyper[3]);
  for (std::int64_t i = gid(); i < n; i += gstride()) adam_element(w, g, m, v, i, b1, b2, step_size, inv_bc2_sqrt, eps);
}

template <class T>
__global__ void sgd_kernel(T* w, const T* g, T* buf, std::int64_t n, T lr, T mom, T damp_keep, bool nesterov,
                           bool first, const std::int32_t* skip) {
  if (skip && *skip) return;
  for (std::int64_t i = gid(); i < n; i += gstride()) {
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

template <class T>
__global__ void rmsprop_kernel(T* w, const T* g, T* v, T* m, std::int64_t n, T lr, T a, T eps,
                               const std::int32_t* skip) {
  if (skip && *skip) return;
  for (std::int64_t i = gid(); i < n; i += gstride()) {
    const T vi = a * v[i] + (T(1) - a) * g[i] * g[i];
    v[i] = vi;
    if (m) {  // centred: the gradient's mean comes off the second moment
      const T mi = a * m[i] + (T(1) - a) * g[i];
      m[i] = mi;
      w[i] -= lr * g[i] / (::sqrt(vi - mi * mi) + eps);
    } else {
      w[i] -= lr * g[i] / (::sqrt(vi) + eps);
    }
  }
}

template <class T>
__global__ void sum_squares_kernel(const T* x, double* acc, std::int64_t n) {
  block0_sum(n, 1.0, acc, [&](std::int64_t i) { return static_cast<double>(x[i]) * static_cast<double>(x[i]); });
}

template <class T>
__global__ void clip_by_norm_kernel(T* g, const double* sum_sq, std::int64_t n, double max_norm) {
  // The coefficient of clip_grad_norm, computed by every thread from the device sum.
  const double coef = max_norm / (::sqrt(*sum_sq) + 1e-6);
  if (!(coef < 1)) return;
  const T c = static_cast<T>(coef);
  for (std::int64_t i = gid(); i < n; i += gstride()) g[i] *= c;
}

// ---- Launchers of the float/double overloads.

template <class T>
void bias_add_t(T* y, const T* b, std::int64_t rows, std::int64_t cols, cudaStream_t s) {
  launch_over(rows * cols, bias_add_kernel<T>, s, y, b, rows * cols, cols);
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
  launch_over(n, act_forward_kernel<T>, s, static_cast<int>(act), x, y, n, static_cast<T>(alpha));
}

template <class T>
void act_backward_t(Act act, const T* x, const T* y, const T* gy, T* gx, std::int64_t n, double alpha, cudaStream_t s) {
  launch_over(n, act_backward_kernel<T>, s, static_cast<int>(act), x, y, gy, gx, n, static_cast<T>(alpha));
}

template <class T>
void softmax_t(const T* x, T* y, std::int64_t rows, std::int64_t cols, bool log, cudaStream_t s) {
  if (rows == 0 || cols == 0) return;
  herd::gpu::launch(softmax_kernel<T>, static_cast<unsigned>(rows), kThreads, 0, s, x, y, cols, log);
  check_launch();
}

template <class T>
void sq_err_t(const T* p, const T* t, double* sum, std::int64_t n, cudaStream_t s) {
  zero_double(sum, s);
  if (n == 0) return;
  herd::gpu::launch(sq_err_kernel<T>, blocks_for(n) < 1024 ? blocks_for(n) : 1024, kThreads, 0, s, p, t, sum, n);
  check_launch();
}

template <class T>
void mse_backward_t(const T* p, const T* t, T* gx, std::int64_t n, double scale_, cudaStream_t s) {
  if (n == 0) return;
  launch_over(n, mse_backward_kernel<T>, s, p, t, gx, n, static_cast<T>(2 * scale_ / static_cast<double>(n)));
}

template <class T>
void scale_t(T* x, double a, std::int64_t n, cudaStream_t s) {
  launch_over(n, scale_kernel<T>, s, x, static_cast<T>(a), n);
}

template <class T>
void adam_t(T* w, const T* g, T* m, T* v, std::int64_t n, double lr, double beta1, double beta2, double eps,
            std::int64_t step, cudaStream_t s, const std::int32_t* skip) {
  if (n == 0) return;
  const double t = static_cast<double>(step);
  const double bc1 = 1 - std::pow(beta1, t), bc2 = 1 - std::pow(beta2, t);
  launch_over(n, adam_kernel<T>, s, w, g, m, v, n, static_cast<T>(beta1), static_cast<T>(beta2),
              static_cast<T>(lr / bc1), static_cast<T>(1 / std::sqrt(bc2)), static_cast<T>(eps), skip);
}

template <class T>
void sgd_t(T* w, const T* g, T* buf, std::int64_t n, double lr, double momentum, double dampening, bool nesterov,
           bool first, cudaStream_t s, const std::int32_t* skip) {
  launch_over(n, sgd_kernel<T>, s, w, g, momentum == 0 ? nullptr : buf, n, static_cast<T>(lr), static_cast<T>(momentum),
              static_cast<T>(1 - dampening), nesterov, first, skip);
}

}  // namespace

// T is a type: it cannot be parenthesised.
// NOLINTBEGIN(bugprone-macro-parentheses)
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
// NOLINTEND(bugprone-macro-parentheses)

template <class T>
void diff_sq_sum(const T* p, const T* t, T* d, double* sum, std::int64_t n, cudaStream_t s, double k) {
  zero_double(sum, s);
  launch_over(n, diff_sq_kernel<T>, s, p, t, d, sum, n, k);
}

template <class T>
void huber_sum(const T* d, double* sum, std::int64_t n, double delta, cudaStream_t s, double k) {
  zero_double(sum, s);
  launch_over(n, huber_kernel<T>, s, d, sum, n, delta, k);
}

template <class T>
void scaled_clamp(const T* d, T* g, std::int64_t n, double k, double delta, cudaStream_t s) {
  launch_over(n, scaled_clamp_kernel<T>, s, d, g, n, static_cast<T>(k), static_cast<T>(delta));
}

template <class T>
void add(const T* a, const T* b, T* y, std::int64_t n, cudaStream_t s) {
  launch_over(n, add_kernel<T>, s, a, b, y, n);
}

template <class T>
void exp(const T* x, T* y, std::int64_t n, cudaStream_t s) {
  launch_over(n, exp_kernel<T>, s, x, y, n);
}

template <class T>
void softmax_backward(const T* y, const T* gy, T* gx, std::int64_t rows, std::int64_t cols, bool log, cudaStream_t s) {
  if (rows == 0 || cols == 0) return;
  herd::gpu::launch(softmax_backward_kernel<T>, blocks_for(rows), kThreads, 0, s, y, gy, gx, rows, cols, log);
  check_launch();
}

template <class T>
void gather_rows(const T* lp, const std::int64_t* idx, T* out, double* sum, std::int64_t rows, std::int64_t cols,
                 cudaStream_t s, double k, std::int64_t* err, int err_code) {
  if (sum) zero_double(sum, s);
  launch_over(rows, gather_kernel<T>, s, lp, idx, out, sum, rows, cols, k, err, err_code);
}

template <class T>
void argmax_rows(const T* x, std::int64_t* out, std::int64_t rows, std::int64_t cols, cudaStream_t s) {
  launch_over(rows, argmax_rows_kernel<T>, s, x, out, rows, cols);
}

template <class T>
void cross_entropy_backward(const T* lp, const std::int64_t* t, T* g, std::int64_t rows, std::int64_t cols, double k,
                            cudaStream_t s) {
  launch_over(rows * cols, ce_backward_kernel<T>, s, lp, t, g, rows, cols, static_cast<T>(k));
}

template <class T>
void categorical_entropy(const T* p, const T* lp, T* h, std::int64_t rows, std::int64_t cols, cudaStream_t s) {
  launch_over(rows, cat_entropy_kernel<T>, s, p, lp, h, rows, cols);
}

template <class T>
void categorical_log_prob_backward(const T* p, const std::int64_t* a, const T* g, T* gl, std::int64_t rows,
                                   std::int64_t cols, cudaStream_t s) {
  launch_over(rows * cols, cat_lp_backward_kernel<T>, s, p, a, g, gl, rows, cols);
}

template <class T>
void categorical_entropy_backward(const T* p, const T* lp, const T* g, T* gl, std::int64_t rows, std::int64_t cols,
                                  cudaStream_t s) {
  launch_over(rows, cat_ent_backward_kernel<T>, s, p, lp, g, gl, rows, cols);
}

template <class T>
void gaussian_log_prob(const T* a, const T* mu, const T* ls, T* out, std::int64_t rows, std::int64_t dim,
                       cudaStream_t s) {
  launch_over(rows, gauss_lp_kernel<T>, s, a, mu, ls, out, rows, dim);
}

template <class T>
void gaussian_entropy(const T* ls, T* out, std::int64_t rows, std::int64_t dim, cudaStream_t s) {
  launch_over(rows, gauss_entropy_kernel<T>, s, ls, out, rows, dim);
}

template <class T>
void gaussian_log_prob_backward(const T* a, const T* mu, const T* ls, const T* g, T* gmu, T* gls, std::int64_t rows,
                                std::int64_t dim, cudaStream_t s) {
  launch_over(rows * dim, gauss_lp_backward_kernel<T>, s, a, mu, ls, g, gmu, gls, rows, dim);
}

template <class T>
void gaussian_entropy_backward(const T* g, T* gls, std::int64_t rows, std::int64_t dim, cudaStream_t s) {
  launch_over(rows * dim, gauss_ent_backward_kernel<T>, s, g, gls, rows, dim);
}

template <class T>
void layer_norm_forward(const T* x, const T* w, const T* b, T* y, T* xhat, T* rstd, std::int64_t rows, std::int64_t F,
                        double eps, cudaStream_t s) {
  launch_over(rows, ln_forward_kernel<T>, s, x, w, b, y, xhat, rstd, rows, F, static_cast<T>(eps));
}

template <class T>
void layer_norm_backward(const T* gy, const T* xhat, const T* rstd, const T* w, T* gw, T* gb, T* gx, std::int64_t rows,
                         std::int64_t F, cudaStream_t s) {
  launch_over(rows, ln_backward_kernel<T>, s, gy, xhat, rstd, w, gw, gb, gx, rows, F);
}

template <class T>
void rmsprop_update(T* w, const T* g, T* v, T* m, std::int64_t n, double lr, double alpha, double eps, cudaStream_t s,
                    const std::int32_t* skip) {
  launch_over(n, rmsprop_kernel<T>, s, w, g, v, m, n, static_cast<T>(lr), static_cast<T>(alpha), static_cast<T>(eps),
              skip);
}

template <class T>
void clip_by_norm(T* g, const double* sum_sq, std::int64_t n, double max_norm, cudaStream_t s) {
  launch_over(n, clip_by_norm_kernel<T>, s, g, sum_sq, n, max_norm);
}

template <class T>
void sum_squares(const T* x, double* acc, std::int64_t n, cudaStream_t s) {
  launch_over(n, sum_squares_kernel<T>, s, x, acc, n);
}

template <class T>
void categorical_sample(const T* p, std::int64_t* out, std::int64_t rows, std::int64_t cols, std::uint64_t seed,
                        std::uint32_t stream, int purpose, std::uint64_t index, cudaStream_t s) {
  launch_over(rows, cat_sample_kernel<T>, s, p, out, rows, cols, seed, stream, purpose, index);
}

template <class T>
void gaussian_sample(const T* mu, const T* ls, T* out, std::int64_t rows, std::int64_t dim, std::uint64_t seed,
                     std::uint32_t stream, int purpose, std::uint64_t index, cudaStream_t s) {
  launch_over(rows, gauss_sample_kernel<T>, s, mu, ls, out, rows, dim, seed, stream, purpose, index);
}

template <class T>
void conv_im2col(const T* x, T* col, std::int64_t C, std::int64_t H, std::int64_t W, std::int64_t kh, std::int64_t kw,
                 std::int64_t stride, std::int64_t pad, std::int64_t ho, std::int64_t wo, cudaStream_t s) {
  const std::int64_t n = C * kh * kw * ho * wo;
  launch_over(n, im2col_kernel<T>, s, x, col, C, H, W, kh, kw, stride, pad, ho, wo);
}

template <class T>
void conv_col2im(const T* col, T* x, std::int64_t C, std::int64_t H, std::int64_t W, std::int64_t kh, std::int64_t kw,
                 std::int64_t stride, std::int64_t pad, std::int64_t ho, std::int64_t wo, cudaStream_t s) {
  const std::int64_t n = C * H * W;
  launch_over(n, col2im_kernel<T>, s, col, x, C, H, W, kh, kw, stride, pad, ho, wo);
}

template <class T>
void conv_bias_add(T* y, const T* b, std::int64_t N, std::int64_t O, std::int64_t P, cudaStream_t s) {
  launch_over(N * O * P, conv_bias_add_kernel<T>, s, y, b, N, O, P);
}

template <class T>
void conv_bias_grad(const T* gy, T* gb, std::int64_t N, std::int64_t O, std::int64_t P, cudaStream_t s) {
  if (O == 0) return;
  const unsigned blocks = static_cast<unsigned>(O < 65535 ? O : 65535);
  herd::gpu::launch(conv_bias_grad_kernel<T>, blocks, kThreads, 0, s, gy, gb, N, O, P);
  check_launch();
}

void adam_tick(double* hyper, double beta1, double beta2, cudaStream_t s) {
  herd::gpu::launch(adam_tick_kernel, 1, 1, 0, s, hyper, beta1, beta2);
  check_launch();
}

template <class T>
void adam_update_hyper(T* w, const T* g, T* m, T* v, std::int64_t n, const double* hyper, double beta1, double beta2,
                       double eps, cudaStream_t s, const std::int32_t* skip) {
  launch_over(n, adam_hyper_kernel<T>, s, w, g, m, v, n, hyper, static_cast<T>(beta1), static_cast<T>(beta2),
              static_cast<T>(eps), skip);
}

// NOLINTBEGIN(bugprone-macro-parentheses)
#define HERD_NN_OPS_INSTANTIATE(T)                                                                                     \
  template void diff_sq_sum<T>(const T*, const T*, T*, double*, std::int64_t, cudaStream_t, double);                   \
  template void huber_sum<T>(const T*, double*, std::int64_t, double, cudaStream_t, double);                           \
  template void argmax_rows<T>(const T*, std::int64_t*, std::int64_t, std::int64_t, cudaStream_t);                     \
  template void scaled_clamp<T>(const T*, T*, std::int64_t, double, double, cudaStream_t);                             \
  template void add<T>(const T*, const T*, T*, std::int64_t, cudaStream_t);                                            \
  template void exp<T>(const T*, T*, std::int64_t, cudaStream_t);                                                      \
  template void softmax_backward<T>(const T*, const T*, T*, std::int64_t, std::int64_t, bool, cudaStream_t);           \
  template void gather_rows<T>(const T*, const std::int64_t*, T*, double*, std::int64_t, std::int64_t, cudaStream_t,   \
                               double, std::int64_t*, int);                                                            \
  template void cross_entropy_backward<T>(const T*, const std::int64_t*, T*, std::int64_t, std::int64_t, double,       \
                                          cudaStream_t);                                                               \
  template void categorical_entropy<T>(const T*, const T*, T*, std::int64_t, std::int64_t, cudaStream_t);              \
  template void categorical_log_prob_backward<T>(const T*, const std::int64_t*, const T*, T*, std::int64_t,            \
                                                 std::int64_t, cudaStream_t);                                          \
  template void categorical_entropy_backward<T>(const T*, const T*, const T*, T*, std::int64_t, std::int64_t,          \
                                                cudaStream_t);                                                         \
  template void gaussian_log_prob<T>(const T*, const T*, const T*, T*, std::int64_t, std::int64_t, cudaStream_t);      \
  template void gaussian_entropy<T>(const T*, T*, std::int64_t, std::int64_t, cudaStream_t);                           \
  template void gaussian_log_prob_backward<T>(const T*, const T*, const T*, const T*, T*, T*, std::int64_t,            \
                                              std::int64_t, cudaStream_t);                                             \
  template void gaussian_entropy_backward<T>(const T*, T*, std::int64_t, std::int64_t, cudaStream_t);                  \
  template void layer_norm_forward<T>(const T*, const T*, const T*, T*, T*, T*, std::int64_t, std::int64_t, double,    \
                                      cudaStream_t);                                                                   \
  template void layer_norm_backward<T>(const T*, const T*, const T*, const T*, T*, T*, T*, std::int64_t, std::int64_t, \
                                       cudaStream_t);                                                                  \
  template void rmsprop_update<T>(T*, const T*, T*, T*, std::int64_t, double, double, double, cudaStream_t,            \
                                  const std::int32_t*);                                                                \
  template void clip_by_norm<T>(T*, const double*, std::int64_t, double, cudaStream_t);                                \
  template void sum_squares<T>(const T*, double*, std::int64_t, cudaStream_t);                                         \
  template void conv_im2col<T>(const T*, T*, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t,     \
                               std::int64_t, std::int64_t, std::int64_t, std::int64_t, cudaStream_t);                  \
  template void conv_col2im<T>(const T*, T*, std::int64_t, std::int64_t, std::int64_t, std::int64_t, std::int64_t,     \
                               std::int64_t, std::int64_t, std::int64_t, std::int64_t, cudaStream_t);                  \
  template void conv_bias_add<T>(T*, const T*, std::int64_t, std::int64_t, std::int64_t, cudaStream_t);                \
  template void conv_bias_grad<T>(const T*, T*, std::int64_t, std::int64_t, std::int64_t, cudaStream_t);               \
  template void adam_update_hyper<T>(T*, const T*, T*, T*, std::int64_t, const double*, double, double, double,        \
                                     cudaStream_t, const std::int32_t*);                                               \
  template void categorical_sample<T>(const T*, std::int64_t*, std::int64_t, std::int64_t, std::uint64_t,              \
                                      std::uint32_t, int, std::uint64_t, cudaStream_t);                                \
  template void gaussian_sample<T>(const T*, const T*, T*, std::int64_t, std::int64_t, std::uint64_t, std::uint32_t,   \
                                   int, std::uint64_t, cudaStream_t);

HERD_NN_OPS_INSTANTIATE(float)
HERD_NN_OPS_INSTANTIATE(double)
#undef HERD_NN_OPS_INSTANTIATE
// NOLINTEND(bugprone-macro-parentheses)

}  // namespace herd::nn::cuda
