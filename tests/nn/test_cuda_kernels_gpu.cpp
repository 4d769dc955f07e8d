// Differential tests of the nn CUDA kernels against the CPU nn layer ([gpu]; exit code 77
// without a CUDA device). Each case runs the CPU module/optimizer and the kernel on the
// same data and compares in float tolerance.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include <cuda_runtime.h>

#include "herd/core/cuda/cuda_check.hpp"
#include "herd/core/rng.hpp"
#include "herd/nn/activations.hpp"
#include "herd/nn/cuda/kernels.hpp"
#include "herd/nn/losses.hpp"
#include "herd/nn/optimizer.hpp"

using namespace herd;
using namespace herd::nn;

namespace {

struct Stream {
  Stream() { HERD_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)); }
  ~Stream() { cudaStreamDestroy(s); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t s = nullptr;
};

// A device copy of a host vector, freed on destruction.
template <class T>
struct Dev {
  Dev(const std::vector<T>& h, cudaStream_t s) : n(h.size()) {
    HERD_CUDA_CHECK(cudaMalloc(&p, n * sizeof(T) + 1));
    HERD_CUDA_CHECK(cudaMemcpyAsync(p, h.data(), n * sizeof(T), cudaMemcpyHostToDevice, s));
  }
  // Zeroed on `s`, the stream that then uses it (a cudaMemset on the legacy default stream
  // is not ordered before work on a non-blocking stream).
  Dev(std::size_t count, cudaStream_t s) : n(count) {
    HERD_CUDA_CHECK(cudaMalloc(&p, n * sizeof(T) + 1));
    HERD_CUDA_CHECK(cudaMemsetAsync(p, 0, n * sizeof(T), s));
  }
  ~Dev() { cudaFree(p); }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
  std::vector<T> host(cudaStream_t s) const {
    std::vector<T> h(n);
    HERD_CUDA_CHECK(cudaMemcpyAsync(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost, s));
    HERD_CUDA_CHECK(cudaStreamSynchronize(s));
    return h;
  }
  T* p = nullptr;
  std::size_t n;
};

std::vector<float> randn(std::size_t n, std::uint32_t stream) {
  RngCursor c = RngStream(17, stream, RngPurpose::kUser).at(0);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(c.normal());
  return v;
}

Tensor tensor(const Shape& s, const std::vector<float>& v) {
  Tensor t(s, DType::kFloat32);
  std::copy(v.begin(), v.end(), t.data<float>());
  return t;
}

void check_close(const std::vector<float>& got, const Tensor& want, double tol = 1e-5) {
  REQUIRE(static_cast<std::int64_t>(got.size()) == want.numel());
  for (std::size_t i = 0; i < got.size(); ++i)
    CHECK(got[i] == Approx(want.item(static_cast<std::int64_t>(i))).epsilon(tol).margin(tol));
}

}  // namespace

TEST_CASE("nn CUDA: activations forward/backward equal the CPU modules", "[gpu][nn]") {
  Stream st;
  const std::int64_t rows = 37, cols = 53;
  const auto xv = randn(rows * cols, 1), gv = randn(rows * cols, 2);
  const Tensor x = tensor({rows, cols}, xv), gy = tensor({rows, cols}, gv);
  ReLU relu;
  Tanh tanh_m;
  ELU elu(0.7);
  struct Case {
    Module* m;
    cuda::Act act;
    double alpha;
  };
  for (const Case& c :
       {Case{&relu, cuda::Act::kReLU, 0.0}, Case{&tanh_m, cuda::Act::kTanh, 0.0}, Case{&elu, cuda::Act::kELU, 0.7}}) {
    CAPTURE(static_cast<int>(c.act));
    const Tensor& y = c.m->forward(x);
    const Tensor& gx = c.m->backward(gy);
    Dev<float> dx(xv, st.s), dy(xv.size(), st.s), dg(gv, st.s), dgx(xv.size(), st.s);
    cuda::activation_forward(c.act, dx.p, dy.p, rows * cols, c.alpha, st.s);
    cuda::activation_backward(c.act, dx.p, dy.p, dg.p, dgx.p, rows * cols, c.alpha, st.s);
    check_close(dy.host(st.s), y);
    check_close(dgx.host(st.s), gx);
  }
}

