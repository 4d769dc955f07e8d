// The file-backed MemoryChainSink (herd/mcmc/chain_sink.hpp): its columns go to an unlinked
// scratch file in blocks, one block in memory, and ChainReader reads them back. Checked: the
// values read back are those of the in-memory sink (every column, blocks full and partial,
// one coordinate or all), the bad-folder error, and that the heap this process holds while a
// chain is sampled into the sink does not grow with the chain (counted through operator new,
// which this test replaces: exact and deterministic, unlike the RSS).
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <new>
#include <string>
#include <vector>

#include <unistd.h>

#include <catch2/catch.hpp>

#include "chain_store_fixture.hpp"

#include "herd/core/communicator.hpp"
#include "herd/core/error.hpp"
#include "herd/mcmc/chain_sink.hpp"
#include "herd/mcmc/dram.hpp"
#include "herd/mcmc/parallel.hpp"
#include "herd/mcmc/refinement.hpp"

#include "heap_counter.hpp"

using herd_test::live_bytes;
using herd_test::peak_bytes;
using herd_test::reset_peak;

// The counters for this program's other translation unit (test_h5_writer_memory.cpp), which
// cannot include heap_counter.hpp (one definition of operator new per program).
namespace herd_test {
std::size_t counted_live_bytes() { return live_bytes(); }
std::size_t counted_peak_bytes() { return peak_bytes(); }
void counted_reset_peak() { reset_peak(); }
}  // namespace herd_test

namespace fs = std::filesystem;
using namespace herd::mcmc;

using herd_test::gauss;
using herd_test::options;
using herd_test::TempDir;

namespace {

/// `n` records with distinct values in every field (point j of record i: i + j / 8).
void write_records(ChainSink& s, std::size_t n, int d) {
  std::vector<double> x(static_cast<std::size_t>(d));
  for (std::size_t i = 0; i < n; ++i) {
    for (int j = 0; j < d; ++j) x[static_cast<std::size_t>(j)] = static_cast<double>(i) + j / 8.0;
    ChainRecord r;
    r.step = 3 * i;
    r.weight = static_cast<std::int64_t>(1 + i % 5);
    r.log_density = -0.5 * static_cast<double>(i);
    r.dr_stage = static_cast<std::int32_t>(i % 3);
    r.accept_prob = 1.0 / static_cast<double>(i + 1);
    r.adapt_measure = static_cast<double>(i) * 0.25;
    r.point = x.data();
    r.ndim = d;
    s.write(r);
  }
}

}  // namespace

TEST_CASE("file-backed chain: read back as the in-memory one", "[mcmc][chain]") {
  TempDir dir("herd_chain_store_");
  const int d = 3;
  for (const std::size_t n : {std::size_t{0}, std::size_t{5}, std::size_t{6}, std::size_t{23}}) {
    CAPTURE(n);
    MemoryChainSink mem;
    MemoryChainSink file(dir.path.string(), 6);  // blocks of 6 states: n = 23 is 3 full, 5 in the tail
    mem.begin(4, d);
    file.begin(4, d);
    write_records(mem, n, d);
    write_records(file, n, d);
    REQUIRE(file.file_backed());
    CHECK(file.block_states() == 6);
    REQUIRE(file.size() == n);
    CHECK(file.step.empty());  // the columns are not in the vectors
    CHECK(file.chain_id == 4);
    CHECK(file.total_weight() == mem.total_weight());
    CHECK(file.verbose(7) == mem.verbose(7));
    ChainReader a(mem, kAllColumns), b(file, kAllColumns);
    for (std::size_t i = 0; i < n; ++i) {
      CHECK(b.step(i) == mem.step[i]);
      CHECK(b.weight(i) == mem.weight[i]);
      CHECK(b.log_density(i) == mem.log_density[i]);
      CHECK(b.dr_stage(i) == mem.dr_stage[i]);
      CHECK(b.accept_prob(i) == mem.accept_prob[i]);
      CHECK(b.adapt_measure(i) == mem.adapt_measure[i]);
      const std::vector<double> p(b.point(i), b.point(i) + d);
      CHECK(p == std::vector<double>(mem.point(i), mem.point(i) + d));
      for (int j = 0; j < d; ++j) CHECK(a.x(i, static_cast<std::size_t>(j)) == b.x(i, static_cast<std::size_t>(j)));
      const ChainRecord r = b.record(i);
      CHECK(r.chain_id == 4);
      CHECK(r.weight == mem.weight[i]);
      CHECK(r.point[d - 1] == static_cast<double>(i) + (d - 1) / 8.0);
    }
    // One coordinate, read backwards (every read leaves the block loaded).
    ChainReader one(file, kPointColumns | kWeightColumn, 2);
    for (std::size_t i = n; i-- > 0;) {
      CHECK(one.x(i, 2) == static_cast<double>(i) + 2 / 8.0);
      CHECK(one.weight(i) == mem.weight[i]);
    }
  }
}

