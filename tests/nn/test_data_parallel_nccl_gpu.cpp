// DataParallel on device modules over NCCL, several ranks ([gpu][mpi]; CTest runs it under
// mpiexec -n 2; every rank exits with 77 and rank 0 prints "SKIPPED" when the node has
// fewer CUDA devices than ranks, since NCCL refuses two ranks on one GPU:
// tests/support/mpi_gpu_main.cpp; scripts/gpu-check runs the executable alone, as one rank
// on its one GPU). Rank r uses Device::cuda(r); the NCCL unique id goes
// over MPI (NcclCommunicator), the collectives run on a stream of their own and wait for
// the nn stream through events (docs/nn.md "CUDA").
//
// Checks: the averaged device gradients equal a host all-reduce (over MPI) of the
// gradients of a plain backward on the same local data, for odd bucket sizes (one element,
// 13 and 17 elements, parameters spanning buckets) and the default; the constructor's
// broadcast makes replicas equal; parameters stay bitwise identical across ranks over 30
// Adam steps (NCCL gives every rank the same reduced bits, and the updates are the same
// kernels). Tolerances for the gradients: float64 1e-12 relative (the all-reduce sums in
// another order than MPI), float32 1e-5 relative + 1e-7 absolute.
#include <catch2/catch.hpp>

#include <cstring>
#include <memory>
#include <vector>

#include <cuda_runtime_api.h>

#include "herd/core/cuda/cuda_check.hpp"
#include "herd/core/mpi_communicator.hpp"
#include "herd/core/nccl_communicator.hpp"
#include "herd/core/rng.hpp"
#include "herd/nn/data_parallel.hpp"
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

MlpOptions options(DType dtype, std::uint64_t seed, Device d) {
  MlpOptions o;
  o.sizes = {5, 7, 6, 3};
  o.dtype = dtype;
  o.device = d;
  o.activation = Activation::kTanh;
  o.rng = RngStream(seed, 0, RngPurpose::kInit);
  return o;
}

std::vector<double> flat(Module& m, bool grads) {
  std::vector<double> out;
  for (Parameter* p : m.parameters())
    for (double v : (grads ? p->grad : p->value).to(Device::cpu()).to_vector()) out.push_back(v);
  return out;
}

// The rank's NCCL communicator on its own GPU, bootstrapped over MPI.
struct Ranks {
  Ranks() : device(Device::cuda(boot.rank())) {
    HERD_CUDA_CHECK(cudaSetDevice(device.index));
    HERD_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    nccl = std::make_unique<NcclCommunicator>(boot, stream, device.index);
  }
  ~Ranks() {
    nccl.reset();
    cudaStreamDestroy(stream);
  }
  MpiCommunicator boot;
  Device device;
  cudaStream_t stream = nullptr;
  std::unique_ptr<NcclCommunicator> nccl;
};

}  // namespace

TEST_CASE("DataParallel over NCCL: averaged device gradients equal a host all-reduce", "[gpu][mpi][nn]") {
  Ranks r;
  REQUIRE(r.nccl->size() == r.boot.size());
  const DType dt = GENERATE(DType::kFloat32, DType::kFloat64);
  const std::size_t elems = GENERATE(std::size_t{1}, std::size_t{13}, std::size_t{17}, std::size_t{25} << 17);
  INFO(dtype_name(dt) << ", bucket of " << elems << " elements, rank " << r.boot.rank());
  const double rtol = dt == DType::kFloat64 ? 1e-12 : 1e-5, atol = dt == DType::kFloat64 ? 1e-14 : 1e-7;
  Mlp ref(options(dt, 3, r.device));
  Mlp model(options(dt, 3, r.device));
  DataParallelOptions o;
  o.bucket_bytes = elems * dtype_size(dt);
  DataParallel dp(model, *r.nccl, o);
  MseLoss lr, lm;
  for (int step = 0; step < 3; ++step) {
    const auto rank = static_cast<std::uint32_t>(r.boot.rank());
    const Tensor x = random_tensor({9, 5}, dt, 100 + static_cast<std::uint64_t>(step), rank).to(r.device);
    const Tensor y = random_tensor({9, 3}, dt, 200 + static_cast<std::uint64_t>(step), rank).to(r.device);
    // Reference: a plain backward, gradients to the host, MPI all-reduce, divide.
    ref.zero_grad();
    lr.forward(ref.forward(x), y);
    ref.backward(lr.backward());
    std::vector<double> want = flat(ref, true);
    r.boot.allreduce(std::span<double>(want), ReduceOp::kSum);
    for (double& v : want) v /= r.boot.size();
    // Through DataParallel: NCCL all-reduces start inside backward.
    model.zero_grad();
    lm.forward(dp.forward(x), y);
    dp.backward(lm.backward());
    const std::vector<double> got = flat(model, true);
    REQUIRE(got.size() == want.size());
    int bad = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      const bool ok = std::abs(got[i] - want[i]) <= atol + rtol * std::abs(want[i]);
      if (!ok && bad++ < 5) {
        INFO("step " << step << " element " << i << ": nccl " << got[i] << " host all-reduce " << want[i]);
        CHECK(ok);
      }
    }
    CHECK(bad == 0);
    // The data differ between ranks, so the averaged gradient is not this rank's own.
    if (r.boot.size() > 1) CHECK(got != flat(ref, true));
  }
}

TEST_CASE("DataParallel over NCCL: broadcast, then parameters stay identical across ranks", "[gpu][mpi][nn]") {
  Ranks r;
  const DType dt = GENERATE(DType::kFloat32, DType::kFloat64);
  const std::size_t bucket_bytes = GENERATE(std::size_t{52}, std::size_t{25} << 20);
  INFO(dtype_name(dt) << ", buckets of " << bucket_bytes << " bytes, rank " << r.boot.rank());
  // A different initialisation on every rank: the constructor broadcasts rank 0's.
  Mlp model(options(dt, 21 + static_cast<std::uint64_t>(r.boot.rank()), r.device));
  Mlp rank0(options(dt, 21, r.device));
  DataParallelOptions o;
  o.bucket_bytes = bucket_bytes;
  DataParallel dp(model, *r.nccl, o);
  CHECK(flat(model, false) == flat(rank0, false));
  const std::vector<double> start = flat(model, false);
  Adam opt(model.named_parameters(), 1e-2);
  MseLoss loss;
  for (int step = 0; step < 30; ++step) {
    const auto rank = static_cast<std::uint32_t>(r.boot.rank());
    const Tensor x = random_tensor({16, 5}, dt, 300 + static_cast<std::uint64_t>(step), rank).to(r.device);
    const Tensor y = random_tensor({16, 3}, dt, 400 + static_cast<std::uint64_t>(step), rank).to(r.device);
    opt.zero_grad();
    loss.forward(dp.forward(x), y);
    dp.backward(loss.backward());
    opt.step();
  }
  const std::vector<double> mine = flat(model, false);
  const std::vector<double> all = r.boot.allgather(std::span<const double>(mine));
  for (int k = 1; k < r.boot.size(); ++k)
    CHECK(std::memcmp(all.data(), all.data() + static_cast<std::size_t>(k) * mine.size(),
                      mine.size() * sizeof(double)) == 0);
  CHECK(mine != start);
}
