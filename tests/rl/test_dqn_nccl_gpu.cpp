// Data-parallel DQN on CUDA devices, gradients averaged over NCCL, several ranks
// ([gpu][mpi]; CTest runs it under mpiexec -n 2; with fewer CUDA devices than ranks every
// rank exits with 77 and rank 0 prints "SKIPPED", since NCCL refuses two ranks on one GPU:
// tests/support/mpi_gpu_main.cpp). Rank r uses cuda:r; the host collectives stay on MPI.
// The CPU data-parallel DQN of test_data_parallel_rl.cpp is the reference.
//
// Checks:
// - `Dqn::train_step` with each rank's networks on its GPU and an `NcclCommunicator`: after
//   each of 3 gradient steps on per-rank batches the online parameters are bitwise
//   identical on every rank, and equal the CPU data-parallel `Dqn` (host networks, MPI,
//   the same per-rank batches): loss, mean Q and mean target (averaged over the ranks) and
//   the gradient norm within 1e-4 relative, the TD errors within 1e-4 of the largest plus
//   1e-6, the parameter change since the start within 1e-3 of the largest change plus 1e-7
//   (tests/rl/test_dqn_gpu.cpp's tolerances for one GPU: float32 cuBLAS against Eigen
//   differ in summation order only, and NCCL sums the two ranks' gradients as MPI does).
// - A non-finite loss on one rank: every rank throws before the optimizer step (that rank
//   names its loss, the others the averaged gradient), the parameters stay, the ranks stay
//   in step; with and without the gradient-norm clip.
// - `DqnTrainer` with device = "cuda" under the ranks: rank r trains on cuda:r; online and
//   target networks and the curve identical on every rank after every iteration. With
//   epsilon 1 throughout (random actions) and uniform replay, the envs' transitions and
//   the batches do not depend on the networks, so the run sees the same data as the CPU
//   data-parallel run of the same configuration: the curve's returns and episode counts
//   equal it exactly, the loss within 1e-3 relative, the networks' change within 1e-3 of
//   the largest change plus 1e-6 after about 30 Adam steps (Adam's epsilon 1e-3 here, so
//   that gradients at the float32 rounding level cannot flip a step's sign). Its
//   checkpoint (taken after two iterations) resumes a GPU run of the same ranks
//   bit-identically (the nn reductions and NCCL's all-reduce run in fixed orders on the
//   same GPUs) and a CPU data-parallel run with the networks exactly.
#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "gpu_compare.hpp"
#include "herd/core/cuda/cuda_check.hpp"
#include "herd/core/device.hpp"
#include "herd/core/mpi_communicator.hpp"
#include "herd/core/nccl_communicator.hpp"
#include "herd/rl/dqn.hpp"
#include "herd/rl/dqn_trainer.hpp"
#include "herd/rl/network.hpp"
#include "herd/rl/train_config.hpp"

using namespace herd;
using namespace herd::rl;
using herd::rl::testing::check_close;
using herd::rl::testing::host_values;

namespace {

constexpr std::int64_t kObs = 6, kActions = 4;

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
  Ranks(const Ranks&) = delete;
  Ranks& operator=(const Ranks&) = delete;
  MpiCommunicator boot;
  Device device;
  cudaStream_t stream = nullptr;
  std::unique_ptr<NcclCommunicator> nccl;
};

std::unique_ptr<QNetwork> make_net(Device d, bool dueling, std::uint64_t seed) {
  EncoderSpec spec;
  spec.hidden = {32, 32};
  std::int64_t features = 0;
  auto enc = make_encoder({kObs}, spec, d, RngStream(seed, 0, RngPurpose::kInit), 0, &features);
  return std::make_unique<QNetwork>(std::move(enc), features, std::vector<std::int64_t>{kObs}, kActions, dueling,
                                    RngStream(seed, 100, RngPurpose::kInit), 0, d);
}

