// Batched DRAM, host path: the same random numbers as the serial kernel for the
// same global chain id, bit-identical chains with the same (frozen) proposal, option
// errors, the HDF5 sink and the report.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <random>
#include <stdexcept>
#include <vector>

#include <catch2/catch.hpp>

#include "herd/core/error.hpp"
#include "herd/io/hdf5.hpp"
#include "herd/mcmc/batched_dram.hpp"
#include "herd/mcmc/batched_run.hpp"
#include "herd/mcmc/batched_targets.hpp"
#include "herd/mcmc/chain_sink.hpp"
#include "herd/mcmc/diagnostics.hpp"
#include "herd/mcmc/dram.hpp"

using namespace herd::mcmc;

namespace {

// A correlated start covariance (not diagonal, so L has off-diagonal terms).
std::vector<double> start_cov(int d) {
  std::vector<double> c(static_cast<std::size_t>(d) * d);
  for (int i = 0; i < d; ++i)
    for (int j = 0; j < d; ++j)
      c[static_cast<std::size_t>(i) * d + j] = 0.3 * std::pow(0.4, std::abs(i - j)) * (1 + 0.1 * i) * (1 + 0.1 * j);
  return c;
}

}  // namespace

TEST_CASE("batched kernel: acceptance uniforms, stage-1 and DR trials equal the serial kernel's", "[mcmc][batched]") {
  const int d = 5;
  const std::uint64_t seed = 0x1234567890abcdefull;
  DramOptions so;
  so.start_point.assign(d, 0.25);
  so.seed = seed;
  so.proposal_start_cov = start_cov(d);
  so.delayed_rejection_count = 3;
  so.delayed_rejection_scale_factors = {0.5, 0.7, 0.9};
  const GaussianTarget g = GaussianTarget::ar1(d, 0.5);
  const auto gv = g.view();

  BatchedDramOptions bo;
  bo.ndim = d;
  bo.num_chains = 3;
  bo.seed = seed;
  bo.start_points = so.start_point;
  bo.proposal_start_cov = so.proposal_start_cov;
  bo.delayed_rejection_count = 3;
  bo.delayed_rejection_scale_factors = so.delayed_rejection_scale_factors;
  bo.adaptation = BatchedAdaptation::kNone;
  bo.num_threads = 1;
  for (std::uint32_t first : {0u, 77u, 4000000000u}) {
    bo.first_chain_id = first;
    detail::BatchedEngine engine(bo);
    engine.init_log_density([&](const double* x, std::size_t n, double* out) {
      for (std::size_t i = 0; i < n; ++i) out[i] = gv(x + i * d, d);
    });
    const auto& p = engine.params();
    const auto& a = engine.arrays();
    for (std::size_t i = 0; i < 3; ++i) {
      so.chain_id = first + static_cast<std::uint32_t>(i);
      DramSampler serial(so, [&](const double* x, int dd) { return gv(x, dd); });
      for (std::uint64_t k : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{999}, (std::uint64_t{1} << 40) + 5}) {
        // Raw words of the three streams (the same Philox counters) and the uniforms.
        for (auto purpose :
             {herd::RngPurpose::kProposal, herd::RngPurpose::kAcceptance, herd::RngPurpose::kDelayedRejection}) {
          const auto b1 = herd::RngStream(seed, batched::chain_id(p, i), purpose).block(k);
          const auto b2 = herd::RngStream(seed, so.chain_id, purpose).block(k);
          for (int q = 0; q < 4; ++q) CHECK(b1.v[q] == b2.v[q]);
        }
        for (int s = 1; s <= 4; ++s)
          CHECK(batched::acceptance_uniform(p, batched::chain_id(p, i), k, s) == serial.acceptance_uniform(k, s));
        // Stage-1 trial, then DR trials forced by -inf log densities (always rejected).
        batched::begin_proposal(p, a, i, k);
        std::vector<double> want(d);
        serial.propose(k, 1, a.x + i * d, a.chol, want.data());
        for (int j = 0; j < d; ++j) CHECK(a.y[i * d + j] == want[j]);
        for (int s = 2; s <= 4; ++s) {
          REQUIRE(batched::finish_stage(p, a, i, k, -std::numeric_limits<double>::infinity()));
          serial.propose(k, s, a.x + i * d, a.chol, want.data());
          for (int j = 0; j < d; ++j) CHECK(a.y[i * d + j] == want[j]);
        }
        CHECK_FALSE(batched::finish_stage(p, a, i, k, -std::numeric_limits<double>::infinity()));
      }
    }
  }
}

