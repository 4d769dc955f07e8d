#pragma once
/// @file lazy_library.hpp
/// cuBLAS and NCCL opened at their first use (CUDA builds only). herd defines the cuBLAS and
/// NCCL functions it calls (`cublasSgemm_v2`, `ncclAllReduce`, ...) itself, with the
/// libraries' own signatures, as forwarders that open the library (`dlopen` of its versioned
/// soname) at the first call and jump to its function (`dlsym`). herd links neither library,
/// so a run that never touches a CUDA device never maps them: cuBLAS's static initialisers
/// alone cost about 200 MiB of resident memory and 0.15 s of CPU in every process that links it.
///
/// Search order: the soname as `dlopen` searches it (LD_LIBRARY_PATH, the caller's RUNPATH,
/// the loader cache, the system folders), then the folder the library was found in when herd
/// was configured. The libraries stay open until the process exits (never `dlclose`d: handles
/// destroyed by static destructors still call into them).

namespace herd::detail {

/// The exception a failure to load throws: `herd::CudaError` (cuBLAS) or
/// `herd::CommunicationError` (NCCL).
enum class LazyLibraryError { kCuda, kCommunication };

/// Opens the shared library `soname` (then `fallback_dir`/`soname` when `fallback_dir` is not
/// empty) with RTLD_NOW | RTLD_LOCAL and returns its handle; never closed.
/// Thread-safe (the dynamic loader serialises it).
/// @param what the library's name for messages, e.g. "cuBLAS".
/// @throws herd::CudaError or herd::CommunicationError (per `error`): "<what>: cannot load
///         '<soname>' (needed by a run on a CUDA device): <dlerror message>".
void* open_cuda_library(const char* what, const char* soname, const char* fallback_dir, LazyLibraryError error);

/// The address of `name` in a library opened by `open_cuda_library`. Thread-safe.
/// @throws herd::CudaError or herd::CommunicationError (per `error`): "<what>: '<soname>' has
///         no symbol '<name>': <dlerror message>".
void* cuda_library_symbol(void* handle, const char* what, const char* soname, const char* name, LazyLibraryError error);

/// Sets the function pointer `f` to `name` in a library opened by `open_cuda_library`
/// (`cuda_library_symbol`, converted to `F`: POSIX guarantees that a dlsym'd function address
/// converts to a function pointer). Thread-safe.
/// @throws as `cuda_library_symbol`.
template <class F>
void resolve_cuda_symbol(void* handle, F& f, const char* what, const char* soname, const char* name,
                         LazyLibraryError error) {
  f = reinterpret_cast<F>(cuda_library_symbol(handle, what, soname, name, error));
}

/// cuBLAS's handle (`libcublas.so.<CUBLAS_VER_MAJOR>`), opened at the first call; later calls
/// return it at once. Thread-safe.
/// @throws herd::CudaError naming the library and the loader's message when it cannot be opened
///         (the next call tries again).
void* cublas_library();

/// NCCL's handle (`libnccl.so.<NCCL_MAJOR>`), opened at the first call (NCCL builds only; as
/// `cublas_library`).
/// @throws herd::CommunicationError naming the library and the loader's message.
void* nccl_library();

}  // namespace herd::detail
