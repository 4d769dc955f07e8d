// device = "cuda" through the C API: the built-in 3-D normal named by the input runs on the
// CUDA path of the batched sampler. On a GPU (label gpu; skipped without one) and, in every
// CUDA build, on the launch layer's host backend (test_mcmc_c_api_cuda_host_emu). Device
// chains are statistically equivalent to host chains (docs/batched.md), so the check is the
// moments with the tolerances of test_mcmc_c_api_batched (about 6 Monte Carlo standard
// errors; seed fixed up front).
#include <unistd.h>

#include <filesystem>
#include <string>

#include <catch2/catch.hpp>

#include "c_api_batched_check.hpp"

TEST_CASE("C API: device = cuda on a built-in target named by the input", "[gpu][mcmc]") {
  namespace fs = std::filesystem;
  // A temporary folder: the GPU machine runs the executable away from this build tree.
  const fs::path dir = fs::temp_directory_path() / ("herd_c_api_cuda_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string prefix = (dir / "run").string();
  REQUIRE(c_batched_builtin(prefix.c_str(), "cuda") == 0);
  check_batched_outputs(prefix, {"x1", "x2", "x3"}, {1.0, -2.0, 0.5}, {1.0, 1.0, 1.0}, {0.06, 0.06, 0.06},
                        {0.05, 0.05, 0.05});
  fs::remove_all(dir);
}
