#pragma once
/// @file data_parallel.hpp
/// `DataParallel`: synchronous data-parallel training of one module replicated on every
/// rank of a `Communicator`, with gradients all-reduced in buckets *during* backward, as
/// PyTorch's DistributedDataParallel does (Li et al. 2020, "PyTorch Distributed:
/// Experiences on Accelerating Data Parallel Training", VLDB 13(12)).
///
/// How it works. The parameters, taken in reverse order of `named_parameters()` (the
/// order in which backward completes them), are laid out end to end in one flat gradient
/// buffer; the buffer is cut into buckets of `bucket_bytes` (the last one shorter). A
/// parameter larger than a bucket, or one straddling a boundary, spans several buckets.
/// The layout depends only on the model and `bucket_bytes`, so it is the same on every
/// rank. During `backward` the module's grad-ready hook (`Module::set_grad_ready_hook`)
/// copies each finished gradient into the flat buffer; when all parameters overlapping a
/// bucket are in, that bucket's `Communicator::allreduce_async` (sum) starts — always in
/// bucket order, so every rank issues the same collectives in the same order. `finish()`
/// starts what is left, waits, divides by the world size and copies the averages back
/// into `Parameter::grad`.
///
/// Every backward pass must be completed by `finish()` (which `backward` calls) before the
/// next one: gradient accumulation over several passes without synchronisation (PyTorch's
/// `no_sync`) is not supported. If the module's backward throws, destroy this object.
///
/// Devices: host (CPU) modules, with any host communicator (`MpiCommunicator`: non-blocking
/// `MPI_Iallreduce`; `SelfCommunicator`). Device (CUDA) modules (CUDA builds) need an
/// `NcclCommunicator` on the module's GPU (or any communicator of size 1): the flat buffer
/// is device memory; gradients are copied into it on the nn stream (`compute_stream`);
/// each bucket records a CUDA event there when its last gradient is in, the
/// communicator's stream waits for that event and runs `ncclAllReduce`, so the
/// all-reduces overlap the rest of backward; `finish` makes the nn stream wait for the
/// communicator's stream, then scales and copies back on the nn stream, without a host
/// wait (the NCCL requests are released without blocking; completion is ordered on the
/// streams). The exposed communication is then a stall of the nn stream, which
/// `stats().wait_seconds` reports from CUDA timing events around that wait once the
/// device has run past it (see `DataParallelStats`).
///
/// Thread-safety: one thread drives the module, this object and the communicator.
/// Collective: the constructor, `backward` and `finish` must be called on every rank in the
/// same order, with replicas of the same architecture.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "herd/core/communicator.hpp"
#include "herd/nn/module.hpp"

/// The CUDA runtime's event struct (`cudaEvent_t` is `CUevent_st*`), declared here so
/// that this header needs no CUDA header.
struct CUevent_st;
namespace herd::nn {

/// Options of `DataParallel`.
struct DataParallelOptions {
  /// Size of one all-reduce bucket in bytes (PyTorch's `bucket_cap_mb`, default 25 MB).
  /// Rounded down to whole elements, at least one element.
  std::size_t bucket_bytes = std::size_t{25} << 20;
  /// Broadcast the parameters of rank 0 to every rank in the constructor, so that the
  /// replicas start identical.
  bool broadcast_parameters = true;
};

/// Timing of the last `backward`/`finish` pair (seconds, on this rank).
struct DataParallelStats {
  double backward_seconds = 0;  ///< host wall clock in the module's backward (incl. packing, launches)
  /// Exposed communication: host modules, the host wall clock `finish` spent blocked on the
  /// all-reduces; device modules (`wait_on_device`), the time the nn stream stood still
  /// waiting for them, measured by CUDA timing events around that stream wait, NaN until
  /// the device has run past it (`stats()` never blocks; after
  /// `synchronize(module().device())` it is known).
  double wait_seconds = 0;
  double finish_seconds = 0;            ///< host wall clock in all of `finish` (launch rest, wait, unpack, scale)
  std::size_t buckets_in_backward = 0;  ///< buckets started before `backward` returned
  bool wait_on_device = false;          ///< true when `wait_seconds` is a device-side stall (device modules)
};

/// Wraps a module for data-parallel training (see the file comment). The module and the
/// communicator must outlive this object; the module keeps its grad-ready hook until this
/// object is destroyed.
class DataParallel {
 public:
  /// Installs the hook, plans the buckets and (by default) broadcasts rank 0's parameters.
  /// Collective.
  /// @throws InputError for a CUDA module with a communicator of size > 1 that is not an
  ///         `NcclCommunicator`, a module without parameters or a bucket size under one
  ///         element; CommunicationError from the broadcast; CudaError on CUDA failures.
  DataParallel(Module& module, Communicator& comm, DataParallelOptions options = {});
  /// Waits for any all-reduce still in flight (never throws) and removes the hook.
  ~DataParallel();
  DataParallel(const DataParallel&) = delete;
  DataParallel& operator=(const DataParallel&) = delete;

