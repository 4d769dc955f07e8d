// The heap that herd-sample's `.h5` writer (write_h5_draws, mcmc/run/serial_h5.cpp) holds:
// it writes `posterior`, `sample_stats` and the `draw` coordinates in pieces read from the
// file-backed chain, so its peak does not grow with the verbose chain. Counted through the
// operator new that test_chain_store.cpp (the same program) replaces (heap_counter.hpp).
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <unistd.h>

#include <catch2/catch.hpp>

#include "chain_store_fixture.hpp"

#include "herd/core/communicator.hpp"
#include "herd/core/error.hpp"
#include "herd/mcmc/chain_sink.hpp"
#include "herd/mcmc/diagnostics.hpp"
#include "herd/mcmc/dram.hpp"
#include "herd/mcmc/refinement.hpp"
#include "serial_run.hpp"

namespace herd_test {
std::size_t counted_live_bytes();
std::size_t counted_peak_bytes();
void counted_reset_peak();
}  // namespace herd_test

using namespace herd::mcmc;

using herd_test::gauss;
using herd_test::options;
using herd_test::TempDir;

namespace {}  // namespace

TEST_CASE("file-backed chain: the .h5 writer holds no whole verbose column, nor a whole column of the sample",
          "[mcmc][chain]") {
  // write_h5_draws (serial_h5.cpp) writes `posterior`, `sample_stats` and the `draw`
  // coordinates in pieces read from the chain, beside the diagnostics threads' scratch: its
  // heap must not grow with the verbose chain (a whole column is 8 bytes per draw).
  TempDir dir("herd_h5_writer_");
  const int d = 4;
  SamplerSpecs specs;
  specs.output_prefix = (dir.path / "run").string();
  specs.variable_names = {"x1", "x2", "x3", "x4"};
  SampleTarget target;
  target.ndim = d;
  target.log_density = gauss;
  target.description = "gauss";
  const SampleRunOptions run_options;
  herd::SelfCommunicator comm;
  // Peak heap bytes above the start while write_h5_draws writes a chain of `n` states, and
  // its verbose draws.
  const auto written = [&](std::int64_t n) {
    herd::mcmc::detail::SerialRun r(specs, target, run_options, comm);
    MemoryChainSink sink(dir.path.string());
    DramSampler s(options(d, n), gauss);
    const DramResult result = s.run(sink);
    r.chains.push_back(std::move(sink));
    r.co.push_back(herd::mcmc::detail::chain_outputs(specs, target, r.chains[0], result));
    r.m = 1;
    r.ndraw = r.co[0].post_draws;
    r.ncol = static_cast<std::size_t>(d);
    r.out.sample_size = static_cast<std::int64_t>(r.co[0].sample_rows.size());
    r.out.burnin = r.co[0].burnin;
    std::optional<herd::io::H5File> h5;
    const std::size_t before = herd_test::counted_live_bytes();
    herd_test::counted_reset_peak();
    herd::mcmc::detail::write_h5_draws(r, h5);
    const std::size_t peak = herd_test::counted_peak_bytes() - before;
    h5.reset();
    return std::pair<std::size_t, std::size_t>{peak, r.ndraw};
  };
  const auto [peak1, draws1] = written(50000);
  const auto [peak4, draws4] = written(200000);
  INFO("peak heap " << peak1 << " bytes at " << draws1 << " draws, " << peak4 << " at " << draws4);
  REQUIRE(draws4 > 3 * draws1);
  // Pieces of 131,072 draws (1 MiB of doubles), a reader's block, HDF5's own: a few MiB
  // whatever the length, against 8 bytes per draw (5 MB here) for one whole column.
  CHECK(peak4 < peak1 + 262144);
  CHECK(peak4 < 8 * draws4);
  // sample_refinement_count = 0: the `sample` group holds every post-burn-in draw; its
  // datasets and its `sample` coordinate are written in pieces too (the version before held a
  // whole column of it, grown by push_back, and the coordinate: 16-24 bytes per draw).
  specs.sample_refinement_count = 0;
  const auto [speak1, sdraws1] = written(50000);
  const auto [speak4, sdraws4] = written(200000);
  INFO("every draw sampled: peak heap " << speak1 << " bytes at " << sdraws1 << " draws, " << speak4 << " at "
                                        << sdraws4);
  REQUIRE(sdraws4 > 3 * sdraws1);
  CHECK(speak4 < speak1 + 262144);
  CHECK(speak4 < 8 * sdraws4);
}