TEST_CASE("batched host path: chains bit-identical to the serial kernel with the same frozen proposal",
          "[mcmc][batched]") {
  const int d = 4;
  const GaussianTarget g = GaussianTarget::ar1(d, 0.6);
  const auto gv = g.view();
  const std::int64_t warm = 37, steps = 400;
  for (int dr : {0, 1, 3}) {
    for (bool box : {false, true}) {
      INFO("delayed_rejection_count = " << dr << ", box = " << box);
      BatchedDramOptions bo;
      bo.ndim = d;
      bo.num_chains = 5;
      bo.first_chain_id = 1000;
      bo.seed = 42;
      bo.start_points.assign(5 * static_cast<std::size_t>(d), 0.0);
      for (int i = 0; i < 5 * d; ++i) bo.start_points[static_cast<std::size_t>(i)] = 0.1 * (i % 7) - 0.3;
      bo.proposal_start_cov = start_cov(d);
      bo.delayed_rejection_count = dr;
      if (dr == 3) bo.delayed_rejection_scale_factors = {0.3, 0.8, 0.5};
      if (box) {
        bo.domain_lower.assign(d, -1.5);
        bo.domain_upper.assign(d, 1.0);
      }
      bo.adaptation = BatchedAdaptation::kNone;
      bo.warmup = warm;
      bo.steps = steps;
      bo.thin = 1;
      bo.block_draws = 64;
      bo.num_threads = 2;
      MemoryBatchedSink sink;
      const auto res = run_batched_dram(bo, gv, sink);
      REQUIRE(sink.draws == steps);
      CHECK(res.adaptive_updates == 0);
      for (int i = 0; i < 5; ++i) {
        DramOptions so;
        so.start_point.assign(bo.start_points.begin() + i * d, bo.start_points.begin() + (i + 1) * d);
        so.chain_id = 1000 + static_cast<std::uint32_t>(i);
        so.seed = 42;
        so.proposal_start_cov = bo.proposal_start_cov;
        so.delayed_rejection_count = dr;
        so.delayed_rejection_scale_factors = bo.delayed_rejection_scale_factors;
        so.domain_lower = bo.domain_lower;
        so.domain_upper = bo.domain_upper;
        so.adaptive_update_count = 0;
        so.chain_size = std::int64_t{1} << 40;
        so.max_proposals = warm + steps;
        DramSampler serial(so, [&](const double* x, int dd) { return gv(x, dd); });
        MemoryChainSink ms;
        serial.run(ms);
        const auto v = ms.verbose();  // [1 + proposals, d]: the start, then after each proposal
        REQUIRE(v.size() == static_cast<std::size_t>((1 + warm + steps) * d));
        std::size_t mismatches = 0;
        for (std::int64_t t = 0; t < steps; ++t)
          for (int j = 0; j < d; ++j)
            mismatches += v[static_cast<std::size_t>((1 + warm + t) * d + j)] !=
                          sink.x[static_cast<std::size_t>((i * steps + t) * d + j)];
        CHECK(mismatches == 0);
        // The per-draw statistics are the serial records' (thin 1: draw t is verbose step
        // 1 + warm + t): accepted when a compact record starts there, and the state's stage
        // and acceptance probability (start point: 0 and 1), bit for bit.
        std::vector<std::uint8_t> first, stage;
        std::vector<double> alpha;
        for (std::size_t r = 0; r < ms.size(); ++r)
          for (std::int64_t w = 0; w < ms.weight[r]; ++w) {
            first.push_back(w == 0 && ms.step[r] > 0 ? 1 : 0);
            stage.push_back(static_cast<std::uint8_t>(ms.dr_stage[r]));
            alpha.push_back(ms.accept_prob[r]);
          }
        std::size_t stat_mismatches = 0;
        for (std::int64_t t = 0; t < steps; ++t) {
          const auto v0 = static_cast<std::size_t>(1 + warm + t), q = static_cast<std::size_t>(i * steps + t);
          stat_mismatches += sink.accepted[q] != first[v0] || sink.dr_stage[q] != stage[v0] ||
                             sink.acceptance_probability[q] != alpha[v0] || sink.adaptation_measure[q] != 0.0;
        }
        CHECK(stat_mismatches == 0);
      }
    }
  }
}

namespace {

BatchedDramResult run_like_device(const BatchedDramOptions& o, const GaussianLogDensity& gv, BatchedDrawSink& sink,
                                  std::vector<double>* measures = nullptr,
                                  std::vector<std::uint64_t>* steps_at_warmup_end = nullptr);

// A flat log density (every first-stage proposal is accepted: alpha = 1 > u), and one whose
// support is the single point `at` (nothing is ever accepted).
struct FlatLogDensity {
  double operator()(const double*, int) const { return 0.0; }
};
struct PointSupport {
  double at = 0.25;
  double operator()(const double* x, int d) const {
    for (int j = 0; j < d; ++j)
      if (x[j] != at) return -std::numeric_limits<double>::infinity();
    return 0.0;
  }
};

}  // namespace

TEST_CASE("batched per-draw statistics: known answers when every or no proposal is accepted", "[mcmc][batched]") {
  BatchedDramOptions o;
  o.ndim = 3;
  o.num_chains = 6;
  o.seed = 9;
  o.start_points.assign(3, 0.25);
  o.warmup = 40;
  o.steps = 90;
  o.delayed_rejection_count = 2;
  o.block_draws = 7;
  o.num_threads = 2;
  for (auto mode : {BatchedAdaptation::kNone, BatchedAdaptation::kPooled, BatchedAdaptation::kPerChain}) {
    for (std::int64_t thin : {1, 4}) {
      INFO("adaptation " << static_cast<int>(mode) << ", thin " << thin);
      o.adaptation = mode;
      o.thin = thin;
      const std::size_t n = static_cast<std::size_t>(6 * (90 / thin));
      MemoryBatchedSink flat, none;
      const auto rf = run_batched_dram(o, FlatLogDensity{}, flat);
      CHECK(rf.stage_accepted == std::vector<std::int64_t>{6 * 90, 0, 0});
      REQUIRE(flat.accepted.size() == n);
      // Every proposal accepted at stage 1 with probability 1; accepted after the warm-up,
      // so no adaptation measure.
      CHECK(flat.accepted == std::vector<std::uint8_t>(n, 1));
      CHECK(flat.dr_stage == std::vector<std::uint8_t>(n, 1));
      CHECK(flat.acceptance_probability == std::vector<double>(n, 1.0));
      CHECK(flat.adaptation_measure == std::vector<double>(n, 0.0));
      const auto rn = run_batched_dram(o, PointSupport{}, none);
      CHECK(rn.stage_accepted == std::vector<std::int64_t>{0, 0, 0});
      // The start point throughout: never accepted, stage 0, probability 1 (the serial
      // kernel's record of a start point), no factor ever replaced (no scatter), measure 0.
      CHECK(none.accepted == std::vector<std::uint8_t>(n, 0));
      CHECK(none.dr_stage == std::vector<std::uint8_t>(n, 0));
      CHECK(none.acceptance_probability == std::vector<double>(n, 1.0));
      CHECK(none.adaptation_measure == std::vector<double>(n, 0.0));
    }
  }
}

