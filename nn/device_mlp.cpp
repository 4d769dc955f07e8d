// DeviceMlp: cuBLAS + nn CUDA kernels (CUDA builds only; see device_mlp.hpp).
#include "herd/nn/cuda/device_mlp.hpp"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "herd/core/cuda/cuda_check.hpp"
#include "herd/nn/cuda/kernels.hpp"

namespace herd::nn::cuda {
namespace {

void cublas_check(cublasStatus_t rc, const char* call) {
  if (rc != CUBLAS_STATUS_SUCCESS)
    throw CudaError(fmt::format("nn::DeviceMlp: {} failed with cuBLAS status {}", call, static_cast<int>(rc)));
}

Act to_act(Activation a) {
  switch (a) {
    case Activation::kTanh:
      return Act::kTanh;
    case Activation::kReLU:
      return Act::kReLU;
    case Activation::kELU:
      return Act::kELU;
  }
  return Act::kTanh;
}

struct Layer {
  std::int64_t in = 0, out = 0;
  std::size_t w = 0, b = 0;  // offsets (elements) into the flat buffers
  bool act = false;
};

}  // namespace

struct DeviceMlp::Impl {
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  Act act = Act::kTanh;
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  std::int64_t steps = 0;
  std::vector<Layer> layers;
  std::vector<std::size_t> sizes;  // element counts of the parameters, in order
  std::size_t total = 0;
  float *w = nullptr, *g = nullptr, *m = nullptr, *v = nullptr;
  double* loss = nullptr;
  // Activations: z[k] pre-activation, h[k] post-activation (h[k] == z[k] without one);
  // d[k] gradient buffers; sized for `batch` rows.
  std::int64_t batch = 0;
  std::vector<float*> z, h, d;
  float* dx = nullptr;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  std::int64_t graph_batch = -1;
  const float* graph_x = nullptr;
  const float* graph_y = nullptr;

  void drop_graph() {
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    exec = nullptr;
    graph = nullptr;
    graph_batch = -1;
  }
  void free_acts() {
    for (auto* p : z) cudaFree(p);
    for (auto* p : h) cudaFree(p);
    for (auto* p : d) cudaFree(p);
    z.clear();
    h.clear();
    d.clear();
  }
  void ensure_batch(std::int64_t b) {
    if (b == batch) return;
    cudaStreamSynchronize(stream);
    drop_graph();  // it refers to the buffers freed here
    free_acts();
    for (const Layer& l : layers) {
      const std::size_t bytes = static_cast<std::size_t>(b * l.out) * sizeof(float) + 4;
      float *zp = nullptr, *hp = nullptr, *dp = nullptr;
      HERD_CUDA_CHECK(cudaMalloc(&zp, bytes));
      z.push_back(zp);
      if (l.act) {
        HERD_CUDA_CHECK(cudaMalloc(&hp, bytes));
      } else {
        hp = nullptr;
      }
      h.push_back(hp);
      HERD_CUDA_CHECK(cudaMalloc(&dp, bytes));
      d.push_back(dp);
    }
    batch = b;
  }
  const float* out_of(std::size_t k) const { return layers[k].act ? h[k] : z[k]; }

  // Forward: z = x W^T + b; h = act(z).
  void run_forward(const float* x, std::int64_t b) {
    const float one = 1.0f, zero = 0.0f;
    const float* in = x;
    for (std::size_t k = 0; k < layers.size(); ++k) {
      const Layer& l = layers[k];
      cublas_check(cublasSgemm(blas, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(l.out), static_cast<int>(b),
                               static_cast<int>(l.in), &one, w + l.w, static_cast<int>(l.in), in,
                               static_cast<int>(l.in), &zero, z[k], static_cast<int>(l.out)),
                   "cublasSgemm (forward)");
      bias_add(z[k], w + l.b, b, l.out, stream);
      if (l.act) activation_forward(act, z[k], h[k], b * l.out, 1.0, stream);
      in = out_of(k);
    }
  }