TEST_CASE("file-backed chain: the derived quantities go to a scratch file, read back bit for bit, no column held",
          "[mcmc][chain]") {
  // chain_outputs (outputs.cpp) keeps the derived quantities' values of a file-backed chain
  // in an unlinked scratch file beside the chain's (DerivedColumns): what it holds on the heap
  // afterwards must not grow with the chain (a column in memory is 8 bytes per state and
  // quantity), and every value read back (DerivedReader, compact_value) is the target's.
  TempDir dir("herd_derived_");
  const int d = 2;
  SamplerSpecs specs;
  specs.output_prefix = (dir.path / "run").string();
  specs.variable_names = {"x1", "x2"};
  specs.sample_size = 100;  // a sample of fixed size: only the derived columns could grow
  SampleTarget target;
  target.ndim = d;
  target.log_density = gauss;
  // "x2" repeats a variable: not a derived column. The others are, in this order.
  target.quantity_names = {"sum", "x2", "prod", "sq1"};
  target.quantities = [](const double* x, double* q) {
    q[0] = x[0] + x[1];
    q[1] = x[1];
    q[2] = x[0] * x[1];
    q[3] = x[0] * x[0];
  };
  const auto expected = [](const double* x, std::size_t e) {
    return e == 0 ? x[0] + x[1] : e == 1 ? x[0] * x[1] : x[0] * x[0];
  };
  // The heap chain_outputs leaves held (its ChainOutputs), and a check of every value.
  const auto held = [&](std::int64_t n, bool file_backed) {
    MemoryChainSink sink = file_backed ? MemoryChainSink(dir.path.string()) : MemoryChainSink();
    DramSampler s(options(d, n), gauss);
    const DramResult result = s.run(sink);
    const std::size_t before = herd_test::counted_live_bytes();
    herd::mcmc::detail::ChainOutputs co = herd::mcmc::detail::chain_outputs(specs, target, sink, result);
    const std::size_t bytes = herd_test::counted_live_bytes() - before;
    REQUIRE(co.columns.size() == 5);
    CHECK(co.columns[2].name == "sum");
    CHECK(co.columns[3].name == "prod");
    CHECK(co.columns[4].name == "sq1");
    REQUIRE(co.derived.count() == 3);
    REQUIRE(co.derived.size() == sink.size());
    CHECK(co.derived.file_backed() == file_backed);
    ChainReader rd(sink, kPointColumns);
    herd::mcmc::detail::DerivedReader dq(co.derived);
    std::size_t wrong = 0;
    for (std::size_t i = 0; i < sink.size(); ++i)
      for (std::size_t e = 0; e < 3; ++e) {
        const double want = expected(rd.point(i), e);
        if (herd::mcmc::detail::compact_value(rd, dq, d, d + e, i) != want) ++wrong;
      }
    // Read back out of order too (the blocks are reloaded).
    for (std::size_t i = sink.size(); i-- > 0;)
      if (dq.value(2, i) != expected(rd.point(i), 2)) ++wrong;
    CHECK(wrong == 0);
    return std::pair<std::size_t, std::size_t>{bytes, sink.size()};
  };
  const auto [bytes1, n1] = held(20000, true);
  const auto [bytes4, n4] = held(80000, true);
  INFO("held " << bytes1 << " bytes at " << n1 << " states, " << bytes4 << " at " << n4);
  REQUIRE(n4 > 3 * n1);
  // The names, the sample's 100 rows: flat, where 3 columns in memory take 24 bytes per state
  // (1.9 MB at n4).
  CHECK(bytes4 < bytes1 + 4096);
  CHECK(bytes4 < n4);
  // An in-memory chain keeps them in memory (the same values).
  const auto [mbytes, mn] = held(20000, false);
  CHECK(mbytes >= 24 * mn);
}