TEST_CASE("batched per-draw statistics: the dr_stage histogram is the run's per-stage acceptance count",
          "[mcmc][batched]") {
  // thin = 1: every post-warm-up proposal is a draw, so the accepted draws' stages count
  // exactly the acceptances per stage the run reports; with thinning, at most as many.
  const int d = 4;
  const GaussianTarget g = GaussianTarget::ar1(d, 0.5);
  const auto gv = g.view();
  BatchedDramOptions o;
  o.ndim = d;
  o.num_chains = 16;
  o.first_chain_id = 5;
  o.seed = 77;
  o.start_points.assign(d, 0.5);
  o.proposal_start_std.assign(d, 3.0);  // too wide: the DR stages accept often
  o.warmup = 0;
  o.steps = 500;
  o.delayed_rejection_count = 3;
  o.adaptation = BatchedAdaptation::kNone;
  o.block_draws = 64;
  o.num_threads = 2;
  for (std::int64_t thin : {1, 3}) {
    for (const char* path : {"fused", "staged", "device hooks"}) {
      INFO(path << " path, thin " << thin);
      o.thin = thin;
      MemoryBatchedSink sink;
      const std::string ps = path;
      BatchedDramResult r;
      if (ps == "fused") r = run_batched_dram(o, gv, sink);
      else if (ps == "staged")
        r = run_batched_dram(o, BatchedLogDensity([&](const double* x, int n, int dd, double* out) {
                               for (int i = 0; i < n; ++i) out[i] = gv(x + static_cast<std::size_t>(i) * dd, dd);
                             }),
                             sink);
      else r = run_like_device(o, gv, sink);
      std::vector<std::int64_t> hist(4, 0);
      std::int64_t accepted = 0;
      for (std::size_t q = 0; q < sink.accepted.size(); ++q) {
        accepted += sink.accepted[q];
        if (sink.accepted[q] != 0) ++hist.at(sink.dr_stage[q] - 1u);
        // An accepted draw's state was accepted at some stage with positive probability.
        if (sink.accepted[q] != 0) CHECK((sink.dr_stage[q] >= 1 && sink.acceptance_probability[q] > 0.0));
      }
      for (int s = 0; s < 4; ++s) {
        INFO("stage " << s + 1);
        if (thin == 1) CHECK(hist[s] == r.stage_accepted[s]);
        else CHECK(hist[s] <= r.stage_accepted[s]);
      }
      CHECK(r.stage_accepted[1] > 100);  // the delayed-rejection stages are exercised
      CHECK(r.stage_accepted[3] > 0);
      if (thin == 1) CHECK(static_cast<double>(accepted) == Approx(r.acceptance_rate * 16 * 500));
    }
  }
}

TEST_CASE("batched host path: thinning, blocks, threads and the batched-density path agree", "[mcmc][batched]") {
  const int d = 3;
  const BananaLogDensity banana{d, 0.05};
  BatchedDramOptions bo;
  bo.ndim = d;
  bo.num_chains = 9;
  bo.seed = 7;
  bo.start_points = {1.0, -0.5, 0.2};
  bo.warmup = 200;
  bo.steps = 300;
  bo.thin = 7;  // 42 draws and 6 trailing proposals
  bo.block_draws = 5;
  bo.adaptation = BatchedAdaptation::kPooled;
  bo.num_threads = 1;
  MemoryBatchedSink a1, a3, b1;
  run_batched_dram(bo, banana, a1);
  bo.num_threads = 3;
  bo.block_draws = 100;
  const auto r3 = run_batched_dram(bo, banana, a3);
  // The batched-density (staged) path: the same chains.
  const auto r = run_batched_dram(bo, BatchedLogDensity([&](const double* x, int n, int dd, double* out) {
                                    for (int i = 0; i < n; ++i)
                                      out[i] = banana(x + static_cast<std::size_t>(i) * dd, dd);
                                  }),
                                  b1);
  REQUIRE(a1.draws == 42);
  CHECK(a1.x == a3.x);
  CHECK(a1.lp == a3.lp);
  CHECK(a1.x == b1.x);
  CHECK(r.proposal_cov == r3.proposal_cov);
  CHECK(r3.adaptive_updates > 0);
  CHECK(r3.proposals_per_chain == 500);
  // Each recorded draw is the state after proposal warmup + 7 (t + 1) - 1: its lp is the target's.
  for (std::size_t q = 0; q < a1.lp.size(); ++q) CHECK(a1.lp[q] == banana(a1.x.data() + q * d, d));
}

TEST_CASE("run_batched_dram takes a plain lambda of either signature", "[mcmc][batched]") {
  // docs/batched.md: run_batched_dram(o, batched_log_density /* or a functor */, sink). A
  // lambda of the batched signature used to bind to the point-functor template and fail to
  // compile inside it ("no match for call to (const double*, const int&)").
  const int d = 2;
  const BananaLogDensity banana{d, 0.05};
  BatchedDramOptions bo;
  bo.ndim = d;
  bo.num_chains = 4;
  bo.seed = 3;
  bo.start_points = {0.5, -0.5};
  bo.warmup = 100;
  bo.steps = 100;
  bo.num_threads = 1;
  MemoryBatchedSink point, batched, wrapped;
  run_batched_dram(
      bo, [&](const double* x, int dd) { return banana(x, dd); }, point);
  const auto batched_lambda = [&](const double* x, int n, int dd, double* out) {
    for (int i = 0; i < n; ++i) out[i] = banana(x + static_cast<std::size_t>(i) * dd, dd);
  };
  run_batched_dram(bo, batched_lambda, batched);
  run_batched_dram(bo, BatchedLogDensity(batched_lambda), wrapped);
  REQUIRE(batched.draws == 100);
  CHECK(batched.x == wrapped.x);
  CHECK(batched.x == point.x);
  CHECK(batched.lp == point.lp);
}

TEST_CASE("batched options: bad input names the field", "[mcmc][batched]") {
  BatchedDramOptions o;
  o.ndim = 2;
  o.num_chains = 4;
  o.start_points = {0.0, 0.0};
  const BananaLogDensity f{2, 0.03};
  MemoryBatchedSink s;
  auto bad = [&](auto edit, const char* needle) {
    BatchedDramOptions b = o;
    edit(b);
    CHECK_THROWS_WITH(run_batched_dram(b, f, s), Catch::Contains(needle));
  };
  bad([](auto& b) { b.start_points = {0.0, 0.0, 1.0}; }, "start_points has 3 values");
  bad([](auto& b) { b.thin = 0; }, "thin is 0");
  bad([](auto& b) { b.delayed_rejection_count = 5; }, "delayed_rejection_count is 5");
  bad([](auto& b) { b.num_chains = 0; }, "num_chains is 0");
  bad([](auto& b) { b.scale_factor = "fast"; }, "scale_factor");
  bad([](auto& b) { b.device = BatchedDevice::kCuda; }, "device = cuda");
  bad(
      [](auto& b) {
        b.domain_lower = {1.0, 1.0};
        b.domain_upper = {2.0, 2.0};
      },
      "outside the domain");
  CHECK_THROWS_WITH(run_batched_dram(
                        o, [](const double*, int) { return -std::numeric_limits<double>::infinity(); }, s),
                    Catch::Contains("start point of chain 0"));
  CHECK_THROWS_AS(
      run_batched_dram(
          o, [](const double* x, int) { return x[0] > 0.5 ? std::numeric_limits<double>::infinity() : 0.0; }, s),
      herd::NumericalError);
  // A functor's exception names the chain (its global id) and the proposal, as the serial
  // sampler's does; at the start point too.
  BatchedDramOptions one = o;
  one.num_threads = 1;
  one.first_chain_id = 10;
  const auto throws_past = [](double edge) {
    return [edge](const double* x, int) -> double {
      if (x[0] > edge) throw std::runtime_error("model blew up");
      return -0.5 * x[0] * x[0];
    };
  };
  CHECK_THROWS_WITH(run_batched_dram(one, throws_past(0.5), s),
                    Catch::StartsWith("batched_dram: chain 1") &&
                        Catch::Contains("the log density threw at proposal ") && Catch::EndsWith(": model blew up"));
  CHECK_THROWS_WITH(run_batched_dram(one, throws_past(-1.0), s),
                    Catch::Equals("batched_dram: chain 10: the log density threw at its start point: model blew up"));
}

