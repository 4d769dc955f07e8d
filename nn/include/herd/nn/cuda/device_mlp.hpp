#pragma once
/// @file device_mlp.hpp
/// `DeviceMlp`: an MLP train step (Linear + activation stack, MSE loss, Adam) on one CUDA
/// device, float32, built from the parameters of a CPU `Mlp` (CUDA builds only). The
/// device path of the nn layer's most common workload until modules run on CUDA: cuBLAS
/// GEMMs (row-major via the transpose identity (A B)^T = B^T A^T) plus the kernels of
/// `herd/nn/cuda/kernels.hpp`; parameters, gradients and Adam moments live in three flat
/// device buffers, so zeroing the gradients and the Adam update are one launch each.
/// Forward/backward of a fixed batch can be captured once as a CUDA graph
/// (`capture(batch)`), which removes the per-kernel launch overhead that dominates at small
/// batches.
///
/// Streams: everything is enqueued on the stream given to the constructor; methods return
/// without waiting unless stated. Thread-safety: one thread at a time per object.
/// Differential test: tests/nn/test_device_mlp_gpu.cpp (against the CPU `Mlp`, `MseLoss`,
/// `Adam`).

#include <cstdint>
#include <memory>
#include <vector>

#include <cuda_runtime_api.h>

#include "herd/nn/mlp.hpp"

namespace herd::nn::cuda {

/// A float32 MLP with MSE loss and Adam on one CUDA device (see the file comment).
class DeviceMlp {
 public:
  /// Copies `model`'s parameters (built from `options`, float32; on the host or already on
  /// a CUDA device, then after its pending nn-stream work) to the current device.
  /// @param lr, beta1, beta2, eps Adam's hyper-parameters (as `nn::Adam`)
  /// @throws InputError unless the model is float32; CudaError on CUDA failures.
  DeviceMlp(Mlp& model, const MlpOptions& options, cudaStream_t stream, double lr = 1e-3, double beta1 = 0.9,
            double beta2 = 0.999, double eps = 1e-8);
  ~DeviceMlp();
  DeviceMlp(const DeviceMlp&) = delete;
  DeviceMlp& operator=(const DeviceMlp&) = delete;

  /// Zero grads, forward of `x` (`[batch, in]`, device), MSE against `y` (`[batch, out]`,
  /// device), backward. The loss is kept on the device (`loss()` reads it). Replays the
  /// captured graph when `batch` equals the captured batch.
  void forward_backward(const float* x, const float* y, std::int64_t batch);
  /// Forward pass only (inference): `x` `[batch, in]` (device) through the layers; returns
  /// the output `[batch, out]` in a device buffer this object owns (valid until the next
  /// call that changes the batch size or runs a forward). Enqueued on the stream; no sync.
  const float* forward(const float* x, std::int64_t batch);
  /// One Adam update of all parameters from the gradients (one kernel).
  void adam_step();
  /// `forward_backward` then `adam_step`.
  void train_step(const float* x, const float* y, std::int64_t batch) {
    forward_backward(x, y, batch);
    adam_step();
  }
  /// Captures `forward_backward` for `batch` and fixed `x`, `y` pointers as a CUDA graph;
  /// later calls with that batch and those pointers replay it.
  void capture(const float* x, const float* y, std::int64_t batch);
  /// The last loss (synchronises the stream).
  double loss();
  /// Parameters (host copies, in `model.parameters()` order; synchronises).
  std::vector<std::vector<float>> parameters_to_host();
  /// Gradients of the last backward (host copies; synchronises).
  std::vector<std::vector<float>> gradients_to_host();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace herd::nn::cuda