TEST_CASE("nn CUDA: bias add, bias grad, softmax against loops", "[gpu][nn]") {
  Stream st;
  for (std::int64_t rows : {1, 7, 300, 5000}) {
    const std::int64_t cols = 45;
    CAPTURE(rows);
    const auto yv = randn(static_cast<std::size_t>(rows * cols), 3);
    const auto bv = randn(static_cast<std::size_t>(cols), 4);
    Dev<float> y(yv, st.s), b(bv, st.s), gb(bv, st.s), sm(yv.size(), st.s), lsm(yv.size(), st.s);
    cuda::bias_add(y.p, b.p, rows, cols, st.s);
    cuda::bias_grad(y.p, gb.p, rows, cols, st.s);
    cuda::softmax_rows(y.p, sm.p, rows, cols, false, st.s);
    cuda::softmax_rows(y.p, lsm.p, rows, cols, true, st.s);
    const auto yo = y.host(st.s), gbo = gb.host(st.s), smo = sm.host(st.s), lsmo = lsm.host(st.s);
    std::vector<double> gsum(bv.begin(), bv.end());
    for (std::int64_t r = 0; r < rows; ++r) {
      double mx = -1e300, z = 0;
      for (std::int64_t c = 0; c < cols; ++c) {
        const auto i = static_cast<std::size_t>(r * cols + c);
        const double v = static_cast<double>(yv[i]) + bv[static_cast<std::size_t>(c)];
        CHECK(yo[i] == Approx(v).epsilon(1e-6).margin(1e-6));
        gsum[static_cast<std::size_t>(c)] += static_cast<float>(v);
        mx = std::max(mx, v);
      }
      for (std::int64_t c = 0; c < cols; ++c)
        z += std::exp(static_cast<double>(yo[static_cast<std::size_t>(r * cols + c)]) - mx);
      for (std::int64_t c = 0; c < cols; ++c) {
        const auto i = static_cast<std::size_t>(r * cols + c);
        const double l = yo[i] - mx - std::log(z);
        CHECK(lsmo[i] == Approx(l).epsilon(1e-5).margin(1e-5));
        CHECK(smo[i] == Approx(std::exp(l)).epsilon(1e-5).margin(1e-6));
      }
    }
    for (std::int64_t c = 0; c < cols; ++c)
      CHECK(gbo[static_cast<std::size_t>(c)] == Approx(gsum[static_cast<std::size_t>(c)]).epsilon(1e-4).margin(1e-3));
  }
}

TEST_CASE("nn CUDA: MSE forward/backward equal MseLoss", "[gpu][nn]") {
  Stream st;
  const std::int64_t n = 4099;
  const auto pv = randn(n, 5), tv = randn(n, 6);
  MseLoss loss;
  const double want = loss.forward(tensor({n}, pv), tensor({n}, tv));
  const Tensor& gx = loss.backward(0.5);
  Dev<float> p(pv, st.s), t(tv, st.s), g(pv.size(), st.s);
  Dev<double> sum(1, st.s);
  cuda::squared_error_sum(p.p, t.p, sum.p, n, st.s);
  cuda::mse_backward(p.p, t.p, g.p, n, 0.5, st.s);
  CHECK(sum.host(st.s)[0] / n == Approx(want).epsilon(1e-6));
  check_close(g.host(st.s), gx);
}

TEST_CASE("nn CUDA: Adam and SGD updates equal the CPU optimizers over steps", "[gpu][nn]") {
  Stream st;
  const std::int64_t n = 1000;
  const auto w0 = randn(n, 7);
  for (int kind = 0; kind < 3; ++kind) {
    CAPTURE(kind);
    Parameter p{tensor({n}, w0), Tensor({n}, DType::kFloat32)};
    std::vector<NamedParameter> np{{"w", &p}};
    std::unique_ptr<Optimizer> opt;
    if (kind == 0) opt = std::make_unique<Adam>(np, 1e-2, 0.9, 0.99, 1e-8);
    else if (kind == 1) opt = std::make_unique<Sgd>(np, 1e-2, 0.9, 0.1, false);
    else opt = std::make_unique<Sgd>(np, 1e-2, 0.8, 0.0, true);
    Dev<float> w(w0, st.s), m(w0.size(), st.s), v(w0.size(), st.s);
    for (int step = 1; step <= 5; ++step) {
      const auto gv = randn(n, 100 + static_cast<std::uint32_t>(step));
      std::copy(gv.begin(), gv.end(), p.grad.data<float>());
      opt->step();
      Dev<float> g(gv, st.s);
      if (kind == 0) cuda::adam_update(w.p, g.p, m.p, v.p, n, 1e-2, 0.9, 0.99, 1e-8, step, st.s);
      else if (kind == 1) cuda::sgd_update(w.p, g.p, m.p, n, 1e-2, 0.9, 0.1, false, step == 1, st.s);
      else cuda::sgd_update(w.p, g.p, m.p, n, 1e-2, 0.8, 0.0, true, step == 1, st.s);
    }
    check_close(w.host(st.s), p.value, 1e-5);
  }
}
