#pragma once
/// @file kernels.hpp
/// Host-callable launchers of the nn CUDA kernels (CUDA builds only; no Eigen, so `.cu`
/// files and plain C++ both include it): the device work behind the nn modules, losses,
/// heads and optimizers, grouped by role below. One source, nn/cuda/kernels.cu, holds the
/// kernel bodies; nvcc builds it for the device and the host backend (label host-emu)
/// builds the same bodies as C++ (nn/cuda/host/kernels.cpp).
///
/// Conventions: every launcher enqueues its work on stream `s` and returns at once
/// (asynchronous with respect to the host); pointers are device memory of the current
/// device; tensors are contiguous row-major. Launchers are float/double overloads or
/// templates instantiated for float and double. Each kernel mirrors a CPU reference (the
/// CPU nn modules and optimizers, named in its comment where it is not obvious), against
/// which the `[gpu]` tests compare it in float tolerance (tests/nn/test_cuda_kernels_gpu.cpp
/// one by one, tests/nn/test_nn_device_gpu.cpp through the modules).
/// Reductions run in a fixed order (no floating-point atomics): the same inputs give the
/// same bits on every run, though not the CPU's bits.
/// Errors: a failed launch throws `herd::CudaError` (checked with cudaGetLastError);
/// errors of the kernel itself surface at the next synchronising call.
/// Thread-safety: launchers are reentrant; concurrent launches on one stream are ordered
/// by CUDA.

#include <cstdint>

#include <cuda_runtime_api.h>