// Rank `rank`'s batch of step `step`: n-step returns, discounts gamma^m or 0, weights.
ReplaySample rank_batch(std::uint64_t step, int rank, std::int64_t n) {
  ReplaySample b;
  RngCursor c = RngStream(31 + step, static_cast<std::uint32_t>(rank)).at(0);
  for (std::int64_t i = 0; i < n * kObs; ++i) {
    b.obs.push_back(static_cast<float>(c.normal()));
    b.next_obs.push_back(static_cast<float>(c.normal()));
  }
  for (std::int64_t i = 0; i < n; ++i) {
    b.actions.push_back(static_cast<std::int64_t>(c.below(kActions)));
    b.returns.push_back(3.0 * c.normal());
    const int m = 1 + static_cast<int>(c.below(3));
    b.discounts.push_back(i % 7 == 0 ? 0.0 : std::pow(0.99, m));
    b.weights.push_back(0.3 + c.uniform());
    b.indices.push_back(static_cast<std::uint64_t>(i));
    b.steps.push_back(m);
  }
  return b;
}

std::vector<double> all_params(QNetwork& q) {
  std::vector<double> v;
  for (const auto& p : q.named_parameters()) {
    const auto x = host_values(p.param->value);
    v.insert(v.end(), x.begin(), x.end());
  }
  return v;
}

// Rank 0's values, broadcast, must equal this rank's bit for bit (on every rank).
bool same_on_all_ranks(Communicator& comm, std::vector<double> v) {
  std::vector<double> r0 = v;
  comm.broadcast(std::span<double>(r0), 0);
  const bool eq = std::memcmp(r0.data(), v.data(), v.size() * sizeof(double)) == 0;  // NaN == NaN here
  return comm.allreduce_value<std::int32_t>(eq ? 1 : 0, ReduceOp::kMin) == 1;
}

std::vector<double> minus(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> d(a.size());
  for (std::size_t i = 0; i < a.size(); ++i) d[i] = a[i] - b[i];
  return d;
}

// Wall-clock columns zeroed (they differ between ranks and runs).
std::vector<double> dqn_row(const std::vector<double>& row) {
  std::vector<double> r = row;
  for (std::size_t k = 0; k < r.size(); ++k)
    if (is_wall_clock_column(kDqnCurveColumns[k])) r[k] = 0;
  return r;
}

std::size_t column(const char* name) {
  for (std::size_t k = 0; k < kDqnCurveColumns.size(); ++k)
    if (std::strcmp(kDqnCurveColumns[k], name) == 0) return k;
  FAIL("no column " << name);
  return 0;
}

// CartPole DQN over `ranks` ranks on `device`: 4 envs x 16 steps per rank and iteration,
// 4 iterations; random actions throughout (epsilon 1) and uniform replay, so the data do not
// depend on the networks; double DQN, dueling heads, 2-step returns, Polyak target updates.
std::string trainer_text(int ranks, const std::string& device, const std::string& prefix) {
  return "env = \"CartPole-v1\"\nalgorithm = \"dqn\"\nseed = 5\ndevice = \"" + device +
         "\"\ntotal_steps = " + std::to_string(4 * 64 * ranks) + "\noutput_prefix = \"" + prefix +
         "\"\n[sampler]\nnum_envs = 4\nnum_steps = 16\n[network]\nhidden = [16]\n"
         "[dqn]\nbuffer_size = 400\nbatch_size = 8\nlearning_starts = 64\ntrain_freq = 2\ngradient_steps = 1\n"
         "target_update_interval = 96\ntau = 0.5\ndouble_q = true\ndueling = true\nn_step = 2\n"
         "exploration_initial_eps = 1.0\nexploration_final_eps = 1.0\nlearning_rate = 1e-3\noptimizer_eps = 1e-3\n";
}

}  // namespace

