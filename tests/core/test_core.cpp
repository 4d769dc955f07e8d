// Tests of errors, logging, devices and the SelfCommunicator.
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "herd/core/communicator.hpp"
#include "herd/core/config.hpp"
#include "herd/core/device.hpp"
#include "herd/core/error.hpp"
#include "herd/core/log.hpp"
#include "herd/core/mpi_communicator.hpp"

#if HERD_HAVE_CUDA
#include "herd/core/cuda/cuda_check.hpp"
#endif
#if HERD_HAVE_NCCL
#include "herd/core/cuda/nccl_check.hpp"
#endif

using Catch::Matchers::Contains;

namespace {
void f_check(int n) { HERD_CHECK(n > 0, "dram: ndim is {}, but must be positive", n); }
void f_require(double v) { HERD_REQUIRE(v >= 0, "dram: proposal_cov[2][2] is {}, but must be positive definite", v); }
}  // namespace

TEST_CASE("HERD_CHECK names the message, file:line and expression", "[core]") {
  CHECK_NOTHROW(f_check(1));
  try {
    f_check(-3);
    FAIL("no throw");
  } catch (const herd::Error& e) {
    const std::string m = e.what();
    CHECK_THAT(m, Contains("dram: ndim is -3, but must be positive"));
    CHECK_THAT(m, Contains("test_core.cpp:"));
    CHECK_THAT(m, Contains("`n > 0`"));
  }
  CHECK_THROWS_AS(f_require(-1), herd::InputError);
  CHECK_THROWS_WITH(f_require(-1), "dram: proposal_cov[2][2] is -1, but must be positive definite");
  // The hierarchy: every herd error is a herd::Error and a std::runtime_error.
  CHECK_THROWS_AS(throw herd::NumericalError("x"), herd::Error);
  CHECK_THROWS_AS(throw herd::CudaError("x"), std::runtime_error);
  CHECK_THROWS_AS(throw herd::CommunicationError("x"), herd::Error);
  try {
    HERD_CHECK_AS(herd::NumericalError, 1 == 2, "value {}", 3);
  } catch (const herd::NumericalError& e) {
    CHECK_THAT(std::string(e.what()), Contains("value 3"));
  }
}

TEST_CASE("log levels parse, and bad names are input errors", "[core]") {
  CHECK(herd::parse_log_level("debug") == herd::LogLevel::kDebug);
  CHECK(herd::parse_log_level("warn") == herd::LogLevel::kWarn);
  CHECK_THROWS_WITH(herd::parse_log_level("loud"),
                    Contains("log level is \"loud\"") && Contains("trace, debug, info"));
  herd::configure_logging(1, 4, herd::LogLevel::kInfo);
  CHECK(herd::logger().level() == spdlog::level::warn);  // non-zero ranks: warn and above
  herd::configure_logging(1, 4, herd::LogLevel::kDebug, true);
  CHECK(herd::logger().level() == spdlog::level::debug);
  herd::configure_logging(0, 1, herd::LogLevel::kInfo);
  CHECK(herd::logger().level() == spdlog::level::info);
}

TEST_CASE("devices parse and the CUDA query answers without a driver", "[core]") {
  CHECK(herd::parse_device("cpu") == herd::Device::cpu());
  CHECK(herd::parse_device("cuda") == herd::Device::cuda(0));
  CHECK(herd::parse_device("cuda:3").index == 3);
  CHECK(herd::parse_device("cuda:3").str() == "cuda:3");
  CHECK_THROWS_AS(herd::parse_device("gpu"), herd::InputError);
  CHECK_THROWS_AS(herd::parse_device("cuda:x"), herd::InputError);
  const int n = herd::cuda_device_count();
  CHECK(n >= 0);
  CHECK(static_cast<int>(herd::cuda_devices().size()) == n);
  const std::string d = herd::describe_devices();
  if (n == 0) {
    CHECK_THAT(d, Contains("CUDA: none ("));
  } else {
    CHECK_THAT(d, Contains("CUDA device 0:"));
  }
#if !HERD_HAVE_CUDA
  CHECK(n == 0);
  CHECK_THAT(d, Contains("built without CUDA"));
#endif
}

TEST_CASE("SelfCommunicator collectives are local copies", "[core][comm]") {
  herd::SelfCommunicator c;
  CHECK(c.rank() == 0);
  CHECK(c.size() == 1);
  CHECK(c.backend() == "self");
  std::vector<double> v{1.5, -2.0};
  c.allreduce(std::span<double>(v), herd::ReduceOp::kSum);
  CHECK(v == std::vector<double>{1.5, -2.0});
  auto req = c.allreduce_async(std::span<double>(v), herd::ReduceOp::kMax);
  CHECK(req->test());
  req->wait();
  const std::vector<std::int64_t> s{4, 5, 6};
  CHECK(c.allgather(std::span<const std::int64_t>(s)) == s);
  std::vector<std::int64_t> g(3);
  c.gather(s.data(), g.data(), 3, herd::DataType::kInt64, 0);
  CHECK(g == s);
  CHECK(c.allreduce_value(7, herd::ReduceOp::kMin) == 7);
  std::string str = "hello";
  c.broadcast_string(str, 0);
  CHECK(str == "hello");
  CHECK_THROWS_AS(c.broadcast(v.data(), 2, herd::DataType::kFloat64, 1), herd::InputError);
  CHECK(herd::data_type_size(herd::DataType::kFloat32) == 4);
}

TEST_CASE("a process not started by mpiexec gets a SelfCommunicator", "[core][comm]") {
  if (herd::launched_by_mpi()) return;  // (not the case under plain ctest)
  auto w = herd::make_world_communicator();
  CHECK(w->backend() == "self");
  CHECK(w->size() == 1);
}

TEST_CASE("CUDA and NCCL status checks throw with the call and the error", "[core]") {
#if HERD_HAVE_CUDA
  // Device -1 never exists, with or without a driver.
  const auto bad_cuda = [] { HERD_CUDA_CHECK(cudaSetDevice(-1)); };
  CHECK_THROWS_AS(bad_cuda(), herd::CudaError);
  CHECK_THROWS_WITH(bad_cuda(), Contains("cudaSetDevice(-1)") && Contains("CUDA: "));
#endif
#if HERD_HAVE_NCCL
  const auto bad_nccl = [] { HERD_NCCL_CHECK(ncclInvalidArgument); };
  CHECK_THROWS_AS(bad_nccl(), herd::CommunicationError);
  CHECK_THROWS_WITH(bad_nccl(), Contains("NCCL: ncclInvalidArgument failed"));
#endif
#if !HERD_HAVE_CUDA
  CHECK(herd::cuda_device_count() == 0);  // nothing to check in a CPU-only build but this
#endif
}