TEST_CASE("batched HDF5 sink: [chain, draw, d] streamed in blocks, with dimension scales", "[mcmc][batched][io]") {
  const auto path = (std::filesystem::temp_directory_path() / "herd_test_batched_sink.h5").string();
  const int d = 2;
  BatchedDramOptions bo;
  bo.ndim = d;
  bo.num_chains = 70;  // more than one chunk of chains
  bo.first_chain_id = 5;
  bo.start_points = {0.0, 0.0};
  bo.warmup = 50;
  bo.steps = 230;
  bo.thin = 10;  // 23 draws, written in blocks of 4
  bo.block_draws = 4;
  bo.num_threads = 2;
  const BananaLogDensity f{d, 0.03};
  MemoryBatchedSink mem;
  run_batched_dram(bo, f, mem);
  {
    Hdf5BatchedSink h5(path);
    run_batched_dram(bo, f, h5);
  }
  const auto file = herd::io::H5File::open(path);
  const auto g = file.open_group("posterior");
  const auto x = g.open_dataset("x");
  CHECK(x.shape() == std::vector<hsize_t>{70, 23, 2});
  CHECK(x.read<double>() == mem.x);
  CHECK(g.open_dataset("lp").read<double>() == mem.lp);
  CHECK(x.dimension_names() == std::vector<std::string>{"chain", "draw", "dim"});
  const auto ids = g.open_dataset("chain").read<std::int64_t>();
  CHECK(ids.front() == 5);
  CHECK(ids.back() == 74);
  std::filesystem::remove(path);
}

TEST_CASE("batched report: R-hat, ESS and nested R-hat per coordinate", "[mcmc][batched]") {
  const int d = 2;
  BatchedDramOptions bo;
  bo.ndim = d;
  bo.num_chains = 64;
  bo.start_points = {0.0, 0.0};
  bo.warmup = 500;
  bo.steps = 1000;
  bo.thin = 5;
  bo.num_threads = 2;
  const GaussianTarget g = GaussianTarget::ar1(d, 0.3);
  MemoryBatchedSink mem;
  const auto r = run_batched_dram(bo, g.view(), mem);
  const auto diag = batched_diagnostics(mem, 16);
  REQUIRE(diag.size() == 2);
  for (const auto& q : diag) {
    CHECK(q.rhat < 1.05);
    CHECK(q.nested_rhat < 1.05);
    CHECK(q.ess_bulk > 1000);
  }
  CHECK(std::isnan(batched_diagnostics(mem, 5)[0].nested_rhat));  // 5 does not divide 64
  const std::string rep = batched_report(bo, r, diag);
  CHECK_THAT(rep, Catch::Contains("nested R-hat"));
  CHECK_THAT(rep, Catch::Contains("64 chains"));
}

TEST_CASE("run_batched: one entry point for applications, host dispatch", "[mcmc][batched]") {
  BatchedDramOptions o;
  o.ndim = 3;
  o.num_chains = 6;
  o.start_points = {0.0, 0.0, 0.0};
  o.warmup = 100;
  o.steps = 100;
  o.num_threads = 1;
  auto g = std::make_shared<const GaussianTarget>(GaussianTarget::ar1(3, 0.2));
  MemoryBatchedSink a, b, c;
  run_batched(o, BatchedTarget::gaussian_target(g), a);
  run_batched_dram(o, g->view(), b);
  CHECK(a.x == b.x);
  const auto gv = g->view();
  run_batched(o, BatchedTarget::host_batched([&](const double* x, int n, int d, double* out) {
                for (int i = 0; i < n; ++i) out[i] = gv(x + static_cast<std::size_t>(i) * d, d);
              }),
              c);
  CHECK(c.x == b.x);
  o.device = BatchedDevice::kCuda;
  CHECK_THROWS_WITH(run_batched(o, BatchedTarget::host_batched([](const double*, int, int, double*) {}), c),
                    Catch::Contains("device = cuda"));
}

TEST_CASE("nested R-hat: a known answer computed by hand (K = 2 superchains of M = 2 chains)", "[mcmc][batched]") {
  // Chains c0 = (1, 2, 3), c1 = (2, 4, 6), c2 = (0, 1, 5), c3 = (3, 3, 3); superchains {c0, c1}
  // and {c2, c3}. Chain means 2, 4, 2, 3; chain variances (divisor N - 1) 1, 4, 7, 0.
  // Superchain 0: mean 3, between-chain variance (divisor M - 1) 2, mean within 2.5: W_0 = 4.5.
  // Superchain 1: mean 2.5, between 0.5, mean within 3.5: W_1 = 4. W = 4.25.
  // B = variance of the superchain means (divisor K - 1) = 0.125.
  // nested R-hat = sqrt(1 + 0.125 / 4.25); numpy:
  //   x = np.array([[1,2,3],[2,4,6],[0,1,5],[3,3,3]], float); cm = x.mean(1); cv = x.var(1, ddof=1)
  //   W = (cm.reshape(2,2).var(1, ddof=1) + cv.reshape(2,2).mean(1)).mean()
  //   B = cm.reshape(2,2).mean(1).var(ddof=1); np.sqrt(1 + B/W) -> 1.0145993123917847
  const std::vector<double> x = {1, 2, 3, 2, 4, 6, 0, 1, 5, 3, 3, 3};
  CHECK(nested_rhat(DrawsView(x, 4, 3), 2) == Approx(1.0145993123917847).epsilon(1e-14));
  // Through the batched report's path (MemoryBatchedSink layout [M, draws, d], d = 1).
  MemoryBatchedSink s;
  s.begin(4, 0, 1, 3);
  s.write_block(0, 3, x.data(), x.data());
  CHECK(batched_diagnostics(s, 2)[0].nested_rhat == Approx(1.0145993123917847).epsilon(1e-14));
}

