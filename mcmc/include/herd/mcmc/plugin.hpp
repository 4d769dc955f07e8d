#pragma once
/// @file plugin.hpp
/// Log densities from shared libraries (plugins) with ParaMonte's C signature
/// `double getLogFunc(int32_t ndim, double point[])` (ParaMonte's C interface), loaded by
/// `dlopen`/`dlsym` (`herd::SharedLibrary`).

#include <cstdint>
#include <memory>
#include <string>

#include "herd/core/shared_library.hpp"
#include "herd/mcmc/dram.hpp"

namespace herd::mcmc {

/// ParaMonte's C log-density signature: `ndim` coordinates in `point` (the callee may
/// read them; herd passes a private copy, so writes are harmless).
using ParaMonteLogFunc = double (*)(std::int32_t ndim, double point[]);

/// A log density in a shared library. Copies share the loaded library, which is closed
/// (`dlclose`) when the last copy is destroyed.
///
/// Thread-safety: loading is thread-safe; whether the function may be called from several
/// threads is the plugin's business (declare it with `DramOptions::log_density_thread_safe`;
/// by default herd calls it from one thread).
class PluginLogDensity {
 public:
  /// Opens `path` (RTLD_NOW | RTLD_LOCAL) and looks up `symbol`.
  /// @throws herd::InputError naming the path or symbol, with `dlerror()`'s message.
  explicit PluginLogDensity(const std::string& path, const std::string& symbol = "getLogFunc");
  /// Looks up `symbol` in `library`, already opened (so that a caller can tell a library that
  /// does not load from a symbol it lacks).
  /// @throws herd::InputError naming the symbol, with `dlerror()`'s message.
  PluginLogDensity(SharedLibrary library, const std::string& symbol);

  /// Calls the plugin on a copy of `x` (`d` values).
  double operator()(const double* x, int d) const;
  /// The raw function pointer.
  ParaMonteLogFunc function() const { return fn_; }
  const std::string& path() const { return library_.path(); }

 private:
  SharedLibrary library_;
  ParaMonteLogFunc fn_ = nullptr;
};

}  // namespace herd::mcmc