TEST_CASE("file-backed chain: with sample_refinement_count = 0 the sample's rows are read back, not held",
          "[mcmc][chain]") {
  // Every post-burn-in draw is sampled: chain_outputs (outputs.cpp) keeps no row per draw (8
  // bytes per draw through the diagnostics); SampleRows::for_each reads the weights back.
  TempDir dir("herd_every_draw_");
  const int d = 2;
  SamplerSpecs specs;
  specs.output_prefix = (dir.path / "run").string();
  specs.variable_names = {"x1", "x2"};
  specs.sample_refinement_count = 0;
  SampleTarget target;
  target.ndim = d;
  target.log_density = gauss;
  const auto held = [&](std::int64_t n) {
    MemoryChainSink sink(dir.path.string());
    DramSampler s(options(d, n), gauss);
    const DramResult result = s.run(sink);
    const std::size_t before = herd_test::counted_live_bytes();
    herd::mcmc::detail::ChainOutputs co = herd::mcmc::detail::chain_outputs(specs, target, sink, result);
    const std::size_t bytes = herd_test::counted_live_bytes() - before;
    CHECK(co.sample_rows.resident_bytes() == 0);
    REQUIRE(co.sample_rows.size() == co.post_draws);
    // The rows: each post-burn-in state as often as its weight, in order.
    std::vector<std::size_t> want;
    ChainReader w(sink, kWeightColumn);
    for (auto i = static_cast<std::size_t>(co.burnin); i < sink.size(); ++i)
      want.insert(want.end(), static_cast<std::size_t>(w.weight(i)), i);
    std::vector<std::size_t> got;
    co.sample_rows.for_each(sink, [&](std::size_t r) { got.push_back(r); });
    CHECK(got == want);
    return std::pair<std::size_t, std::size_t>{bytes, co.post_draws};
  };
  const auto [bytes1, draws1] = held(20000);
  const auto [bytes4, draws4] = held(80000);
  INFO("held " << bytes1 << " bytes at " << draws1 << " draws, " << bytes4 << " at " << draws4);
  REQUIRE(draws4 > 3 * draws1);
  // Flat, where the rows held take 8 bytes per draw (2 MB at draws4).
  CHECK(bytes4 < bytes1 + 4096);
  CHECK(bytes4 < draws4);
}

TEST_CASE("file-backed chain: refined out of core past the budget, the same sample, no memory per state",
          "[mcmc][chain]") {
  // Past diagnostics_rank_budget() / kRefinementBytesPerState post-burn-in states, chain_outputs
  // (outputs.cpp) refines out of core (refine_sample_out_of_core): the weights read from the
  // chain per pass, the states in play and the refined sample in scratch files. The same
  // rounds and sample rows as the in-memory path, and a heap peak that does not grow with the
  // chain, where the in-memory path holds 8 bytes per state and more.
  TempDir dir("herd_refine_bounded_");
  const int d = 10;
  SamplerSpecs specs;
  specs.output_prefix = (dir.path / "run").string();
  specs.variable_names = {"x1", "x2", "x3", "x4", "x5", "x6", "x7", "x8", "x9", "x10"};
  SampleTarget target;
  target.ndim = d;
  target.log_density = gauss;
  const std::size_t budget = diagnostics_rank_budget();
  struct Outcome {
    std::size_t peak = 0, held = 0, states = 0;
    std::vector<std::size_t> rows;
    std::vector<RefinementRound> rounds;
  };
  const auto outputs = [&](MemoryChainSink& sink, const DramResult& result, bool bounded) {
    set_diagnostics_rank_budget(bounded ? 0 : std::size_t{1} << 40);
    Outcome o;
    const std::size_t before = herd_test::counted_live_bytes();
    herd_test::counted_reset_peak();
    herd::mcmc::detail::ChainOutputs co = herd::mcmc::detail::chain_outputs(specs, target, sink, result);
    o.peak = herd_test::counted_peak_bytes() - before;
    o.held = herd_test::counted_live_bytes() - before;
    o.states = sink.size() - static_cast<std::size_t>(co.burnin);
    co.sample_rows.for_each(sink, [&](std::size_t r) { o.rows.push_back(r); });
    CHECK(o.rows.size() == co.sample_rows.size());
    o.rounds = co.refined.rounds;
    // Only the rounds are kept: the refined indices and weights are freed, not emptied with
    // their capacity kept (16 bytes per refined state through the run).
    CHECK(co.refined.index.capacity() == 0);
    CHECK(co.refined.weight.capacity() == 0);
    return o;
  };
  std::vector<Outcome> bounded;
  for (const std::int64_t n : {40000, 160000}) {
    MemoryChainSink sink(dir.path.string());
    DramSampler s(options(d, n), gauss);
    const DramResult result = s.run(sink);
    const Outcome in_memory = outputs(sink, result, false);
    Outcome out_of_core = outputs(sink, result, true);
    CHECK(out_of_core.rows == in_memory.rows);
    REQUIRE(out_of_core.rounds.size() == in_memory.rounds.size());
    REQUIRE(in_memory.rounds.size() >= 3);
    for (std::size_t k = 0; k < in_memory.rounds.size(); ++k) {
      CHECK(out_of_core.rounds[k].compact_size == in_memory.rounds[k].compact_size);
      CHECK(out_of_core.rounds[k].verbose_size == in_memory.rounds[k].verbose_size);
      CHECK(out_of_core.rounds[k].iac == in_memory.rounds[k].iac);
    }
    INFO("states " << in_memory.states << ": peak heap in memory " << in_memory.peak << ", out of core "
                   << out_of_core.peak << "; held after " << in_memory.held << ", " << out_of_core.held);
    CHECK(out_of_core.held < 4096);  // the sample is in its scratch file
    CHECK(in_memory.peak > 8 * in_memory.states);
    bounded.push_back(std::move(out_of_core));
  }
  set_diagnostics_rank_budget(budget);
  // Out of core: the chain readers' blocks (about 1 MiB each), a block of records read and one
  // written (about 256 KiB each), the batch sums: 2,622,316 bytes at both lengths when
  // written. The same at 4x the states: 8 bytes per state more (the weights held) would add
  // 0.96 MB, the first thinning's kept states (16 per kept state) about 0.6 MB.
  INFO("out-of-core peak heap " << bounded[0].peak << " bytes at " << bounded[0].states << " states, "
                                << bounded[1].peak << " at " << bounded[1].states);
  REQUIRE(bounded[1].states > 3 * bounded[0].states);
  CHECK(bounded[1].peak < bounded[0].peak + 65536);
  CHECK(bounded[1].peak < (std::size_t{7} << 19));
}