TEST_CASE("batched kernel: segment_local (the GPU kernel's thread-local state) gives bit-identical chains",
          "[mcmc][batched]") {
  const int d = 6;
  const GaussianTarget g = GaussianTarget::ar1(d, 0.4);
  const auto gv = g.view();
  for (auto mode : {BatchedAdaptation::kPooled, BatchedAdaptation::kPerChain, BatchedAdaptation::kNone}) {
    BatchedDramOptions o;
    o.ndim = d;
    o.num_chains = 7;
    o.first_chain_id = 99;
    o.seed = 3;
    o.start_points.assign(d, 0.1);
    o.warmup = 150;
    o.steps = 230;
    o.thin = 3;
    o.block_draws = 11;
    o.adaptation = mode;
    o.delayed_rejection_count = 2;
    o.domain_lower.assign(d, -2.5);
    o.domain_upper.assign(d, 2.5);
    o.num_threads = 2;
    MemoryBatchedSink want, got;
    const auto rw = run_batched_dram(o, gv, want);
    detail::BatchedEngine e(o);
    e.init_log_density([&](const double* x, std::size_t n, double* out) {
      for (std::size_t i = 0; i < n; ++i) out[i] = gv(x + i * d, d);
    });
    const auto* p = &e.params();
    const auto* a = &e.arrays();
    detail::BatchedEngine::DeviceHooks h;  // the device runner's structure, run on the host
    h.segment = [&](std::uint64_t k0, std::uint64_t per, std::int64_t nd, double* bx, double* blp,
                    const batched::DrawStats& bs, bool adapting) {
      batched::KernelParams q = *p;
      q.adapting = adapting;
      for (std::size_t i = 0; i < 7; ++i) batched::segment_local<8>(q, *a, i, k0, per, nd, gv, bx, blp, bs);
    };
    h.adapt_update = [] {};  // replaced below: the host engine's own update is not reachable
    h.sync = [] {};
    if (mode == BatchedAdaptation::kNone) {
      const auto rg = e.run_device(h, got);
      CHECK(got.x == want.x);
      CHECK(got.lp == want.lp);
      CHECK(rg.stage_accepted == rw.stage_accepted);
      CHECK(rg.out_of_domain == rw.out_of_domain);
    } else {
      // With adaptation, run the host engine's schedule with segment_local as the advance.
      detail::BatchedEngine e2(o);
      e2.init_log_density([&](const double* x, std::size_t n, double* out) {
        for (std::size_t i = 0; i < n; ++i) out[i] = gv(x + i * d, d);
      });
      const auto* p2 = &e2.params();
      const auto* a2 = &e2.arrays();
      const auto rg = e2.run(
          [&](std::size_t b, std::size_t en, std::uint64_t k0, std::uint64_t k1) {
            const batched::KernelParams q = *p2;
            for (std::size_t i = b; i < en; ++i)
              batched::segment_local<8>(q, *a2, i, k0, k1 - k0, 1, gv, nullptr, nullptr);
          },
          got, true);
      CHECK(got.x == want.x);
      CHECK(rg.proposal_cov == rw.proposal_cov);
      CHECK(rg.stage_accepted == rw.stage_accepted);
    }
  }
}

namespace {

// Warm-up statistics of `rows` chains (d = 2): n, s1 [rows, 2], s2 [rows, 2, 2] (lower).
struct Stats {
  std::vector<double> n, s1, s2;
  batched::ChainArrays arrays() {
    batched::ChainArrays a;
    a.ad_n = n.data();
    a.ad_s1 = s1.data();
    a.ad_s2 = s2.data();
    return a;
  }
};

// The pooled tree's value of node (level, j) over chain ids [lo, hi), by its definition:
// left + right when both children hold chains in range, else the one that does.
bool tree_value(const Stats& leaves, std::uint64_t lo, std::uint64_t hi, int level, std::uint64_t j,
                std::vector<double>& out) {
  const std::uint64_t b = j << level, e = (j + 1) << level;
  if (e <= lo || b >= hi) return false;
  if (level == 0) {
    const std::size_t i = b - lo;
    out = {leaves.n[i],          leaves.s1[2 * i],     leaves.s1[2 * i + 1], leaves.s2[4 * i],
           leaves.s2[4 * i + 1], leaves.s2[4 * i + 2], leaves.s2[4 * i + 3]};
    return true;
  }
  std::vector<double> l, r;
  const bool hl = tree_value(leaves, lo, hi, level - 1, 2 * j, l),
             hr = tree_value(leaves, lo, hi, level - 1, 2 * j + 1, r);
  if (hl && hr)
    for (std::size_t t = 0; t < l.size(); ++t) l[t] += r[t];
  out = hl ? l : r;
  return true;
}

}  // namespace