  void run(const float* x, const float* y, std::int64_t b) {
    const float one = 1.0f, zero = 0.0f;
    HERD_CUDA_CHECK(cudaMemsetAsync(g, 0, total * sizeof(float), stream));
    run_forward(x, b);
    // MSE: loss and dL/d(out).
    const Layer& last = layers.back();
    const std::int64_t n_out = b * last.out;
    squared_error_sum(out_of(layers.size() - 1), y, loss, n_out, stream);
    mse_backward(out_of(layers.size() - 1), y, d.back(), n_out, 1.0, stream);
    // Backward, last layer first.
    for (std::size_t k = layers.size(); k-- > 0;) {
      const Layer& l = layers[k];
      float* dz = d[k];
      if (l.act) activation_backward(act, z[k], h[k], dz, dz, b * l.out, 1.0, stream);
      const float* xin = k == 0 ? x : out_of(k - 1);
      // dW^T (in x out, col-major) = X^T dZ, i.e. dW = dZ^T X.
      cublas_check(cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_T, static_cast<int>(l.in), static_cast<int>(l.out),
                               static_cast<int>(b), &one, xin, static_cast<int>(l.in), dz, static_cast<int>(l.out),
                               &one, g + l.w, static_cast<int>(l.in)),
                   "cublasSgemm (weight gradient)");
      bias_grad(dz, g + l.b, b, l.out, stream);
      if (k > 0) {
        // dX = dZ W into the previous layer's gradient buffer.
        cublas_check(cublasSgemm(blas, CUBLAS_OP_N, CUBLAS_OP_N, static_cast<int>(l.in), static_cast<int>(b),
                                 static_cast<int>(l.out), &one, w + l.w, static_cast<int>(l.in), dz,
                                 static_cast<int>(l.out), &zero, d[k - 1], static_cast<int>(l.in)),
                     "cublasSgemm (input gradient)");
      }
    }
  }
};

DeviceMlp::DeviceMlp(Mlp& model, const MlpOptions& o, cudaStream_t stream, double lr, double beta1, double beta2,
                     double eps)
    : impl_(std::make_unique<Impl>()) {
  HERD_REQUIRE(model.dtype() == DType::kFloat32, "nn::DeviceMlp: the model is {}, but must be float32",
               dtype_name(model.dtype()));
  HERD_REQUIRE(o.sizes.size() >= 2, "nn::DeviceMlp: options.sizes has {} entries", o.sizes.size());
  Impl& s = *impl_;
  s.stream = stream;
  s.act = to_act(o.activation);
  s.lr = lr;
  s.beta1 = beta1;
  s.beta2 = beta2;
  s.eps = eps;
  auto params = model.parameters();
  HERD_REQUIRE(params.size() == 2 * (o.sizes.size() - 1),
               "nn::DeviceMlp: the model has {} parameters, but options describe {} Linear layers with bias",
               params.size(), o.sizes.size() - 1);
  std::size_t off = 0;
  for (std::size_t k = 0; k + 1 < o.sizes.size(); ++k) {
    Layer l;
    l.in = o.sizes[k];
    l.out = o.sizes[k + 1];
    l.w = off;
    off += static_cast<std::size_t>(l.in * l.out);
    l.b = off;
    off += static_cast<std::size_t>(l.out);
    l.act = k + 2 < o.sizes.size() || o.activate_output;
    HERD_REQUIRE(params[2 * k]->value.numel() == l.in * l.out && params[2 * k + 1]->value.numel() == l.out,
                 "nn::DeviceMlp: layer {} of the model does not match the options", k);
    s.layers.push_back(l);
    s.sizes.push_back(static_cast<std::size_t>(l.in * l.out));
    s.sizes.push_back(static_cast<std::size_t>(l.out));
  }
  s.total = off;
  const std::size_t bytes = s.total * sizeof(float);
  HERD_CUDA_CHECK(cudaMalloc(&s.w, bytes));
  HERD_CUDA_CHECK(cudaMalloc(&s.g, bytes));
  HERD_CUDA_CHECK(cudaMalloc(&s.m, bytes));
  HERD_CUDA_CHECK(cudaMalloc(&s.v, bytes));
  HERD_CUDA_CHECK(cudaMalloc(&s.loss, sizeof(double)));
  HERD_CUDA_CHECK(cudaMemsetAsync(s.m, 0, bytes, stream));
  HERD_CUDA_CHECK(cudaMemsetAsync(s.v, 0, bytes, stream));
  // A model on a GPU may have work pending on the nn stream, which `stream` may not be
  // ordered after (a non-blocking stream): finish it first.
  if (model.device().is_cuda()) synchronize(model.device());
  std::size_t at = 0;
  for (std::size_t i = 0; i < params.size(); ++i) {
    // The model's parameters are host or device memory (a model already on a GPU):
    // cudaMemcpyDefault lets unified addressing pick the direction.
    HERD_CUDA_CHECK(cudaMemcpyAsync(s.w + at, params[i]->value.data<float>(), s.sizes[i] * sizeof(float),
                                    cudaMemcpyDefault, stream));
    at += s.sizes[i];
  }
  HERD_CUDA_CHECK(cudaStreamSynchronize(stream));
  cublas_check(cublasCreate(&s.blas), "cublasCreate");
  cublas_check(cublasSetStream(s.blas, stream), "cublasSetStream");
  // Keep cuBLAS in its default (deterministic, non-TF32) math mode: the differential tests
  // compare with the CPU in float tolerance.
}

