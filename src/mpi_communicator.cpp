#include "herd/core/mpi_communicator.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <thread>

#include "herd/core/error.hpp"

#if HERD_HAVE_MPI
#include <mpi.h>
#endif

namespace herd {

bool launched_by_mpi() {
  // Hydra (MPICH), Open MPI, Slurm's PMI and PMIx all export one of these to each process.
  for (const char* v :
       {"PMI_RANK", "PMI_SIZE", "PMIX_RANK", "OMPI_COMM_WORLD_SIZE", "MPI_LOCALNRANKS", "HYDI_CONTROL_FD", "PMI_FD"}) {
    if (std::getenv(v) != nullptr) return true;
  }
  return false;
}

#if HERD_HAVE_MPI

namespace {

bool g_herd_initialised_mpi = false;
/// Set by `MpiCommunicator::abort`: the exit handlers must not finalise MPI then.
std::atomic<bool> g_herd_aborting{false};

[[noreturn]] void throw_mpi(const char* what, int code) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, buf, &len);
  throw CommunicationError(fmt::format("MPI: {} failed: {}", what, std::string(buf, len)));
}

/// How many MPI calls of this process are in progress. MPICH ends a rank from inside its
/// progress engine (calling exit()) when another rank called MPI_Abort; the exit handlers
/// must not finalise MPI then: MPI_Finalize would re-enter the transport's progress (UCX
/// asserts `worker->inprogress++ == 0` and prints pages of backtraces).
std::atomic<int> g_mpi_calls_in_progress{0};

struct InMpiCall {
  InMpiCall() { ++g_mpi_calls_in_progress; }
  ~InMpiCall() { --g_mpi_calls_in_progress; }
  InMpiCall(const InMpiCall&) = delete;
  InMpiCall& operator=(const InMpiCall&) = delete;
};

#define HERD_MPI_CALL(what, call)                                   \
  do {                                                              \
    int herd_mpi_rc_ = MPI_SUCCESS;                                 \
    {                                                               \
      const InMpiCall herd_in_mpi_;                                 \
      herd_mpi_rc_ = (call);                                        \
    }                                                               \
    if (herd_mpi_rc_ != MPI_SUCCESS) throw_mpi(what, herd_mpi_rc_); \
  } while (0)

MPI_Datatype mpi_type(DataType t) {
  switch (t) {
    case DataType::kFloat64:
      return MPI_DOUBLE;
    case DataType::kFloat32:
      return MPI_FLOAT;
    case DataType::kInt64:
      return MPI_INT64_T;
    case DataType::kInt32:
      return MPI_INT32_T;
    case DataType::kUint8:
      return MPI_UINT8_T;
  }
  return MPI_BYTE;
}

MPI_Op mpi_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return MPI_SUM;
    case ReduceOp::kMin:
      return MPI_MIN;
    case ReduceOp::kMax:
      return MPI_MAX;
  }
  return MPI_SUM;
}

int checked_count(std::size_t count, const char* what) {
  HERD_CHECK_AS(CommunicationError, count <= static_cast<std::size_t>(INT_MAX),
                "MpiCommunicator::{}: count is {}, but must be at most {}", what, count, INT_MAX);
  return static_cast<int>(count);
}

constexpr std::size_t kChunk = std::size_t{1} << 30;

/// Set by `MpiEnvironment::request_abort` (another thread, e.g. a watchdog): the main
/// thread aborts the job at its next wait for an MPI request.
std::atomic<int> g_abort_requested{0};

/// How long a wait polls MPI_Test back to back before it gives the core away between
/// polls: HERD_MPI_SPIN_US microseconds (default 50; 0: yield at once; -1: never, a pure
/// busy-poll). Read once.
std::int64_t spin_ns() {
  static const std::int64_t ns = [] {
    const char* v = std::getenv("HERD_MPI_SPIN_US");
    if (!v || !*v) return std::int64_t{50000};
    char* end = nullptr;
    const long long us = std::strtoll(v, &end, 10);
    if (end == v || *end != 0 || us < -1) return std::int64_t{50000};
    return us < 0 ? std::numeric_limits<std::int64_t>::max() : static_cast<std::int64_t>(us) * 1000;
  }();
  return ns;
}

