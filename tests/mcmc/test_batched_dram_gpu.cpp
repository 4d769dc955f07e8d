// Batched DRAM on the GPU, [gpu]: exits 77 (skipped) without a CUDA device.
// - The device draws the same Philox words and acceptance uniforms as the host path, bit for
//   bit, and the same ziggurat normals up to the last bits (device exp/log).
// - GPU and host path chains on the same seeds are statistically equivalent: two-sample KS
//   of the chains' last draws (independent across chains) per coordinate.
// - The statistical test of the host path (10-D Gaussian, one DR stage, pooled-then-frozen
//   adaptation) on the GPU, with 100k chains.
// - The neural-surrogate target on the device (the nn Mlp on the device, one forward per
//   stage round) against the host path with the same network: two-sample KS of the last
//   draws.
// - Every kernel variant against the host path: thread-local state of size 8 (d <= 8) and 32
//   (16 < d <= 32), the array form (d > 32), several delayed-rejection stages, per-chain,
//   pooled and no adaptation; the other built-in targets (banana, funnel, Rosenbrock).
// - A device run resumed from a checkpoint continues bit for bit (device arithmetic is
//   deterministic: no floating-point atomics in the chain or adaptation math).
// Under the host backend (label host-emu) the two largest cases run fewer chains (4000
// instead of 100k, 1000 instead of 4000) to keep CI short; the assertions are the same.
// Seeds fixed before any run. False-failure rates are stated per assertion; the file fails
// by chance with probability < 7e-3.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "herd/core/launch.hpp"
#include "herd/mcmc/batched_dram.hpp"
#include "herd/mcmc/batched_targets.hpp"
#include "herd/mcmc/cuda/batched_dram_cuda.hpp"
#include "herd/mcmc/cuda/batched_surrogate_cuda.hpp"
#include "herd/mcmc/ks_test.hpp"
#include "herd/nn/mlp.hpp"
#include "ks.hpp"

using namespace herd::mcmc;

namespace {

// Fewer chains under the host backend, where the kernels run on the CPU.
std::int64_t chains(std::int64_t on_device, std::int64_t on_host_backend) {
  return herd::gpu::active_backend() == herd::gpu::Backend::kHost ? on_host_backend : on_device;
}

double normal_cdf(double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); }

std::vector<double> last_coordinate(const MemoryBatchedSink& s, int j) {
  std::vector<double> v;
  for (std::int64_t i = 0; i < s.num_chains; ++i)
    v.push_back(s.x[static_cast<std::size_t>((i * s.draws + s.draws - 1) * s.ndim + j)]);
  return v;
}

BatchedDramOptions gaussian_options(std::int64_t m) {
  BatchedDramOptions o;
  o.ndim = 10;
  o.num_chains = m;
  o.first_chain_id = 31;
  o.seed = 2026112917;
  std::mt19937_64 gen(17);
  std::normal_distribution<double> z;
  o.start_points.resize(static_cast<std::size_t>(m) * 10);
  for (double& x : o.start_points) x = 2.0 * z(gen);
  o.warmup = 800;
  o.steps = 400;
  o.thin = 10;
  o.delayed_rejection_count = 1;
  o.adaptation = BatchedAdaptation::kPooled;
  o.block_draws = 8;
  return o;
}

}  // namespace

TEST_CASE("gpu batched kernel: Philox words and uniforms bit-identical to the host, normals to rounding",
          "[gpu][mcmc][batched]") {
  const std::uint64_t seed = 0xfeedbeefcafe1234ull;
  const int d = 10, stages = 3;
  const std::size_t n = 1000;
  for (std::uint64_t k : {std::uint64_t{0}, std::uint64_t{12345}, (std::uint64_t{1} << 44) + 3}) {
    std::vector<std::uint32_t> words;
    std::vector<double> uniforms, normals;
    cuda::kernel_draws(seed, 77, n, k, d, stages, words, uniforms, normals);
    batched::KernelParams p;
    p.d = d;
    p.stages = stages;
    p.seed = seed;
    p.first_chain_id = 77;
    p.zig = &herd::ziggurat_tables();
    std::size_t word_mismatch = 0, uniform_mismatch = 0;
    double max_normal_diff = 0.0;
    std::vector<double> z(d);
    for (std::size_t i = 0; i < n; ++i) {
      const auto cid = batched::chain_id(p, i);
      const herd::RngPurpose purposes[3] = {herd::RngPurpose::kProposal, herd::RngPurpose::kAcceptance,
                                            herd::RngPurpose::kDelayedRejection};
      for (int q = 0; q < 3; ++q) {
        const auto b = herd::RngStream(seed, cid, purposes[q]).block(k);
        for (int j = 0; j < 4; ++j) word_mismatch += b.v[j] != words[(i * 3 + q) * 4 + j];
      }
      for (int s = 1; s <= stages; ++s)
        uniform_mismatch += batched::acceptance_uniform(p, cid, k, s) != uniforms[i * stages + s - 1];
      auto c = herd::RngStream(seed, cid, herd::RngPurpose::kProposal).at(k);
      herd::ziggurat_normals(c, *p.zig, z.data(), d);
      for (int j = 0; j < d; ++j) max_normal_diff = std::max(max_normal_diff, std::abs(z[j] - normals[i * d + j]));
    }
    CHECK(word_mismatch == 0);
    CHECK(uniform_mismatch == 0);
    CHECK(max_normal_diff < 1e-12);
  }
}