TEST_CASE("Data-parallel DQN over NCCL: a gradient step equals the CPU data-parallel step, on every rank",
          "[gpu][mpi][rl][dqn]") {
  Ranks r;
  const int rank = r.boot.rank(), R = r.boot.size();
  constexpr std::int64_t kPerRank = 12;
  struct Variant {
    const char* name;
    bool double_q, dueling;
    DqnLoss loss;
    OptimizerKind opt;
    double max_norm;
  };
  const Variant variants[] = {
      {"plain, Huber, Adam, clip", false, false, DqnLoss::kHuber, OptimizerKind::kAdam, 0.2},
      {"double, dueling, MSE, RMSprop, no clip", true, true, DqnLoss::kMse, OptimizerKind::kRmsProp, 0.0}};
  for (const Variant& v : variants) {
    INFO(v.name << ", rank " << rank << " of " << R);
    DqnOptions o;
    o.double_q = v.double_q;
    o.dueling = v.dueling;
    o.loss = v.loss;
    o.optimizer = v.opt;
    o.learning_rate = 1e-3;
    o.max_grad_norm = v.max_norm;
    auto on_c = make_net(Device::cpu(), v.dueling, 9), tg_c = make_net(Device::cpu(), v.dueling, 10);
    auto on_g = make_net(r.device, v.dueling, 9), tg_g = make_net(r.device, v.dueling, 10);
    Dqn cpu(*on_c, *tg_c, o, &r.boot);                // the CPU data-parallel DQN (MPI)
    Dqn gpu(*on_g, *tg_g, o, &r.boot, r.nccl.get());  // gradients over NCCL on the device
    const std::vector<double> start = all_params(*on_c);
    REQUIRE(all_params(*on_g) == start);
    for (std::uint64_t step = 0; step < 3; ++step) {
      INFO("step " << step);
      const ReplaySample b = rank_batch(step, rank, kPerRank);
      std::vector<double> td_c, td_g;
      const DqnStepStats sc = cpu.train_step(b, &td_c);
      const DqnStepStats sg = gpu.train_step(b, &td_g);
      std::array<double, 6> m = {sc.loss, sc.q_mean, sc.target_mean, sg.loss, sg.q_mean, sg.target_mean};
      r.boot.allreduce(std::span<double>(m), ReduceOp::kSum);
      CHECK(m[3] == Approx(m[0]).epsilon(1e-4));
      CHECK(m[4] == Approx(m[1]).epsilon(1e-4).margin(1e-6));
      CHECK(m[5] == Approx(m[2]).epsilon(1e-4).margin(1e-6));
      if (v.max_norm > 0) CHECK(sg.grad_norm == Approx(sc.grad_norm).epsilon(1e-4));
      else CHECK((std::isnan(sg.grad_norm) && std::isnan(sc.grad_norm)));
      check_close(td_c, td_g, 1e-4, 1e-6, "TD errors");
      const std::vector<double> pg = all_params(*on_g);
      CHECK(same_on_all_ranks(r.boot, pg));  // NCCL gives every rank the same bits
      check_close(minus(all_params(*on_c), start), minus(pg, start), 1e-3, 1e-7, "parameter change");
    }
  }
}

TEST_CASE("Data-parallel DQN over NCCL: a non-finite loss on one rank stops every rank before the step",
          "[gpu][mpi][rl][dqn]") {
  Ranks r;
  const int rank = r.boot.rank(), last = r.boot.size() - 1;
  for (const double max_norm : {10.0, 0.0}) {
    INFO("max_grad_norm " << max_norm << ", rank " << rank);
    DqnOptions o;
    o.max_grad_norm = max_norm;
    auto on = make_net(r.device, false, 3), tg = make_net(r.device, false, 4);
    Dqn dqn(*on, *tg, o, &r.boot, r.nccl.get());
    ReplaySample b = rank_batch(7, rank, 6);
    if (rank == last) b.returns[2] = std::numeric_limits<double>::quiet_NaN();
    const auto before = all_params(*on);
    if (rank == last) CHECK_THROWS_WITH(dqn.train_step(b, nullptr), Catch::Contains("TD loss is nan"));
    else CHECK_THROWS_WITH(dqn.train_step(b, nullptr), Catch::Contains("averaged over the ranks is not finite"));
    CHECK(all_params(*on) == before);
    // The ranks are still in step: a good batch trains on every rank.
    CHECK_NOTHROW(dqn.train_step(rank_batch(8, rank, 6), nullptr));
    CHECK(all_params(*on) != before);
    CHECK(same_on_all_ranks(r.boot, all_params(*on)));
  }
}