DeviceMlp::~DeviceMlp() {
  Impl& s = *impl_;
  cudaStreamSynchronize(s.stream);
  s.drop_graph();
  s.free_acts();
  if (s.blas) cublasDestroy(s.blas);
  cudaFree(s.w);
  cudaFree(s.g);
  cudaFree(s.m);
  cudaFree(s.v);
  cudaFree(s.loss);
}

void DeviceMlp::forward_backward(const float* x, const float* y, std::int64_t batch) {
  HERD_REQUIRE(batch > 0, "nn::DeviceMlp: batch is {}, but must be positive", batch);
  Impl& s = *impl_;
  if (s.exec && batch == s.graph_batch && x == s.graph_x && y == s.graph_y) {
    HERD_CUDA_CHECK(cudaGraphLaunch(s.exec, s.stream));
    return;
  }
  s.ensure_batch(batch);
  s.run(x, y, batch);
}

const float* DeviceMlp::forward(const float* x, std::int64_t batch) {
  HERD_REQUIRE(batch > 0, "nn::DeviceMlp::forward: batch is {}, but must be positive", batch);
  Impl& s = *impl_;
  s.ensure_batch(batch);
  s.run_forward(x, batch);
  return s.out_of(s.layers.size() - 1);
}

void DeviceMlp::capture(const float* x, const float* y, std::int64_t batch) {
  HERD_REQUIRE(batch > 0, "nn::DeviceMlp::capture: batch is {}, but must be positive", batch);
  Impl& s = *impl_;
  s.ensure_batch(batch);
  s.run(x, y, batch);  // warm-up outside the capture (cuBLAS workspace, kernel loading)
  HERD_CUDA_CHECK(cudaStreamSynchronize(s.stream));
  s.drop_graph();
  HERD_CUDA_CHECK(cudaStreamBeginCapture(s.stream, cudaStreamCaptureModeThreadLocal));
  s.run(x, y, batch);
  HERD_CUDA_CHECK(cudaStreamEndCapture(s.stream, &s.graph));
  HERD_CUDA_CHECK(cudaGraphInstantiate(&s.exec, s.graph, 0));
  s.graph_batch = batch;
  s.graph_x = x;
  s.graph_y = y;
}

void DeviceMlp::adam_step() {
  Impl& s = *impl_;
  ++s.steps;
  adam_update(s.w, s.g, s.m, s.v, static_cast<std::int64_t>(s.total), s.lr, s.beta1, s.beta2, s.eps, s.steps, s.stream);
}

double DeviceMlp::loss() {
  Impl& s = *impl_;
  double sum = 0;
  HERD_CUDA_CHECK(cudaMemcpyAsync(&sum, s.loss, sizeof(double), cudaMemcpyDeviceToHost, s.stream));
  HERD_CUDA_CHECK(cudaStreamSynchronize(s.stream));
  return sum / static_cast<double>(s.batch * s.layers.back().out);
}

namespace {
std::vector<std::vector<float>> split_to_host(const float* flat, const std::vector<std::size_t>& sizes,
                                              cudaStream_t stream) {
  std::vector<std::vector<float>> out;
  std::size_t at = 0;
  for (std::size_t n : sizes) {
    out.emplace_back(n);
    HERD_CUDA_CHECK(cudaMemcpyAsync(out.back().data(), flat + at, n * sizeof(float), cudaMemcpyDeviceToHost, stream));
    at += n;
  }
  HERD_CUDA_CHECK(cudaStreamSynchronize(stream));
  return out;
}
}  // namespace

std::vector<std::vector<float>> DeviceMlp::parameters_to_host() {
  return split_to_host(impl_->w, impl_->sizes, impl_->stream);
}

std::vector<std::vector<float>> DeviceMlp::gradients_to_host() {
  return split_to_host(impl_->g, impl_->sizes, impl_->stream);
}

}  // namespace herd::nn::cuda