// 10 two-sample KS at 1e-4: < 1e-3.
TEST_CASE("gpu batched DRAM: GPU and host chains on the same seeds are statistically equivalent",
          "[gpu][mcmc][batched]") {
  const GaussianTarget g = GaussianTarget::ar1(10, 0.5);
  BatchedDramOptions o = gaussian_options(4000);
  MemoryBatchedSink host, dev;
  const auto rh = run_batched_dram(o, g.view(), host);
  const auto rd = cuda::run_batched_gaussian(o, g, dev);
  INFO("acceptance host " << rh.acceptance_rate << ", device " << rd.acceptance_rate);
  CHECK(std::abs(rh.acceptance_rate - rd.acceptance_rate) < 0.02);
  for (int j = 0; j < 10; ++j) {
    const auto a = last_coordinate(host, j), b = last_coordinate(dev, j);
    const auto ks = ks_two_sample(a, b);
    INFO("coordinate " << j << ": two-sample KS p = " << ks.p_value);
    CHECK(ks.p_value > 1e-4);
  }
}

// 10 KS at 1e-4: 1e-3.
TEST_CASE("gpu batched DRAM: 10-D Gaussian, one DR stage, pooled-then-frozen, 100k chains", "[gpu][mcmc][batched]") {
  const GaussianTarget g = GaussianTarget::ar1(10, 0.5);
  BatchedDramOptions o = gaussian_options(chains(100000, 4000));
  MemoryBatchedSink dev;
  const auto r = cuda::run_batched_gaussian(o, g, dev);
  CHECK(r.adaptive_updates > 0);
  for (int j = 0; j < 10; ++j) {
    const double p = herd::testing::ks_pvalue(last_coordinate(dev, j), normal_cdf);
    INFO("coordinate " << j << ": KS p = " << p);
    CHECK(p > 1e-4);
  }
}

// 10 two-sample KS at 1e-4: 1e-3. An untrained float32 MLP 10-64-64-1 plus a Gaussian
// shape (the network output is scaled small and added to an isotropic log density through
// offset 0 and scale 0.1, so the target is proper): host and device sample the same density.
TEST_CASE("gpu batched DRAM: MLP surrogate on the device matches the host path", "[gpu][mcmc][batched][nn]") {
  namespace nn = herd::nn;
  nn::MlpOptions mo;
  mo.sizes = {10, 64, 64, 1};
  mo.activation = nn::Activation::kTanh;
  mo.dtype = nn::DType::kFloat32;
  mo.rng = herd::RngStream(3, 0, herd::RngPurpose::kInit);
  nn::Mlp net(mo);
  // Target: 0.1 * mlp(x) inside the box [-3, 3]^10 (a bounded perturbation of a uniform).
  BatchedDramOptions o = gaussian_options(chains(4000, 1000));
  o.start_points.assign(10, 0.0);
  o.domain_lower.assign(10, -3.0);
  o.domain_upper.assign(10, 3.0);
  MemoryBatchedSink host, dev;
  MlpLogDensity f(net, 10, {}, {}, 0.1, 0.0);
  run_batched_dram(o, BatchedLogDensity([&](const double* x, int n, int d, double* out) { f(x, n, d, out); }), host);
  cuda::run_batched_surrogate(o, net, mo, {}, {}, 0.1, 0.0, dev);
  // The network path records the per-draw statistics too: accepted draws carry the stage and
  // a positive acceptance probability of the state.
  REQUIRE(dev.accepted.size() == host.accepted.size());
  std::size_t bad = 0, accepted = 0;
  for (std::size_t q = 0; q < dev.accepted.size(); ++q) {
    accepted += dev.accepted[q];
    if (dev.accepted[q] != 0) bad += dev.dr_stage[q] < 1 || !(dev.acceptance_probability[q] > 0.0);
  }
  CHECK(bad == 0);
  CHECK(accepted > 0);
  for (int j = 0; j < 10; ++j) {
    const auto ks = ks_two_sample(last_coordinate(host, j), last_coordinate(dev, j));
    INFO("coordinate " << j << ": two-sample KS p = " << ks.p_value);
    CHECK(ks.p_value > 1e-4);
  }
}

