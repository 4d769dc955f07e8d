// Plugin loading (dlopen) of a ParaMonte-signature log density built by CMake.
#include <cmath>

#include <catch2/catch.hpp>

#include "herd/core/error.hpp"
#include "herd/mcmc/dram.hpp"
#include "herd/mcmc/plugin.hpp"

using namespace herd::mcmc;

TEST_CASE("a ParaMonte-signature plugin is loaded and sampled", "[mcmc][plugin]") {
  const PluginLogDensity p(HERD_TEST_PLUGIN_PATH);
  const double x[] = {1.0, 2.0};
  CHECK(p(x, 2) == Approx(-2.5));
  CHECK(x[0] == 1.0);  // the plugin wrote to a copy
  DramOptions o;
  o.start_point = {0.1, 0.2};
  o.chain_size = 500;
  DramSampler s(o, p);
  MemoryChainSink m;
  const auto r = s.run(m);
  CHECK(r.chain_size == 500);
  for (std::size_t i = 0; i < m.size(); ++i)
    CHECK(m.log_density[i] == Approx(-0.5 * (m.point(i)[0] * m.point(i)[0] + m.point(i)[1] * m.point(i)[1])));
}

TEST_CASE("plugin errors name the path and symbol", "[mcmc][plugin]") {
  try {
    PluginLogDensity p("/no/such/plugin.so");
    FAIL("no error");
  } catch (const herd::InputError& e) {
    CHECK_THAT(e.what(), Catch::Contains("/no/such/plugin.so"));
  }
  try {
    PluginLogDensity p(HERD_TEST_PLUGIN_PATH, "noSuchFunction");
    FAIL("no error");
  } catch (const herd::InputError& e) {
    CHECK_THAT(e.what(), Catch::Contains("noSuchFunction"));
  }
  // A variable of that name would be called as code (a crash before): refused.
  CHECK_THROWS_WITH(PluginLogDensity(HERD_TEST_PLUGIN_PATH, "herd_test_not_a_function"),
                    Catch::Contains("has a symbol 'herd_test_not_a_function', but it is a data object (a variable), "
                                    "not a function"));
}
