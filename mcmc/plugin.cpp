// Shared-library log densities (plugin.hpp).
#include "herd/mcmc/plugin.hpp"

#include <utility>
#include <vector>

#include "herd/core/error.hpp"

namespace herd::mcmc {

namespace {

SharedLibrary open_plugin(const std::string& path) {
  try {
    return SharedLibrary(path);
  } catch (const InputError& e) {
    throw InputError(std::string("dram plugin: ") + e.what());
  }
}

}  // namespace

PluginLogDensity::PluginLogDensity(const std::string& path, const std::string& symbol)
    : PluginLogDensity(open_plugin(path), symbol) {}

PluginLogDensity::PluginLogDensity(SharedLibrary library, const std::string& symbol) : library_(std::move(library)) {
  try {
    fn_ = reinterpret_cast<ParaMonteLogFunc>(library_.function(symbol));
  } catch (const InputError& e) {
    throw InputError(std::string("dram plugin: ") + e.what());
  }
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
