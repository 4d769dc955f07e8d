#pragma once
/// @file mpi_communicator.hpp
/// `MpiCommunicator`: the collectives of `Communicator` over MPI (MPICH), on host buffers.

#include <memory>

#include "herd/core/communicator.hpp"
#include "herd/core/config.hpp"

namespace herd {

/// MPI's life cycle for a process. `MpiEnvironment::ensure()` initialises MPI (with
/// MPI_THREAD_FUNNELED) when the caller has not, and registers finalisation at exit for an
/// initialisation it made itself; a program that initialised MPI itself keeps ownership.
/// Thread-safety: call from the main thread.
class MpiEnvironment {
 public:
  /// Initialises MPI if needed. @throws CommunicationError when MPI support is not built.
  static void ensure();
  /// True when MPI is initialised and not finalised.
  static bool active();
  /// True while an MPI call made by herd (any thread) is in progress, or the job is being
  /// aborted: an exit() seen then was made by MPI itself (MPICH ends a rank from inside its
  /// progress engine when another rank aborted the job), not by user code. Thread-safe.
  static bool call_in_progress();
  /// Asks the thread that drives MPI to abort the job (MPI_Abort with `code`, non-zero) the
  /// next time it waits for an MPI operation (every herd collective waits by polling). For
  /// another thread (a watchdog): calling MPI_Abort there while the main thread is inside
  /// MPI would run the transport's progress concurrently (UCX asserts). Thread-safe.
  static void request_abort(int code);
  /// Finalises MPI if herd initialised it and it is still active. Not collective in MPI's
  /// sense, but every rank must call it (MPI_Finalize is).
  static void finalize();
};

/// Collectives over an MPI communicator (a duplicate of MPI_COMM_WORLD by default, so herd's
/// messages never mix with the caller's). Host buffers only. One thread at a time.
/// Every collective is collective over the communicator; errors throw `CommunicationError`
/// naming the operation and the MPI error string.
class MpiCommunicator final : public Communicator {
 public:
  /// Duplicates MPI_COMM_WORLD, initialising MPI if needed. Collective over MPI_COMM_WORLD.
  MpiCommunicator();
  /// Wraps (duplicates) an existing `MPI_Comm` passed as its Fortran handle
  /// (`MPI_Comm_c2f`), so that C and Fortran callers can hand over their communicator.
  explicit MpiCommunicator(long fortran_handle);
  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator&) = delete;
  MpiCommunicator& operator=(const MpiCommunicator&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "mpi"; }
  void barrier() override;
  void broadcast(void* data, std::size_t count, DataType type, int root) override;
  void allreduce(void* data, std::size_t count, DataType type, ReduceOp op) override;
  std::unique_ptr<CommRequest> allreduce_async(void* data, std::size_t count, DataType type, ReduceOp op) override;
  void allgather(const void* send, void* recv, std::size_t count, DataType type) override;
  void gather(const void* send, void* recv, std::size_t count, DataType type, int root) override;
  [[noreturn]] void abort(int code) override;
  /// This process's rank among the ranks of this communicator on the same node (shared
  /// memory domain, MPI_Comm_split_type with MPI_COMM_TYPE_SHARED, ordered by rank), in
  /// [0, local_size()): what picks "this rank's GPU" (local rank mod device count), which
  /// the global rank does not do across nodes. Computed once by the constructor.
  int local_rank() const { return local_rank_; }
  /// Number of ranks of this communicator on this process's node.
  int local_size() const { return local_size_; }
  using Communicator::allgather;
  using Communicator::allreduce;
  using Communicator::allreduce_async;
  using Communicator::broadcast;

 private:
  struct Impl;
  void find_node_ranks();
  std::unique_ptr<Impl> impl_;
  int rank_ = 0;
  int size_ = 1;
  int local_rank_ = 0;
  int local_size_ = 1;
};

/// The node-local rank of this process in `comm`: `MpiCommunicator::local_rank()` for an
/// MPI communicator, else `comm.rank()` (a single process, or a backend without node
/// information). Not collective.
int node_local_rank(const Communicator& comm);

/// The communicator for this process: an `MpiCommunicator` when MPI support is built and
/// the process was started by an MPI launcher (or MPI is already initialised), else a
/// `SelfCommunicator`. Collective when it returns an MPI communicator.
std::unique_ptr<Communicator> make_world_communicator();

/// True when the environment shows an MPI launcher (MPICH/Hydra, Open MPI, Slurm, PMI).
bool launched_by_mpi();

}  // namespace herd
