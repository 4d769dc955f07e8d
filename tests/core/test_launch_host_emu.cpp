// The launch layer's host backend (herd/core/cuda/launch.hpp, src/cuda/host_runtime.cpp):
// grid and block indices, __shared__ memory and __syncthreads, stream and graph semantics,
// the counters, and the checked mode's reports. Compiled as a host-emu translation unit
// (HERD_HOST_EMU), so its kernels are ordinary CUDA source run on the CPU.
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "herd/core/cuda/cuda_check.hpp"
#include "herd/core/cuda/launch.hpp"
#include "herd/core/launch.hpp"

namespace {

// Every thread writes its global linear index; each block sums its threads' values with a
// shared-memory tree (one barrier per level), as the nn reductions do.
__global__ void index_and_sum(int* ids, double* block_sums, const double* x, int n) {
  __shared__ double part[256];
  const unsigned t = threadIdx.y * blockDim.x + threadIdx.x;
  const unsigned nt = blockDim.x * blockDim.y;
  const unsigned b = blockIdx.y * gridDim.x + blockIdx.x;
  const int g = static_cast<int>(b * nt + t);
  if (g < n) ids[g] = g;
  part[t] = g < n ? x[g] : 0.0;
  __syncthreads();
  for (unsigned s = nt / 2; s > 0; s /= 2) {
    if (t < s) part[t] += part[t + s];
    __syncthreads();
  }
  if (t == 0) block_sums[b] = part[0];
}

__global__ void add_value(double* y, double v, int n) {
  const int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) y[i] += v;
}

__global__ void write_at(double* y, int at) {
  if (threadIdx.x == 0) y[at] = 1.0;
}

template <class T>
T* device_alloc(std::size_t n) {
  void* p = nullptr;
  HERD_CUDA_CHECK(cudaMalloc(&p, n * sizeof(T)));
  return static_cast<T*>(p);
}

// Runs `f` in a child process; returns (terminating signal or 0, what it wrote to stderr).
std::pair<int, std::string> in_child(const std::function<void()>& f) {
  int fd[2];
  REQUIRE(pipe(fd) == 0);
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(fd[1], 2);
    close(fd[0]);
    f();
    _exit(0);
  }
  close(fd[1]);
  std::string err;
  char buf[512];
  for (ssize_t r; (r = read(fd[0], buf, sizeof buf)) > 0;) err.append(buf, static_cast<std::size_t>(r));
  close(fd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return {WIFSIGNALED(status) ? WTERMSIG(status) : 0, err};
}

}  // namespace

TEST_CASE("host backend: indices, shared memory and barriers over a 2-D grid of 2-D blocks", "[core][host-emu]") {
  REQUIRE(herd::gpu::active_backend() == herd::gpu::Backend::kHost);
  const dim3 grid(3, 2), block(64, 2);
  const int n = 3 * 2 * 128 - 50;  // the last block partly idle
  std::vector<double> x(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) x[static_cast<std::size_t>(i)] = 1.0 + i % 7;
  int* ids = device_alloc<int>(static_cast<std::size_t>(n));
  double* sums = device_alloc<double>(6);
  double* dx = device_alloc<double>(static_cast<std::size_t>(n));
  HERD_CUDA_CHECK(cudaMemcpy(dx, x.data(), x.size() * sizeof(double), cudaMemcpyHostToDevice));
  herd::gpu::launch(index_and_sum, grid, block, 0, nullptr, ids, sums, dx, n);
  HERD_CUDA_CHECK(cudaGetLastError());
  std::vector<int> hid(static_cast<std::size_t>(n));
  std::vector<double> hs(6);
  HERD_CUDA_CHECK(cudaMemcpy(hid.data(), ids, hid.size() * sizeof(int), cudaMemcpyDeviceToHost));
  HERD_CUDA_CHECK(cudaMemcpy(hs.data(), sums, hs.size() * sizeof(double), cudaMemcpyDeviceToHost));
  for (int i = 0; i < n; ++i) REQUIRE(hid[static_cast<std::size_t>(i)] == i);
  for (int b = 0; b < 6; ++b) {
    double e = 0;
    for (int i = b * 128; i < std::min(n, (b + 1) * 128); ++i) e += x[static_cast<std::size_t>(i)];
    CHECK(hs[static_cast<std::size_t>(b)] == e);
  }
  for (void* p : {static_cast<void*>(ids), static_cast<void*>(sums), static_cast<void*>(dx)}) cudaFree(p);
}

