// Shared libraries opened at run time (shared_library.hpp).
#include "herd/core/shared_library.hpp"

#include <dlfcn.h>
#include <link.h>

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
  if (e || !f)
    throw InputError(fmt::format("'{}' has no symbol '{}': {}{}", path_, name, e ? e : "symbol is null",
                                 e ? " (a function compiled as C++ needs extern \"C\" to be found by this name)" : ""));
  return f;
}

void* SharedLibrary::function(const std::string& name) const {
  void* f = symbol(name);
  // The symbol table entry of the address: a data object there would be called as code.
  Dl_info info{};
  void* entry = nullptr;
  if (dladdr1(f, &info, &entry, RTLD_DL_SYMENT) != 0 && entry != nullptr) {
    const unsigned type = ELF64_ST_TYPE(static_cast<const ElfW(Sym)*>(entry)->st_info);  // the same in ELF32
    if (type == STT_OBJECT || type == STT_COMMON || type == STT_TLS)
      throw InputError(fmt::format("'{}' has a symbol '{}', but it is {}, not a function", path_, name,
                                   type == STT_TLS ? "thread-local data" : "a data object (a variable)"));
  }
  return f;
}

}  // namespace herd