TEST_CASE("batched pooled adaptation: the summation tree is the same however the chains are split", "[mcmc][batched]") {
  // Any split of the chain ids over processes (the plan of each part, in place, then the
  // combination of every part's maximal nodes) gives the tree's root bit for bit (the
  // leaves span 12 orders of magnitude, so a different order of additions would show).
  std::mt19937_64 gen(20261130);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (std::uint64_t lo : {0u, 3u, 1000u}) {
    for (std::uint64_t m : {1u, 2u, 5u, 13u, 64u, 100u, 257u}) {
      Stats all;
      for (std::uint64_t i = 0; i < m; ++i) {
        const double scale = std::pow(10.0, 12.0 * (u(gen) + 1.0) / 2.0);
        all.n.push_back(1.0 + static_cast<double>(i % 3));
        for (int t = 0; t < 2; ++t) all.s1.push_back(scale * u(gen));
        all.s2.insert(all.s2.end(), {scale * u(gen), 0.0, scale * u(gen), scale * u(gen)});
      }
      int top = 0;
      while ((std::uint64_t{1} << top) < lo + m) ++top;
      std::vector<double> want;
      REQUIRE(tree_value(all, lo, lo + m, top, 0, want));
      for (int parts : {1, 2, 3, 7}) {
        if (static_cast<std::uint64_t>(parts) > m) continue;
        // Random cut points.
        std::vector<std::uint64_t> cuts = {0, m};
        while (cuts.size() < static_cast<std::size_t>(parts) + 1) {
          const std::uint64_t c = 1 + gen() % (m - 1 ? m - 1 : 1);
          if (std::find(cuts.begin(), cuts.end(), c) == cuts.end()) cuts.push_back(c);
        }
        std::sort(cuts.begin(), cuts.end());
        std::vector<detail::PooledNode> nodes;
        for (std::size_t p = 0; p + 1 < cuts.size(); ++p) {
          const std::uint64_t b = cuts[p], e = cuts[p + 1];
          Stats part{{all.n.begin() + b, all.n.begin() + e},
                     {all.s1.begin() + 2 * b, all.s1.begin() + 2 * e},
                     {all.s2.begin() + 4 * b, all.s2.begin() + 4 * e}};
          const auto plan = detail::pooled_tree_plan(lo + b, e - b);
          const auto a = part.arrays();
          for (std::size_t lv = 0; lv < plan.parents.size(); ++lv)
            for (std::uint64_t j = plan.parents[lv].first; j < plan.parents[lv].second; ++j) {
              const std::uint64_t left = (j << (lv + 1)) - (lo + b);
              batched::pooled_pair_add(a, 2, left, left + (std::uint64_t{1} << lv));
            }
          for (const auto& [lv, j] : plan.emitted) {
            const std::size_t row = (j << lv) - (lo + b);
            nodes.push_back({lv,
                             j,
                             {part.n[row], part.s1[2 * row], part.s1[2 * row + 1], part.s2[4 * row],
                              part.s2[4 * row + 1], part.s2[4 * row + 2], part.s2[4 * row + 3]}});
          }
        }
        INFO("chain ids [" << lo << ", " << lo + m << ") in " << parts << " parts");
        CHECK(detail::pooled_combine(nodes, lo, lo + m) == want);
      }
    }
  }
  // Nodes that do not partition the range are refused.
  std::vector<detail::PooledNode> gap = {{0, 0, std::vector<double>(7, 1.0)}, {0, 2, std::vector<double>(7, 1.0)}};
  CHECK_THROWS_WITH(detail::pooled_combine(gap, 0, 3), Catch::Contains("cover 2 chain ids"));
}

namespace {

// Keeps every snapshot; resumes from `from` when set.
struct MemoryCheckpointer final : BatchedCheckpointer {
  std::vector<BatchedSnapshot> saved;
  const BatchedSnapshot* from = nullptr;
  const BatchedSnapshot* resume_state() override { return from; }
  bool due(std::uint64_t) override { return true; }
  void save(const BatchedSnapshot& s) override { saved.push_back(s); }
};

// Draws t >= first of every chain of `part` equal `full`'s.
bool same_tail(const MemoryBatchedSink& full, const MemoryBatchedSink& part, std::int64_t first) {
  for (std::int64_t c = 0; c < full.num_chains; ++c)
    for (std::int64_t t = first; t < full.draws; ++t) {
      const auto q = static_cast<std::size_t>(c * full.draws + t);
      if (full.lp[q] != part.lp[q]) return false;
      if (full.accepted[q] != part.accepted[q] || full.dr_stage[q] != part.dr_stage[q] ||
          full.acceptance_probability[q] != part.acceptance_probability[q] ||
          full.adaptation_measure[q] != part.adaptation_measure[q])
        return false;
      for (int j = 0; j < full.ndim; ++j)
        if (full.x[q * full.ndim + j] != part.x[q * full.ndim + j]) return false;
    }
  return true;
}

// The device runner's structure on the host (segment_local segments; pooled updates through
// pooled_plan / pooled_update as cuda/batched_dram.cuh does them; state already on the host).
// `measures`: the adaptation measure of every pooled update, in order; `steps_at_warmup_end`:
// every chain's `state_step` when the first block of draws starts.
BatchedDramResult run_like_device(const BatchedDramOptions& o, const GaussianLogDensity& gv, BatchedDrawSink& sink,
                                  std::vector<double>* measures, std::vector<std::uint64_t>* steps_at_warmup_end) {
  detail::BatchedEngine e(o);
  const int d = o.ndim;
  e.init_log_density([&](const double* x, std::size_t n, double* out) {
    for (std::size_t i = 0; i < n; ++i) out[i] = gv(x + i * d, d);
  });
  const auto* p = &e.params();
  const auto a = e.arrays();
  const auto m = static_cast<std::size_t>(o.num_chains), du = static_cast<std::size_t>(d);
  detail::BatchedEngine::DeviceHooks h;
  h.segment = [&](std::uint64_t k0, std::uint64_t per, std::int64_t nd, double* bx, double* blp,
                  const batched::DrawStats& bs, bool adapting) {
    batched::KernelParams q = *p;
    q.adapting = adapting;
    if (bx && steps_at_warmup_end && steps_at_warmup_end->empty())
      steps_at_warmup_end->assign(a.state_step, a.state_step + m);
    for (std::size_t i = 0; i < m; ++i) batched::segment_local<8>(q, a, i, k0, per, nd, gv, bx, blp, bs);
  };
  h.adapt_update = [&] {
    const auto& plan = e.pooled_plan();
    const std::uint64_t f = o.first_chain_id;
    for (std::size_t lv = 0; lv < plan.parents.size(); ++lv)
      for (std::uint64_t j = plan.parents[lv].first; j < plan.parents[lv].second; ++j)
        batched::pooled_pair_add(a, d, (j << (lv + 1)) - f, (j << (lv + 1)) - f + (std::uint64_t{1} << lv));
    std::vector<detail::PooledNode> nodes;
    for (const auto& [lv, j] : plan.emitted) {
      const std::size_t row = (j << lv) - f;
      detail::PooledNode nd{lv, j, {a.ad_n[row]}};
      nd.stats.insert(nd.stats.end(), a.ad_s1 + row * du, a.ad_s1 + (row + 1) * du);
      nd.stats.insert(nd.stats.end(), a.ad_s2 + row * du * du, a.ad_s2 + (row + 1) * du * du);
      nodes.push_back(std::move(nd));
    }
    e.pooled_update(nodes);
    if (measures) measures->push_back(e.last_adaptation_measure());
    for (std::size_t i = 0; i < m; ++i) a.adapt_measure[i] = std::max(a.adapt_measure[i], e.last_adaptation_measure());
    std::fill(a.ad_n, a.ad_n + m, 0.0);
    std::fill(a.ad_s1, a.ad_s1 + m * du, 0.0);
    std::fill(a.ad_s2, a.ad_s2 + m * du * du, 0.0);
  };
  h.sync = [] {};
  h.download_state = [] {};
  return e.run_device(h, sink);
}

}  // namespace