TEST_CASE("file-backed chain: moves, refuses copies, names a bad folder", "[mcmc][chain]") {
  TempDir dir("herd_chain_store_");
  MemoryChainSink a(dir.path.string(), 4);
  a.begin(0, 2);
  write_records(a, 9, 2);
  MemoryChainSink b(std::move(a));
  CHECK(b.size() == 9);
  CHECK(ChainReader(b, kWeightColumn).weight(8) == 4);
  CHECK_THROWS_AS(MemoryChainSink(b), herd::Error);
  std::vector<MemoryChainSink> v;
  v.push_back(std::move(b));
  CHECK(v[0].total_weight() == 1 + 2 + 3 + 4 + 5 + 1 + 2 + 3 + 4);
  // The scratch file is unlinked at once: nothing is left in the folder.
  CHECK(fs::is_empty(dir.path));

  const std::string missing = (dir.path / "no" / "such").string();
  MemoryChainSink c(missing);
  try {
    c.begin(0, 2);
    FAIL("no error");
  } catch (const herd::IoError& e) {
    const std::string what = e.what();
    CHECK(what.find(missing) != std::string::npos);
    CHECK(what.find("No such file") != std::string::npos);
    CHECK(what.find('\n') == std::string::npos);
  }
}

TEST_CASE("file-backed chain: the heap held while sampling does not grow with the chain", "[mcmc][chain]") {
  TempDir dir("herd_chain_store_");
  const int d = 10;
  // Peak heap bytes above the start while a chain of `n` states is sampled into `sink`.
  const auto sampled = [&](std::int64_t n, bool file) {
    const std::size_t before = live_bytes();
    reset_peak();
    std::size_t held = 0;
    {
      MemoryChainSink sink = file ? MemoryChainSink(dir.path.string()) : MemoryChainSink();
      DramSampler s(options(d, n), gauss);
      const DramResult r = s.run(sink);
      REQUIRE(static_cast<std::int64_t>(sink.size()) == r.chain_size);
      held = sink.resident_bytes();
    }
    return std::pair<std::size_t, std::size_t>{peak_bytes() - before, held};
  };
  const auto [mem1, mem_held1] = sampled(20000, false);
  const auto [mem4, mem_held4] = sampled(80000, false);
  const auto [file1, held1] = sampled(20000, true);
  const auto [file4, held4] = sampled(80000, true);
  // In memory: 44 + 8 d bytes per compact state, at least (the vectors' spare capacity aside).
  CHECK(mem_held4 >= 80000 * (44 + 8 * d));
  CHECK(mem4 > mem1 + 60000 * (44 + 8 * d));
  // File-backed: one block (about 1 MiB) whatever the length, and the same heap peak for a
  // chain 4x as long (a few KiB of slack: nothing per state).
  CHECK(held1 == held4);
  CHECK(held4 <= (std::size_t{1} << 20) + 8 * (44 + 8 * d));
  CHECK(file4 <= file1 + 16384);
  CHECK(file4 < mem1);
}

TEST_CASE("file-backed chain: run_multi_chain with a scratch folder gives the in-memory chains", "[mcmc][chain]") {
  TempDir dir("herd_chain_store_");
  herd::SelfCommunicator self;
  const int d = 3;
  const DramOptions o = options(d, 3000);
  const MultiChainRun a = run_multi_chain(o, gauss, true, self, 3);
  const MultiChainRun b =
      run_multi_chain(o, gauss, true, self, 3, 0, "", 0, 5.0, false, nullptr, {}, dir.path.string());
  REQUIRE(a.chains.size() == 3);
  REQUIRE(b.chains.size() == 3);
  for (std::size_t c = 0; c < 3; ++c) {
    const MemoryChainSink& m = a.chains[c];
    const MemoryChainSink& f = b.chains[c];
    CHECK_FALSE(m.file_backed());
    CHECK(f.file_backed());
    CHECK(f.chain_id == m.chain_id);
    REQUIRE(f.size() == m.size());
    ChainReader rd(f, kAllColumns);
    bool same = true;
    for (std::size_t i = 0; i < m.size(); ++i) {
      same = same && rd.step(i) == m.step[i] && rd.weight(i) == m.weight[i] && rd.log_density(i) == m.log_density[i] &&
             rd.dr_stage(i) == m.dr_stage[i] && rd.accept_prob(i) == m.accept_prob[i] &&
             rd.adapt_measure(i) == m.adapt_measure[i];
      for (int j = 0; j < d; ++j) same = same && rd.x(i, static_cast<std::size_t>(j)) == m.point(i)[j];
    }
    CHECK(same);
  }
  CHECK(fs::is_empty(dir.path));
}

