// NcclCommunicator on one rank ([gpu]; skipped with exit code 77 without a CUDA device).
// Multi-rank runs need one GPU per rank and an MPI bootstrap.
#include <catch2/catch.hpp>

#include <vector>

#include <cuda_runtime_api.h>

#include "herd/core/communicator.hpp"
#include "herd/core/cuda/cuda_check.hpp"
#include "herd/core/nccl_communicator.hpp"

using herd::DataType;
using herd::ReduceOp;

namespace {

struct DeviceBuffer {
  explicit DeviceBuffer(std::size_t bytes) { HERD_CUDA_CHECK(cudaMalloc(&p, bytes)); }
  ~DeviceBuffer() { cudaFree(p); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* p = nullptr;
};

}  // namespace

TEST_CASE("NcclCommunicator: one rank: allreduce, async allreduce, broadcast, gathers", "[gpu][core]") {
  herd::SelfCommunicator boot;
  cudaStream_t stream = nullptr;
  HERD_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  {
    herd::NcclCommunicator c(boot, stream);
    CHECK(c.backend() == "nccl");
    CHECK(c.rank() == 0);
    CHECK(c.size() == 1);
    c.barrier();
    const std::vector<float> host{1.5f, -2.0f, 3.25f, 0.0f, 7.0f};
    const std::size_t bytes = host.size() * sizeof(float);
    DeviceBuffer d(bytes), g(bytes);
    HERD_CUDA_CHECK(cudaMemcpyAsync(d.p, host.data(), bytes, cudaMemcpyHostToDevice, stream));
    for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax})
      c.allreduce(d.p, host.size(), DataType::kFloat32, op);
    auto req = c.allreduce_async(d.p, host.size(), DataType::kFloat32, ReduceOp::kSum);
    req->wait();
    CHECK(req->test());
    c.broadcast(d.p, host.size(), DataType::kFloat32, 0);
    c.allgather(d.p, g.p, host.size(), DataType::kFloat32);
    std::vector<float> back(host.size()), gathered(host.size());
    HERD_CUDA_CHECK(cudaMemcpyAsync(back.data(), d.p, bytes, cudaMemcpyDeviceToHost, stream));
    HERD_CUDA_CHECK(cudaMemcpyAsync(gathered.data(), g.p, bytes, cudaMemcpyDeviceToHost, stream));
    HERD_CUDA_CHECK(cudaStreamSynchronize(stream));
    CHECK(back == host);
    CHECK(gathered == host);
    c.gather(d.p, g.p, host.size(), DataType::kFloat32, 0);
    HERD_CUDA_CHECK(cudaMemcpyAsync(gathered.data(), g.p, bytes, cudaMemcpyDeviceToHost, stream));
    HERD_CUDA_CHECK(cudaStreamSynchronize(stream));
    CHECK(gathered == host);
  }
  HERD_CUDA_CHECK(cudaStreamDestroy(stream));
}
