// DataParallel over MPI; run by CTest under mpiexec -n 2 and -n 3.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "herd/core/mpi_communicator.hpp"
#include "herd/core/rng.hpp"
#include "herd/nn/data_parallel.hpp"
#include "herd/nn/linear.hpp"
#include "herd/nn/losses.hpp"
#include "herd/nn/mlp.hpp"
#include "herd/nn/optimizer.hpp"

using namespace herd;
using namespace herd::nn;

namespace {

Tensor random_tensor(const Shape& s, DType dtype, std::uint64_t seed, std::uint32_t stream) {
  Tensor t(s, dtype);
  RngCursor c = RngStream(seed, stream, RngPurpose::kUser).at(0);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.set_item(i, c.normal());
  return t;
}

MlpOptions options(DType dtype, std::uint64_t seed, std::vector<std::int64_t> sizes) {
  MlpOptions o;
  o.sizes = std::move(sizes);
  o.dtype = dtype;
  o.rng = RngStream(seed, 0, RngPurpose::kInit);
  return o;
}

// One loss backward on rank-dependent data (no DataParallel involved).
void local_backward(Module& m, int rank, int step, DType dtype, std::int64_t in, std::int64_t out) {
  const Tensor x =
      random_tensor({9, in}, dtype, 100 + static_cast<std::uint64_t>(step), static_cast<std::uint32_t>(rank));
  const Tensor y =
      random_tensor({9, out}, dtype, 200 + static_cast<std::uint64_t>(step), static_cast<std::uint32_t>(rank));
  MseLoss loss;
  loss.forward(m.forward(x), y);
  m.zero_grad();
  m.backward(loss.backward());
}

std::vector<double> flat_grads(Module& m) {
  std::vector<double> out;
  for (Parameter* p : m.parameters())
    for (double v : p->grad.to_vector()) out.push_back(v);
  return out;
}

std::vector<double> flat_values(Module& m) {
  std::vector<double> out;
  for (Parameter* p : m.parameters())
    for (double v : p->value.to_vector()) out.push_back(v);
  return out;
}

// Averaged gradients of the reference: plain blocking all-reduce after backward.
std::vector<double> reference_grads(Communicator& c, Module& m) {
  std::vector<double> g = flat_grads(m);
  c.allreduce(std::span<double>(g), ReduceOp::kSum);
  for (double& v : g) v /= c.size();
  return g;
}

}  // namespace

TEST_CASE("DataParallel: averaged gradients equal a plain all-reduce after backward", "[nn][mpi]") {
  MpiCommunicator comm;
  const std::vector<std::int64_t> sizes{5, 7, 6, 3};
  // bucket sizes in elements (float64): one element, odd boundaries (weights of 35 and
  // 42 elements span several buckets), one bucket exactly a parameter, the default.
  for (std::size_t elems : {std::size_t{1}, std::size_t{13}, std::size_t{17}, std::size_t{42}, std::size_t{25} << 17}) {
    CAPTURE(elems);
    Mlp ref(options(DType::kFloat64, 3, sizes));
    Mlp dpm(options(DType::kFloat64, 3, sizes));
    DataParallelOptions o;
    o.bucket_bytes = elems * sizeof(double) + 3;  // rounded down to whole elements
    DataParallel dp(dpm, comm, o);
    const std::size_t total = static_cast<std::size_t>(dpm.parameter_count());
    CHECK(dp.bucket_count() == (total + elems - 1) / elems);
    std::size_t sum = 0;
    for (std::size_t b = 0; b < dp.bucket_count(); ++b) sum += dp.bucket_elements(b);
    CHECK(sum == total);
    for (int step = 0; step < 3; ++step) {
      local_backward(ref, comm.rank(), step, DType::kFloat64, 5, 3);
      const std::vector<double> want = reference_grads(comm, ref);
      // Through the wrapper: all-reduces start inside backward.
      const Tensor x = random_tensor({9, 5}, DType::kFloat64, 100 + step, comm.rank());
      const Tensor y = random_tensor({9, 3}, DType::kFloat64, 200 + step, comm.rank());
      MseLoss loss;
      loss.forward(dp.forward(x), y);
      dpm.zero_grad();
      dp.backward(loss.backward());
      const std::vector<double> got = flat_grads(dpm);
      REQUIRE(got.size() == want.size());
      for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(want[i]).epsilon(1e-12).margin(1e-14));
      if (dp.bucket_count() > 1) CHECK(dp.stats().buckets_in_backward >= 1);
    }
  }
}

TEST_CASE("DataParallel: broadcast makes replicas equal; backward called directly + finish", "[nn][mpi]") {
  MpiCommunicator comm;
  // Different initialisation on every rank: the constructor broadcasts rank 0's.
  Mlp ref(options(DType::kFloat32, 11, {4, 8, 2}));
  Mlp m(options(DType::kFloat32, 11 + static_cast<std::uint64_t>(comm.rank()), {4, 8, 2}));
  DataParallelOptions o;
  o.bucket_bytes = 7 * sizeof(float);
  DataParallel dp(m, comm, o);
  CHECK(flat_values(m) == flat_values(ref));
  local_backward(ref, comm.rank(), 0, DType::kFloat32, 4, 2);
  const std::vector<double> want = reference_grads(comm, ref);
  local_backward(m, comm.rank(), 0, DType::kFloat32, 4, 2);  // hook fires inside
  dp.finish();
  const std::vector<double> got = flat_grads(m);
  for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(want[i]).epsilon(1e-6).margin(1e-7));
}

