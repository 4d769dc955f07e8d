#pragma once
/// @file nccl_communicator.hpp
/// `NcclCommunicator`: the `Communicator` interface over NCCL for *device* buffers, one GPU
/// per rank (NCCL builds only: `HERD_HAVE_NCCL`). The NCCL unique id is created on rank 0
/// and broadcast over a host "bootstrap" communicator (normally an `MpiCommunicator`),
/// then every rank calls `ncclCommInitRank` (NVIDIA NCCL documentation, "Creating a
/// communicator with options" / "Using NCCL with MPI").
///
/// Buffers: every pointer passed to a collective is device memory of this rank's GPU
/// (cudaMalloc; managed memory also works but is not used by herd).
/// Streams: collectives are enqueued on the communicator's stream (`stream()`, given to
/// the constructor; never the legacy default stream unless the caller passes 0). Blocking
/// collectives (`broadcast`, `allreduce`, `allgather`, `gather`, `barrier`) synchronise
/// that stream before returning, so they behave like their MPI counterparts;
/// `allreduce_async` only enqueues and returns a request backed by a CUDA event
/// (`wait` = cudaEventSynchronize, `test` = cudaEventQuery), so work the caller enqueues
/// later on the same stream is ordered after it without any host wait. Unlike the host
/// backends' requests, destroying such a request without `wait()` does not block either:
/// the collective stays ordered on the stream (order other streams after it with an event
/// recorded there, and call `wait()` before the host reads the buffer).
/// Thread-safety: one thread at a time per communicator. Collective: as `Communicator`.

#include <memory>

#include <cuda_runtime_api.h>

#include "herd/core/communicator.hpp"

namespace herd {

/// NCCL communicator over device buffers (see the file comment).
class NcclCommunicator final : public Communicator {
 public:
  /// Creates the NCCL communicator with one rank per rank of `bootstrap`. Collective over
  /// `bootstrap`. `bootstrap` must outlive this object (`abort` uses it).
  /// @param stream the CUDA stream collectives run on (on `device`)
  /// @param device the CUDA device of this rank; -1: the node-local rank of `bootstrap`
  ///        (`node_local_rank`, mpi_communicator.hpp) mod the device count.
  ///        It becomes the calling thread's current device.
  /// @throws CudaError when no device is present or a CUDA call fails;
  ///         CommunicationError when NCCL initialisation fails.
  NcclCommunicator(Communicator& bootstrap, cudaStream_t stream, int device = -1);
  /// Destroys the NCCL communicator (after synchronising the stream); never throws.
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "nccl"; }
  /// The CUDA device of this rank.
  int device() const { return device_; }
  /// The stream collectives are enqueued on.
  cudaStream_t stream() const { return stream_; }
  /// Changes the stream of later collectives (same device). Not collective.
  void set_stream(cudaStream_t stream) { stream_ = stream; }

  /// A one-element device all-reduce, then a stream synchronisation. Collective.
  /// @throws CommunicationError, CudaError
  void barrier() override;
  /// ncclBroadcast in place; synchronises the stream. Collective.
  void broadcast(void* data, std::size_t count, DataType type, int root) override;
  /// ncclAllReduce in place; synchronises the stream. Collective.
  void allreduce(void* data, std::size_t count, DataType type, ReduceOp op) override;
  /// ncclAllReduce in place, enqueued only; the request's event completes with it.
  /// Collective (same order on every rank).
  std::unique_ptr<CommRequest> allreduce_async(void* data, std::size_t count, DataType type, ReduceOp op) override;
  /// ncclAllGather into `recv` (`[size(), count]`, device); synchronises. Collective.
  void allgather(const void* send, void* recv, std::size_t count, DataType type) override;
  /// Point-to-point sends to `root` grouped with ncclGroupStart/End (NCCL has no gather);
  /// `recv` (device, `[size(), count]`) is used on `root` only; synchronises. Collective.
  void gather(const void* send, void* recv, std::size_t count, DataType type, int root) override;
  /// ncclCommAbort, then `bootstrap.abort(code)`. Not collective; never returns.
  [[noreturn]] void abort(int code) override;

  using Communicator::allgather;
  using Communicator::allreduce;
  using Communicator::allreduce_async;
  using Communicator::broadcast;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  Communicator& bootstrap_;
  cudaStream_t stream_ = nullptr;
  int rank_ = 0, size_ = 1, device_ = 0;
};

}  // namespace herd