namespace herd::nn::cuda {

// ---- Layers: Linear bias, activations, softmax, LayerNorm, Conv2d.

/// Element-wise nonlinearities.
enum class Act : int { kReLU = 0, kTanh = 1, kELU = 2 };

/// `y[r, c] += b[c]` for `y` `[rows, cols]`, `b` `[cols]`.
void bias_add(float* y, const float* b, std::int64_t rows, std::int64_t cols, cudaStream_t s);
/// double overload.
void bias_add(double* y, const double* b, std::int64_t rows, std::int64_t cols, cudaStream_t s);

/// `gb[c] += sum_r gy[r, c]` (bias gradient; accumulates, like the CPU `Linear`). Rows are
/// summed in a fixed order (no atomics: the same bits on every run), not the CPU's order.
void bias_grad(const float* gy, float* gb, std::int64_t rows, std::int64_t cols, cudaStream_t s);
/// double overload.
void bias_grad(const double* gy, double* gb, std::int64_t rows, std::int64_t cols, cudaStream_t s);

/// `y = f(x)` over `n` elements (`alpha` is ELU's; ignored otherwise). In place allowed.
void activation_forward(Act act, const float* x, float* y, std::int64_t n, double alpha, cudaStream_t s);
/// double overload.
void activation_forward(Act act, const double* x, double* y, std::int64_t n, double alpha, cudaStream_t s);

/// `gx = gy * f'(x)`, with `y = f(x)` from the forward: ReLU `y > 0`, Tanh `1 - y^2`,
/// ELU `x > 0 ? 1 : y + alpha` (the CPU modules' conventions).
void activation_backward(Act act, const float* x, const float* y, const float* gy, float* gx, std::int64_t n,
                         double alpha, cudaStream_t s);
/// double overload.
void activation_backward(Act act, const double* x, const double* y, const double* gy, double* gx, std::int64_t n,
                         double alpha, cudaStream_t s);

/// Row-wise softmax (or log-softmax when `log`) of `x` `[rows, cols]` into `y`, max-shifted.
void softmax_rows(const float* x, float* y, std::int64_t rows, std::int64_t cols, bool log, cudaStream_t s);
/// double overload.
void softmax_rows(const double* x, double* y, std::int64_t rows, std::int64_t cols, bool log, cudaStream_t s);

/// Softmax backward per row: `gx = y (gy - sum(y gy))` (`log`: `gx = gy - exp(y) sum(gy)`,
/// `y` being the log-softmax). CPU reference: `Softmax`/`LogSoftmax::backward`.
template <class T>
void softmax_backward(const T* y, const T* gy, T* gx, std::int64_t rows, std::int64_t cols, bool log, cudaStream_t s);

/// LayerNorm forward over rows of `F` features: `xhat = (x - mean) rstd`,
/// `rstd = 1/sqrt(var + eps)` (biased variance), `y = xhat w + b` (w, b null: `y = xhat`).
/// CPU reference: `LayerNorm::forward`.
template <class T>
void layer_norm_forward(const T* x, const T* w, const T* b, T* y, T* xhat, T* rstd, std::int64_t rows, std::int64_t F,
                        double eps, cudaStream_t s);

/// LayerNorm backward: accumulates `gw += sum_r gy xhat`, `gb += sum_r gy` (when w is not
/// null) and writes `gx = rstd (d - mean(d) - xhat mean(d xhat))`, `d = gy w` (or gy).
template <class T>
void layer_norm_backward(const T* gy, const T* xhat, const T* rstd, const T* w, T* gw, T* gb, T* gx, std::int64_t rows,
                         std::int64_t F, cudaStream_t s);

/// Conv2d im2col of one sample: `col[(c kh + i) kw + j, y wo + x] = x[c, y s - p + i, x s - p + j]`
/// (zero outside the image) for an input `[C, H, W]` and `col` `[C kh kw, ho wo]`; one
/// thread per element of `col`. CPU reference: `im2col` in nn/conv2d.cpp.
template <class T>
void conv_im2col(const T* x, T* col, std::int64_t C, std::int64_t H, std::int64_t W, std::int64_t kh, std::int64_t kw,
                 std::int64_t stride, std::int64_t pad, std::int64_t ho, std::int64_t wo, cudaStream_t s);

/// Conv2d col2im of one sample, the adjoint of `conv_im2col`: `x[c, iy, ix]` is *set* to
/// the sum of the `col` entries that `conv_im2col` reads from that position (gather form:
/// one thread per input element, no atomics, so the sum order is fixed: i, then j).
/// CPU reference: `col2im` in nn/conv2d.cpp.
template <class T>
void conv_col2im(const T* col, T* x, std::int64_t C, std::int64_t H, std::int64_t W, std::int64_t kh, std::int64_t kw,
                 std::int64_t stride, std::int64_t pad, std::int64_t ho, std::int64_t wo, cudaStream_t s);

/// `y[n, o, q] += b[o]` for `y` `[N, O, P]` (NCHW with P = H W). CPU reference: the bias
/// broadcast of `Conv2d::forward`.
template <class T>
void conv_bias_add(T* y, const T* b, std::int64_t N, std::int64_t O, std::int64_t P, cudaStream_t s);

/// `gb[o] += sum_{n, q} gy[n, o, q]` for `gy` `[N, O, P]`: one block per channel, the sum
/// in double (deterministic). CPU reference: the bias gradient of `Conv2d::backward`.
template <class T>
void conv_bias_grad(const T* gy, T* gb, std::int64_t N, std::int64_t O, std::int64_t P, cudaStream_t s);

// ---- Element-wise.

/// `y = a + b` over `n` elements.
template <class T>
void add(const T* a, const T* b, T* y, std::int64_t n, cudaStream_t s);

/// `y = exp(x)` over `n` elements.
template <class T>
void exp(const T* x, T* y, std::int64_t n, cudaStream_t s);

/// `x *= a` over `n` elements (e.g. DataParallel's division by the world size).
void scale(float* x, double a, std::int64_t n, cudaStream_t s);
/// double overload.
void scale(double* x, double a, std::int64_t n, cudaStream_t s);

// ---- Losses.

/// `*sum = sum_i (p_i - t_i)^2` accumulated in double (`sum` is one device double,
/// overwritten). The MSE loss is `*sum / n`.
void squared_error_sum(const float* p, const float* t, double* sum, std::int64_t n, cudaStream_t s);
/// double overload.
void squared_error_sum(const double* p, const double* t, double* sum, std::int64_t n, cudaStream_t s);

/// `gx = scale * 2 (p - t) / n` (gradient of `scale * MSE`).
void mse_backward(const float* p, const float* t, float* gx, std::int64_t n, double scale, cudaStream_t s);
/// double overload.
void mse_backward(const double* p, const double* t, double* gx, std::int64_t n, double scale, cudaStream_t s);

/// `d = p - t` over `n` elements; `*sum = k sum d^2` (a device double, overwritten; the
/// scale `k` is applied to each block's partial sum, so `k = 1/n` gives the mean without
/// another launch). CPU reference: `MseLoss::forward`.
template <class T>
void diff_sq_sum(const T* p, const T* t, T* d, double* sum, std::int64_t n, cudaStream_t s, double k = 1.0);

/// `*sum = k sum_i huber(d_i)` with 0.5 d^2 for |d| < delta, delta (|d| - delta/2) otherwise
/// (a device double, overwritten). CPU reference: `HuberLoss::forward`.
template <class T>
void huber_sum(const T* d, double* sum, std::int64_t n, double delta, cudaStream_t s, double k = 1.0);

/// `g = k * clamp(d, -delta, delta)` (delta <= 0: no clamp, `g = k d`).
template <class T>
void scaled_clamp(const T* d, T* g, std::int64_t n, double k, double delta, cudaStream_t s);

/// `out[r] = lp[r, idx[r]]` for `lp` `[rows, cols]` (when `out` is not null);
/// `*sum = k sum_r lp[r, idx[r]]` in double when `sum` is not null (overwritten).
/// Indices are checked on the device: an index outside [0, cols) reads nothing, gives NaN
/// (in `out` and the sum) and, when `err` is not null, is written to the error record
/// `err` (four int64 {code, index, value, bound}, claimed with atomicCAS on `code` by the
/// first offender: `{err_code, r, idx[r], cols}`), which the host reports at its next
/// synchronisation (`check_dev_errors` in nn/device_context.hpp).
template <class T>
void gather_rows(const T* lp, const std::int64_t* idx, T* out, double* sum, std::int64_t rows, std::int64_t cols,
                 cudaStream_t s, double k = 1.0, std::int64_t* err = nullptr, int err_code = 0);

/// Cross-entropy gradient: `g[r, c] = k (exp(lp[r, c]) - [c == t[r]])`.
/// CPU reference: `CrossEntropyLoss::backward`.
template <class T>
void cross_entropy_backward(const T* lp, const std::int64_t* t, T* g, std::int64_t rows, std::int64_t cols, double k,
                            cudaStream_t s);

// ---- Heads: Categorical and diagonal Gaussian.

/// Index of the largest entry per row of `x` `[rows, cols]` (the first on ties; NaN never
/// wins, as the CPU's `>` comparison) into int64 `out` `[rows]`.
/// CPU reference: `Categorical::mode`.
template <class T>
void argmax_rows(const T* x, std::int64_t* out, std::int64_t rows, std::int64_t cols, cudaStream_t s);

/// Categorical entropy per row: `h[r] = -sum_c p lp`. CPU reference: `Categorical::entropy`.
template <class T>
void categorical_entropy(const T* p, const T* lp, T* h, std::int64_t rows, std::int64_t cols, cudaStream_t s);

/// `gl[r, :] += g[r] (onehot(a[r]) - p[r, :])` (d log p(a)/d logits).
template <class T>
void categorical_log_prob_backward(const T* p, const std::int64_t* a, const T* g, T* gl, std::int64_t rows,
                                   std::int64_t cols, cudaStream_t s);

/// `gl[r, :] -= g[r] p (lp + H_r)` (dH/d logits). CPU reference: `Categorical::backward_entropy`.
template <class T>
void categorical_entropy_backward(const T* p, const T* lp, const T* g, T* gl, std::int64_t rows, std::int64_t cols,
                                  cudaStream_t s);

/// Diagonal Gaussian log-density per row of actions `a` `[rows, dim]` around `mu` with
/// log-std `ls` `[dim]`: `out[r] = -1/2 sum_d (a - mu)^2 exp(-2 ls) - sum ls - dim log(2 pi)/2`.
/// CPU reference: `Gaussian::log_prob`.
template <class T>
void gaussian_log_prob(const T* a, const T* mu, const T* ls, T* out, std::int64_t rows, std::int64_t dim,
                       cudaStream_t s);

/// Gaussian entropy, the same for every row: `out[r] = sum ls + dim (1 + log(2 pi))/2`.
template <class T>
void gaussian_entropy(const T* ls, T* out, std::int64_t rows, std::int64_t dim, cudaStream_t s);

/// `gmu += g[r] (a - mu) exp(-2 ls)`; `gls[d] += sum_r g[r] ((a - mu)^2 exp(-2 ls) - 1)`.
/// CPU reference: `Gaussian::backward_log_prob`.
template <class T>
void gaussian_log_prob_backward(const T* a, const T* mu, const T* ls, const T* g, T* gmu, T* gls, std::int64_t rows,
                                std::int64_t dim, cudaStream_t s);

/// `gls[d] += sum_r g[r]` for every d. CPU reference: `Gaussian::backward_entropy`.
template <class T>
void gaussian_entropy_backward(const T* g, T* gls, std::int64_t rows, std::int64_t dim, cudaStream_t s);

/// Categorical sampling by inversion on the device, the draws of `Categorical::sample`:
/// row r takes the uniform `RngStream(seed, stream + r, purpose).uniform(index)` and the
/// first class whose running sum of `p` (in double, in class order) exceeds it (the last
/// class otherwise). Philox and the uniform conversion are bit-identical on host and
/// device, so the actions equal the CPU's exactly. `out` is int64 `[rows]`.
template <class T>
void categorical_sample(const T* p, std::int64_t* out, std::int64_t rows, std::int64_t cols, std::uint64_t seed,
                        std::uint32_t stream, int purpose, std::uint64_t index, cudaStream_t s);

/// Diagonal Gaussian sampling on the device, the draws of `Gaussian::sample`: row r walks
/// `RngStream(seed, stream + r, purpose).at(index)` and sets
/// `out[r, d] = mu[r, d] + exp(ls[d]) z_d` (in double, then rounded to T) with the
/// cursor's standard normals in order. The normals use the device's log/sincospi, which
/// may differ from the host's in the last bits of a double (see herd/core/rng.hpp).
template <class T>
void gaussian_sample(const T* mu, const T* ls, T* out, std::int64_t rows, std::int64_t dim, std::uint64_t seed,
                     std::uint32_t stream, int purpose, std::uint64_t index, cudaStream_t s);

// ---- Optimizers and gradient clipping.

/// One Adam step (PyTorch's form, as `nn::Adam`) over `n` elements; `step` >= 1 is the
/// step count including this one. `skip` (device memory, may be null): when `*skip` is
/// non-zero at run time the step leaves `w`, `m` and `v` unchanged (a device-side guard,
/// e.g. set by a loss kernel that found a non-finite loss; no host read-back needed).
void adam_update(float* w, const float* g, float* m, float* v, std::int64_t n, double lr, double beta1, double beta2,
                 double eps, std::int64_t step, cudaStream_t s, const std::int32_t* skip = nullptr);
/// double overload.
void adam_update(double* w, const double* g, double* m, double* v, std::int64_t n, double lr, double beta1,
                 double beta2, double eps, std::int64_t step, cudaStream_t s, const std::int32_t* skip = nullptr);

/// Adam with its step-dependent scalars on the device, for CUDA graphs (a replayed graph
/// cannot take new kernel arguments). `hyper` is float64 `[4]`: {lr, step, step_size,
/// inv_bc2_sqrt}. `adam_tick` (one thread) advances `step` by one and sets
/// `step_size = lr / (1 - beta1^step)`, `inv_bc2_sqrt = 1 / sqrt(1 - beta2^step)` in double,
/// as `nn::Adam` does on the host (the device's pow may differ in the last bit of a double).
void adam_tick(double* hyper, double beta1, double beta2, cudaStream_t s);

/// The update of `adam_update` with `step_size` and
/// `inv_bc2_sqrt` read from `hyper` (set by `adam_tick`) and rounded to T. `skip`: as for
/// `adam_update` (a non-zero device flag leaves w, m and v unchanged).
template <class T>
void adam_update_hyper(T* w, const T* g, T* m, T* v, std::int64_t n, const double* hyper, double beta1, double beta2,
                       double eps, cudaStream_t s, const std::int32_t* skip = nullptr);

/// One SGD step (as `nn::Sgd`); `buf` may be null when `momentum == 0`; `first` is true on
/// the first step (buf = g). `skip`: as for `adam_update`.
void sgd_update(float* w, const float* g, float* buf, std::int64_t n, double lr, double momentum, double dampening,
                bool nesterov, bool first, cudaStream_t s, const std::int32_t* skip = nullptr);
/// double overload.
void sgd_update(double* w, const double* g, double* buf, std::int64_t n, double lr, double momentum, double dampening,
                bool nesterov, bool first, cudaStream_t s, const std::int32_t* skip = nullptr);

/// One RMSprop step (as `nn::RmsProp`): `v = a v + (1 - a) g^2`, `w -= lr g / (sqrt(v) + eps)`;
/// centred when `m` (the gradient average) is not null: `m = a m + (1 - a) g`,
/// `w -= lr g / (sqrt(v - m^2) + eps)`. `skip` (device memory, may be null): when `*skip` is
/// non-zero at run time, `w`, `v` and `m` stay unchanged (see `adam_update`).
template <class T>
void rmsprop_update(T* w, const T* g, T* v, T* m, std::int64_t n, double lr, double alpha, double eps, cudaStream_t s,
                    const std::int32_t* skip = nullptr);

/// `*acc += sum x^2` in double (`acc` one device double, not reset: clip_grad_norm sums
/// every parameter into it).
template <class T>
void sum_squares(const T* x, double* acc, std::int64_t n, cudaStream_t s);

/// The scaling of `clip_grad_norm` without a host read-back: with `coef = max_norm /
/// (sqrt(*sum_sq) + 1e-6)` computed on the device from the device double `*sum_sq` (the
/// squared global norm, e.g. from `sum_squares`), `g *= coef` (rounded to T) when
/// `coef < 1`; otherwise (also for a NaN norm) `g` is left as is, as on the host.
template <class T>
void clip_by_norm(T* g, const double* sum_sq, std::int64_t n, double max_norm, cudaStream_t s);

}  // namespace herd::nn::cuda
