// Shared libraries of a CUDA run opened at their first use (herd/core/cuda/lazy_library.hpp).
#include "herd/core/cuda/lazy_library.hpp"

#include <dlfcn.h>

#include <string>

#include <fmt/format.h>

#include "herd/core/error.hpp"

namespace herd::detail {
namespace {

[[noreturn]] void throw_lazy(LazyLibraryError error, const std::string& message) {
  if (error == LazyLibraryError::kCommunication) throw CommunicationError(message);
  throw CudaError(message);
}

}  // namespace

void* open_cuda_library(const char* what, const char* soname, const char* fallback_dir, LazyLibraryError error) {
  dlerror();
  void* h = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (h != nullptr) return h;
  const char* e = dlerror();
  const std::string first = e != nullptr ? e : "unknown error";
  std::string tried;
  if (fallback_dir != nullptr && *fallback_dir != '\0') {
    const std::string path = fmt::format("{}/{}", fallback_dir, soname);
    h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h != nullptr) return h;
    tried = fmt::format(" (also tried '{}')", path);
  }
  throw_lazy(error, fmt::format("{}: cannot load '{}' (needed by a run on a CUDA device): {}{}; put its folder on "
                                "LD_LIBRARY_PATH",
                                what, soname, first, tried));
}

void* cuda_library_symbol(void* handle, const char* what, const char* soname, const char* name,
                          LazyLibraryError error) {
  dlerror();
  void* f = dlsym(handle, name);
  const char* e = dlerror();
  if (e != nullptr || f == nullptr)
    throw_lazy(error,
               fmt::format("{}: '{}' has no symbol '{}': {}", what, soname, name, e != nullptr ? e : "symbol is null"));
  return f;
}

}  // namespace herd::detail
