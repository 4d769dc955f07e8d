#pragma once
/// @file kernels.hpp
/// Host-callable launchers of the nn CUDA kernels (CUDA builds only; no Eigen, so `.cu`
/// files and plain C++ both include it). Every launcher enqueues its work on the given
/// stream and returns at once (asynchronous with respect to the host); pointers are device
/// memory of the current device; tensors are contiguous row-major. Each kernel has a CPU
/// reference (the CPU nn modules and optimizers), against which the `[gpu]` tests
/// (tests/nn/test_cuda_kernels_gpu.cpp) compare it in float tolerance.
/// Errors: a failed launch throws `herd::CudaError` (checked with cudaGetLastError);
/// errors of the kernel itself surface at the next synchronising call.
/// Thread-safety: launchers are reentrant; concurrent launches on one stream are ordered
/// by CUDA.

#include <cstdint>

#include <cuda_runtime_api.h>

namespace herd::nn::cuda {

/// Element-wise nonlinearities.
enum class Act : int { kReLU = 0, kTanh = 1, kELU = 2 };

/// `y[r, c] += b[c]` for `y` `[rows, cols]`, `b` `[cols]`.
void bias_add(float* y, const float* b, std::int64_t rows, std::int64_t cols, cudaStream_t s);
/// double overload.
void bias_add(double* y, const double* b, std::int64_t rows, std::int64_t cols, cudaStream_t s);

/// `gb[c] += sum_r gy[r, c]` (bias gradient; accumulates, like the CPU `Linear`).
/// Summation order differs from the CPU (and between runs: atomics).
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

/// `*sum = sum_i (p_i - t_i)^2` accumulated in double (`sum` is one device double,
/// overwritten). The MSE loss is `*sum / n`.
void squared_error_sum(const float* p, const float* t, double* sum, std::int64_t n, cudaStream_t s);
/// double overload.
void squared_error_sum(const double* p, const double* t, double* sum, std::int64_t n, cudaStream_t s);
/// `gx = scale * 2 (p - t) / n` (gradient of `scale * MSE`).
void mse_backward(const float* p, const float* t, float* gx, std::int64_t n, double scale, cudaStream_t s);
/// double overload.
void mse_backward(const double* p, const double* t, double* gx, std::int64_t n, double scale, cudaStream_t s);

/// `x *= a` over `n` elements (e.g. DataParallel's division by the world size).
void scale(float* x, double a, std::int64_t n, cudaStream_t s);
/// double overload.
void scale(double* x, double a, std::int64_t n, cudaStream_t s);

/// One Adam step (PyTorch's form, as `nn::Adam`) over `n` elements; `step` >= 1 is the
/// step count including this one. `skip` (device memory, may be null): when `*skip` is
/// non-zero at run time the step leaves `w`, `m` and `v` unchanged (a device-side guard,
/// e.g. set by a loss kernel that found a non-finite loss; no host read-back needed).
void adam_update(float* w, const float* g, float* m, float* v, std::int64_t n, double lr, double beta1, double beta2,
                 double eps, std::int64_t step, cudaStream_t s, const std::int32_t* skip = nullptr);
/// double overload.
void adam_update(double* w, const double* g, double* m, double* v, std::int64_t n, double lr, double beta1,
                 double beta2, double eps, std::int64_t step, cudaStream_t s, const std::int32_t* skip = nullptr);

/// One SGD step (as `nn::Sgd`); `buf` may be null when `momentum == 0`; `first` is true on
/// the first step (buf = g). `skip`: as for `adam_update`.
void sgd_update(float* w, const float* g, float* buf, std::int64_t n, double lr, double momentum, double dampening,
                bool nesterov, bool first, cudaStream_t s, const std::int32_t* skip = nullptr);
/// double overload.
void sgd_update(double* w, const double* g, double* buf, std::int64_t n, double lr, double momentum, double dampening,
                bool nesterov, bool first, cudaStream_t s, const std::int32_t* skip = nullptr);

}  // namespace herd::nn::cuda