namespace {

BatchedDramOptions config(int d, int dr, BatchedAdaptation mode, std::int64_t m, std::uint64_t seed) {
  BatchedDramOptions o;
  o.ndim = d;
  o.num_chains = m;
  o.first_chain_id = 5;
  o.seed = seed;
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> z;
  o.start_points.resize(static_cast<std::size_t>(m * d));
  for (double& x : o.start_points) x = 1.5 * z(gen);
  o.warmup = 400;
  o.steps = 200;
  o.thin = 20;
  o.block_draws = 4;
  o.delayed_rejection_count = dr;
  o.adaptation = mode;
  return o;
}

std::vector<double> last_coordinate_of(const MemoryBatchedSink& s, int j) { return last_coordinate(s, j); }

}  // namespace

// 6 configurations x 2 two-sample KS at 1e-4: 1.2e-3.
TEST_CASE("gpu batched DRAM: state sizes 8 and 32, d > 32, several DR stages and every adaptation match the host",
          "[gpu][mcmc][batched]") {
  struct Case {
    int d, dr;
    BatchedAdaptation mode;
  };
  const Case cases[] = {{5, 3, BatchedAdaptation::kPooled},    {8, 2, BatchedAdaptation::kPerChain},
                        {24, 3, BatchedAdaptation::kPerChain}, {32, 1, BatchedAdaptation::kPooled},
                        {40, 2, BatchedAdaptation::kPerChain}, {40, 4, BatchedAdaptation::kNone}};
  for (const Case& c : cases) {
    INFO("d " << c.d << ", delayed-rejection stages " << c.dr << ", adaptation " << static_cast<int>(c.mode));
    const GaussianTarget g = GaussianTarget::ar1(c.d, 0.5);
    const BatchedDramOptions o = config(c.d, c.dr, c.mode, 2000, 1000 + static_cast<std::uint64_t>(c.d));
    MemoryBatchedSink host, dev;
    const auto rh = run_batched_dram(o, g.view(), host);
    const auto rd = cuda::run_batched_gaussian(o, g, dev);
    REQUIRE(dev.draws == 10);
    CHECK(std::abs(rh.acceptance_rate - rd.acceptance_rate) < 0.03);
    REQUIRE(rd.stage_accepted.size() == static_cast<std::size_t>(c.dr + 1));
    // Later stages accept too (the delayed-rejection path runs on the device).
    CHECK(rd.stage_accepted[1] > 0);
    // Which updates replace a factor depends only on the proposal counts.
    CHECK(rd.adaptive_updates + rd.chol_failures == rh.adaptive_updates + rh.chol_failures);
    for (int q = 0; q < c.d; ++q) CHECK(rd.proposal_cov[static_cast<std::size_t>(q * c.d + q)] > 0.0);
    for (int j : {0, c.d - 1}) {
      const auto ks = ks_two_sample(last_coordinate_of(host, j), last_coordinate_of(dev, j));
      INFO("coordinate " << j << ": two-sample KS p = " << ks.p_value);
      CHECK(ks.p_value > 1e-4);
    }
  }
}

// 3 targets x 2 two-sample KS at 1e-4: 6e-4. From the same start points after the same
// number of proposals, the host and device chain states have the same distribution (mixed
// or not).
TEST_CASE("gpu batched DRAM: banana, funnel and Rosenbrock targets match the host path", "[gpu][mcmc][batched]") {
  const BananaLogDensity banana{4, 0.05};
  const FunnelLogDensity funnel{5};
  const RosenbrockLogDensity rosen{3};
  for (const std::string name : {"banana", "funnel", "rosenbrock"}) {
    INFO(name);
    const int d = name == "banana" ? 4 : name == "funnel" ? 5 : 3;
    BatchedDramOptions o = config(d, 2, BatchedAdaptation::kPooled, 2000, 77);
    for (double& x : o.start_points) x *= 0.3;
    MemoryBatchedSink host, dev;
    if (name == "banana") {
      run_batched_dram(o, banana, host);
      cuda::run_batched_banana(o, banana, dev);
    } else if (name == "funnel") {
      run_batched_dram(o, funnel, host);
      cuda::run_batched_funnel(o, funnel, dev);
    } else {
      run_batched_dram(o, rosen, host);
      cuda::run_batched_rosenbrock(o, rosen, dev);
    }
    for (int j : {0, d - 1}) {
      const auto ks = ks_two_sample(last_coordinate_of(host, j), last_coordinate_of(dev, j));
      INFO("coordinate " << j << ": two-sample KS p = " << ks.p_value);
      CHECK(ks.p_value > 1e-4);
    }
  }
}