TEST_CASE("compact posterior: 4 bytes per state for the weights, a posterior past 2^32 - 1 draws refused",
          "[mcmc][chain]") {
  // compact_posterior (serial_run.cpp) holds the weights the diagnostics and the HTML report
  // read beside the quantities' values: 32 bits per state (64 before), counted exactly.
  TempDir dir("herd_compact_posterior_");
  const int d = 2;
  SamplerSpecs specs;
  specs.output_prefix = (dir.path / "run").string();
  specs.variable_names = {"x1", "x2"};
  SampleTarget target;
  target.ndim = d;
  target.log_density = gauss;
  target.description = "gauss";
  const SampleRunOptions run_options;
  herd::SelfCommunicator comm;
  herd::mcmc::detail::SerialRun r(specs, target, run_options, comm);
  MemoryChainSink sink(dir.path.string());
  DramSampler s(options(d, 60000), gauss);
  const DramResult result = s.run(sink);
  r.chains.push_back(std::move(sink));
  r.co.push_back(herd::mcmc::detail::chain_outputs(specs, target, r.chains[0], result));
  r.m = 1;
  r.ndraw = r.co[0].post_draws;
  const std::size_t before = herd_test::counted_live_bytes();
  herd_test::counted_reset_peak();
  std::size_t held = 0, states = 0;
  {
    const herd::mcmc::detail::CompactPosterior cp = herd::mcmc::detail::compact_posterior(r);
    held = herd_test::counted_live_bytes() - before;
    states = cp.states;
    // The weights as the chain's, the last one cut: they sum to the posterior's draws.
    std::uint64_t sum = 0;
    for (const std::uint32_t w : cp.weights) sum += w;
    CHECK(sum == r.ndraw);
  }
  INFO(held << " bytes held for " << states << " states");
  REQUIRE(states > 10000);
  // The weights (4 bytes per state) and one PosteriorStates; 8 per state fails it.
  CHECK(held == 4 * states + sizeof(herd::mcmc::detail::PosteriorStates));
  // The refusal: every weight is at most the posterior's draws per chain, so 32 bits hold
  // each one exactly up to 2^32 - 1 draws in all; past that the run stops with this error.
  using herd::mcmc::detail::check_posterior_draws;
  constexpr std::size_t kMax = 4294967295U;
  CHECK_NOTHROW(check_posterior_draws(1, kMax));
  CHECK_NOTHROW(check_posterior_draws(3, kMax / 3));
  CHECK_THROWS_WITH(check_posterior_draws(1, kMax + 1), Catch::Contains("at most 2^32 - 1"));
  CHECK_THROWS_WITH(check_posterior_draws(2, std::size_t{1} << 31), Catch::Contains("2 chains x 2147483648 draws"));
  CHECK_THROWS_AS(check_posterior_draws(1, kMax + 1), herd::InputError);
}
