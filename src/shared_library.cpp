// Shared libraries opened at run time (shared_library.hpp).
#include "herd/core/shared_library.hpp"

#include <dlfcn.h>

#include <fmt/format.h>

#include "herd/core/error.hpp"

namespace herd {

SharedLibrary::SharedLibrary(const std::string& path) : path_(path) {
  dlerror();
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = dlerror();
    throw InputError(fmt::format("cannot load '{}': {}", path, e ? e : "unknown error"));
  }
  handle_ = std::shared_ptr<void>(h, [](void* p) { dlclose(p); });
}

void* SharedLibrary::symbol(const std::string& name) const {
  dlerror();
  void* f = dlsym(handle_.get(), name.c_str());
  const char* e = dlerror();
  if (e || !f) throw InputError(fmt::format("'{}' has no symbol '{}': {}", path_, name, e ? e : "symbol is null"));
  return f;
}

}  // namespace herd
