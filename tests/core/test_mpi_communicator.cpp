// MpiCommunicator tests; run by CTest under mpiexec -n 1, 2 and 3.
#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <numeric>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "herd/core/error.hpp"
#include "herd/core/mpi_communicator.hpp"

#include <mpi.h>

using herd::DataType;
using herd::ReduceOp;

TEST_CASE("MpiCommunicator: rank, size, barrier", "[core][mpi]") {
  herd::MpiCommunicator c;
  CHECK(c.backend() == "mpi");
  CHECK(c.size() >= 1);
  CHECK(c.rank() >= 0);
  CHECK(c.rank() < c.size());
  c.barrier();
  CHECK(herd::make_world_communicator()->backend() == "mpi");
}

TEST_CASE("MpiCommunicator: allreduce sum/min/max on double, float, int64, int32", "[core][mpi]") {
  herd::MpiCommunicator c;
  const int r = c.rank(), n = c.size();
  std::vector<double> d{1.0 * r, 0.5, -1.0 * r};
  c.allreduce(std::span<double>(d), ReduceOp::kSum);
  CHECK(d[0] == n * (n - 1) / 2.0);
  CHECK(d[1] == 0.5 * n);
  CHECK(d[2] == -n * (n - 1) / 2.0);
  std::vector<float> f{static_cast<float>(r) + 0.25f};
  c.allreduce(std::span<float>(f), ReduceOp::kMax);
  CHECK(f[0] == static_cast<float>(n - 1) + 0.25f);
  std::vector<std::int64_t> i64{(std::int64_t{1} << 40) + r};
  c.allreduce(std::span<std::int64_t>(i64), ReduceOp::kMin);
  CHECK(i64[0] == (std::int64_t{1} << 40));
  CHECK(c.allreduce_value<std::int32_t>(r + 1, ReduceOp::kSum) == n * (n + 1) / 2);
  CHECK(c.allreduce_value<std::int32_t>(10 - r, ReduceOp::kMin) == 10 - (n - 1));
}

TEST_CASE("MpiCommunicator: non-blocking allreduce with a wait handle", "[core][mpi]") {
  herd::MpiCommunicator c;
  const int r = c.rank(), n = c.size();
  std::vector<double> a(1000, 1.0 + r), b(17, 2.0 * r);
  auto ra = c.allreduce_async(std::span<double>(a), ReduceOp::kSum);
  auto rb = c.allreduce_async(std::span<double>(b), ReduceOp::kMax);
  rb->wait();
  ra->wait();
  CHECK(ra->test());
  const double sa = n + n * (n - 1) / 2.0;
  for (double x : a) REQUIRE(x == sa);
  for (double x : b) REQUIRE(x == 2.0 * (n - 1));
}

TEST_CASE("MpiCommunicator: a rank waiting for a late peer gives its core away", "[core][mpi]") {
  // Rank 0 reaches the all-reduce 300 ms before the others. A busy-polling wait would use
  // about 300 ms of CPU (and, on a machine with fewer free cores than ranks, hold the core
  // the late rank needs); the wait spins 50 us, yields, and after 2 ms sleeps between polls.
  herd::MpiCommunicator c;
  if (c.size() < 2) return;
  // Rank 0's clocks start before the barrier, which the others leave only after rank 0 has
  // entered it: its wait lasts at least the 300 ms whatever the scheduler does (started
  // after the barrier, a rank 0 descheduled there for 0.1 s on a loaded machine waited less
  // than the 0.2 s checked).
  timespec c0{}, c1{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
  const auto w0 = std::chrono::steady_clock::now();
  c.barrier();
  if (c.rank() != 0) std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK(c.allreduce_value<std::int32_t>(1, ReduceOp::kSum) == c.size());
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
  const double cpu = static_cast<double>(c1.tv_sec - c0.tv_sec) + 1e-9 * static_cast<double>(c1.tv_nsec - c0.tv_nsec);
  if (c.rank() == 0) {
    INFO("waited " << wall << " s, using " << cpu << " s of CPU");
    CHECK(wall > 0.2);
    CHECK(cpu < 0.1 * wall);
  }
}

TEST_CASE("MpiCommunicator: broadcast, allgather, gather", "[core][mpi]") {
  herd::MpiCommunicator c;
  const int r = c.rank(), n = c.size();
  const int root = n - 1;
  std::vector<std::int32_t> v(5, r == root ? 42 : -1);
  c.broadcast(std::span<std::int32_t>(v), root);
  for (auto x : v) CHECK(x == 42);
  std::string s = r == 0 ? std::string(100000, 'x') + "end" : "";
  c.broadcast_string(s, 0);
  CHECK(s.size() == 100003);
  CHECK(s.substr(100000) == "end");
  const std::vector<double> mine{1.0 * r, 10.0 * r};
  const auto all = c.allgather(std::span<const double>(mine));
  REQUIRE(all.size() == 2u * n);
  for (int k = 0; k < n; ++k) {
    CHECK(all[2 * k] == k);
    CHECK(all[2 * k + 1] == 10.0 * k);
  }
  std::vector<std::int64_t> g(r == 0 ? n : 0);
  const std::int64_t val = 100 + r;
  c.gather(&val, g.data(), 1, DataType::kInt64, 0);
  if (r == 0) {
    for (int k = 0; k < n; ++k) CHECK(g[k] == 100 + k);
  }
  CHECK_THROWS_AS(c.broadcast(v.data(), 1, DataType::kInt32, n), herd::InputError);
}

TEST_CASE("MpiCommunicator: node-local rank and size (one node)", "[core][mpi]") {
  herd::MpiCommunicator c;
  // Every rank of this test runs on this machine: one node.
  CHECK(c.local_size() == c.size());
  CHECK(c.local_rank() == c.rank());
  CHECK(herd::node_local_rank(c) == c.local_rank());
  // The launcher's own view (MPICH's Hydra exports MPI_LOCALRANKID) agrees.
  if (const char* v = std::getenv("MPI_LOCALRANKID")) CHECK(c.local_rank() == std::atoi(v));
  // The local ranks of the node are a permutation of 0 .. local_size - 1.
  const auto all = c.allgather(std::span<const std::int32_t>(std::vector<std::int32_t>{c.local_rank()}));
  std::vector<std::int32_t> sorted(all.begin(), all.end());
  std::sort(sorted.begin(), sorted.end());
  for (int i = 0; i < c.size(); ++i) CHECK(sorted[static_cast<std::size_t>(i)] == i);
  // A single process has node-local rank 0.
  herd::SelfCommunicator self;
  CHECK(herd::node_local_rank(self) == 0);
}

TEST_CASE("MpiCommunicator: node-local rank follows the communicator's rank order", "[core][mpi]") {
  // A communicator whose ranks are the world's in reverse: the node-local rank is the rank
  // in *this* communicator among its ranks on the node, not the world rank.
  int world_rank = 0, world_size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  MPI_Comm reversed = MPI_COMM_NULL;
  REQUIRE(MPI_Comm_split(MPI_COMM_WORLD, 0, world_size - 1 - world_rank, &reversed) == MPI_SUCCESS);
  {
    herd::MpiCommunicator c(static_cast<long>(MPI_Comm_c2f(reversed)));
    CHECK(c.rank() == world_size - 1 - world_rank);
    CHECK(c.local_rank() == c.rank());
    CHECK(c.local_size() == world_size);
  }
  MPI_Comm_free(&reversed);
}
