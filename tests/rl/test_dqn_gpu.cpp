// DQN on a CUDA device against the CPU, [gpu]: QNetwork forward (linear and dueling heads),
// one Dqn::train_step on a fixed batch (Huber and MSE losses, plain and double targets,
// dueling heads, n-step discounts, prioritized-replay weights): loss, mean Q, mean target,
// gradient norm, the TD errors that become priorities, and the parameters after the step;
// hard and Polyak target updates bit for bit; a non-finite loss; the host waits and
// transfers of one update (the budget of "On a CUDA device" in herd/rl/dqn.hpp); and a
// DqnTrainer on the device (iterations, checkpoint into a CPU run); the guards of a
// data-parallel step on the device (a flagged rank's gradient filled with NaN, the flag
// raised by a non-finite gradient norm; test_dqn_nccl_gpu.cpp runs them over NCCL). Without a device the
// program prints "SKIPPED" and exits 77; the host-emu build runs the same kernels on the CPU.
//
// Tolerances: float32 results of cuBLAS and Eigen differ in summation order only, and the
// device sums the loss terms as a tree; 1e-4 relative (plus a small absolute margin) is
// thousands of float32 roundings of headroom at these widths (32). The dueling combination
// and the Polyak update do the host's arithmetic in the host's order, so they are exact.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include "gpu_compare.hpp"
#include "herd/core/device.hpp"
#include "herd/core/error.hpp"
#include "herd/core/launch.hpp"
#include "herd/nn/tensor.hpp"
#include "herd/rl/cuda/dqn_kernels.hpp"
#include "herd/rl/dqn.hpp"
#include "herd/rl/dqn_trainer.hpp"
#include "herd/rl/network.hpp"
#include "herd/rl/train_config.hpp"

using namespace herd;
using namespace herd::rl;
using herd::rl::testing::check_close;
using herd::rl::testing::host_values;

