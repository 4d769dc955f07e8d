#pragma once
#include "herd/core/cxx20.hpp"  // C++20 or one clear error
/// @file shared_library.hpp
/// Shared libraries opened at run time (`dlopen`/`dlsym`): the one place herd loads user
/// code named by an input file (herd-sample's log-density plugins, herd-rl's C
/// environments).

#include <memory>
#include <string>

namespace herd {

/// An open shared library. Copies share the handle; the library is closed (`dlclose`) when
/// the last copy is destroyed, so keep a copy for as long as any function or data taken
/// from it may be used.
///
/// Thread-safety: opening and `symbol` are thread-safe (the dynamic loader serialises them;
/// `dlerror`'s message is per thread).
class SharedLibrary {
 public:
  /// Opens `path` with RTLD_NOW | RTLD_LOCAL (every symbol resolved now, none exported to
  /// later libraries). A path without '/' is searched as `dlopen` does (LD_LIBRARY_PATH,
  /// the cache, the default folders).
  /// @throws herd::InputError "cannot load '<path>': <dlerror message>".
  explicit SharedLibrary(const std::string& path);

  /// The address of `name`.
  /// @throws herd::InputError "'<path>' has no symbol '<name>': <dlerror message> (a function
  ///         compiled as C++ needs extern "C" ...)" when the library does not define it (or
  ///         defines it as null).
  void* symbol(const std::string& name) const;

  /// The address of the function `name`: symbol(name), refused when the library's symbol
  /// table says that `name` is data (a variable), which a call would execute as code.
  /// @throws herd::InputError as symbol(), or "'<path>' has a symbol '<name>', but it is a
  ///         data object (a variable), not a function".
  void* function(const std::string& name) const;

  /// The path given to the constructor.
  const std::string& path() const { return path_; }

 private:
  std::shared_ptr<void> handle_;
  std::string path_;
};

}  // namespace herd
