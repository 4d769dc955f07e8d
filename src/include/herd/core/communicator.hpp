#pragma once
#include "herd/core/cxx20.hpp"  // C++20 or one clear error
/// @file communicator.hpp
/// The collective interface shared by the sampler and the RL engine (DESIGN.md §4):
/// `SelfCommunicator` (one process), `MpiCommunicator` (MPICH) and, with CUDA,
/// `NcclCommunicator` (GPU buffers).
///
/// Every collective must be called on all ranks of the communicator in the same order, with
/// matching counts and types; a mismatch is undefined behaviour in MPI and may hang.
/// A communicator object is used by one thread at a time (not thread-safe).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

namespace herd {

/// Element types the collectives move.
enum class DataType { kFloat64, kFloat32, kInt64, kInt32, kUint8 };

/// Size in bytes of one element of `t`.
std::size_t data_type_size(DataType t);

/// Reduction operators of `allreduce`.
enum class ReduceOp { kSum, kMin, kMax };

/// The `DataType` of a C++ element type (double, float, int64_t, int32_t, uint8_t).
template <class T>
constexpr DataType data_type_of() {
  if constexpr (std::is_same_v<T, double>) return DataType::kFloat64;
  else if constexpr (std::is_same_v<T, float>) return DataType::kFloat32;
  else if constexpr (std::is_same_v<T, std::int64_t>) return DataType::kInt64;
  else if constexpr (std::is_same_v<T, std::int32_t>) return DataType::kInt32;
  else if constexpr (std::is_same_v<T, std::uint8_t> || std::is_same_v<T, char>) return DataType::kUint8;
  else static_assert(sizeof(T) == 0, "herd::Communicator: unsupported element type");
}

/// Handle of a non-blocking collective. `wait()` must be called before the buffers are
/// read or reused, and before the handle is destroyed (the destructor waits if needed and
/// never throws).
class CommRequest {
 public:
  virtual ~CommRequest() = default;
  /// Blocks until the operation has completed. @throws CommunicationError
  virtual void wait() = 0;
  /// True when the operation has completed (then `wait()` returns at once).
  virtual bool test() = 0;
};

/// A group of ranks and its collectives. Host buffers for Self and MPI; device buffers for
/// NCCL. All collectives are *collective*: call on all ranks in the same order.
class Communicator {
 public:
  virtual ~Communicator() = default;

  /// This process's rank in [0, size()).
  virtual int rank() const = 0;
  /// Number of ranks.
  virtual int size() const = 0;
  /// Name of the backend: "self", "mpi" or "nccl".
  virtual std::string backend() const = 0;

  /// Blocks until every rank has entered. Collective. @throws CommunicationError
  virtual void barrier() = 0;
  /// Copies `count` elements at `data` from `root` to every rank. Collective.
  virtual void broadcast(void* data, std::size_t count, DataType type, int root) = 0;
  /// Element-wise reduction of `count` elements in place over all ranks. Collective.
  virtual void allreduce(void* data, std::size_t count, DataType type, ReduceOp op) = 0;
  /// Non-blocking `allreduce`; the buffer must stay alive and untouched until `wait()`.
  /// Collective (every rank starts it in the same order).
  virtual std::unique_ptr<CommRequest> allreduce_async(void* data, std::size_t count, DataType type, ReduceOp op) = 0;
  /// Gathers `count` elements from every rank into `recv` (`[size(), count]`, rank-major)
  /// on every rank. Collective.
  virtual void allgather(const void* send, void* recv, std::size_t count, DataType type) = 0;
  /// Gathers `count` elements from every rank into `recv` (`[size(), count]`) on `root`;
  /// `recv` is ignored on other ranks. Collective.
  virtual void gather(const void* send, void* recv, std::size_t count, DataType type, int root) = 0;
  /// Ends every rank of the job with `code` (MPI_Abort); used when one rank fails so the
  /// others do not hang. Not collective; never returns.
  [[noreturn]] virtual void abort(int code) = 0;

  // Typed conveniences over the raw collectives (same collective rules).
  template <class T>
  void broadcast(std::span<T> data, int root) {
    broadcast(data.data(), data.size(), data_type_of<T>(), root);
  }
  template <class T>
  void allreduce(std::span<T> data, ReduceOp op) {
    allreduce(data.data(), data.size(), data_type_of<T>(), op);
  }
  template <class T>
  std::unique_ptr<CommRequest> allreduce_async(std::span<T> data, ReduceOp op) {
    return allreduce_async(data.data(), data.size(), data_type_of<T>(), op);
  }
  /// Scalar all-reduce; returns the reduced value.
  template <class T>
  T allreduce_value(T value, ReduceOp op) {
    allreduce(&value, 1, data_type_of<T>(), op);
    return value;
  }
  /// `send` from every rank, concatenated in rank order, on every rank.
  template <class T>
  std::vector<T> allgather(std::span<const T> send) {
    std::vector<T> recv(send.size() * static_cast<std::size_t>(size()));
    allgather(send.data(), recv.data(), send.size(), data_type_of<T>());
    return recv;
  }
  /// Broadcasts a string of any length from `root`. Collective.
  void broadcast_string(std::string& s, int root);
};

/// A communicator of one rank: every collective is a local copy or no-op.
class SelfCommunicator final : public Communicator {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string backend() const override { return "self"; }
  void barrier() override {}
  void broadcast(void*, std::size_t, DataType, int root) override;
  void allreduce(void*, std::size_t, DataType, ReduceOp) override {}
  std::unique_ptr<CommRequest> allreduce_async(void* data, std::size_t count, DataType type, ReduceOp op) override;
  void allgather(const void* send, void* recv, std::size_t count, DataType type) override;
  void gather(const void* send, void* recv, std::size_t count, DataType type, int root) override;
  [[noreturn]] void abort(int code) override;
  using Communicator::allgather;
  using Communicator::allreduce;
  using Communicator::allreduce_async;
  using Communicator::broadcast;
};

}  // namespace herd