namespace {

const Device kGpu = Device::cuda(0);
constexpr std::int64_t kObs = 6, kActions = 4, kBatch = 40;

std::unique_ptr<QNetwork> make_net(Device d, bool dueling, std::uint64_t seed) {
  EncoderSpec spec;
  spec.hidden = {32, 32};
  std::int64_t features = 0;
  auto enc = make_encoder({kObs}, spec, d, RngStream(seed, 0, RngPurpose::kInit), 0, &features);
  return std::make_unique<QNetwork>(std::move(enc), features, std::vector<std::int64_t>{kObs}, kActions, dueling,
                                    RngStream(seed, 100, RngPurpose::kInit), 0, d);
}

// A fixed batch: n-step returns, discounts gamma^m or 0 (terminated), importance weights.
ReplaySample make_batch(std::uint64_t seed) {
  ReplaySample b;
  RngCursor c = RngStream(seed, 7).at(0);
  for (std::int64_t i = 0; i < kBatch * kObs; ++i) {
    b.obs.push_back(static_cast<float>(c.normal()));
    b.next_obs.push_back(static_cast<float>(c.normal()));
  }
  for (std::int64_t i = 0; i < kBatch; ++i) {
    b.actions.push_back(static_cast<std::int64_t>(c.below(kActions)));
    b.returns.push_back(3.0 * c.normal());  // large enough that some |TD| exceed the Huber threshold
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

}  // namespace

TEST_CASE("QNetwork on CUDA: same initial parameters and Q values as on the CPU", "[gpu][rl][dqn]") {
  for (const bool dueling : {false, true}) {
    auto cpu = make_net(Device::cpu(), dueling, 5);
    auto gpu = make_net(kGpu, dueling, 5);
    CHECK(gpu->device() == kGpu);
    CHECK(all_params(*cpu) == all_params(*gpu));
    const ReplaySample b = make_batch(1);
    nn::Tensor x({kBatch, kObs}, nn::DType::kFloat32);
    std::copy(b.obs.begin(), b.obs.end(), x.data<float>());
    const auto qc = cpu->forward(x).to_vector();
    const auto qg = host_values(gpu->forward(x.to(kGpu)));
    check_close(qc, qg, 1e-5, 1e-6, dueling ? "dueling Q" : "Q");
    // Greedy actions agree wherever the CPU's best action wins by a margin.
    std::vector<std::int64_t> ac(kBatch), ag(kBatch);
    cpu->greedy_actions(b.obs.data(), kBatch, ac.data());
    gpu->greedy_actions(b.obs.data(), kBatch, ag.data());
    for (std::int64_t i = 0; i < kBatch; ++i) {
      std::vector<double> row(qc.begin() + i * kActions, qc.begin() + (i + 1) * kActions);
      std::sort(row.rbegin(), row.rend());
      if (row[0] - row[1] > 1e-4) CHECK(ac[static_cast<std::size_t>(i)] == ag[static_cast<std::size_t>(i)]);
    }
  }
}

TEST_CASE("Dqn::train_step on CUDA equals the CPU update on a fixed batch", "[gpu][rl][dqn]") {
  struct Variant {
    const char* name;
    bool double_q, dueling;
    DqnLoss loss;
    OptimizerKind opt;
  };
  const Variant variants[] = {{"plain, Huber, Adam", false, false, DqnLoss::kHuber, OptimizerKind::kAdam},
                              {"double, dueling, MSE, RMSprop", true, true, DqnLoss::kMse, OptimizerKind::kRmsProp},
                              {"double, Huber, Adam", true, false, DqnLoss::kHuber, OptimizerKind::kAdam}};
  for (const Variant& v : variants) {
    INFO(v.name);
    DqnOptions o;
    o.double_q = v.double_q;
    o.dueling = v.dueling;
    o.loss = v.loss;
    o.optimizer = v.opt;
    o.learning_rate = 1e-3;
    o.max_grad_norm = 0.2;  // the clip is active (the norms here are about 0.4 to 1)
    auto on_c = make_net(Device::cpu(), v.dueling, 9), tg_c = make_net(Device::cpu(), v.dueling, 10);
    auto on_g = make_net(kGpu, v.dueling, 9), tg_g = make_net(kGpu, v.dueling, 10);
    Dqn dc(*on_c, *tg_c, o), dg(*on_g, *tg_g, o);
    const std::vector<double> before = all_params(*on_c);
    for (int step = 0; step < 2; ++step) {  // the second step runs on the first one's optimizer state
      const ReplaySample b = make_batch(20 + static_cast<std::uint64_t>(step));
      std::vector<double> td_c, td_g;
      const DqnStepStats sc = dc.train_step(b, &td_c);
      const DqnStepStats sg = dg.train_step(b, &td_g);
      CHECK(sg.loss == Approx(sc.loss).epsilon(1e-4));
      CHECK(sg.q_mean == Approx(sc.q_mean).epsilon(1e-4).margin(1e-6));
      CHECK(sg.target_mean == Approx(sc.target_mean).epsilon(1e-4).margin(1e-6));
      CHECK(sc.grad_norm > o.max_grad_norm);
      CHECK(sg.grad_norm == Approx(sc.grad_norm).epsilon(1e-4));
      check_close(td_c, td_g, 1e-4, 1e-6, "TD errors");
      // Priorities |TD| + eps of prioritized replay: the same within the same tolerance.
      const auto pc = all_params(*on_c), pg = all_params(*on_g);
      std::vector<double> dc_(pc.size()), dg_(pc.size());
      for (std::size_t i = 0; i < pc.size(); ++i) {
        dc_[i] = pc[i] - before[i];
        dg_[i] = pg[i] - before[i];
      }
      check_close(dc_, dg_, 1e-3, 1e-7, "parameter change");
    }
    // targets() gives the same values on both devices.
    const ReplaySample b = make_batch(40);
    check_close(dc.targets(b), dg.targets(b), 1e-4, 1e-6, "TD targets");
  }
}

TEST_CASE("Dqn::train_step on CUDA: host waits and transfers per update", "[gpu][rl][dqn]") {
  DqnOptions o;
  o.double_q = true;
  o.dueling = true;
  auto on = make_net(kGpu, true, 3), tg = make_net(kGpu, true, 4);
  Dqn dqn(*on, *tg, o);
  const ReplaySample b = make_batch(2);
  std::vector<double> td;
  dqn.train_step(b, &td);  // first call: buffers reach their sizes
  const gpu::CounterScope scope;
  dqn.train_step(b, &td);
  const gpu::LaunchCounters c = scope.delta();
  INFO(c.str());
  if (gpu::active_backend() == gpu::Backend::kHost) {  // the host runtime counts waits and copies
    CHECK(c.host_waits == 1);
    CHECK(c.h2d_copies == 1);
    CHECK(c.d2h_copies == 1);
    CHECK(c.h2d_bytes < 2 * kBatch * kObs * 4 + 64 * kBatch);
  }
  CHECK(c.kernel_launches > 10);  // forward, loss, backward and the step ran as kernels
  // Acting: one upload, one read-back, one wait per call.
  std::vector<std::int64_t> actions(kBatch);
  on->greedy_actions(b.obs.data(), kBatch, actions.data());
  const gpu::CounterScope act;
  on->greedy_actions(b.obs.data(), kBatch, actions.data());
  if (gpu::active_backend() == gpu::Backend::kHost) {
    CHECK(act.delta().host_waits == 1);
    CHECK(act.delta().h2d_copies == 1);
    CHECK(act.delta().d2h_copies == 1);
  }
  // Target updates need no host wait.
  const gpu::CounterScope up;
  tg->update_from(*on, 1.0);
  tg->update_from(*on, 0.5);
  if (gpu::active_backend() == gpu::Backend::kHost) {
    CHECK(up.delta().host_waits == 0);
    CHECK(up.delta().transfers() == 0);
  }
}

TEST_CASE("QNetwork::update_from on CUDA: hard and Polyak updates exactly as on the CPU", "[gpu][rl][dqn]") {
  for (const bool dueling : {false, true}) {
    auto on_c = make_net(Device::cpu(), dueling, 1), tg_c = make_net(Device::cpu(), dueling, 2);
    auto on_g = make_net(kGpu, dueling, 1), tg_g = make_net(kGpu, dueling, 2);
    REQUIRE(all_params(*on_c) != all_params(*tg_c));
    for (const double tau : {0.005, 0.3}) {
      tg_c->update_from(*on_c, tau);
      tg_g->update_from(*on_g, tau);
      CHECK(all_params(*tg_c) == all_params(*tg_g));
    }
    tg_g->update_from(*on_g, 1.0);
    CHECK(all_params(*tg_g) == all_params(*on_c));
    // A target on another device is refused.
    CHECK_THROWS_AS(tg_c->update_from(*on_g, 1.0), InputError);
  }
}

TEST_CASE("Dqn::train_step on CUDA: a non-finite loss throws and leaves the parameters", "[gpu][rl][dqn]") {
  DqnOptions o;
  auto on = make_net(kGpu, false, 3), tg = make_net(kGpu, false, 4);
  Dqn dqn(*on, *tg, o);
  ReplaySample b = make_batch(3);
  b.returns[5] = std::numeric_limits<double>::quiet_NaN();
  const auto before = all_params(*on);
  CHECK_THROWS_AS(dqn.train_step(b, nullptr), NumericalError);
  CHECK(all_params(*on) == before);
  b = make_batch(3);
  b.actions[2] = kActions;  // outside [0, A): refused before anything runs
  CHECK_THROWS_AS(dqn.train_step(b, nullptr), InputError);
}

TEST_CASE("DqnTrainer on CUDA: iterations, and its checkpoint resumes on the CPU", "[gpu][rl][dqn]") {
  const std::string dir = (std::filesystem::temp_directory_path() / "herd_test_dqn_gpu").string();
  std::filesystem::create_directories(dir);
  const std::string text =
      "env = \"CartPole-v1\"\nalgorithm = \"dqn\"\nseed = 3\ntotal_steps = 256\n"
      "device = \"cuda\"\noutput_prefix = \"" +
      dir +
      "/run\"\n"
      "[sampler]\nnum_envs = 4\nnum_steps = 16\n[network]\nhidden = [16]\n"
      "[dqn]\nbuffer_size = 512\nbatch_size = 16\nlearning_starts = 64\ntrain_freq = 2\n"
      "target_update_interval = 64\ndouble_q = true\ndueling = true\nn_step = 2\n"
      "prioritized = true\n";
  std::string resolved;
  const TrainConfig c = parse_train_config(text, &resolved, 1);
  DqnTrainer t(c, resolved);
  CHECK(t.device() == kGpu);
  CHECK(t.q_network().device() == kGpu);
  t.iterate();
  t.iterate();
  CHECK(t.gradient_steps() > 0);
  CHECK(std::isfinite(t.curve().back()[10]));  // loss
  t.save_checkpoint(dir + "/run.ckpt");
  // The same configuration on the CPU loads the CUDA run's networks exactly.
  std::string cpu_text = text;
  cpu_text.replace(cpu_text.find("\"cuda\""), 6, "\"cpu\"");
  std::string cpu_resolved;
  const TrainConfig cc = parse_train_config(cpu_text, &cpu_resolved, 1);
  DqnTrainer cpu(cc, cpu_resolved);
  cpu.load_checkpoint(dir + "/run.ckpt");
  CHECK(all_params(cpu.q_network()) == all_params(t.q_network()));
  CHECK(all_params(cpu.target_network()) == all_params(t.target_network()));
  CHECK(cpu.gradient_steps() == t.gradient_steps());
  std::filesystem::remove_all(dir);
}

TEST_CASE("DQN's data-parallel guards on CUDA: a flagged gradient becomes NaN, a non-finite norm raises the flag",
          "[gpu][rl][dqn]") {
  // Device scratch: floats 0-4 a gradient, float 5 a flag (int32 bits), 6-7 a double.
  nn::Tensor host({8}, nn::DType::kFloat32);
  const auto put = [&](std::int32_t flag, double v) {
    for (int i = 0; i < 5; ++i) host.data<float>()[i] = 0.5f * static_cast<float>(i + 1);
    std::memcpy(host.data<float>() + 5, &flag, sizeof flag);
    std::memcpy(host.data<float>() + 6, &v, sizeof v);
    return host.to(kGpu);
  };
  const auto flag_of = [](const nn::Tensor& h) {
    std::int32_t f = 0;
    std::memcpy(&f, h.data<float>() + 5, sizeof f);
    return f;
  };
  cudaStream_t st = nn::compute_stream(kGpu);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const std::int32_t flag : {0, 1}) {
    nn::Tensor d = put(flag, 1.0);
    auto* f = reinterpret_cast<std::int32_t*>(d.data<float>() + 5);
    cuda::fill_if_flagged(f, d.data<float>(), 5, nan, st);
    const nn::Tensor h = d.to(Device::cpu());
    for (int i = 0; i < 5; ++i) {
      if (flag) CHECK(std::isnan(h.data<float>()[i]));
      else CHECK(h.data<float>()[i] == 0.5f * static_cast<float>(i + 1));
    }
  }
  struct Case {
    std::int32_t flag;
    double v;
    std::int32_t want;
  };
  const double inf = std::numeric_limits<double>::infinity();
  for (const Case c : {Case{0, 2.5, 0}, Case{1, 2.5, 1}, Case{0, std::nan(""), 1}, Case{0, inf, 1}, Case{1, inf, 1}}) {
    INFO("flag " << c.flag << ", value " << c.v);
    nn::Tensor d = put(c.flag, c.v);
    cuda::flag_if_not_finite(reinterpret_cast<const double*>(d.data<float>() + 6),
                             reinterpret_cast<std::int32_t*>(d.data<float>() + 5), st);
    CHECK(flag_of(d.to(Device::cpu())) == c.want);
  }
}