TEST_CASE("batched engine: a run resumed from any checkpoint continues bit for bit", "[mcmc][batched]") {
  const int d = 3;
  const BananaLogDensity banana{d, 0.05};
  const GaussianTarget g = GaussianTarget::ar1(d, 0.4);
  const auto gv = g.view();
  for (auto mode : {BatchedAdaptation::kPooled, BatchedAdaptation::kPerChain, BatchedAdaptation::kNone}) {
    for (const char* path : {"fused", "staged", "device hooks"}) {
      const std::string ps = path;
      if (ps == "device hooks" && mode == BatchedAdaptation::kPerChain)
        continue;  // per-chain updates run on the device
      INFO("adaptation " << static_cast<int>(mode) << ", " << path << " path");
      BatchedDramOptions o;
      o.ndim = d;
      o.num_chains = 5;
      o.first_chain_id = 7;
      o.seed = 41;
      o.start_points = {1.0, -0.5, 0.2};
      o.warmup = 120;
      o.steps = 300;
      o.thin = 4;  // 75 draws
      o.block_draws = 10;
      o.adaptation = mode;
      o.num_threads = 2;
      auto run = [&](BatchedDrawSink& sink) {
        if (ps == "fused") return run_batched_dram(o, banana, sink);
        if (ps == "device hooks") return run_like_device(o, gv, sink);
        return run_batched_dram(o, BatchedLogDensity([&](const double* x, int n, int dd, double* out) {
                                  for (int i = 0; i < n; ++i) out[i] = banana(x + static_cast<std::size_t>(i) * dd, dd);
                                }),
                                sink);
      };
      MemoryBatchedSink plain, full;
      const auto r0 = run(plain);
      MemoryCheckpointer all;
      o.checkpointer = &all;
      const auto r = run(full);
      // Checkpoints change nothing; one after every update in the warm-up (none: every
      // period) and after every block but the last.
      CHECK(full.x == plain.x);
      CHECK(full.lp == plain.lp);
      CHECK(r.proposal_cov == r0.proposal_cov);
      CHECK(all.saved.size() == 9 + 7);
      for (const std::size_t q :
           {std::size_t{0}, std::size_t{5}, std::size_t{9}, std::size_t{12}, all.saved.size() - 1}) {
        const BatchedSnapshot& st = all.saved[q];
        INFO("resumed from checkpoint " << q << " (proposal " << st.next_proposal << ", " << st.draws_done
                                        << " draws)");
        MemoryCheckpointer res;
        res.from = &st;
        o.checkpointer = &res;
        MemoryBatchedSink part;
        const auto rr = run(part);
        CHECK(same_tail(full, part, st.draws_done));
        CHECK(rr.proposal_cov == r.proposal_cov);
        CHECK(rr.stage_accepted == r.stage_accepted);
        CHECK(rr.adaptive_updates == r.adaptive_updates);
        CHECK(rr.acceptance_rate == r.acceptance_rate);
        // Its own checkpoints repeat the uninterrupted run's.
        REQUIRE(res.saved.size() == all.saved.size() - q - 1);
        if (!res.saved.empty()) {
          CHECK(res.saved.back().x == all.saved.back().x);
          CHECK(res.saved.back().chol == all.saved.back().chol);
        }
      }
      o.checkpointer = nullptr;
    }
  }
  // A state that does not fit the run is refused.
  BatchedDramOptions o;
  o.ndim = 2;
  o.num_chains = 4;
  o.start_points = {0.0, 0.0};
  MemoryCheckpointer bad;
  BatchedSnapshot st;
  st.x.assign(6, 0.0);
  bad.from = &st;
  o.checkpointer = &bad;
  CHECK_THROWS_WITH(detail::BatchedEngine(o), Catch::Contains("resume state's x has 6 values, but this run needs 8"));
}

TEST_CASE("batched adaptation measure: the serial kernel's Hellinger distance of the proposals, a known answer",
          "[mcmc][batched]") {
  // C0 = I; statistics of 10 points about 0 with scatter 10 diag(4, 1/4) and scale 1 give
  // C1 = diag(4, 1/4): H^2 = 1 - |C0|^(1/4) |C1|^(1/4) / |(C0 + C1)/2|^(1/2) = 1 - 1 / 1.25.
  const int d = 2;
  std::vector<double> chol = {1, 0, 0, 1}, s1 = {0, 0}, s2 = {40, 0, 0, 2.5}, ref = {0, 0}, work(4);
  std::vector<double> mean(2, 0.0), m2(4, 0.0);
  double run_n = 0.0, h = -1.0;
  CHECK(batched::merge_and_factor(d, 10.0, s1.data(), s2.data(), ref.data(), run_n, mean.data(), m2.data(), 1.0,
                                  chol.data(), work.data(), &h) == 1);
  CHECK(h == Approx(std::sqrt(0.2)).epsilon(1e-14));
  CHECK(chol[0] == Approx(2.0));
  CHECK(chol[3] == Approx(0.5));
  // The same proposal again (no new statistics): distance 0.
  CHECK(batched::merge_and_factor(d, 0.0, s1.data(), s2.data(), ref.data(), run_n, mean.data(), m2.data(), 1.0,
                                  chol.data(), work.data(), &h) == 1);
  CHECK(h == Approx(0.0).margin(1e-7));
  // A deferred update (fewer than d + 1 proposals) changes nothing: 0.
  double n0 = 0.0;
  std::vector<double> mean0(2, 0.0), m20(4, 0.0), c0 = {1, 0, 0, 1};
  CHECK(batched::merge_and_factor(d, 2.0, s1.data(), s2.data(), ref.data(), n0, mean0.data(), m20.data(), 1.0,
                                  c0.data(), work.data(), &h) == 0);
  CHECK(h == 0.0);
}