TEST_CASE("host backend: counters of launches, waits and transfers", "[core][host-emu]") {
  double* d = device_alloc<double>(8);
  std::vector<double> h(8, 2.0);
  cudaStream_t s;
  HERD_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  herd::gpu::reset_launch_counters();
  const herd::gpu::CounterScope scope;
  HERD_CUDA_CHECK(cudaMemcpyAsync(d, h.data(), 64, cudaMemcpyHostToDevice, s));
  herd::gpu::launch(add_value, 1, 8, 0, s, d, 1.0, 8);
  herd::gpu::launch(add_value, 1, 8, 0, s, d, 1.0, 8);
  HERD_CUDA_CHECK(cudaMemsetAsync(d, 0, 8, s));
  HERD_CUDA_CHECK(cudaStreamSynchronize(s));
  HERD_CUDA_CHECK(cudaMemcpyAsync(h.data(), d, 64, cudaMemcpyDeviceToHost, s));  // pageable: the host waits
  const herd::gpu::LaunchCounters c = scope.delta();
  CHECK(c.kernel_launches == 2);
  CHECK(c.host_waits == 2);
  CHECK(c.h2d_copies == 1);
  CHECK(c.h2d_bytes == 64);
  CHECK(c.d2h_copies == 1);
  CHECK(c.d2h_bytes == 64);
  CHECK(c.memsets == 1);
  CHECK(h[0] == 0.0);
  CHECK(h[1] == 4.0);
  CHECK(herd::gpu::launch_counters().kernel_launches == 2);
  herd::gpu::reset_launch_counters();
  CHECK(herd::gpu::launch_counters().kernel_launches == 0);
  cudaStreamDestroy(s);
  cudaFree(d);
}

TEST_CASE("host backend: a captured graph runs at each launch, with the arguments of the capture", "[core][host-emu]") {
  double* d = device_alloc<double>(4);
  HERD_CUDA_CHECK(cudaMemset(d, 0, 4 * sizeof(double)));
  cudaStream_t s;
  HERD_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  double v = 1.5;
  HERD_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
  herd::gpu::launch(add_value, 1, 4, 0, s, d, v, 4);
  CHECK(cudaStreamSynchronize(s) == cudaErrorStreamCaptureUnsupported);
  cudaGraph_t g = nullptr;
  HERD_CUDA_CHECK(cudaStreamEndCapture(s, &g));
  v = 100.0;  // captured by value
  std::vector<double> h(4);
  HERD_CUDA_CHECK(cudaMemcpy(h.data(), d, 32, cudaMemcpyDeviceToHost));
  CHECK(h[0] == 0.0);  // recorded, not run
  cudaGraphExec_t e = nullptr;
  HERD_CUDA_CHECK(cudaGraphInstantiate(&e, g, 0));
  const herd::gpu::CounterScope scope;
  HERD_CUDA_CHECK(cudaGraphLaunch(e, s));
  HERD_CUDA_CHECK(cudaGraphLaunch(e, s));
  CHECK(scope.delta().graph_launches == 2);
  CHECK(scope.delta().kernel_launches == 0);
  HERD_CUDA_CHECK(cudaStreamSynchronize(s));
  HERD_CUDA_CHECK(cudaMemcpy(h.data(), d, 32, cudaMemcpyDeviceToHost));
  CHECK(h == std::vector<double>(4, 3.0));
  cudaGraphExecDestroy(e);
  cudaGraphDestroy(g);
  cudaStreamDestroy(s);
  cudaFree(d);
}

TEST_CASE("host backend: a copy into page-locked memory is delivered at the sync, NaN before", "[core][host-emu]") {
  double* d = device_alloc<double>(2);
  const double src[2] = {3.0, 4.0};
  HERD_CUDA_CHECK(cudaMemcpy(d, src, sizeof src, cudaMemcpyHostToDevice));
  HERD_CUDA_CHECK(cudaDeviceSynchronize());  // the copy's DMA may outlive cudaMemcpy
  double* pinned = nullptr;
  HERD_CUDA_CHECK(cudaHostAlloc(reinterpret_cast<void**>(&pinned), 2 * sizeof(double), cudaHostAllocPortable));
  cudaStream_t s;
  HERD_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cudaEvent_t ev;
  HERD_CUDA_CHECK(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
  HERD_CUDA_CHECK(cudaMemcpyAsync(pinned, d, 2 * sizeof(double), cudaMemcpyDeviceToHost, s));
  HERD_CUDA_CHECK(cudaEventRecord(ev, s));
  herd::gpu::launch(add_value, 1, 2, 0, s, d, 10.0, 2);  // after the copy: not in it
  CHECK(std::isnan(pinned[0]));                          // read before a sync: the poison, not the value
  HERD_CUDA_CHECK(cudaEventSynchronize(ev));
  CHECK(pinned[0] == 3.0);
  CHECK(pinned[1] == 4.0);
  HERD_CUDA_CHECK(cudaMemcpyAsync(pinned, d, 2 * sizeof(double), cudaMemcpyDeviceToHost, s));
  CHECK(std::isnan(pinned[1]));
  HERD_CUDA_CHECK(cudaStreamSynchronize(s));
  CHECK(pinned[1] == 14.0);
  cudaEventDestroy(ev);
  cudaStreamDestroy(s);
  cudaFreeHost(pinned);
  cudaFree(d);
}

TEST_CASE("host backend: copies are checked against allocations and kinds; bad launches set the last error",
          "[core][host-emu]") {
  double* d = device_alloc<double>(4);
  double* d2 = device_alloc<double>(4);
  std::vector<double> h(8);
  CHECK(cudaMemcpy(h.data(), d, 5 * sizeof(double), cudaMemcpyDeviceToHost) == cudaErrorInvalidValue);
  CHECK(cudaMemcpy(d2, d, 4 * sizeof(double), cudaMemcpyHostToDevice) == cudaErrorInvalidValue);  // source is device
  CHECK(cudaMemcpy(d2, d, 4 * sizeof(double), cudaMemcpyDeviceToDevice) == cudaSuccess);
  CHECK(cudaMemsetAsync(d + 1, 0, 4 * sizeof(double), nullptr) == cudaErrorInvalidValue);
  cudaGetLastError();
  herd::gpu::launch(add_value, 1, 2048, 0, nullptr, d, 1.0, 4);
  CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration);
  CHECK(cudaGetLastError() == cudaSuccess);
  cudaFree(d);
  cudaFree(d2);
}