TEST_CASE("file-backed chain: refine_sample reads it block by block, the same result without a copy of it",
          "[mcmc][chain]") {
  TempDir dir("herd_chain_store_");
  const int d = 10;
  const std::size_t nv = d + 1;  // log density, then the point (as herd-sample refines)
  MemoryChainSink sink(dir.path.string());
  DramSampler s(options(d, 80000), gauss);
  s.run(sink);
  const std::size_t n = sink.size();
  REQUIRE(n > 50000);
  std::vector<std::int64_t> w(n);
  {
    ChainReader rd(sink, kWeightColumn);
    for (std::size_t i = 0; i < n; ++i) w[i] = rd.weight(i);
  }
  // The states gathered (8 nv bytes per state), as before.
  RefinedSample gathered;
  {
    std::vector<double> states(n * nv);
    ChainReader rd(sink, kLogDensityColumn | kPointColumns);
    for (std::size_t i = 0; i < n; ++i) {
      states[i * nv] = rd.log_density(i);
      const double* p = rd.point(i);
      std::copy(p, p + d, states.begin() + static_cast<std::ptrdiff_t>(i * nv + 1));
    }
    gathered = refine_sample(states, w, nv);
  }
  // Read through a row source, the heap counted; the weights are handed over (as
  // herd-sample hands over those it read), so their 8 bytes per state are counted before.
  std::vector<std::int64_t> handed = w;
  const std::size_t before = live_bytes();
  reset_peak();
  RefinedSample streamed;
  {
    ChainReader rd(sink, kLogDensityColumn | kPointColumns);
    std::vector<double> row(nv);
    streamed = refine_sample(
        n, nv,
        [&](std::size_t i) {
          row[0] = rd.log_density(i);
          const double* p = rd.point(i);
          std::copy(p, p + d, row.begin() + 1);
          return static_cast<const double*>(row.data());
        },
        std::move(handed));
  }
  const std::size_t peak = peak_bytes() - before;
  // Bit for bit the same refinement: rows, weights and every round.
  CHECK(streamed.index == gathered.index);
  CHECK(streamed.weight == gathered.weight);
  REQUIRE(streamed.rounds.size() == gathered.rounds.size());
  REQUIRE(gathered.rounds.size() >= 2);
  for (std::size_t k = 0; k < gathered.rounds.size(); ++k) {
    const RefinementRound& a = streamed.rounds[k];
    const RefinementRound& b = gathered.rounds[k];
    CHECK(a.verbose_stage == b.verbose_stage);
    CHECK(a.compact_size == b.compact_size);
    CHECK(a.verbose_size == b.verbose_size);
    CHECK(a.iac == b.iac);
    CHECK(a.iac_summary == b.iac_summary);
  }
  // The heap beside the weights handed over: the reader's block (about 1 MiB), the first
  // thinning's kept indices and their weights (16 bytes per kept state, about a third of the
  // states here; the weights are thinned in place), then the rows of the states left once
  // they take at most 16 bytes per state: 505,056 bytes above the block at 80,000 states
  // (6.3 per state; INFO below). An index of every state (8 per state, more with push_back's
  // spare capacity), an array of new weights beside the old (8) or the first thinning's rows
  // held (8 nv per kept state: about 30 per state) exceed the bound of 8 per state.
  const std::size_t block = sink.block_states() * (44 + 8 * static_cast<std::size_t>(d));
  INFO("peak heap " << peak << " bytes for " << n << " states, the reader's block " << block);
  CHECK(peak < block + 8 * n);
  CHECK(peak < 8 * nv * n);
}
