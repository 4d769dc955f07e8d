#include "herd/core/nccl_communicator.hpp"

#include <cstdlib>

#include <nccl.h>

#include "herd/core/cuda/cuda_check.hpp"
#include "herd/core/cuda/lazy_library.hpp"
#include "herd/core/cuda/nccl_check.hpp"
#include "herd/core/error.hpp"
#include "herd/core/mpi_communicator.hpp"

namespace herd {
namespace {

ncclDataType_t nccl_type(DataType t) {
  switch (t) {
    case DataType::kFloat64:
      return ncclFloat64;
    case DataType::kFloat32:
      return ncclFloat32;
    case DataType::kInt64:
      return ncclInt64;
    case DataType::kInt32:
      return ncclInt32;
    case DataType::kUint8:
      return ncclUint8;
  }
  return ncclFloat32;
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return ncclSum;
    case ReduceOp::kMin:
      return ncclMin;
    case ReduceOp::kMax:
      return ncclMax;
  }
  return ncclSum;
}

// Completion of an enqueued collective, tracked by an event recorded after it.
class NcclRequest final : public CommRequest {
 public:
  explicit NcclRequest(cudaStream_t stream) {
    HERD_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming));
    HERD_CUDA_CHECK(cudaEventRecord(event_, stream));
  }
  // Does not block: the collective stays ordered on the communicator's stream, and CUDA
  // releases an event destroyed before it completed once it does.
  ~NcclRequest() override {
    if (event_ != nullptr) cudaEventDestroy(event_);
  }
  NcclRequest(const NcclRequest&) = delete;
  NcclRequest& operator=(const NcclRequest&) = delete;
  void wait() override { HERD_CUDA_CHECK(cudaEventSynchronize(event_)); }
  bool test() override {
    const cudaError_t rc = cudaEventQuery(event_);
    if (rc == cudaErrorNotReady) return false;
    HERD_CUDA_CHECK(rc);
    return true;
  }

 private:
  cudaEvent_t event_ = nullptr;
};

}  // namespace

struct NcclCommunicator::Impl {
  ncclComm_t comm = nullptr;
  void* scratch = nullptr;  // one int for barrier
};

NcclCommunicator::NcclCommunicator(Communicator& bootstrap, cudaStream_t stream, int device)
    : impl_(std::make_unique<Impl>()),
      bootstrap_(bootstrap),
      stream_(stream),
      rank_(bootstrap.rank()),
      size_(bootstrap.size()) {
  int count = 0;
  HERD_CUDA_CHECK(cudaGetDeviceCount(&count));
  HERD_CHECK_AS(CudaError, count > 0, "NcclCommunicator: no CUDA device");
  // One GPU per rank of a node: the node-local rank picks it (the global rank would
  // ask for devices past the first node's count on every other node).
  device_ = device < 0 ? node_local_rank(bootstrap) % count : device;
  HERD_REQUIRE(device_ < count, "NcclCommunicator: device {} requested, but only {} present", device_, count);
  HERD_CUDA_CHECK(cudaSetDevice(device_));
  // NCCL is opened at first use: every rank opens it before the id's broadcast, so that a
  // missing library throws on each rank rather than leaving the others waiting for rank 0.
  detail::nccl_library();
  ncclUniqueId id{};
  if (rank_ == 0) HERD_NCCL_CHECK(ncclGetUniqueId(&id));
  bootstrap.broadcast(&id, sizeof(id), DataType::kUint8, 0);
  HERD_NCCL_CHECK(ncclCommInitRank(&impl_->comm, size_, id, rank_));
  HERD_CUDA_CHECK(cudaMalloc(&impl_->scratch, sizeof(int)));
}

NcclCommunicator::~NcclCommunicator() {
  if (!impl_) return;
  cudaStreamSynchronize(stream_);
  if (impl_->comm != nullptr) ncclCommDestroy(impl_->comm);
  if (impl_->scratch != nullptr) cudaFree(impl_->scratch);
}

void NcclCommunicator::barrier() {
  HERD_CUDA_CHECK(cudaMemsetAsync(impl_->scratch, 0, sizeof(int), stream_));
  allreduce(impl_->scratch, 1, DataType::kInt32, ReduceOp::kSum);
}

void NcclCommunicator::broadcast(void* data, std::size_t count, DataType type, int root) {
  HERD_REQUIRE(root >= 0 && root < size_, "NcclCommunicator::broadcast: root {} of {} ranks", root, size_);
  HERD_NCCL_CHECK(ncclBroadcast(data, data, count, nccl_type(type), root, impl_->comm, stream_));
  HERD_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void NcclCommunicator::allreduce(void* data, std::size_t count, DataType type, ReduceOp op) {
  HERD_NCCL_CHECK(ncclAllReduce(data, data, count, nccl_type(type), nccl_op(op), impl_->comm, stream_));
  HERD_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

std::unique_ptr<CommRequest> NcclCommunicator::allreduce_async(void* data, std::size_t count, DataType type,
                                                               ReduceOp op) {
  HERD_NCCL_CHECK(ncclAllReduce(data, data, count, nccl_type(type), nccl_op(op), impl_->comm, stream_));
  return std::make_unique<NcclRequest>(stream_);
}

void NcclCommunicator::allgather(const void* send, void* recv, std::size_t count, DataType type) {
  HERD_NCCL_CHECK(ncclAllGather(send, recv, count, nccl_type(type), impl_->comm, stream_));
  HERD_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void NcclCommunicator::gather(const void* send, void* recv, std::size_t count, DataType type, int root) {
  HERD_REQUIRE(root >= 0 && root < size_, "NcclCommunicator::gather: root {} of {} ranks", root, size_);
  const std::size_t bytes = count * data_type_size(type);
  HERD_NCCL_CHECK(ncclGroupStart());
  if (rank_ == root) {
    for (int r = 0; r < size_; ++r) {
      void* dst = static_cast<char*>(recv) + static_cast<std::size_t>(r) * bytes;
      if (r == root) {
        HERD_CUDA_CHECK(cudaMemcpyAsync(dst, send, bytes, cudaMemcpyDeviceToDevice, stream_));
      } else {
        HERD_NCCL_CHECK(ncclRecv(dst, count, nccl_type(type), r, impl_->comm, stream_));
      }
    }
  } else {
    HERD_NCCL_CHECK(ncclSend(send, count, nccl_type(type), root, impl_->comm, stream_));
  }
  HERD_NCCL_CHECK(ncclGroupEnd());
  HERD_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void NcclCommunicator::abort(int code) {
  if (impl_ && impl_->comm != nullptr) ncclCommAbort(impl_->comm);
  if (impl_) impl_->comm = nullptr;
  bootstrap_.abort(code);
  std::abort();  // not reached: the bootstrap's abort does not return
}

}  // namespace herd