/// Waits for `req` by polling MPI_Test, so that an abort requested by another thread is
/// made here, by the thread that drives MPI, instead of concurrently from that thread.
/// The first `spin_ns()` of a wait poll back to back (lowest latency while the peers run
/// on cores of their own); after that every poll is followed by sched_yield, and after
/// 2 ms by a sleep of 1/32 of the time waited so far (20 us to 1 ms: the wait ends at most
/// about 3% late): on a machine with fewer free cores than busy threads (ranks
/// plus their compute threads, or other load) a rank spinning in MPI_Test holds the core
/// its peer needs to reach the same collective, so each synchronisation would cost up to
/// a scheduler time slice. @throws CommunicationError naming `what`.
void wait_polling(MPI_Request& req, const char* what) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::int64_t spin = spin_ns();
  for (std::uint64_t polls = 1;; ++polls) {
    int flag = 0;
    int rc = MPI_SUCCESS;
    {
      const InMpiCall in_mpi;
      rc = MPI_Test(&req, &flag, MPI_STATUS_IGNORE);
    }
    if (rc != MPI_SUCCESS) throw_mpi(what, rc);
    if (flag) return;
    if (const int code = g_abort_requested.load(); code != 0) {
      g_herd_aborting = true;
      const InMpiCall in_mpi;
      MPI_Abort(MPI_COMM_WORLD, code);  // see MpiCommunicator::abort
      std::_Exit(code);
    }
    if (spin == std::numeric_limits<std::int64_t>::max() || (spin > 0 && polls % 16 != 0)) continue;
    const std::int64_t waited =
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0).count();
    if (waited < spin) continue;
    if (waited < 2000000) std::this_thread::yield();
    else std::this_thread::sleep_for(std::chrono::nanoseconds(std::clamp<std::int64_t>(waited / 32, 20000, 1000000)));
  }
}

class MpiRequest final : public CommRequest {
 public:
  explicit MpiRequest(MPI_Request r) : req_(r) {}
  ~MpiRequest() override {
    if (req_ != MPI_REQUEST_NULL && MpiEnvironment::active()) {
      const InMpiCall in_mpi;
      MPI_Wait(&req_, MPI_STATUS_IGNORE);
    }
  }
  void wait() override {
    if (req_ != MPI_REQUEST_NULL) wait_polling(req_, "MPI_Wait");
  }
  bool test() override {
    if (req_ == MPI_REQUEST_NULL) return true;
    int flag = 0;
    HERD_MPI_CALL("MPI_Test", MPI_Test(&req_, &flag, MPI_STATUS_IGNORE));
    return flag != 0;
  }

 private:
  MPI_Request req_;
};

}  // namespace

void MpiEnvironment::ensure() {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  if (fin)
    throw CommunicationError(
        "MPI was already finalised in this process and cannot be initialised again: a run of herd's C or "
        "Fortran API finalises the MPI that it initialised unless its input sets mpi_finalize_requested = false "
        "(mpiFinalizeRequested), so set that in every run but the last of a program; a program that calls "
        "MPI_Finalize itself must run herd before it");
  if (init) return;
  int provided = 0;
  HERD_MPI_CALL("MPI_Init_thread", MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided));
  g_herd_initialised_mpi = true;
  std::atexit([] { MpiEnvironment::finalize(); });
}

bool MpiEnvironment::active() {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  return init && !fin;
}

bool MpiEnvironment::call_in_progress() { return g_herd_aborting.load() || g_mpi_calls_in_progress.load() > 0; }

void MpiEnvironment::request_abort(int code) { g_abort_requested = code == 0 ? 1 : code; }

