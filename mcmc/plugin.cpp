// Shared-library log densities (plugin.hpp).
#include "herd/mcmc/plugin.hpp"

#include <dlfcn.h>

#include <vector>

#include "herd/core/error.hpp"

namespace herd::mcmc {

PluginLogDensity::PluginLogDensity(const std::string& path, const std::string& symbol) : path_(path) {
  dlerror();
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = dlerror();
    throw InputError(fmt::format("dram plugin: cannot load '{}': {}", path, e ? e : "unknown error"));
  }
  handle_ = std::shared_ptr<void>(h, [](void* p) { dlclose(p); });
  dlerror();
  void* f = dlsym(h, symbol.c_str());
  const char* e = dlerror();
  if (e || !f)
    throw InputError(fmt::format("dram plugin: '{}' has no symbol '{}': {}", path, symbol,
                                 e ? e : "symbol is null"));
  fn_ = reinterpret_cast<ParaMonteLogFunc>(f);
}

double PluginLogDensity::operator()(const double* x, int d) const {
  double small[64];
  std::vector<double> big;
  double* p = small;
  if (d > 64) {
    big.resize(static_cast<std::size_t>(d));
    p = big.data();
  }
  for (int i = 0; i < d; ++i) p[i] = x[i];
  return fn_(static_cast<std::int32_t>(d), p);
}

}  // namespace herd::mcmc