namespace {

struct DeviceMemoryCheckpointer final : BatchedCheckpointer {
  std::vector<BatchedSnapshot> saved;
  const BatchedSnapshot* from = nullptr;
  const BatchedSnapshot* resume_state() override { return from; }
  bool due(std::uint64_t) override { return true; }
  void save(const BatchedSnapshot& s) override { saved.push_back(s); }
};

}  // namespace

TEST_CASE("gpu batched DRAM: a device run resumed from a checkpoint continues bit for bit", "[gpu][mcmc][batched]") {
  const GaussianTarget g = GaussianTarget::ar1(6, 0.4);
  for (auto mode : {BatchedAdaptation::kPooled, BatchedAdaptation::kPerChain}) {
    INFO("adaptation " << static_cast<int>(mode));
    BatchedDramOptions o = config(6, 2, mode, 300, 5150);
    MemoryBatchedSink full;
    DeviceMemoryCheckpointer all;
    o.checkpointer = &all;
    const auto r = cuda::run_batched_gaussian(o, g, full);
    REQUIRE(all.saved.size() > 4);
    for (const std::size_t q : {std::size_t{1}, all.saved.size() / 2, all.saved.size() - 1}) {
      const BatchedSnapshot& st = all.saved[q];
      INFO("resumed from checkpoint " << q << " (proposal " << st.next_proposal << ", " << st.draws_done << " draws)");
      DeviceMemoryCheckpointer res;
      res.from = &st;
      o.checkpointer = &res;
      MemoryBatchedSink part;
      const auto rr = cuda::run_batched_gaussian(o, g, part);
      bool same = true;
      for (std::int64_t c = 0; c < full.num_chains; ++c)
        for (std::int64_t t = st.draws_done; t < full.draws; ++t) {
          const auto k = static_cast<std::size_t>(c * full.draws + t);
          same = same && full.lp[k] == part.lp[k] && full.accepted[k] == part.accepted[k] &&
                 full.dr_stage[k] == part.dr_stage[k] &&
                 full.acceptance_probability[k] == part.acceptance_probability[k] &&
                 full.adaptation_measure[k] == part.adaptation_measure[k];
          for (int j = 0; j < full.ndim; ++j) same = same && full.x[k * 6 + j] == part.x[k * 6 + j];
        }
      CHECK(same);
      CHECK(rr.stage_accepted == r.stage_accepted);
      CHECK(rr.adaptive_updates == r.adaptive_updates);
      CHECK(rr.proposal_cov == r.proposal_cov);
      if (!res.saved.empty()) CHECK(res.saved.back().chol == all.saved.back().chol);
    }
  }
}

namespace {
// Forwards to a MemoryBatchedSink and snapshots the launch counters at every block.
class CountingSink final : public BatchedDrawSink {
 public:
  void begin(std::int64_t m, std::uint32_t first, int d, std::int64_t draws) override {
    inner.begin(m, first, d, draws);
  }
  void write_block(std::int64_t first, std::int64_t n, const double* x, const double* lp) override {
    at_block.push_back(herd::gpu::launch_counters());
    inner.write_block(first, n, x, lp);
  }
  void finish() override { inner.finish(); }
  MemoryBatchedSink inner;
  std::vector<herd::gpu::LaunchCounters> at_block;
};
}  // namespace

