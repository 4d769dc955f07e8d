// Tests of errors, logging, devices and the SelfCommunicator.
#include <limits>
#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "herd/core/communicator.hpp"
#include "herd/core/config.hpp"
#include "herd/core/device.hpp"
#include "herd/core/error.hpp"
#include "herd/core/log.hpp"
#include "herd/core/memory.hpp"
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
  CHECK_THROWS_WITH(herd::parse_log_level("loud"), Contains("log level is \"loud\"") && Contains("trace, debug, info"));
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

// --- sizes and memory (herd/core/memory.hpp) -----------------------------------------------

TEST_CASE("checked_count refuses products that overflow, and negative factors", "[core]") {
  CHECK(herd::checked_count({4, 1000, 3}, "x") == 12000u);
  CHECK(herd::checked_count({0, std::numeric_limits<std::int64_t>::max()}, "x") == 0u);
  // chains x draws x ndim of the batched heap overflow: 4 x 2^62 x 3 wraps around in 64 bits.
  CHECK_THROWS_WITH(herd::checked_count({4, std::int64_t{1} << 62, 3}, "sink: chains x draws x ndim"),
                    Catch::Matchers::Contains("sink: chains x draws x ndim: 4 x 4611686018427387904 x 3 is too large"));
  CHECK_THROWS_AS(herd::checked_count({-1, 5}, "x"), herd::InputError);
  CHECK_THROWS_AS(herd::checked_count({std::int64_t{1} << 61, 1}, "x"), herd::InputError);  // x 8 bytes > 2^63
}

TEST_CASE("parse_memory_size reads units; format_bytes writes binary units", "[core]") {
  CHECK(herd::parse_memory_size("0") == 0u);
  CHECK(herd::parse_memory_size("") == 0u);
  CHECK(herd::parse_memory_size("1000") == 1000u);
  CHECK(herd::parse_memory_size("16GiB") == (std::uint64_t{16} << 30));
  CHECK(herd::parse_memory_size("500 MB") == 500000000u);
  CHECK(herd::parse_memory_size("1.5kib") == 1536u);
  CHECK(herd::parse_memory_size("2e9") == 2000000000u);
  for (const char* bad : {"lots", "-1GB", "16 GiBs", "nan", "1e30"})
    CHECK_THROWS_WITH(herd::parse_memory_size(bad), Catch::Matchers::Contains("is not a memory size"));
  CHECK(herd::format_bytes(96) == "96 B");
  CHECK(herd::format_bytes(1536) == "1.5 KiB");
  CHECK(herd::format_bytes(16.0 * (1ull << 30)) == "16 GiB");
  // 1000-1023.99 of a unit in whole units, never "1.02e+03 MiB".
  CHECK(herd::format_bytes(1023.9 * (1ull << 20)) == "1024 MiB");
  CHECK(herd::format_bytes(1000.0 * (1ull << 20)) == "1000 MiB");
  CHECK(herd::format_bytes(999.4 * (1ull << 20)) == "999 MiB");
  CHECK(herd::format_bytes(1023.0) == "1023 B");
}

TEST_CASE("check_memory_need compares with max_memory, else the available memory", "[core]") {
  CHECK_NOTHROW(herd::check_memory_need(1000, 2000, "the run", "lower it"));
  CHECK_THROWS_WITH(
      herd::check_memory_need(3000, 2000, "the run", "lower it"),
      Catch::Matchers::Equals("the run needs about 2.93 KiB of memory, but max_memory is 1.95 KiB; lower it"));
  const auto avail = herd::available_memory_bytes();
  REQUIRE(avail.has_value());  // Linux: /proc/meminfo
  CHECK(*avail > 0);
  CHECK_THROWS_WITH(herd::check_memory_need(1e30, 0, "the run", "lower it"),
                    Catch::Matchers::Contains("this machine has") && Catch::Matchers::Contains("max_memory"));
  // A max_memory above the machine's memory is the user's to give.
  CHECK_NOTHROW(herd::check_memory_need(static_cast<double>(*avail) * 2, *avail * 4, "the run", "lower it"));
}

TEST_CASE("error_text names an allocation failure instead of a bare std::bad_alloc", "[core]") {
  CHECK(herd::error_text(std::runtime_error("plain"), "sampling") == "plain");
  const std::string m = herd::error_text(std::bad_alloc(), "sampling");
  CHECK_THAT(m, Catch::Matchers::StartsWith("out of memory while sampling (std::bad_alloc)"));
  CHECK_THAT(herd::error_text(std::length_error("cannot create std::vector larger than max_size()"), "reading"),
             Catch::Matchers::StartsWith("out of memory while reading (std::length_error: cannot create"));
}
