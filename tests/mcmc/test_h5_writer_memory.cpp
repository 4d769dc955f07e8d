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

#include <unistd.h>

#include <catch2/catch.hpp>

#include "chain_store_fixture.hpp"

#include "herd/core/communicator.hpp"
#include "herd/mcmc/chain_sink.hpp"
#include "herd/mcmc/dram.hpp"
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