TEST_CASE("DataParallel: a bare Linear (no hook calls) and nested containers", "[nn][mpi]") {
  MpiCommunicator comm;
  {
    Linear ref(6, 4, DType::kFloat64, Device::cpu(), true, RngStream(5, 0, RngPurpose::kInit), 0);
    Linear m(6, 4, DType::kFloat64, Device::cpu(), true, RngStream(5, 0, RngPurpose::kInit), 0);
    DataParallelOptions o;
    o.bucket_bytes = 5 * sizeof(double);
    DataParallel dp(m, comm, o);
    CHECK(dp.bucket_count() == 6);  // 28 elements
    local_backward(ref, comm.rank(), 1, DType::kFloat64, 6, 4);
    const std::vector<double> want = reference_grads(comm, ref);
    local_backward(m, comm.rank(), 1, DType::kFloat64, 6, 4);
    CHECK(dp.stats().buckets_in_backward == 0);
    dp.finish();
    const std::vector<double> got = flat_grads(m);
    for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(want[i]).epsilon(1e-12));
  }
  {
    // Sequential(Mlp, Linear): the inner Mlp reports its layers, then the outer
    // container reports the Mlp's parameters again (ignored the second time).
    auto build = [] {
      auto s = std::make_unique<Sequential>(DType::kFloat64);
      s->add(std::make_unique<Mlp>(options(DType::kFloat64, 8, {3, 5, 4})));
      s->emplace<Linear>(4, 2, DType::kFloat64, Device::cpu(), true, RngStream(9, 0, RngPurpose::kInit), 0);
      return s;
    };
    auto ref = build();
    auto m = build();
    DataParallelOptions o;
    o.bucket_bytes = 3 * sizeof(double);
    DataParallel dp(*m, comm, o);
    for (int step = 0; step < 2; ++step) {
      local_backward(*ref, comm.rank(), step, DType::kFloat64, 3, 2);
      const std::vector<double> want = reference_grads(comm, *ref);
      local_backward(*m, comm.rank(), step, DType::kFloat64, 3, 2);
      dp.finish();
      const std::vector<double> got = flat_grads(*m);
      for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(want[i]).epsilon(1e-12));
    }
  }
}

TEST_CASE("DataParallel: parameters stay identical across ranks over many Adam steps", "[nn][mpi]") {
  MpiCommunicator comm;
  for (std::size_t bucket_bytes : {std::size_t{52}, std::size_t{4096}, std::size_t{25} << 20}) {
    CAPTURE(bucket_bytes);
    Mlp m(options(DType::kFloat32, 21 + static_cast<std::uint64_t>(comm.rank()), {6, 16, 16, 2}));
    DataParallelOptions o;
    o.bucket_bytes = bucket_bytes;
    DataParallel dp(m, comm, o);
    const std::vector<double> start = flat_values(m);
    Adam opt(m.named_parameters(), 1e-2);
    MseLoss loss;
    for (int step = 0; step < 60; ++step) {
      const Tensor x = random_tensor({16, 6}, DType::kFloat32, 300 + step, comm.rank());
      const Tensor y = random_tensor({16, 2}, DType::kFloat32, 400 + step, comm.rank());
      opt.zero_grad();
      loss.forward(dp.forward(x), y);
      dp.backward(loss.backward());
      opt.step();
    }
    std::vector<float> mine;
    for (double v : flat_values(m)) mine.push_back(static_cast<float>(v));
    const std::vector<float> all = comm.allgather(std::span<const float>(mine));
    for (int r = 1; r < comm.size(); ++r)
      CHECK(std::memcmp(all.data(), all.data() + static_cast<std::size_t>(r) * mine.size(),
                        mine.size() * sizeof(float)) == 0);
    CHECK(flat_values(m) != start);
  }
}

TEST_CASE("DataParallel: rejects a zero-element bucket", "[nn][mpi]") {
  MpiCommunicator comm;
  Mlp m(options(DType::kFloat64, 1, {2, 2}));
  DataParallelOptions o;
  o.bucket_bytes = 7;
  CHECK_THROWS_AS(DataParallel(m, comm, o), InputError);
}

TEST_CASE("DataParallel: wait_seconds is the host time finish spends blocked on a late rank", "[nn][mpi]") {
  MpiCommunicator comm;
  Mlp m(options(DType::kFloat64, 5, {6, 16, 2}));
  DataParallelOptions o;
  o.bucket_bytes = 40 * sizeof(double);
  DataParallel dp(m, comm, o);
  const Tensor x = random_tensor({9, 6}, DType::kFloat64, 1, static_cast<std::uint32_t>(comm.rank()));
  const Tensor y = random_tensor({9, 2}, DType::kFloat64, 2, static_cast<std::uint32_t>(comm.rank()));
  MseLoss loss;
  loss.forward(dp.forward(x), y);
  m.zero_grad();
  // The last rank starts its backward 0.4 s late: every other rank's all-reduces cannot
  // complete before that, so their finish blocks for most of it. From a barrier, so that a
  // rank that reached this point late (start-up on a loaded machine) still waits.
  const bool late = comm.rank() == comm.size() - 1;
  comm.barrier();
  if (late) std::this_thread::sleep_for(std::chrono::milliseconds(400));
  dp.backward(loss.backward());
  const DataParallelStats& s = dp.stats();
  CHECK_FALSE(s.wait_on_device);
  CHECK(s.wait_seconds >= 0.0);
  CHECK(s.wait_seconds <= s.finish_seconds);
  if (!late) CHECK(s.wait_seconds > 0.2);
  comm.barrier();
}