TEST_CASE("host backend, checked mode: host reads of device memory and out-of-bounds kernel writes are reported",
          "[core][host-emu]") {
  SECTION("host code reading device memory") {
    const auto [sig, err] = in_child([] {
      double* d = device_alloc<double>(4);
      const volatile double x = d[1];
      (void)x;
    });
    CHECK(sig == SIGSEGV);
    CHECK_THAT(err, Catch::Contains("host code accessed device memory") && Catch::Contains("byte 8 of a 32-byte"));
  }
  SECTION("a kernel writing one element past the end") {
    const auto [sig, err] = in_child([] {
      double* d = device_alloc<double>(4);
      herd::gpu::launch(write_at, 1, 32, 0, nullptr, d, 4);
    });
    CHECK(sig == SIGSEGV);
    CHECK_THAT(err, Catch::Contains("out-of-bounds device memory access by a kernel") &&
                        Catch::Contains("byte 0 past the end of a 32-byte allocation"));
  }
  SECTION("in bounds: no report") {
    const auto [sig, err] = in_child([] {
      double* d = device_alloc<double>(4);
      herd::gpu::launch(write_at, 1, 32, 0, nullptr, d, 3);
    });
    CHECK(sig == 0);
    CHECK(err.empty());
  }
}

TEST_CASE("host backend, checked mode: work on two streams without an event or sync between is a race",
          "[core][host-emu]") {
  // Zeroed on the legacy default stream, then used by a kernel on another stream.
  auto run = [](unsigned flags, bool order) {
    return in_child([flags, order] {
      double* d = device_alloc<double>(4);
      cudaStream_t s;
      HERD_CUDA_CHECK(cudaStreamCreateWithFlags(&s, flags));
      HERD_CUDA_CHECK(cudaMemset(d, 0, 4 * sizeof(double)));
      if (order) {
        cudaEvent_t e;
        HERD_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
        HERD_CUDA_CHECK(cudaEventRecord(e, nullptr));
        HERD_CUDA_CHECK(cudaStreamWaitEvent(s, e, 0));
      }
      herd::gpu::launch(add_value, 1, 4, 0, s, d, 1.0, 4);
      HERD_CUDA_CHECK(cudaStreamSynchronize(s));
    });
  };
  SECTION("non-blocking stream, no order: reported") {
    const auto [sig, err] = run(cudaStreamNonBlocking, false);
    CHECK(sig == SIGABRT);
    CHECK_THAT(err, Catch::Contains("stream-order race: a kernel on stream") &&
                        Catch::Contains("last written by work on the legacy default stream"));
  }
  SECTION("non-blocking stream after an event wait: fine") {
    const auto [sig, err] = run(cudaStreamNonBlocking, true);
    CHECK(sig == 0);
    CHECK(err.empty());
  }
  SECTION("blocking stream: ordered after the legacy stream implicitly") {
    const auto [sig, err] = run(cudaStreamDefault, false);
    CHECK(sig == 0);
    CHECK(err.empty());
  }
  SECTION("reads on two streams are not a race; a host sync orders a write") {
    const auto [sig, err] = in_child([] {
      double* d = device_alloc<double>(4);
      double* e = device_alloc<double>(4);
      cudaStream_t a, b;
      HERD_CUDA_CHECK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
      HERD_CUDA_CHECK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
      HERD_CUDA_CHECK(cudaMemsetAsync(d, 0, 32, a));
      HERD_CUDA_CHECK(cudaMemsetAsync(e, 0, 32, b));
      HERD_CUDA_CHECK(cudaStreamSynchronize(a));
      herd::gpu::launch(add_value, 1, 4, 0, b, d, 1.0, 4);  // d: written on a, synced
      HERD_CUDA_CHECK(cudaMemcpyAsync(e, d, 32, cudaMemcpyDeviceToDevice, b));
      HERD_CUDA_CHECK(cudaStreamSynchronize(b));
      std::vector<double> h(4);
      HERD_CUDA_CHECK(cudaMemcpyAsync(h.data(), e, 32, cudaMemcpyDeviceToHost, a));  // synced with b
      std::fprintf(stderr, "%s", h[3] == 1.0 ? "" : "wrong value");
    });
    CHECK(sig == 0);
    CHECK(err.empty());
  }
}
