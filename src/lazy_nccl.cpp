// The NCCL functions herd calls, forwarded to libnccl opened at the first call
// (herd/core/cuda/lazy_library.hpp). Same names and signatures as nccl.h, so call sites use
// NCCL as usual. To call another NCCL function, add it to Nccl and below.
#include <nccl.h>

#include "herd/core/cuda/lazy_library.hpp"

#ifndef HERD_NCCL_FALLBACK_DIR
#define HERD_NCCL_FALLBACK_DIR ""
#endif

#define HERD_LAZY_STR2(x) #x
#define HERD_LAZY_STR(x) HERD_LAZY_STR2(x)

namespace {

constexpr const char* kWhat = "NCCL";
constexpr const char* kSoname = "libnccl.so." HERD_LAZY_STR(NCCL_MAJOR);

// NCCL's entry points, resolved together on first use.
struct Nccl {
  decltype(&ncclGetErrorString) get_error_string = nullptr;
  decltype(&ncclGetUniqueId) get_unique_id = nullptr;
  decltype(&ncclCommInitRank) comm_init_rank = nullptr;
  decltype(&ncclCommDestroy) comm_destroy = nullptr;
  decltype(&ncclCommAbort) comm_abort = nullptr;
  decltype(&ncclAllReduce) all_reduce = nullptr;
  decltype(&ncclBroadcast) broadcast = nullptr;
  decltype(&ncclAllGather) all_gather = nullptr;
  decltype(&ncclSend) send = nullptr;
  decltype(&ncclRecv) recv = nullptr;
  decltype(&ncclGroupStart) group_start = nullptr;
  decltype(&ncclGroupEnd) group_end = nullptr;
};

template <class F>
void resolve(void* handle, F& f, const char* name) {
  herd::detail::resolve_cuda_symbol(handle, f, kWhat, kSoname, name, herd::detail::LazyLibraryError::kCommunication);
}

// Loaded once; a failed load throws herd::CommunicationError and is tried again at the next call.
const Nccl& nccl() {
  static const Nccl table = [] {
    void* h = herd::detail::nccl_library();
    Nccl t;
    resolve(h, t.get_error_string, "ncclGetErrorString");
    resolve(h, t.get_unique_id, "ncclGetUniqueId");
    resolve(h, t.comm_init_rank, "ncclCommInitRank");
    resolve(h, t.comm_destroy, "ncclCommDestroy");
    resolve(h, t.comm_abort, "ncclCommAbort");
    resolve(h, t.all_reduce, "ncclAllReduce");
    resolve(h, t.broadcast, "ncclBroadcast");
    resolve(h, t.all_gather, "ncclAllGather");
    resolve(h, t.send, "ncclSend");
    resolve(h, t.recv, "ncclRecv");
    resolve(h, t.group_start, "ncclGroupStart");
    resolve(h, t.group_end, "ncclGroupEnd");
    return t;
  }();
  return table;
}

}  // namespace

namespace herd::detail {

void* nccl_library() {
  static void* const handle =
      open_cuda_library(kWhat, kSoname, HERD_NCCL_FALLBACK_DIR, LazyLibraryError::kCommunication);
  return handle;
}

}  // namespace herd::detail

extern "C" {

// Called while reporting an error; never throws.
const char* ncclGetErrorString(ncclResult_t result) {
  try {
    return nccl().get_error_string(result);
  } catch (...) {
    return "NCCL library not loaded";
  }
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* uniqueId) { return nccl().get_unique_id(uniqueId); }

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId commId, int rank) {
  return nccl().comm_init_rank(comm, nranks, commId, rank);
}

// A communicator exists only once NCCL is loaded; destructors call these, so they never throw.
ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  try {
    return nccl().comm_destroy(comm);
  } catch (...) {
    return ncclSystemError;
  }
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  try {
    return nccl().comm_abort(comm);
  } catch (...) {
    return ncclSystemError;
  }
}

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
  return nccl().all_reduce(sendbuff, recvbuff, count, datatype, op, comm, stream);
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream) {
  return nccl().broadcast(sendbuff, recvbuff, count, datatype, root, comm, stream);
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream) {
  return nccl().all_gather(sendbuff, recvbuff, sendcount, datatype, comm, stream);
}

ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  return nccl().send(sendbuff, count, datatype, peer, comm, stream);
}

ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream) {
  return nccl().recv(recvbuff, count, datatype, peer, comm, stream);
}

ncclResult_t ncclGroupStart() { return nccl().group_start(); }

ncclResult_t ncclGroupEnd() { return nccl().group_end(); }

}  // extern "C"