void MpiEnvironment::finalize() {
  // Never from inside an abort: MPICH's MPI_Abort may run the exit handlers, and finalising
  // there can trip assertions in the transport (UCX) while the job is being torn down.
  // Nor from an exit() that MPICH calls inside an MPI call (another rank aborted the job).
  if (g_herd_initialised_mpi && !g_herd_aborting && g_mpi_calls_in_progress.load() == 0 && active()) MPI_Finalize();
}

struct MpiCommunicator::Impl {
  MPI_Comm comm = MPI_COMM_NULL;
};

MpiCommunicator::MpiCommunicator() : impl_(std::make_unique<Impl>()) {
  MpiEnvironment::ensure();
  HERD_MPI_CALL("MPI_Comm_dup", MPI_Comm_dup(MPI_COMM_WORLD, &impl_->comm));
  MPI_Comm_set_errhandler(impl_->comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank(impl_->comm, &rank_);
  MPI_Comm_size(impl_->comm, &size_);
  find_node_ranks();
}

MpiCommunicator::MpiCommunicator(long fortran_handle) : impl_(std::make_unique<Impl>()) {
  MpiEnvironment::ensure();
  MPI_Comm given = MPI_Comm_f2c(static_cast<MPI_Fint>(fortran_handle));
  HERD_MPI_CALL("MPI_Comm_dup", MPI_Comm_dup(given, &impl_->comm));
  MPI_Comm_set_errhandler(impl_->comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank(impl_->comm, &rank_);
  MPI_Comm_size(impl_->comm, &size_);
  find_node_ranks();
}

void MpiCommunicator::find_node_ranks() {
  MPI_Comm node = MPI_COMM_NULL;
  HERD_MPI_CALL("MPI_Comm_split_type",
                MPI_Comm_split_type(impl_->comm, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node));
  MPI_Comm_rank(node, &local_rank_);
  MPI_Comm_size(node, &local_size_);
  MPI_Comm_free(&node);
}

MpiCommunicator::~MpiCommunicator() {
  if (impl_ && impl_->comm != MPI_COMM_NULL && MpiEnvironment::active()) MPI_Comm_free(&impl_->comm);
}

void MpiCommunicator::barrier() {
  MPI_Request req = MPI_REQUEST_NULL;
  HERD_MPI_CALL("MPI_Ibarrier", MPI_Ibarrier(impl_->comm, &req));
  wait_polling(req, "MPI_Barrier");
}

void MpiCommunicator::broadcast(void* data, std::size_t count, DataType type, int root) {
  HERD_REQUIRE(root >= 0 && root < size_, "MpiCommunicator::broadcast: root is {}, but must be in [0, {})", root,
               size_);
  auto* p = static_cast<char*>(data);
  const std::size_t es = data_type_size(type);
  for (std::size_t off = 0; off < count; off += kChunk) {
    const std::size_t n = std::min(kChunk, count - off);
    MPI_Request req = MPI_REQUEST_NULL;
    HERD_MPI_CALL("MPI_Ibcast", MPI_Ibcast(p + off * es, static_cast<int>(n), mpi_type(type), root, impl_->comm, &req));
    wait_polling(req, "MPI_Bcast");
  }
}

void MpiCommunicator::allreduce(void* data, std::size_t count, DataType type, ReduceOp op) {
  auto* p = static_cast<char*>(data);
  const std::size_t es = data_type_size(type);
  for (std::size_t off = 0; off < count; off += kChunk) {
    const std::size_t n = std::min(kChunk, count - off);
    MPI_Request req = MPI_REQUEST_NULL;
    HERD_MPI_CALL("MPI_Iallreduce", MPI_Iallreduce(MPI_IN_PLACE, p + off * es, static_cast<int>(n), mpi_type(type),
                                                   mpi_op(op), impl_->comm, &req));
    wait_polling(req, "MPI_Allreduce");
  }
}

std::unique_ptr<CommRequest> MpiCommunicator::allreduce_async(void* data, std::size_t count, DataType type,
                                                              ReduceOp op) {
  MPI_Request req = MPI_REQUEST_NULL;
  HERD_MPI_CALL("MPI_Iallreduce", MPI_Iallreduce(MPI_IN_PLACE, data, checked_count(count, "allreduce_async"),
                                                 mpi_type(type), mpi_op(op), impl_->comm, &req));
  return std::make_unique<MpiRequest>(req);
}

void MpiCommunicator::allgather(const void* send, void* recv, std::size_t count, DataType type) {
  const int n = checked_count(count, "allgather");
  MPI_Request req = MPI_REQUEST_NULL;
  HERD_MPI_CALL("MPI_Iallgather", MPI_Iallgather(send, n, mpi_type(type), recv, n, mpi_type(type), impl_->comm, &req));
  wait_polling(req, "MPI_Allgather");
}

void MpiCommunicator::gather(const void* send, void* recv, std::size_t count, DataType type, int root) {
  HERD_REQUIRE(root >= 0 && root < size_, "MpiCommunicator::gather: root is {}, but must be in [0, {})", root, size_);
  const int n = checked_count(count, "gather");
  MPI_Request req = MPI_REQUEST_NULL;
  HERD_MPI_CALL("MPI_Igather", MPI_Igather(send, n, mpi_type(type), rank_ == root ? recv : nullptr, n, mpi_type(type),
                                           root, impl_->comm, &req));
  wait_polling(req, "MPI_Gather");
}

void MpiCommunicator::abort(int code) {
  g_herd_aborting = true;
  // The launcher forwards this process's stderr asynchronously, and MPI_Abort ends every
  // process of the job at once: a one-line message printed just before (the reason for the
  // abort) could be lost with it. A moment's pause lets the launcher forward it.
  std::fflush(stderr);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const InMpiCall in_mpi;
  // On MPI_COMM_WORLD: MPICH aborts a derived communicator (ours is a duplicate) by
  // messaging its other ranks first, which never completes when one of them is stopped
  // (SIGSTOP); on the world communicator it asks the launcher to end the job at once.
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

int node_local_rank(const Communicator& comm) {
  if (const auto* mpi = dynamic_cast<const MpiCommunicator*>(&comm)) return mpi->local_rank();
  return comm.rank();
}

std::unique_ptr<Communicator> make_world_communicator() {
  if (launched_by_mpi() || MpiEnvironment::active()) return std::make_unique<MpiCommunicator>();
  return std::make_unique<SelfCommunicator>();
}

#else  // !HERD_HAVE_MPI

void MpiEnvironment::ensure() {
  throw CommunicationError("MpiEnvironment: herd was built without MPI (HERD_ENABLE_MPI=OFF)");
}
bool MpiEnvironment::active() { return false; }
bool MpiEnvironment::call_in_progress() { return false; }
void MpiEnvironment::request_abort(int) {}
void MpiEnvironment::finalize() {}
struct MpiCommunicator::Impl {};
MpiCommunicator::MpiCommunicator() { MpiEnvironment::ensure(); }
MpiCommunicator::MpiCommunicator(long) { MpiEnvironment::ensure(); }
MpiCommunicator::~MpiCommunicator() = default;
void MpiCommunicator::barrier() {}
void MpiCommunicator::broadcast(void*, std::size_t, DataType, int) {}
void MpiCommunicator::allreduce(void*, std::size_t, DataType, ReduceOp) {}
std::unique_ptr<CommRequest> MpiCommunicator::allreduce_async(void*, std::size_t, DataType, ReduceOp) {
  return nullptr;
}
void MpiCommunicator::allgather(const void*, void*, std::size_t, DataType) {}
void MpiCommunicator::gather(const void*, void*, std::size_t, DataType, int) {}
void MpiCommunicator::abort(int code) { std::_Exit(code); }
int node_local_rank(const Communicator& comm) { return comm.rank(); }
std::unique_ptr<Communicator> make_world_communicator() { return std::make_unique<SelfCommunicator>(); }

#endif

}  // namespace herd