TEST_CASE("Data-parallel DqnTrainer on CUDA devices: identical networks on every rank, the CPU run's results",
          "[gpu][mpi][rl][dqn]") {
  MpiCommunicator comm;
  const int R = comm.size();
  const std::string prefix = "test_rl_dqn_nccl_np" + std::to_string(R);
  const std::string path = prefix + ".ckpt";
  std::string gtext, ctext;
  const TrainConfig gc = parse_train_config(trainer_text(R, "cuda", prefix), &gtext, R);
  const TrainConfig cc = parse_train_config(trainer_text(R, "cpu", prefix), &ctext, R);
  DqnTrainer gpu(gc, gtext, &comm);
  DqnTrainer cpu(cc, ctext, &comm);
  const Device mine = Device::cuda(node_local_rank(comm) % cuda_device_count());
  CHECK(gpu.device() == mine);
  CHECK(gpu.q_network().device() == mine);
  CHECK(gpu.target_network().device() == mine);
  const std::vector<double> start = all_params(cpu.q_network());
  REQUIRE(all_params(gpu.q_network()) == start);
  const std::size_t loss = column("loss");
  int iters = 0;
  while (!gpu.done()) {
    gpu.iterate();
    cpu.iterate();
    ++iters;
    INFO("iteration " << iters);
    CHECK(same_on_all_ranks(comm, all_params(gpu.q_network())));
    CHECK(same_on_all_ranks(comm, all_params(gpu.target_network())));
    const std::vector<double> g = dqn_row(gpu.curve().back()), c = dqn_row(cpu.curve().back());
    CHECK(same_on_all_ranks(comm, g));
    // The same data as the CPU run: returns, lengths, episode and step counts exactly.
    for (const char* name :
         {"env_steps", "return_mean", "episode_length", "episodes", "gradient_steps", "replay_size", "epsilon"}) {
      INFO(name);
      const std::size_t k = column(name);
      CHECK(((std::isnan(g[k]) && std::isnan(c[k])) || g[k] == c[k]));
    }
    if (std::isfinite(c[loss])) CHECK(g[loss] == Approx(c[loss]).epsilon(1e-3));
    if (iters == 2) gpu.save_checkpoint(path);
  }
  CHECK(iters == 4);
  CHECK(gpu.gradient_steps() > 20);
  CHECK(gpu.gradient_steps() == cpu.gradient_steps());
  check_close(minus(all_params(cpu.q_network()), start), minus(all_params(gpu.q_network()), start), 1e-3, 1e-6,
              "online network change");
  check_close(minus(all_params(cpu.target_network()), start), minus(all_params(gpu.target_network()), start), 1e-3,
              1e-6, "target network change");
  comm.barrier();
  // The GPU checkpoint resumes a GPU run of the same ranks bit-identically ...
  DqnTrainer again(gc, gtext, &comm);
  again.load_checkpoint(path);
  CHECK(again.iteration() == 2);
  while (!again.done()) again.iterate();
  CHECK(all_params(again.q_network()) == all_params(gpu.q_network()));
  CHECK(all_params(again.target_network()) == all_params(gpu.target_network()));
  REQUIRE(again.curve().size() == gpu.curve().size());
  for (std::size_t i = 0; i < gpu.curve().size(); ++i) {
    INFO("row " << i);
    const auto x = dqn_row(gpu.curve()[i]), y = dqn_row(again.curve()[i]);
    CHECK(std::memcmp(x.data(), y.data(), x.size() * sizeof(double)) == 0);
  }
  // ... and a CPU data-parallel run of the same ranks, with its networks exactly.
  DqnTrainer on_cpu(cc, ctext, &comm);
  on_cpu.load_checkpoint(path);
  DqnTrainer at2(gc, gtext, &comm);
  at2.load_checkpoint(path);
  CHECK(all_params(on_cpu.q_network()) == all_params(at2.q_network()));
  CHECK(all_params(on_cpu.target_network()) == all_params(at2.target_network()));
  CHECK(on_cpu.gradient_steps() == at2.gradient_steps());
  CHECK(on_cpu.replay().size() == at2.replay().size());
  comm.barrier();
  if (comm.rank() == 0) std::remove(path.c_str());
}
