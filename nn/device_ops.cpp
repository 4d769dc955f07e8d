#include "device_ops.hpp"

#include <array>
#include <cstring>
#include <mutex>
#include <type_traits>

#include "herd/core/cuda/cuda_check.hpp"

namespace herd::nn::detail {
namespace {

constexpr int kMaxDevices = 64;

void check_blas(cublasStatus_t st, const char* what) {
  HERD_CHECK(st == CUBLAS_STATUS_SUCCESS, "nn: cuBLAS {} failed with status {}", what, static_cast<int>(st));
}

int index_of(Device d) {
  HERD_REQUIRE(d.is_cuda() && d.index >= 0 && d.index < kMaxDevices,
               "nn: device {} is not a CUDA device index in [0, {})", d.str(), kMaxDevices);
  return d.index;
}

struct ThreadHandles {
  std::array<cublasHandle_t, kMaxDevices> blas{};
  std::array<double*, kMaxDevices> scratch{};
  ~ThreadHandles() {
    // Best effort at thread exit (the driver may already be shut down at process exit).
    for (auto& h : blas)
      if (h) cublasDestroy(h);
    for (auto* p : scratch)
      if (p) cudaFree(p);
  }
};

ThreadHandles& thread_handles() {
  thread_local ThreadHandles h;
  return h;
}

}  // namespace

DevGuard::DevGuard(Device d) {
  HERD_CUDA_CHECK(cudaGetDevice(&previous_));
  changed_ = previous_ != d.index;
  if (changed_) HERD_CUDA_CHECK(cudaSetDevice(d.index));
}
DevGuard::~DevGuard() {
  if (changed_) cudaSetDevice(previous_);
}

namespace {

// The nn stream and the error record of each device, created together on first use (so
// the record exists before any stream capture).
struct DeviceState {
  cudaStream_t stream = nullptr;
  std::int64_t* record_host = nullptr;  // mapped pinned memory, 4 int64
  std::int64_t* record_dev = nullptr;   // its device address
};

DeviceState& device_state(Device d) {
  static std::mutex mu;
  static std::array<DeviceState, kMaxDevices> states{};
  const int i = index_of(d);
  std::lock_guard<std::mutex> lock(mu);
  DeviceState& st = states[static_cast<std::size_t>(i)];
  if (!st.stream) {
    DevGuard g(d);
    void* host = nullptr;
    HERD_CUDA_CHECK(cudaHostAlloc(&host, 4 * sizeof(std::int64_t), cudaHostAllocMapped | cudaHostAllocPortable));
    std::memset(host, 0, 4 * sizeof(std::int64_t));
    void* dev = nullptr;
    HERD_CUDA_CHECK(cudaHostGetDevicePointer(&dev, host, 0));
    st.record_host = static_cast<std::int64_t*>(host);
    st.record_dev = static_cast<std::int64_t*>(dev);
    HERD_CUDA_CHECK(cudaStreamCreate(&st.stream));
  }
  return st;
}

}  // namespace

cudaStream_t dev_stream(Device d) { return device_state(d).stream; }

std::int64_t* dev_error_record(Device d) { return device_state(d).record_dev; }

void check_dev_errors(Device d) {
  volatile std::int64_t* r = device_state(d).record_host;
  const std::int64_t code = r[0];
  if (code == kDevErrNone) return;
  const std::int64_t index = r[1], value = r[2], bound = r[3];
  r[1] = 0;
  r[2] = 0;
  r[3] = 0;
  r[0] = 0;
  const char* who = code == kDevErrCrossEntropyTarget ? "nn::CrossEntropyLoss::forward" : "nn::Categorical::log_prob";
  const char* what = code == kDevErrCrossEntropyTarget ? "targets" : "actions";
  throw InputError(
      fmt::format("{}: {}[{}] is {}, but must be in [0, {}) (found on {} and reported at the next "
                  "synchronisation)",
                  who, what, index, value, bound, d.str()));
}

cublasHandle_t dev_blas(Device d) {
  auto& h = thread_handles().blas[static_cast<std::size_t>(index_of(d))];
  if (!h) {
    DevGuard g(d);
    check_blas(cublasCreate(&h), "cublasCreate");
    check_blas(cublasSetStream(h, dev_stream(d)), "cublasSetStream");
  }
  return h;
}

double* dev_scratch(Device d) {
  auto& p = thread_handles().scratch[static_cast<std::size_t>(index_of(d))];
  if (!p) {
    DevGuard g(d);
    HERD_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&p), 8 * sizeof(double)));
  }
  return p;
}

double dev_read(Device d, const double* p) {
  double v = 0;
  cudaStream_t s = dev_stream(d);
  HERD_CUDA_CHECK(cudaMemcpyAsync(&v, p, sizeof(double), cudaMemcpyDeviceToHost, s));
  HERD_CUDA_CHECK(cudaStreamSynchronize(s));
  check_dev_errors(d);
  return v;
}

template <class T>
void dev_gemm(Device d, bool trans_a, bool trans_b, std::int64_t M, std::int64_t N, std::int64_t K, const T* A,
              const T* B, T* C, bool accumulate) {
  if (M == 0 || N == 0) return;
  const T alpha = 1;
  const T beta = accumulate ? 1 : 0;
  cublasHandle_t h = dev_blas(d);
  // Row-major C[M,N] is column-major C^T[N,M] = op(B)^T op(A)^T: B's column-major view is
  // op(B)^T untransposed when B is stored [K,N] (ld N) and needs a transpose when stored
  // [N,K] (ld K); likewise A (ld K untransposed, M transposed).
  const int m = static_cast<int>(N), n = static_cast<int>(M), k = static_cast<int>(K);
  const int ldb = static_cast<int>(trans_b ? K : N), lda = static_cast<int>(trans_a ? M : K);
  const cublasOperation_t ob = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t oa = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  // With K == 0 cuBLAS scales C by beta, which is what an empty sum means.
  if constexpr (std::is_same_v<T, float>)
    check_blas(cublasSgemm(h, ob, oa, m, n, k, &alpha, B, ldb > 0 ? ldb : 1, A, lda > 0 ? lda : 1, &beta, C, m),
               "sgemm");
  else
    check_blas(cublasDgemm(h, ob, oa, m, n, k, &alpha, B, ldb > 0 ? ldb : 1, A, lda > 0 ? lda : 1, &beta, C, m),
               "dgemm");
}

template void dev_gemm<float>(Device, bool, bool, std::int64_t, std::int64_t, std::int64_t, const float*, const float*,
                              float*, bool);
template void dev_gemm<double>(Device, bool, bool, std::int64_t, std::int64_t, std::int64_t, const double*,
                               const double*, double*, bool);

void require_device(const Tensor& t, Device d, const char* who) {
  HERD_REQUIRE(t.defined() && t.device() == d, "{}: tensor {} must be on {}", who, t.str(), d.str());
}

}  // namespace herd::nn::detail
