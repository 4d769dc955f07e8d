// DeviceMlp (cuBLAS + nn CUDA kernels) against the CPU Mlp + MseLoss + Adam ([gpu]; exit
// code 77 without a CUDA device).
#include <catch2/catch.hpp>

#include <vector>

#include <cuda_runtime.h>

#include "herd/core/cuda/cuda_check.hpp"
#include "herd/core/rng.hpp"
#include "herd/nn/cuda/device_mlp.hpp"
#include "herd/nn/losses.hpp"
#include "herd/nn/mlp.hpp"
#include "herd/nn/optimizer.hpp"

using namespace herd;
using namespace herd::nn;

namespace {

std::vector<float> randn(std::size_t n, std::uint32_t stream) {
  RngCursor c = RngStream(23, stream, RngPurpose::kUser).at(0);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(c.normal());
  return v;
}

void check_params(const std::vector<std::vector<float>>& got, const std::vector<Parameter*>& want, bool grads,
                  double tol) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    const Tensor& t = grads ? want[i]->grad : want[i]->value;
    REQUIRE(static_cast<std::int64_t>(got[i].size()) == t.numel());
    for (std::size_t j = 0; j < got[i].size(); ++j)
      CHECK(got[i][j] == Approx(t.item(static_cast<std::int64_t>(j))).epsilon(tol).margin(tol));
  }
}

}  // namespace

// The parameters may live on the host or already on the device: the copy must name neither
// direction (the host backend's checked mode rejects a host-to-device copy from device memory).
TEST_CASE("DeviceMlp from a model on the device starts from its parameters", "[gpu][nn]") {
  MlpOptions o;
  o.sizes = {6, 9, 3};
  Mlp cpu(o);
  o.device = Device::cuda(0);
  Mlp dev(o);  // same initial values as on the CPU
  cudaStream_t stream = nullptr;
  HERD_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  {
    cuda::DeviceMlp gpu(dev, o, stream, 1e-2);
    const auto got = gpu.parameters_to_host();
    const auto want = cpu.parameters();
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < got.size(); ++i)
      for (std::size_t j = 0; j < got[i].size(); ++j)
        CHECK(got[i][j] == want[i]->value.item(static_cast<std::int64_t>(j)));
  }
  HERD_CUDA_CHECK(cudaStreamDestroy(stream));
}

TEST_CASE("DeviceMlp: loss, gradients and Adam steps equal the CPU path", "[gpu][nn]") {
  for (Activation act : {Activation::kTanh, Activation::kReLU, Activation::kELU}) {
    for (bool graph : {false, true}) {
      CAPTURE(static_cast<int>(act), graph);
      MlpOptions o;
      o.sizes = {24, 40, 40, 5};
      o.activation = act;
      Mlp cpu(o);
      cudaStream_t stream = nullptr;
      HERD_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
      {
        cuda::DeviceMlp gpu(cpu, o, stream, 1e-2);
        Adam adam(cpu.named_parameters(), 1e-2);
        MseLoss loss;
        const std::int64_t batch = 33;
        const auto xv = randn(static_cast<std::size_t>(batch * 24), 1);
        const auto yv = randn(static_cast<std::size_t>(batch * 5), 2);
        Tensor x({batch, 24}, DType::kFloat32), y({batch, 5}, DType::kFloat32);
        std::copy(xv.begin(), xv.end(), x.data<float>());
        std::copy(yv.begin(), yv.end(), y.data<float>());
        float *dx = nullptr, *dy = nullptr;
        HERD_CUDA_CHECK(cudaMalloc(&dx, xv.size() * sizeof(float)));
        HERD_CUDA_CHECK(cudaMalloc(&dy, yv.size() * sizeof(float)));
        HERD_CUDA_CHECK(cudaMemcpyAsync(dx, xv.data(), xv.size() * sizeof(float), cudaMemcpyHostToDevice, stream));
        HERD_CUDA_CHECK(cudaMemcpyAsync(dy, yv.data(), yv.size() * sizeof(float), cudaMemcpyHostToDevice, stream));
        if (graph) gpu.capture(dx, dy, batch);
        for (int step = 0; step < 4; ++step) {
          adam.zero_grad();
          const double l = loss.forward(cpu.forward(x), y);
          cpu.backward(loss.backward());
          gpu.forward_backward(dx, dy, batch);
          CHECK(gpu.loss() == Approx(l).epsilon(1e-5));
          check_params(gpu.gradients_to_host(), cpu.parameters(), true, 1e-4);
          adam.step();
          gpu.adam_step();
        }
        check_params(gpu.parameters_to_host(), cpu.parameters(), false, 1e-4);
        cudaFree(dx);
        cudaFree(dy);
      }
      HERD_CUDA_CHECK(cudaStreamDestroy(stream));
    }
  }
}

TEST_CASE("DeviceMlp: built from a model already on the GPU copies its parameters exactly", "[gpu][nn]") {
  MlpOptions o;
  o.sizes = {6, 9, 2};
  o.activation = Activation::kTanh;
  o.rng = RngStream(5, 0, RngPurpose::kInit);
  Mlp host(o);
  MlpOptions og = o;
  og.device = Device::cuda(0);
  Mlp on_gpu(og);  // same initialisation, parameters in device memory
  cudaStream_t stream = nullptr;
  HERD_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  {
    cuda::DeviceMlp from_gpu(on_gpu, o, stream);
    const auto got = from_gpu.parameters_to_host();
    const auto want = host.parameters();
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < got.size(); ++i)
      for (std::size_t j = 0; j < got[i].size(); ++j)
        CHECK(got[i][j] == static_cast<float>(want[i]->value.item(static_cast<std::int64_t>(j))));
  }
  HERD_CUDA_CHECK(cudaStreamDestroy(stream));
}