TEST_CASE("batched adaptation measure: a recorded state's measure is the largest of the updates while it was current",
          "[mcmc][batched]") {
  const int d = 4;
  const GaussianTarget g = GaussianTarget::ar1(d, 0.5);
  const auto gv = g.view();
  BatchedDramOptions o;
  o.ndim = d;
  o.num_chains = 32;
  o.seed = 1234;
  o.start_points.assign(d, 1.0);
  o.adaptation = BatchedAdaptation::kPooled;
  o.adaptive_update_period = 10;
  o.steps = 60;
  o.thin = 1;
  o.block_draws = 16;
  o.num_threads = 1;
  o.delayed_rejection_count = 0;          // plain Metropolis: more chains keep their warm-up state a while
  std::size_t nonzero = 0;                // recorded states that were current during an update
  for (std::int64_t warm : {200, 205}) {  // the last update at the warm-up's end, or 5 proposals before it
    INFO("warmup " << warm);
    o.warmup = warm;
    MemoryBatchedSink sink, fused;
    std::vector<double> h;
    std::vector<std::uint64_t> since;
    run_like_device(o, gv, sink, &h, &since);
    REQUIRE(h.size() == 20);
    REQUIRE(since.size() == 32);
    // The host engine's updates give the same measures.
    run_batched_dram(o, gv, fused);
    CHECK(fused.adaptation_measure == sink.adaptation_measure);
    for (std::size_t c = 0; c < 32; ++c) {
      // Update j happened after proposal 10 (j + 1) - 1; the state current at the warm-up's end
      // (current since proposal since[c] - 1) saw the updates at counts >= since[c].
      double want = 0.0;
      for (std::size_t j = 0; j < h.size(); ++j)
        if (10 * (j + 1) >= since[c]) want = std::max(want, h[j]);
      bool moved = false;
      for (std::int64_t t = 0; t < 60; ++t) {
        const auto q = c * 60 + static_cast<std::size_t>(t);
        moved = moved || sink.accepted[q] != 0;
        INFO("chain " << c << ", draw " << t);
        CHECK(sink.adaptation_measure[q] == (moved ? 0.0 : want));
        nonzero += !moved && want > 0.0;
      }
    }
  }
  // Not vacuous: with warmup 200 the state current at the last update is the one the first
  // draw starts from, kept there by about 7 in 10 chains (acceptance about 0.3).
  CHECK(nonzero > 0);
  // One chain: per-chain adaptation is pooled adaptation, measures included.
  o.num_chains = 1;
  o.warmup = 200;
  MemoryBatchedSink pooled, per_chain;
  run_batched_dram(o, gv, pooled);
  o.adaptation = BatchedAdaptation::kPerChain;
  run_batched_dram(o, gv, per_chain);
  CHECK(per_chain.x == pooled.x);
  CHECK(per_chain.adaptation_measure == pooled.adaptation_measure);
}

TEST_CASE("batched DRAM: the draw buffer is sized by the draws a block needs", "[mcmc][batched]") {
  BatchedDramOptions o;
  o.ndim = 10;
  o.num_chains = 1000000;
  o.block_draws = 256;
  o.thin = 10;
  o.steps = 1000;  // 100 draws kept per chain: a block never needs 256
  CHECK(detail::block_buffer_draws(o) == 100);
  std::size_t draws = 0;
  const std::size_t total = detail::device_memory_bytes(o, &draws);
  // [M, n, d] + [M, n] doubles, and the statistics [M, n]: two doubles and two bytes.
  CHECK(draws == std::size_t{1000000} * 100 * (13 * sizeof(double) + 2));
  CHECK(total > draws);
  o.steps = 100000;  // 10000 draws: blocks of block_draws
  CHECK(detail::block_buffer_draws(o) == 256);
  detail::device_memory_bytes(o, &draws);
  CHECK(draws == std::size_t{1000000} * 256 * (13 * sizeof(double) + 2));
  o.steps = 9;  // thin 10: no draw is kept, no buffer
  CHECK(detail::block_buffer_draws(o) == 0);
  detail::device_memory_bytes(o, &draws);
  CHECK(draws == 0);
  o.thin = 1;
  o.steps = 1;
  CHECK(detail::block_buffer_draws(o) == 1);
}

TEST_CASE(
    "batched DRAM: device memory counts per-chain factors and adaptation, and a run that does not fit "
    "is refused with the sizes",
    "[mcmc][batched]") {
  BatchedDramOptions o;
  o.ndim = 10;
  o.num_chains = 100000;
  o.steps = 1000;
  o.warmup = 1000;
  o.adaptation = BatchedAdaptation::kNone;
  const std::size_t none = detail::device_memory_bytes(o);
  o.adaptation = BatchedAdaptation::kPooled;
  const std::size_t pooled = detail::device_memory_bytes(o);
  o.adaptation = BatchedAdaptation::kPerChain;
  const std::size_t per_chain = detail::device_memory_bytes(o);
  const std::size_t md2 = std::size_t{100000} * 100 * sizeof(double);  // M d^2 doubles
  // Warm-up statistics: s2 is M d^2; per chain adds its factors and running M2 (2 M d^2).
  CHECK(pooled - none >= md2);
  CHECK(per_chain - pooled >= 2 * md2);
  // The state is at least x, y and the delayed-rejection path per chain.
  CHECK(none >= std::size_t{100000} * (2 + 3) * 10 * sizeof(double));
  // No warm-up: no adaptation arrays.
  o.warmup = 0;
  CHECK(detail::device_memory_bytes(o) < per_chain - md2);
  o.warmup = 1000;
  CHECK_NOTHROW(detail::check_device_memory(o, per_chain));
  try {
    detail::check_device_memory(o, per_chain - 1);
    FAIL("a run needing more than the free device memory was accepted");
  } catch (const herd::InputError& e) {
    const std::string msg = e.what();
    CHECK(msg.find("100000 chains of dimension 10") != std::string::npos);
    CHECK(msg.find("block_draws") != std::string::npos);
    CHECK(msg.find("GB free") != std::string::npos);
  }
}
