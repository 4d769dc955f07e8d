// Memory of a batched run's post-processing (herd/mcmc/run/batched_outputs.hpp): the
// diagnostics, the `.h5` groups and the HTML report read the draws from the store one
// quantity (or one group of chains) at a time, so what they allocate grows with one
// quantity's draws, not with all of them. Measured by counting the bytes this process holds
// through operator new (its high-water mark; exact and deterministic, unlike the RSS): the
// diagnostics' largest buffers (2 MiB and more) bypass operator new and are per quantity
// anyway (diagnostics.hpp).
#include <algorithm>
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

/// The bytes a batched post-processing holds at its peak above what it held before: in all,
/// and in its steps that read the draws per quantity (the summaries with nested R-hat, the
/// HTML report).
struct PostPeaks {
  std::size_t all = 0, summaries = 0, quantities = 0, html = 0;
};

/// The bytes the post-processing of `m` chains x `draws` draws of `d` coordinates (and two
/// derived quantities) holds at its peak above what it held before: summaries with nested
/// R-hat on one thread, the derived quantities, the serial run's `.h5` groups, the HTML
/// report (which alone holds about 17 MB here that do not grow with the draws).
PostPeaks post_processing_peaks(const fs::path& dir, std::int64_t m, std::int64_t draws, int d) {
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
  PostPeaks peaks;
  {
    BatchedDrawStore& store = sink.draws();
    BatchedPosterior post = summarize_batched_draws(store, names, facts.superchains, 1);
    peaks.summaries = peak_bytes() - before;
    const std::size_t quantities_before = live_bytes();
    reset_peak();
    add_batched_quantities(h5, target, names, store, post, facts.superchains, 1);
    peaks.quantities = peak_bytes() - quantities_before;
    peaks.all = std::max(peaks.summaries, peak_bytes() - before);
    write_batched_serial_groups(h5, facts, store, post);
    peaks.all = std::max(peaks.all, peak_bytes() - before);
    release_diagnostics_workspace();
    const std::size_t html_before = live_bytes();
    reset_peak();
    write_batched_html_report(facts, post, store);
    peaks.html = peak_bytes() - html_before;
    peaks.all = std::max(peaks.all, peak_bytes() - before);
    release_diagnostics_workspace();
  }
  // The derived quantities' `posterior` datasets (past the budget written a group of chains
  // at a time): every value at its [chain, draw].
  const io::H5Group pg = h5.root().open_group("posterior");
  const std::vector<double> s = pg.read<double>("s"), p = pg.read<double>("p");
  REQUIRE(s.size() == static_cast<std::size_t>(m * draws));
  REQUIRE(p.size() == s.size());
  std::size_t wrong = 0;
  for (std::int64_t c = 0; c < m; ++c)
    for (std::int64_t t = 0; t < draws; ++t) {
      const auto q = static_cast<std::size_t>(c * draws + t);
      wrong += s[q] != draw_value(c, t, 0) + draw_value(c, t, 1);
      wrong += p[q] != draw_value(c, t, 0) * draw_value(c, t, 2);
    }
  CHECK(wrong == 0);
  return peaks;
}

std::size_t post_processing_peak(const fs::path& dir, std::int64_t m, std::int64_t draws, int d) {
  return post_processing_peaks(dir, m, draws, d).all;
}

/// Sets diagnostics_rank_budget() for its lifetime, then restores it.
struct RankBudget {
  std::size_t saved;
  explicit RankBudget(std::size_t bytes) : saved(diagnostics_rank_budget()) { set_diagnostics_rank_budget(bytes); }
  ~RankBudget() { set_diagnostics_rank_budget(saved); }
  RankBudget(const RankBudget&) = delete;
  RankBudget& operator=(const RankBudget&) = delete;
};

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

TEST_CASE(
    "batched post-processing past the diagnostics budget: the summaries and the HTML report hold nothing per draw",
    "[mcmc]") {
  // Past diagnostics_rank_budget() each quantity is summarized as a streamed view read from
  // the store in blocks (its ranks and z-scores per draw on disk), nested R-hat reads a few
  // chains at a time and the HTML report reads each chain's draws in blocks: from 1000 to
  // 4000 draws per chain (320 chains, 960,000 more draws per quantity) the summaries' and the
  // report's peaks grow by less than 6 bytes per added draw of one quantity: what is left
  // per draw is the shared table of normal quantiles (1.25 bytes per draw), the z-scores'
  // buckets (3 bytes per draw of one quantity at this budget: buckets of 1,024 draws) and the
  // packed indicators (0.14). One quantity's column (8 bytes per draw, what each thread held
  // before), or the in-memory rank side (28), fails it; so does the in-memory path below.
  const fs::path dir = fs::temp_directory_path() / ("herd_batched_budget_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "streamed");
  fs::create_directories(dir / "memory");
  // 320 chains: the split draws (2 x 320 x 500 at 1000 draws) past detail::stored_split_limit
  // (2^18 split draws, whose buffer of 2 MiB at most is held below it, a constant).
  const std::int64_t m = 320;
  const int d = 3;
  const double added = double(m) * 3000.0;  // draws per quantity added from 1000 to 4000
  {
    const RankBudget b(std::size_t{64} << 10);
    REQUIRE(diagnostics_out_of_core(static_cast<std::size_t>(m), 1000));
    const PostPeaks small = post_processing_peaks(dir / "streamed", m, 1000, d);
    const PostPeaks large = post_processing_peaks(dir / "streamed", m, 4000, d);
    INFO("streamed: summaries " << small.summaries << " -> " << large.summaries << " bytes, derived quantities "
                                << small.quantities << " -> " << large.quantities << ", HTML report " << small.html
                                << " -> " << large.html << ", all " << small.all << " -> " << large.all);
    CHECK(double(large.summaries) - double(small.summaries) < 6.0 * added);
    // The derived quantities: their summaries as above, and their `posterior` datasets written
    // a group of chains at a time (a whole column and its copy, 16 bytes per draw, fail it).
    CHECK(double(large.quantities) - double(small.quantities) < 6.0 * added);
    CHECK(double(large.html) - double(small.html) < 6.0 * added);
  }
  {  // in memory (the default budget): a column per quantity and the rank buffers, 28+ bytes per draw
    REQUIRE_FALSE(diagnostics_out_of_core(static_cast<std::size_t>(m), 4000));
    const PostPeaks small = post_processing_peaks(dir / "memory", m, 1000, d);
    const PostPeaks large = post_processing_peaks(dir / "memory", m, 4000, d);
    INFO("in memory: summaries " << small.summaries << " -> " << large.summaries << " bytes, HTML report " << small.html
                                 << " -> " << large.html);
    CHECK(double(large.summaries) - double(small.summaries) > 8.0 * added);
  }
  fs::remove_all(dir);
}
