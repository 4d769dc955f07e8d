// Batched devices through the C API (herd/mcmc/paradram.h): a built-in target named by the
// input, a C log function, ParaMonte 1's runParaDRAM, device = "cuda" without a device, and
// the target keys' input errors. Statistical checks: seed fixed up front; 32 chains x 2000
// draws (thin 2 after a 2000-proposal warm-up); the tolerances are about 6 Monte Carlo
// standard errors of these runs (ESS of the mean over 10,000 for the 3-D normal, whose MCSE
// of the mean is then below 0.01 and of the sd below 0.008), so a false failure is rarer
// than 1 in 10^6 per check.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include <catch2/catch.hpp>

#include "c_api_batched_check.hpp"
#include "herd/core/device.hpp"

namespace fs = std::filesystem;

namespace {

fs::path fresh(const std::string& name) {
  fs::path dir = fs::path(HERD_TEST_WORK_DIR) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

/// Runs `f` with stderr sent to a file; returns what it printed there.
template <typename F>
std::string stderr_of(F&& f, int& status) {
  const std::string path = (fs::path(HERD_TEST_WORK_DIR) / "stderr.txt").string();
  std::fflush(stderr);
  const int saved = ::dup(2);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ::dup2(fd, 2);
  ::close(fd);
  status = f();
  std::fflush(stderr);
  ::dup2(saved, 2);
  ::close(saved);
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace

TEST_CASE("C API: device = cpu_batched on a built-in target named by the input", "[mcmc]") {
  const std::string prefix = (fresh("c_api_batched_builtin") / "run").string();
  REQUIRE(c_batched_builtin(prefix.c_str(), "cpu_batched") == 0);
  // AR(1) rho 0.5: unit standard deviations.
  check_batched_outputs(prefix, {"x1", "x2", "x3"}, {1.0, -2.0, 0.5}, {1.0, 1.0, 1.0}, {0.06, 0.06, 0.06},
                        {0.05, 0.05, 0.05});
  // The same input again: the run is complete and is not redone.
  CHECK(c_batched_builtin(prefix.c_str(), "cpu_batched") == 0);
}

TEST_CASE("C API: device = cpu_batched on a C log function (herd_run_dram and runParaDRAM)", "[mcmc]") {
  const std::string a = (fresh("c_api_batched_logfunc") / "run").string();
  REQUIRE(c_batched_log_func(a.c_str(), "cpu_batched") == 0);
  check_batched_outputs(a, {"x1", "x2"}, {1.0, -2.0}, {1.0, 3.0}, {0.06, 0.18}, {0.05, 0.15});
  const std::string b = (fresh("c_api_batched_paramonte") / "run").string();
  REQUIRE(c_batched_paramonte(b.c_str()) == 0);
  // Same seed, same chains: the same draws as through herd_run_dram.
  auto pa = herd::io::H5File::open(a + ".h5"), pb = herd::io::H5File::open(b + ".h5");
  CHECK(pa.open_dataset("posterior/x2").read<double>() == pb.open_dataset("posterior/x2").read<double>());
}

TEST_CASE("C API: device = cuda without a CUDA device is one clear error line, nothing written", "[mcmc]") {
  if (herd::cuda_device_count() > 0) {
    // A machine with a GPU runs it (test_mcmc_c_api_cuda checks the outputs).
    SUCCEED("a CUDA device is present");
    return;
  }
  const fs::path dir = fresh("c_api_batched_nocuda");
  const std::string prefix = (dir / "out" / "run").string();
  int status = -1;
  const std::string err = stderr_of([&] { return c_batched_builtin(prefix.c_str(), "cuda"); }, status);
  CHECK(status == 2);
  CHECK(err.find("key \"device\" is \"cuda\", but") != std::string::npos);
  CHECK((err.find("no CUDA device is usable here") != std::string::npos ||
         err.find("has no CUDA support") != std::string::npos));
  CHECK(std::count(err.begin(), err.end(), '\n') == 1);
  CHECK(!fs::exists(dir / "out"));
}

TEST_CASE("C API: target keys' input errors are one line each, status 2", "[mcmc]") {
  const fs::path dir = fresh("c_api_batched_bad");
  const std::string prefix = (dir / "out" / "run").string();
  int status = -1;
  std::string err = stderr_of([&] { return c_batched_bad(0, prefix.c_str()); }, status);
  CHECK(status == 2);
  CHECK(err.find("a log function is given too") != std::string::npos);
  err = stderr_of([&] { return c_batched_bad(1, prefix.c_str()); }, status);
  CHECK(status == 2);
  CHECK(err.find("\"norml\"") != std::string::npos);
  CHECK(err.find("\"normal\", \"banana\", \"rosenbrock\", \"mixture\", \"funnel\"") != std::string::npos);
  CHECK(std::count(err.begin(), err.end(), '\n') == 1);
  err = stderr_of([&] { return c_batched_bad(2, prefix.c_str()); }, status);
  CHECK(status == 2);
  CHECK(err.find("ndim is 3, but the input's target has 2 dimensions") != std::string::npos);
  CHECK(!fs::exists(dir / "out"));
}