  /// The wrapped module.
  Module& module() { return module_; }
  /// `module().forward(input)`.
  const Tensor& forward(const Tensor& input) { return module_.forward(input); }
  /// `module().backward(grad_output)` (all-reduces start as buckets fill), then `finish()`.
  /// On return `Parameter::grad` of every parameter holds the average over ranks of the
  /// ranks' gradients. Collective. @throws as `Module::backward`, CommunicationError.
  const Tensor& backward(const Tensor& grad_output);
  /// Completes the pass of a `module().backward` called directly: starts the buckets not
  /// yet started, waits for all, and writes averaged gradients into `Parameter::grad`.
  /// Collective. @throws CommunicationError
  void finish();

  /// Number of buckets.
  std::size_t bucket_count() const { return buckets_.size(); }
  /// Elements in bucket `i` (in bucket order). @throws std::out_of_range
  std::size_t bucket_elements(std::size_t i) const { return buckets_.at(i).count; }
  /// Timing of the last pass. Never blocks: for a device module, `wait_seconds` is filled
  /// in from the timing events once they have completed (NaN before).
  const DataParallelStats& stats() const;

 private:
  struct Slot {  // one parameter in the flat buffer
    Parameter* param = nullptr;
    std::size_t offset = 0, count = 0;  // in elements
    std::size_t first_bucket = 0, last_bucket = 0;
    bool ready = false;
  };
  struct Bucket {
    std::size_t offset = 0, count = 0;  // in elements
    std::size_t pending_total = 0;      // parameters overlapping it
    std::size_t pending = 0;            // of those, not yet ready in this pass
    std::unique_ptr<CommRequest> request;
  };

  void on_ready(Parameter& p);
  void mark_ready(Slot& s);
  void launch_ready_buckets();
  void begin_pass();

  Module& module_;
  Communicator& comm_;
  DataParallelOptions options_;
  DType dtype_;
  std::size_t elem_size_ = 0;
  std::vector<Slot> slots_;
  std::unordered_map<const Parameter*, std::size_t> slot_of_;
  std::vector<Bucket> buckets_;
  std::vector<unsigned char> flat_;  // host flat gradient buffer (host modules)
  // Device modules: flat gradient buffer in device memory, one event per bucket (its
  // gradients are in, recorded on the nn stream) and one for "all buckets reduced"
  // (recorded on the communicator's stream).
  bool on_device_ = false;
  Tensor flat_dev_;
  std::vector<CUevent_st*> bucket_events_;
  CUevent_st* done_event_ = nullptr;
  // Timing events on the nn stream just before and after its wait for `done_event_`; the
  // stall between them is the device-side `wait_seconds`, read once they completed.
  CUevent_st* wait_begin_ = nullptr;
  CUevent_st* wait_end_ = nullptr;
  mutable bool wait_pending_ = false;
  CUstream_st* nn_stream_ = nullptr;
  CUstream_st* comm_stream_ = nullptr;
  std::size_t next_launch_ = 0;
  bool in_pass_ = false;
  std::chrono::steady_clock::time_point pass_start_{};
  mutable DataParallelStats stats_;
};

}  // namespace herd::nn