// The device budget of the batched sampler: a segment (the proposals up to the next block of
// draws, with their copy back) is one kernel launch and at most one host wait. Host waits are
// counted by the host backend (label host-emu); on a CUDA device only launches are counted.
TEST_CASE("gpu batched DRAM: a segment is one kernel launch and at most one host wait", "[gpu][mcmc][batched]") {
  const GaussianTarget g = GaussianTarget::ar1(10, 0.5);
  for (const BatchedAdaptation ad : {BatchedAdaptation::kNone, BatchedAdaptation::kPooled}) {
    BatchedDramOptions o = gaussian_options(256);
    o.adaptation = ad;
    o.warmup = 200;
    o.steps = 400;
    o.thin = 10;
    o.block_draws = 8;  // 40 draws: 5 blocks, 5 segments in the sampling phase
    CountingSink sink;
    cuda::run_batched_gaussian(o, g, sink);
    REQUIRE(sink.at_block.size() == 5);
    for (std::size_t b = 1; b < sink.at_block.size(); ++b) {
      const herd::gpu::LaunchCounters c = sink.at_block[b] - sink.at_block[b - 1];
      INFO("adaptation " << static_cast<int>(ad) << ", segment " << b << ": " << c.str());
      std::printf("batched DRAM segment (adaptation %d): %s\n", static_cast<int>(ad), c.str().c_str());
      CHECK(c.kernel_launches == 1);
      CHECK(c.host_waits <= 1);
    }
  }
}

// Under the host backend the CUDA path's kernels run on the CPU with the host's own exp and
// log, so its chains must equal the host path's bit for bit: a differential test of the
// device runner (thread-local state for d <= 8, 16, 32, the array form above, several DR
// stages, per-chain and pooled adaptation, the built-in targets). On a CUDA device the
// normals may differ in the last bits, so there the acceptance rates are compared only.
TEST_CASE("gpu batched DRAM: device path equals the host path draw for draw (host backend)", "[gpu][mcmc][batched]") {
  const bool exact = herd::gpu::active_backend() == herd::gpu::Backend::kHost;
  struct Case {
    int d;
    int stages;
    BatchedAdaptation ad;
    int target;  // 0 Gaussian, 1 banana, 2 funnel, 3 Rosenbrock
  };
  const Case cases[] = {{4, 3, BatchedAdaptation::kPerChain, 0},  {12, 2, BatchedAdaptation::kPooled, 0},
                        {30, 1, BatchedAdaptation::kPerChain, 2}, {40, 2, BatchedAdaptation::kPooled, 0},
                        {2, 2, BatchedAdaptation::kPooled, 1},    {3, 1, BatchedAdaptation::kNone, 3}};
  for (const Case& c : cases) {
    INFO("d " << c.d << ", stages " << c.stages << ", adaptation " << static_cast<int>(c.ad) << ", target "
              << c.target);
    BatchedDramOptions o;
    o.ndim = c.d;
    o.num_chains = 64;
    o.first_chain_id = 5;
    o.seed = 20261202;
    o.start_points.assign(static_cast<std::size_t>(c.d), 0.1);
    o.proposal_start_std.assign(static_cast<std::size_t>(c.d), 2.4 / std::sqrt(static_cast<double>(c.d)));
    o.warmup = 300;
    o.steps = 200;
    o.thin = 5;
    o.block_draws = 16;
    o.delayed_rejection_count = c.stages;
    o.adaptation = c.ad;
    MemoryBatchedSink host, dev;
    BatchedDramResult rh, rd;
    if (c.target == 0) {
      const GaussianTarget g = GaussianTarget::ar1(c.d, 0.5);
      rh = run_batched_dram(o, g.view(), host);
      rd = cuda::run_batched_gaussian(o, g, dev);
    } else if (c.target == 1) {
      const BananaLogDensity b{c.d};
      rh = run_batched_dram(o, b, host);
      rd = cuda::run_batched_banana(o, b, dev);
    } else if (c.target == 2) {
      const FunnelLogDensity f{c.d};
      rh = run_batched_dram(o, f, host);
      rd = cuda::run_batched_funnel(o, f, dev);
    } else {
      const RosenbrockLogDensity r{c.d};
      rh = run_batched_dram(o, r, host);
      rd = cuda::run_batched_rosenbrock(o, r, dev);
    }
    REQUIRE(host.x.size() == static_cast<std::size_t>(64 * 40 * c.d));
    CHECK(rh.acceptance_rate > 0.05);  // the chains move
    CHECK(host.x.front() != host.x.back());
    if (exact) {
      CHECK(rd.acceptance_rate == rh.acceptance_rate);
      CHECK(dev.x == host.x);
      CHECK(dev.lp == host.lp);
      // The per-draw statistics (recorded by the segment kernels, copied back with the draws).
      CHECK(dev.accepted == host.accepted);
      CHECK(dev.dr_stage == host.dr_stage);
      CHECK(dev.acceptance_probability == host.acceptance_probability);
      CHECK(dev.adaptation_measure == host.adaptation_measure);
    } else {
      CHECK(std::abs(rd.acceptance_rate - rh.acceptance_rate) < 0.05);
    }
  }
}
