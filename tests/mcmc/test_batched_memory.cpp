// Memory of a batched run's post-processing (herd/mcmc/run/batched_outputs.hpp): the
// diagnostics, the `.h5` groups and the HTML report read the draws from the store one
// quantity (or one group of chains) at a time, so what they allocate grows with one
// quantity's draws, not with all of them. Measured by counting the bytes this process holds
// through operator new (its high-water mark; exact and deterministic, unlike the RSS): the
// diagnostics' largest buffers (2 MiB and more) bypass operator new and are per quantity
// anyway (diagnostics.hpp).
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <new>
#include <string>
#include <vector>

#include <unistd.h>

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include "herd/core/communicator.hpp"
#include "herd/io/hdf5.hpp"
#include "herd/mcmc/run/batched_outputs.hpp"

#include "heap_counter.hpp"

using herd_test::live_bytes;
using herd_test::peak_bytes;
using herd_test::reset_peak;

namespace fs = std::filesystem;
using namespace herd;
using namespace herd::mcmc;

namespace {

/// A deterministic pseudo-random draw of chain c, draw t, coordinate j (j = -1: lp).
double draw_value(std::int64_t c, std::int64_t t, int j) {
  const double s = std::sin(12.9898 * double(c) + 78.233 * double(t) + 37.719 * double(j + 1)) * 43758.5453;
  return s - std::floor(s) + 0.01 * double(j);
}

/// The bytes the post-processing of `m` chains x `draws` draws of `d` coordinates (and two
/// derived quantities) holds at its peak above what it held before: summaries with nested
/// R-hat on one thread, the derived quantities, the serial run's `.h5` groups, the HTML
/// report (which alone holds about 17 MB here that do not grow with the draws).
std::size_t post_processing_peak(const fs::path& dir, std::int64_t m, std::int64_t draws, int d) {
  SelfCommunicator comm;
  std::vector<std::string> names;
  names.reserve(static_cast<std::size_t>(d));
  for (int j = 0; j < d; ++j) names.push_back(fmt::format("x{}", j + 1));
  SamplerSpecs specs;
  specs.variable_names = names;
  specs.output_prefix = (dir / fmt::format("run_{}_{}", m, draws)).string();
  SampleTarget target;
  target.ndim = d;
  target.names = names;
  target.description = "memory test";
  target.quantity_names = {"s", "p"};
  target.quantities = [](const double* x, double* q) {
    q[0] = x[0] + x[1];
    q[1] = x[0] * x[2];
  };
  SampleRunOptions options;
  options.quiet = true;
  io::H5File h5 = io::H5File::create_atomic(specs.output_prefix + ".h5");
  BatchedGatherSink sink(comm, &h5, names, nullptr, 0, 256, true, dir.string());
  sink.begin(m, 0, d, draws);
  {
    std::vector<double> x, lp;
    std::vector<std::uint8_t> acc, stage;
    std::vector<double> alpha, measure;
    for (std::int64_t first = 0; first < draws; first += 256) {
      const std::int64_t n = std::min<std::int64_t>(256, draws - first);
      x.resize(static_cast<std::size_t>(m * n * d));
      lp.resize(static_cast<std::size_t>(m * n));
      acc.assign(lp.size(), 1);
      stage.assign(lp.size(), 1);
      alpha.assign(lp.size(), 0.5);
      measure.assign(lp.size(), 0.0);
      for (std::int64_t c = 0; c < m; ++c)
        for (std::int64_t t = 0; t < n; ++t) {
          for (int j = 0; j < d; ++j) x[static_cast<std::size_t>((c * n + t) * d + j)] = draw_value(c, first + t, j);
          lp[static_cast<std::size_t>(c * n + t)] = draw_value(c, first + t, -1);
        }
      sink.write_block(first, n, x.data(), lp.data());
      sink.write_stats(first, n, {acc.data(), stage.data(), alpha.data(), measure.data()});
    }
  }
  sink.finish();
  BatchedRunFacts facts;
  facts.specs = &specs;
  facts.target = &target;
  facts.options = &options;
  facts.all_options.ndim = d;
  facts.all_options.num_chains = m;
  facts.totals.num_chains = m;
  facts.totals.acceptance_rate = 0.25;
  facts.superchains = 4;
  facts.draws = draws;
  release_diagnostics_workspace();
  const std::size_t before = live_bytes();
  reset_peak();
  {
    BatchedDrawStore& store = sink.draws();
    BatchedPosterior post = summarize_batched_draws(store, names, facts.superchains, 1);
    add_batched_quantities(h5, target, names, store, post, facts.superchains, 1);
    write_batched_serial_groups(h5, facts, store, post);
    write_batched_html_report(facts, post, store);
    release_diagnostics_workspace();
  }
  return peak_bytes() - before;
}

}  // namespace

TEST_CASE("batched post-processing holds about one quantity's draws, not every draw", "[mcmc]") {
  const fs::path dir = fs::temp_directory_path() / ("herd_batched_memory_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  // 40 coordinates and 2 derived quantities: all draws are 42 quantities' worth (and the
  // per-draw statistics), which the post-processing held before it read them a quantity at
  // a time (the draws of every quantity for the summaries and the HTML report). From 1000 to
  // 4000 draws per chain its peak now grows by a few quantities' worth: the quantity being
  // summarized or plotted with the diagnostics' buffers under 2 MiB, a group of chains
  // (at most one quantity's draws), a sampled dataset.
  const std::int64_t m = 16;
  const int d = 40;
  const std::size_t small = post_processing_peak(dir, m, 1000, d);
  const std::size_t large = post_processing_peak(dir, m, 4000, d);
  const double quantity = 8.0 * double(m) * 3000.0;  // one quantity's draws, growth from 1000 to 4000
  INFO("peak above the start: " << small << " bytes at 1000 draws, " << large << " at 4000; one quantity's growth "
                                << quantity);
  CHECK(double(large) - double(small) < 16.0 * quantity);
  fs::remove_all(dir);
}
