// Serial tests of parallel.hpp: checkpoints of the kernel state, exact restart
// of a resumable run after a crash, fork-join with one rank, and the fault checks.
#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include <catch2/catch.hpp>

#include "herd/core/communicator.hpp"
#include "herd/core/error.hpp"
#include "herd/io/hdf5.hpp"
#include "herd/io/schema.hpp"
#include "herd/io/toml_reader.hpp"
#include "herd/mcmc/diagnostics.hpp"
#include "herd/mcmc/paradram_run.hpp"
#include "herd/mcmc/parallel.hpp"
#include "herd/mcmc/run_progress.hpp"
#include "herd/mcmc/sampler_specs.hpp"
#include "progress_sink.hpp"  // mcmc/run/ (private to herd::mcmc): the terminal's steps per second
#include "summary_bits.hpp"

using namespace herd::mcmc;
namespace fs = std::filesystem;

namespace {

double banana(const double* x, int d) {
  double q = 0.0;
  for (int i = 0; i < d; ++i) q += x[i] * x[i];
  const double b = x[1] + 0.1 * x[0] * x[0];
  return -0.5 * (q - x[1] * x[1] + b * b);
}

DramOptions opts(int dr = 0) {
  DramOptions o;
  o.start_point = {0.3, -0.2, 0.1};
  o.chain_size = 600;
  o.seed = 7;
  o.delayed_rejection_count = dr;
  o.target_acceptance_rate = {0.2, 0.3};
  return o;
}

bool same_chain(const MemoryChainSink& a, const MemoryChainSink& b) {
  return a.chain_id == b.chain_id && a.step == b.step && a.weight == b.weight && a.log_density == b.log_density &&
         a.dr_stage == b.dr_stage && a.accept_prob == b.accept_prob && a.adapt_measure == b.adapt_measure &&
         a.points == b.points;
}

std::string slurp(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

fs::path temp_dir(const std::string& name) {
  fs::path p = fs::temp_directory_path() / ("herd_par_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

/// A multi_chain run of the 3-D banana (thread-safe density) from the input `keys` (TOML
/// lines), started at (0.3, -0.2, 0.1), writing `prefix`'s outputs, its post-processing
/// diagnostics on `threads` threads, quiet.
SampleRunSummary run_banana(const std::string& keys, const fs::path& prefix, std::size_t threads) {
  herd::io::Schema schema("test");
  declare_sampler_specs(schema);
  SampleTarget target;
  target.ndim = 3;
  target.log_density = banana;
  target.thread_safe = true;
  const std::string toml = keys + "parallelization_model = \"multi_chain\"\nstart_point = [0.3, -0.2, 0.1]\n" +
                           "output_prefix = \"" + prefix.string() + "\"\n";
  const SamplerSpecs specs = resolve_sampler_specs(schema.apply(herd::io::parse_toml(toml, "test.toml"), {}), 3);
  prepare_outputs(specs);
  SampleRunOptions o;
  o.quiet = true;
  o.diagnostics_threads = threads;
  return run_paradram(specs, target, o);
}

}  // namespace

TEST_CASE("parallel: a saved and restored kernel state continues the chain exactly", "[mcmc][parallel]") {
  for (int dr : {0, 2}) {
    DramOptions o = opts(dr);
    MemoryChainSink whole;
    DramSampler ref(o, banana);
    ref.run(whole);

    MemoryChainSink part;
    DramSampler a(o, banana);
    part.begin(0, 3);
    for (int i = 0; i < 237; ++i) a.step(part);
    herd::io::CheckpointWriter w("test", 1);
    save_dram_state(w, a.state());
    const auto bytes = w.serialize();
    herd::io::CheckpointReader r(bytes, "memory");
    DramSampler b(o, banana);
    b.set_state(load_dram_state(r));
    while (!b.finished()) b.step(part);
    b.finish(part, 0.0);
    CHECK(same_chain(part, whole));
  }
}

TEST_CASE("parallel: a resumable chain record is read back whole, in blocks, into columns of exact size",
          "[mcmc][parallel]") {
  // 40000 records of 72 bytes span three 1 MiB read blocks; the record equals the chain the
  // kernel hands a memory sink, and the columns have no spare capacity (the chain is held once).
  const fs::path dir = temp_dir("read_blocks");
  DramOptions o = opts(1);
  o.chain_size = 40000;
  ResumableOptions f;
  f.chain_path = (dir / "c.chain").string();
  f.checkpoint_path = (dir / "c.ckpt").string();
  f.period_steps = 0;
  f.period_seconds = 1e9;
  run_resumable(o, banana, f);
  MemoryChainSink whole;
  DramSampler ref(o, banana);
  ref.run(whole);
  const MemoryChainSink c = read_resumable_chain(f.chain_path, 3, f.checkpoint_path);
  REQUIRE(c.size() == 40000);
  CHECK(same_chain(c, whole));
  CHECK(c.points.capacity() == c.points.size());
  CHECK(c.weight.capacity() == c.weight.size());
  // The chain just sampled, read without its checksums (in memory, or into a scratch file):
  // the same chain, even where the file no longer matches its checkpoint's CRC-32s (what
  // this process wrote is not checked again; the checking overload finds the change).
  CHECK(same_chain(read_sampled_chain(f.chain_path, 3), whole));
  const MemoryChainSink scratch = read_sampled_chain(f.chain_path, 3, dir.string());
  CHECK(scratch.file_backed());
  REQUIRE(scratch.size() == whole.size());
  {
    ChainReader rd(scratch, kStepColumn | kWeightColumn | kLogDensityColumn | kPointColumns);
    bool same = true;
    for (std::size_t i = 0; i < whole.size(); ++i)
      same = same && rd.step(i) == whole.step[i] && rd.weight(i) == whole.weight[i] &&
             rd.log_density(i) == whole.log_density[i] &&
             std::equal(rd.point(i), rd.point(i) + 3, &whole.points[3 * i]);
    CHECK(same);
  }
  {
    std::fstream io(f.chain_path, std::ios::in | std::ios::out | std::ios::binary);
    io.seekp(9);  // the first record's weight (bytes 8 to 15), its second byte: + 256
    io.put(static_cast<char>(1));
  }
  CHECK(read_sampled_chain(f.chain_path, 3).weight[0] == whole.weight[0] + 256);
  CHECK_THROWS_WITH(read_resumable_chain(f.chain_path, 3, f.checkpoint_path), Catch::Contains("c.chain"));
  // A file cut inside a record is refused, naming the file.
  fs::resize_file(f.chain_path, fs::file_size(f.chain_path) - 5);
  CHECK_THROWS_WITH(read_resumable_chain(f.chain_path, 3),
                    Catch::Contains("c.chain") && Catch::Contains("whole number"));
  CHECK_THROWS_WITH(read_sampled_chain(f.chain_path, 3), Catch::Contains("c.chain") && Catch::Contains("whole number"));
}

TEST_CASE("parallel: a resumable run killed by an error resumes byte-identically", "[mcmc][parallel]") {
  const fs::path dir = temp_dir("resume");
  DramOptions o = opts(1);
  o.chain_size = 3000;
  ResumableOptions ref;
  ref.chain_path = (dir / "ref.chain").string();
  ref.checkpoint_path = (dir / "ref.ckpt").string();
  ref.period_steps = 97;
  const ResumableRun whole = run_resumable(o, banana, ref);
  CHECK(whole.checkpoints > 1);
  CHECK_FALSE(whole.resumed);

  ResumableOptions f = ref;
  f.chain_path = (dir / "x.chain").string();
  f.checkpoint_path = (dir / "x.ckpt").string();
  // Crash after a given number of evaluations, several times, resuming each time.
  int crashes = 0;
  for (long limit : {500L, 1300L, 2100L, 1000000L}) {
    long calls = 0;
    auto crashing = [&](const double* x, int d) {
      if (++calls > limit) throw std::runtime_error("simulated crash");
      return banana(x, d);
    };
    try {
      const ResumableRun r = run_resumable(o, crashing, f);
      CHECK(r.resumed);
      CHECK(r.result.proposals == whole.result.proposals);
    } catch (const herd::Error&) {
      ++crashes;
    }
  }
  CHECK(crashes == 3);
  CHECK(slurp(f.chain_path) == slurp(ref.chain_path));
  const MemoryChainSink c = read_resumable_chain(f.chain_path, 3);
  CHECK(static_cast<std::int64_t>(c.size()) == o.chain_size);
  // A completed run is reported, not redone.
  const ResumableRun again = run_resumable(
      o, [](const double*, int) -> double { throw std::runtime_error("no"); }, f);
  CHECK(again.already_complete);
  // Other options refuse to resume; overwrite starts afresh.
  DramOptions other = o;
  other.seed = 8;
  CHECK_THROWS_AS(run_resumable(other, banana, f), herd::InputError);
  ResumableOptions fresh = f;
  fresh.overwrite = true;
  CHECK_FALSE(run_resumable(o, banana, fresh).resumed);
  CHECK(slurp(f.chain_path) == slurp(ref.chain_path));
  fs::remove_all(dir);
}

// A flipped byte in the recorded chain file went unnoticed: the rerun resumed from it and
// exited 0 with different results. The checkpoint's per-MiB CRC-32s now refuse it.
TEST_CASE("parallel: a changed byte in a chain file is refused, naming the file and block", "[mcmc][parallel]") {
  const fs::path dir = temp_dir("flip");
  DramOptions o = opts(1);
  o.chain_size = 3000;
  ResumableOptions f;
  f.chain_path = (dir / "x.chain").string();
  f.checkpoint_path = (dir / "x.ckpt").string();
  f.period_steps = 97;
  long calls = 0;
  auto crashing = [&](const double* x, int d) {
    if (++calls > 1500) throw std::runtime_error("simulated crash");
    return banana(x, d);
  };
  CHECK_THROWS_AS(run_resumable(o, crashing, f), herd::Error);
  const std::string good = slurp(f.chain_path);
  REQUIRE(good.size() > 1000);
  auto flip = [&](std::size_t at) {
    std::string bad = good;
    bad[at] = static_cast<char>(bad[at] ^ 0x10);
    std::ofstream(f.chain_path, std::ios::binary | std::ios::trunc) << bad;
  };
  flip(good.size() / 2);
  try {
    run_resumable(o, banana, f);
    FAIL("a corrupt chain file was resumed");
  } catch (const herd::IoError& e) {
    CHECK_THAT(e.what(), Catch::Matchers::Contains("x.chain") && Catch::Matchers::Contains("block 1 of 1") &&
                             Catch::Matchers::Contains("corrupt") && Catch::Matchers::Contains("overwrite = true"));
  }
  // Restored, it resumes and completes; a byte changed after that is found when the
  // completed record is read back.
  std::ofstream(f.chain_path, std::ios::binary | std::ios::trunc) << good;
  const ResumableRun r = run_resumable(o, banana, f);
  CHECK(r.resumed);
  CHECK(read_resumable_chain(f.chain_path, 3, f.checkpoint_path).size() == 3000);
  const std::string done = slurp(f.chain_path);
  std::string bad = done;
  bad[10] = static_cast<char>(bad[10] ^ 1);
  std::ofstream(f.chain_path, std::ios::binary | std::ios::trunc) << bad;
  CHECK_THROWS_WITH(read_resumable_chain(f.chain_path, 3, f.checkpoint_path),
                    Catch::Matchers::Contains("x.chain") && Catch::Matchers::Contains("block 1"));
  fs::remove_all(dir);
}

TEST_CASE("parallel: fork-join on one rank is the serial chain", "[mcmc][parallel]") {
  herd::SelfCommunicator comm;
  for (int dr : {0, 2}) {
    DramOptions o = opts(dr);
    MemoryChainSink serial, fj;
    DramSampler ref(o, banana);
    const DramResult rs = ref.run(serial);
    const ForkJoinRun r = run_fork_join(o, banana, comm, fj);
    CHECK(same_chain(serial, fj));
    CHECK(r.result.evaluations == rs.evaluations);
    CHECK(r.rank_proposals[0] == rs.proposals);
  }
}

TEST_CASE("parallel: multi-chain on one rank equals run_chains, threads or not", "[mcmc][parallel]") {
  herd::SelfCommunicator comm;
  DramOptions o = opts(1);
  std::vector<MemoryChainSink> ref(4);
  std::vector<ChainSink*> ptr;
  ptr.reserve(ref.size());
  for (auto& s : ref) ptr.push_back(&s);
  DramSampler(o, banana).run_chains(ptr, 1);
  for (int threads : {1, 2}) {
    const MultiChainRun m = run_multi_chain(o, banana, true, comm, 4, threads);
    REQUIRE(m.chains.size() == 4);
    for (int i = 0; i < 4; ++i) CHECK(same_chain(m.chains[i], ref[i]));
  }
}

TEST_CASE("parallel: fork-join speedup model", "[mcmc][parallel]") {
  CHECK(fork_join_predicted_speedup(0.3, 1, 1e-3, 0.0) == 1.0);
  // p -> 0: every rank's proposal is used.
  CHECK(fork_join_predicted_speedup(1e-12, 4, 1e-3, 0.0) == Approx(4.0));
  // p = 0.5, N = 2: mean 1.5; with communication equal to the evaluation, 0.75.
  CHECK(fork_join_predicted_speedup(0.5, 2, 1e-3, 0.0) == Approx(1.5));
  CHECK(fork_join_predicted_speedup(0.5, 2, 1e-3, 1e-3) == Approx(0.75));
}

TEST_CASE("parallel: a foreign launcher is detected from its environment", "[mcmc][parallel]") {
  const char* old = std::getenv("OMPI_COMM_WORLD_SIZE");
  const std::string saved = old ? old : "";
  ::setenv("OMPI_COMM_WORLD_SIZE", "4", 1);
  CHECK(launcher_process_count() >= 4);
  CHECK_THROWS_AS(check_launch(1), herd::InputError);
  CHECK_NOTHROW(check_launch(4));
  if (old) ::setenv("OMPI_COMM_WORLD_SIZE", saved.c_str(), 1);
  else ::unsetenv("OMPI_COMM_WORLD_SIZE");
  herd::SelfCommunicator comm;
  CHECK_NOTHROW(check_same_input(comm, 123));
  CHECK(dram_options_hash(opts(0)) != dram_options_hash(opts(1)));
  CHECK(dram_options_hash(opts(1)) == dram_options_hash(opts(1)));
}

TEST_CASE("parallel: diagnostics across chains cut to a common length", "[mcmc][parallel]") {
  herd::SelfCommunicator comm;
  DramOptions o = opts(1);
  o.chain_size = 3000;
  const MultiChainRun m = run_multi_chain(o, banana, true, comm, 4, 2);
  std::vector<std::int64_t> burnin;
  std::size_t shortest = SIZE_MAX;
  for (const auto& r : m.results) burnin.push_back(r.burnin);
  for (std::size_t c = 0; c < 4; ++c) {
    std::size_t n = 0;
    for (std::size_t i = static_cast<std::size_t>(burnin[c]); i < m.chains[c].size(); ++i)
      n += static_cast<std::size_t>(m.chains[c].weight[i]);
    shortest = std::min(shortest, n);
  }
  const MultiChainDiagnostics g = multi_chain_diagnostics(m.chains, burnin);
  CHECK(g.draws == shortest);
  REQUIRE(g.summary.size() == 3);
  REQUIRE(g.ks.size() == 3);
  for (const auto& s : g.summary) {
    CHECK(s.rhat < 1.1);
    CHECK(s.ess_bulk > 100);
  }
  REQUIRE(g.ks[0].size() == 16);
  CHECK(g.ks[0][0].statistic == 0.0);
  CHECK(g.ks[0][1].statistic == g.ks[0][4].statistic);
  // The KS table tests the refined (nearly independent) samples: for converged chains the
  // p-values are about uniform, so the median of the 18 (6 pairs x 3 variables) falls below
  // 0.05 with a probability far below 1% (it did with the autocorrelated verbose chains).
  std::vector<double> p;
  for (const auto& t : g.ks)
    for (std::size_t a = 0; a < 4; ++a)
      for (std::size_t b = a + 1; b < 4; ++b) p.push_back(t[a * 4 + b].p_value);
  std::sort(p.begin(), p.end());
  CHECK((p[8] + p[9]) / 2 > 0.05);
  // The refinement's options reach the KS table's samples (herd-sample passes the run's
  // sample_refinement_method; this took the defaults whatever the method): the defaults
  // spelled out give the same table, another method another one.
  const auto statistics = [](const MultiChainDiagnostics& x) {
    std::vector<double> v;
    for (const auto& t : x.ks)
      for (const auto& k : t) v.push_back(k.statistic);
    return v;
  };
  CHECK(statistics(multi_chain_diagnostics(m.chains, burnin, RefinementOptions{})) == statistics(g));
  RefinementOptions other;
  other.estimator = IacEstimator::kMaxCumSumAutoCorr;
  other.summary = IacSummary::kMax;
  other.stages = RefinementStages::kCompactOnly;
  CHECK(statistics(multi_chain_diagnostics(m.chains, burnin, other)) != statistics(g));
  CHECK_THROWS_AS(multi_chain_diagnostics(m.chains, {0, 0}), herd::InputError);
}

TEST_CASE("EtaEstimator: the time left from this process's own rate (a resumed run's first lines)", "[mcmc]") {
  // A resumed run of chain_size 1000 at 400 accepted states; reading and checking the restart
  // record took 5 s before its first progress. The time left used to be seconds since the
  // process started / states accepted by it x states left: 5.1 / 11 x 589 = 273 s after
  // 0.1 s at 100 states/s, where about 5.9 s are left.
  herd::mcmc::EtaEstimator eta(1000);
  CHECK(std::isnan(eta.update(5.0, 401)));      // the first progress: no rate yet
  CHECK(eta.update(5.1, 411) == Approx(5.89));  // 10 states in 0.1 s, 589 left
  CHECK(eta.update(6.0, 501) == Approx(4.99));  // 100 states in 1 s, 499 left
  CHECK(std::isnan(herd::mcmc::EtaEstimator(10).update(1.0, 3)));
  herd::mcmc::EtaEstimator stuck(10);
  stuck.update(1.0, 3);
  CHECK(std::isnan(stuck.update(2.0, 3)));  // nothing done since: unknown, not infinite
  CHECK(stuck.update(3.0, 10) == 0.0);      // done
}

TEST_CASE("RunProgress: phases timed and reported, lines in a log at the first progress and then periodically",
          "[mcmc]") {
  const auto text_of = [](std::FILE* f) {
    std::rewind(f);
    std::string text;
    for (int c; (c = std::fgetc(f)) != EOF;) text += static_cast<char>(c);
    std::fclose(f);
    return text;
  };
  // A log (a file) with the default period of 10 s: the first progress of a phase at once,
  // the next not within the period, but the phase's last progress when it ends.
  std::FILE* f = std::tmpfile();
  REQUIRE(f != nullptr);
  {
    herd::mcmc::RunProgress p(f, false);
    CHECK_FALSE(p.tty());
    p.phase("sampling");
    p.detail("steps 10");
    p.detail("steps 20");
    p.phase("writing run.h5");
    p.print_line("WARNING: something");
    p.finish();
    const auto ph = p.phases();
    REQUIRE(ph.size() == 2);
    CHECK(ph[0].first == "sampling");
    CHECK(ph[1].first == "writing run.h5");
    CHECK_THAT(p.phase_table(), Catch::Contains("writing run.h5") && Catch::Contains("total"));
  }
  const std::string text = text_of(f);
  INFO(text);
  CHECK(text == "sampling: steps 10\nsampling: steps 20\nWARNING: something\n");
  // A phase without progress of its own gets lines from the ticker with its elapsed time
  // (period 0.05 s here).
  std::FILE* g = std::tmpfile();
  REQUIRE(g != nullptr);
  {
    herd::mcmc::RunProgress p(g, false, 0.25, 0.05);
    p.phase("writing run.h5");
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    p.finish();
    CHECK(p.phases().at(0).second >= 0.35);
  }
  const std::string ticks = text_of(g);
  INFO(ticks);
  CHECK_THAT(ticks, Catch::StartsWith("writing run.h5 (") && Catch::EndsWith(" s)\n"));
  // A progress that the ticker shows again (no new one for a period) is marked as old, not
  // repeated as if new.
  std::FILE* h = std::tmpfile();
  REQUIRE(h != nullptr);
  {
    herd::mcmc::RunProgress p(h, false, 0.25, 0.05);
    p.phase("sampling");
    p.detail("draws 256/1000");
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    p.finish();
  }
  const std::string again = text_of(h);
  INFO(again);
  CHECK_THAT(again, Catch::StartsWith("sampling: draws 256/1000\nsampling: draws 256/1000 (as of ") &&
                        Catch::EndsWith(" s ago; still running)\n"));
  // Quiet: phases timed, nothing printed (no terminal needed).
  herd::mcmc::RunProgress q(nullptr, true);
  q.phase("a");
  q.detail("x");
  q.finish();
  CHECK(q.phases().size() == 1);
}

// A run of a few seconds with its output piped showed one progress line (its first: the
// next was due 10 s later) and not its final counts.
TEST_CASE("RunProgress: a log shows every further tenth of a phase once 1 s passed, and the phase's last progress",
          "[mcmc][progress]") {
  std::FILE* f = std::tmpfile();
  REQUIRE(f != nullptr);
  {
    herd::mcmc::RunProgress p(f, false);  // the default periods: 0.25 s on a terminal, 10 s in a log
    REQUIRE_FALSE(p.tty());
    p.phase("sampling");
    p.detail("steps 0", 0.0);   // the phase's first progress: at once
    p.detail("steps 5", 0.05);  // less than a tenth more: held back
    std::this_thread::sleep_for(std::chrono::milliseconds(1100));
    p.detail("steps 16", 0.16);  // a tenth more, 1 s after the last line: shown
    p.detail("steps 20", 0.20);  // less than a tenth more than the last line shown: held back
    p.phase("post-processing");  // ... but it was the phase's last progress: shown now
    p.detail("chain 1 of 2");    // no fraction: the first line only, then the last at the end
    p.detail("chain 2 of 2");
    p.finish();
  }
  std::rewind(f);
  std::string text;
  for (int c; (c = std::fgetc(f)) != EOF;) text += static_cast<char>(c);
  std::fclose(f);
  CHECK(text ==
        "sampling: steps 0\nsampling: steps 16\nsampling: steps 20\npost-processing: chain 1 of 2\n"
        "post-processing: chain 2 of 2\n");
  // A run that ends by an exception (the destructor, not finish) shows no last line: under
  // mpiexec a SIGTERM can leave stdout closed, and writing to it ended the rank (SIGPIPE)
  // before it printed why it stopped (kill_resume_sample.sh under mpiexec -n 2 failed).
  std::FILE* g = std::tmpfile();
  REQUIRE(g != nullptr);
  {
    herd::mcmc::RunProgress p(g, false);
    p.phase("sampling");
    p.detail("steps 0", 0.0);
    p.detail("steps 5", 0.05);  // held back, and not shown by the destructor
  }
  std::rewind(g);
  std::string unwound;
  for (int c; (c = std::fgetc(g)) != EOF;) unwound += static_cast<char>(c);
  std::fclose(g);
  CHECK(unwound == "sampling: steps 0\n");
}

TEST_CASE("RunProgress's phase table gives each phase's CPU time and the peak memory at its end", "[mcmc][progress]") {
  herd::mcmc::RunProgress p(nullptr, true);
  p.phase("small");
  p.phase("allocate and compute");
  // 256 MB touched page by page, then 0.2 s of CPU time (counted by the process's CPU clock,
  // so a busy machine only makes it last longer).
  std::vector<char> big(std::size_t{256} << 20);
  for (std::size_t i = 0; i < big.size(); i += 4096) big[i] = static_cast<char>(i / 4096);
  volatile char keep = big[big.size() - 4096];
  (void)keep;
  volatile double sink = 0.0;
  const std::clock_t start = std::clock();
  while (static_cast<double>(std::clock() - start) < 0.2 * CLOCKS_PER_SEC)
    for (int i = 0; i < 1000; ++i) sink = sink + std::sqrt(static_cast<double>(i));
  p.phase("after");
  p.finish();
  const auto costs = p.phase_costs();
  REQUIRE(costs.size() == 3);
  CHECK(costs[1].name == "allocate and compute");
  CHECK(costs[1].peak_rss_bytes >= (std::uint64_t{256} << 20));
  CHECK(costs[0].peak_rss_bytes < costs[1].peak_rss_bytes);
  CHECK(costs[1].cpu_seconds >= 0.19);
  CHECK(costs[1].cpu_seconds <= costs[1].seconds + 0.05);
  CHECK(costs[2].cpu_seconds < 0.1);
  const std::string table = p.phase_table();
  CHECK_THAT(table, Catch::Contains("peak memory") && Catch::Contains(" MB\n") && Catch::Contains("total"));
}

TEST_CASE("parallel: a run's post-processing diagnostics on several threads equal one thread's, bit for bit",
          "[mcmc][parallel]") {
  // Two chains (multi_chain on threads) of the 3-D banana: 3 quantities, each summarized whole
  // by one of the diagnostics threads, beside the thread that writes the draws.
  const fs::path dir = temp_dir("diag_threads");
  std::vector<std::vector<QuantitySummary>> summaries;
  // The last run: 2 threads past a diagnostics budget of 0 bytes, each quantity streamed from
  // the chains (its values read block by block, its ranks and z-scores out of core).
  const std::size_t saved_budget = herd::mcmc::diagnostics_rank_budget();
  for (std::size_t threads : {1, 2, 3, 4}) {
    const bool streamed = threads == 4;
    herd::mcmc::set_diagnostics_rank_budget(streamed ? 0 : saved_budget);
    summaries.push_back(run_banana("random_seed = 11\nchain_size = 4000\nchains_per_rank = 2\n",
                                   dir / ("t" + std::to_string(threads)) / "run", streamed ? 2 : threads)
                            .summary);
  }
  herd::mcmc::set_diagnostics_rank_budget(saved_budget);
  const auto bits = [](const std::vector<QuantitySummary>& v) {
    std::vector<std::uint64_t> b;
    for (const auto& q : v) {
      const std::vector<std::uint64_t> one = herd::mcmc::testing::summary_bits(q.stats);
      b.insert(b.end(), one.begin(), one.end());
    }
    return b;
  };
  REQUIRE(summaries[0].size() == 3);
  CHECK(summaries[0][0].stats.ess_bulk > 100);
  CHECK(bits(summaries[1]) == bits(summaries[0]));
  CHECK(bits(summaries[2]) == bits(summaries[0]));
  CHECK(bits(summaries[3]) == bits(summaries[0]));
  fs::remove_all(dir);
}

TEST_CASE("parallel: a streamed run's nested R-hat (superchains) equals the in-memory run's, bit for bit",
          "[mcmc][parallel]") {
  // 4 chains in 2 superchains of the 3-D banana, in memory on one thread and streamed past a
  // diagnostics budget of 0 bytes on 2 (nested_rhat of streamed views: each chain's moments
  // read from the chains block by block, never expanded): the .h5's nested R-hat and the
  // summary the same bits.
  const fs::path dir = temp_dir("nested_streamed");
  const std::size_t saved_budget = herd::mcmc::diagnostics_rank_budget();
  std::vector<std::vector<std::uint64_t>> nested, summary;
  for (const bool streamed : {false, true}) {
    herd::mcmc::set_diagnostics_rank_budget(streamed ? 0 : saved_budget);
    const std::string sub = streamed ? "s" : "m";
    const auto out = run_banana("random_seed = 13\nchain_size = 3000\nchains_per_rank = 4\nsuperchains = 2\n",
                                dir / sub / "run", streamed ? 2 : 1);
    std::vector<std::uint64_t> b;
    for (const auto& q : out.summary)
      for (double f : {q.stats.mean, q.stats.sd, q.stats.ess_bulk, q.stats.rhat, q.stats.mcse_q95})
        b.push_back(std::bit_cast<std::uint64_t>(f));
    summary.push_back(b);
    herd::io::H5File f = herd::io::H5File::open((dir / sub / "run.h5").string());
    b.clear();
    for (double v : f.open_group("diagnostics").read<double>("nested_rhat"))
      b.push_back(std::bit_cast<std::uint64_t>(v));
    nested.push_back(b);
  }
  herd::mcmc::set_diagnostics_rank_budget(saved_budget);
  REQUIRE(nested[0].size() == 3);
  CHECK(std::isfinite(std::bit_cast<double>(nested[0][0])));
  CHECK(nested[1] == nested[0]);
  CHECK(summary[1] == summary[0]);
  fs::remove_all(dir);
}

namespace {

/// Records the calls a sink gets that tell where a chain starts, in order: `resume_at`,
/// `begin`, then "write" once for the records.
struct StartRecorder final : ChainSink {
  std::vector<std::string> calls;
  std::uint64_t proposals = 0;
  std::int64_t records = -1;
  void resume_at(std::uint64_t p, std::int64_t r) override {
    calls.emplace_back("resume_at");
    proposals = p;
    records = r;
  }
  void begin(std::uint32_t, int) override { calls.emplace_back("begin"); }
  void write(const ChainRecord&) override {
    if (calls.empty() || calls.back() != "write") calls.emplace_back("write");
  }
};

}  // namespace

// A resumed multi_chain run's progress counted the earlier invocations' proposals as this
// process's and its records from 0 (a mean acceptance rate of 2e-7, a false low-acceptance
// warning and 2.4e7 steps/s): its chains never told the progress sink of the resume.
TEST_CASE("parallel: every resumable engine tells its sink where a resumed chain continues", "[mcmc][parallel]") {
  const fs::path dir = temp_dir("resume_at");
  DramOptions o = opts(1);
  o.chain_size = 3000;
  for (const char* engine : {"run_resumable", "run_fork_join", "run_multi_chain"}) {
    INFO(engine);
    const std::string name = engine;
    ResumableOptions f;
    f.chain_path = (dir / (name + ".chain")).string();
    f.checkpoint_path = (dir / (name + ".ckpt")).string();
    f.period_steps = 500;
    f.period_seconds = 0;
    herd::SelfCommunicator comm;
    auto run = [&](const PointLogDensity& ld, ChainSink& sink) {
      if (name == "run_resumable") {
        ResumableOptions g = f;
        g.tee = &sink;
        return run_resumable(o, ld, g).proposals_before;
      }
      if (name == "run_fork_join") return run_fork_join(o, ld, comm, sink, &f).proposals_before;
      return run_multi_chain(o, ld, false, comm, 1, 1, (dir / name).string(), f.period_steps, 0, false, &sink)
          .proposals_before;
    };
    long calls = 0;
    auto crashing = [&](const double* x, int d) {
      if (++calls > 2200) throw std::runtime_error("simulated crash");
      return banana(x, d);
    };
    StartRecorder first;
    CHECK_THROWS(run(crashing, first));
    CHECK(first.calls.front() == "begin");  // a fresh start: no resume_at
    StartRecorder again;
    const std::uint64_t before = run(banana, again);
    REQUIRE(before > 0);
    REQUIRE(again.calls.size() >= 3);
    CHECK(again.calls[0] == "resume_at");
    CHECK(again.calls[1] == "begin");
    CHECK(again.proposals == before);  // the checkpoint's proposal number
    CHECK(again.records > 0);
    CHECK(again.calls[2] == "write");
  }
  fs::remove_all(dir);
}

// The first terminal line after a resume divided the few steps made before it by the
// seconds since the sink was made, reading and checking the restart record included:
// 4.75e3 steps/s for a chain making 9.9e5 (a 70 MB record took 0.19 s to check).
TEST_CASE("parallel: the first progress line after a resume rates this process's steps over its sampling time",
          "[mcmc][parallel]") {
  const fs::path dir = temp_dir("progress_rate");
  SamplerSpecs specs;
  specs.chain_size = 100000;
  specs.progress_report_period = 1000;
  detail::ProgressSink p(specs, detail::TextFormat{});
  p.open((dir / "progress.txt").string());
  struct Line {
    std::uint64_t steps;
    std::int64_t accepted;
    double seconds;
    std::uint64_t new_steps;
  };
  std::vector<Line> lines;
  p.on_progress = [&](std::uint64_t steps, std::int64_t accepted, double seconds, std::uint64_t new_steps, double) {
    lines.push_back({steps, accepted, seconds, new_steps});
  };
  // Resumed at proposal 9500 after 900 records; the start-up (the restart record read and
  // checked) takes 0.3 s before the chain samples.
  p.resume_at(9500, 900);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  // Started before `begin`, so that the sink's sampling time lies within it whatever the
  // scheduler does between the two (started after it, a preemption there longer than the
  // loop's last 20 writes made the check fail on a loaded machine).
  const herd::Timer sampling;
  p.begin(0, 1);
  double x = 0.0;
  ChainRecord r;
  r.point = &x;
  r.ndim = 1;
  r.weight = 10;
  for (std::uint64_t step = 9500; step < 10200; step += 10) {
    r.step = step;
    p.write(r);
  }
  const double sampled = sampling.seconds();
  p.close();
  REQUIRE(!lines.empty());
  const Line& first = lines.front();
  CHECK(first.steps == 10000);  // the record at 9990 with weight 10 reaches the period
  CHECK(first.accepted == 950);
  CHECK(first.new_steps == 500);
  // This process's sampling time only: at most what the loop took, not the 0.3 s before.
  CHECK(first.seconds >= 0.0);
  CHECK(first.seconds <= sampled);
  // The progress file's times count from the same start (they counted from the sink's
  // making: the first row said 0.3 s since the start and since the last report).
  const auto rows = [&] {
    std::ifstream in(dir / "progress.txt");
    std::vector<std::vector<double>> out;
    std::string line;
    std::getline(in, line);  // the header
    while (std::getline(in, line)) {
      std::vector<double> v;
      std::istringstream row(line);
      for (std::string cell; std::getline(row, cell, ',');) v.push_back(std::stod(cell));
      out.push_back(v);
    }
    return out;
  }();
  REQUIRE(rows.size() == 1);
  REQUIRE(rows[0].size() == 7);
  CHECK(rows[0][0] == 10000);
  CHECK(rows[0][4] >= 0.0);  // TimeElapsedSinceLastReportInSeconds
  CHECK(rows[0][4] <= sampled);
  CHECK(rows[0][5] == rows[0][4]);  // TimeElapsedSinceStartInSeconds: the first row's are equal
  fs::remove_all(dir);
}

// A multi_chain run resumed after its first chain was complete (the others not) printed
// "steps 1588489  accepted 0/300000  acceptance 0.000  3.64e+07 steps/s": the progress sink,
// which that chain never began in this process, still wrote its final row.
TEST_CASE("parallel: a progress sink whose chain never began in this process writes no final row", "[mcmc][parallel]") {
  const fs::path dir = temp_dir("progress_not_begun");
  SamplerSpecs specs;
  specs.chain_size = 1000;
  specs.progress_report_period = 100;
  detail::ProgressSink p(specs, detail::TextFormat{});
  p.open((dir / "progress.txt").string());
  int lines = 0;
  p.on_progress = [&](std::uint64_t, std::int64_t, double, std::uint64_t, double) { ++lines; };
  p.finish(5000);
  p.close();
  CHECK(lines == 0);
  std::ifstream in(dir / "progress.txt");
  std::string header, row;
  std::getline(in, header);
  CHECK_FALSE(static_cast<bool>(std::getline(in, row)));  // the header only
  fs::remove_all(dir);
}

namespace {

/// A sink whose `begin` takes 0.3 s, as a text chain's does when it truncates an earlier
/// run's large file. `since_begun` is restarted as `begin` returns.
struct SlowBegin final : ChainSink {
  void begin(std::uint32_t, int) override {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    since_begun.reset();
  }
  void write(const ChainRecord&) override {}
  herd::Timer since_begun;
};

}  // namespace

// After a restart from a record without a checkpoint, the first line said 2.3e4 steps/s for a
// chain making 6e5: the text chain's begin, which truncated the earlier run's 25 MB chain
// file, came after the progress sink's and counted as sampling time.
TEST_CASE("parallel: the text chain's start-up is not counted as the progress sink's sampling time",
          "[mcmc][parallel]") {
  const fs::path dir = temp_dir("progress_text_order");
  SamplerSpecs specs;
  specs.chain_size = 100000;
  specs.progress_report_period = 1000;
  detail::ProgressSink p(specs, detail::TextFormat{});
  p.open((dir / "progress.txt").string());
  double seconds = -1.0;
  p.on_progress = [&](std::uint64_t, std::int64_t, double s, std::uint64_t, double) {
    if (seconds < 0) seconds = s;
  };
  SlowBegin text;
  const std::unique_ptr<FanSink> both = detail::progress_and_text(p, text);
  const herd::Timer since_begin;
  both->begin(0, 1);
  const double text_begin = since_begin.seconds();
  REQUIRE(text_begin >= 0.29);
  double x = 0.0;
  ChainRecord r;
  r.point = &x;
  r.ndim = 1;
  r.weight = 10;
  for (std::uint64_t step = 0; step < 1200; step += 10) {
    r.step = step;
    both->write(r);
  }
  // From the end of the text chain's begin to the end of the loop: the progress sink's
  // sampling time lies within it when its clock starts after the text chain's begin, whatever
  // the scheduler does (a timer started after `both->begin` returned missed a preemption
  // between the sink's begin and it, and failed on a loaded machine); it includes the 0.3 s
  // when the clock starts first.
  const double sampled = text.since_begun.seconds();
  p.close();
  REQUIRE(seconds >= 0.0);
  CHECK(seconds <= sampled);  // not the 0.3 s of the text chain's begin
  fs::remove_all(dir);
}

// The batched run's memory estimate counted one thread's diagnostics scratch while the
// quantities are summarized on every core at once, each thread holding one's scratch.
TEST_CASE("sampler_memory_need counts the diagnostics scratch of every diagnostics thread", "[mcmc]") {
  SamplerSpecs s;
  s.device = "cpu_batched";
  s.chains_per_rank = 64;
  s.chain_size = 1000;
  s.thin = 1;
  const int d = 10;
  const double per_thread = 64.0 * 1000.0 * static_cast<double>(kDiagnosticsScratchBytes);
  const double one = sampler_memory_need(s, d, 1, 1);
  CHECK(sampler_memory_need(s, d, 1, 4) - one == Approx(3 * per_thread));
  // At most one thread per quantity; 0: one per core.
  CHECK(sampler_memory_need(s, d, 1, 64) - one == Approx(9 * per_thread));
  CHECK(diagnostics_threads_used(64, 10) == 10);
  CHECK(diagnostics_threads_used(3, 10) == 3);
  CHECK(diagnostics_threads_used(0, 1000) == std::max(1u, std::thread::hardware_concurrency()));
  CHECK(diagnostics_threads_used(0, 0) == 1);
  // The serial kernel's estimate does not depend on it.
  s.device = "cpu";
  CHECK(sampler_memory_need(s, d, 1, 1) == sampler_memory_need(s, d, 1, 8));
  // The refinement's autocorrelation estimators hold a verbose series: 40 bytes per draw, 4
  // draws per state assumed; batch means (any qualifiers) and no refinement add nothing.
  const double base = sampler_memory_need(s, d, 1, 1);
  s.sample_refinement_method = "max_cumsum_autocorr-median";
  CHECK(sampler_memory_need(s, d, 1, 1) - base == Approx(160.0 * static_cast<double>(s.chain_size)));
  s.sample_refinement_method = "CutOffAutoCorr";
  CHECK(sampler_memory_need(s, d, 1, 1) - base == Approx(160.0 * static_cast<double>(s.chain_size)));
  s.sample_refinement_count = 0;
  CHECK(sampler_memory_need(s, d, 1, 1) == base);
  s.sample_refinement_count = 20;
  s.sample_refinement_method = "BatchMeans-max";
  CHECK(sampler_memory_need(s, d, 1, 1) == base);
}

// The batched estimate was 7.5 times the peak for 25000 chains x 1000 draws (it counted every
// draw's diagnostics scratch, while past the diagnostics budget they are summarized out of
// core) and half of it for 16777216 chains x 1 draw (it counted 104 bytes per chain, where the
// kernel's state, the draw store's and HDF5's bookkeeping and the block of draws hold about
// 540). Hand-computed values of the model (docs/batched.md "What max_memory counts").
TEST_CASE("sampler_memory_need of a batched run: hand-computed values of its model", "[mcmc]") {
  const std::size_t budget = diagnostics_rank_budget();
  set_diagnostics_rank_budget(std::size_t{48} << 20);  // the default (the environment may set another)
  const double program = static_cast<double>(kBatchedProgramBytes), half_budget = 25165824.0;
  SamplerSpecs s;
  s.device = "cpu_batched";
  s.warmup = 0;
  s.thin = 1;
  // d = 3, pooled, no delayed rejection, the posterior group: per chain 286 bytes of kernel
  // state (8 (3 x 4 + 4) + 6 + the 56-byte cursor + 16 + 32 + 2 start points of 24), 168 of
  // bookkeeping (the store's 8 (3 + 2), HDF5's 80 + 12 x 4 datasets) and one draw in the
  // block (50 + 16): 520 bytes; the summaries in memory (36 bytes per draw on one thread).
  s.chains_per_rank = 1000000;
  s.chain_size = 1;
  CHECK(sampler_memory_need(s, 3, 1, 1) == program + 520e6);
  // 25000 x 1000: the block of 256 draws (66 bytes each) outweighs the summaries, which are
  // out of core (half the budget and 4 bytes per draw: 125 MB).
  s.chains_per_rank = 25000;
  s.chain_size = 1000;
  CHECK(sampler_memory_need(s, 3, 1, 1) == program + 25000.0 * 454 + 256.0 * 25000 * 66);
  CHECK(sampler_memory_need(s, 3, 1, 1) < 1024.0 * 1024 * 1024);  // max_memory = 1GiB runs it (peak 460 MB)
  // 1000 x 20000 on 2 threads: the summaries out of core outweigh the block.
  s.chains_per_rank = 1000;
  s.chain_size = 20000;
  CHECK(sampler_memory_need(s, 3, 1, 2) == program + 1000.0 * 454 + 2 * half_budget + 4 * 2e7);
  // Per-chain adaptation with a warm-up, 1 delayed-rejection stage, d = 2, thin 2, no posterior
  // group, 2 processes of 10 chains: per own chain 278 + adaptation 64 + 72 + factor 32; per
  // chain 32; the blocks of 2 draws: 2 x (10 x 42 + 20 x 42 gathered + 20 x 8); the summaries
  // of 40 draws in memory on 1 thread (36 each).
  s.chains_per_rank = 10;
  s.chain_size = 4;
  s.thin = 2;
  s.warmup = 100;
  s.batched_adaptation = "per_chain";
  s.delayed_rejection_count = 1;
  s.h5_posterior = "compact";
  CHECK(sampler_memory_need(s, 2, 2, 1) == program + 10.0 * 446 + 20.0 * 32 + 2.0 * (420 + 840 + 160));
  s.chain_size = 2000;  // 1000 draws: the summaries (36 x 20000) outweigh the blocks
  CHECK(sampler_memory_need(s, 2, 2, 1) == program + 10.0 * 446 + 20.0 * 32 + 36.0 * 20000);
  set_diagnostics_rank_budget(budget);
}

TEST_CASE("chain_rows: ParaDRAM's compact and verbose rows, padded and not", "[mcmc]") {
  herd::mcmc::SamplerSpecs specs;
  const double point[3] = {1.25, -0.0625, 3e-7};
  herd::mcmc::ChainRecord r;
  r.step = 8;
  r.weight = 3;
  r.log_density = -2.5;
  r.dr_stage = 2;  // the first delayed-rejection stage: ParaDRAM's DelayedRejectionStage 1
  r.adapt_measure = 0.125;
  r.point = point;
  r.ndim = 3;
  for (const int width : {0, 16}) {
    herd::mcmc::detail::TextFormat tf;
    tf.precision = 5;
    tf.width = width;
    auto pad = [&](const std::string& s) {
      return std::string(static_cast<std::size_t>(std::max<int>(0, width - static_cast<int>(s.size()))), ' ') + s;
    };
    auto real = [&](double v) { return pad(fmt::format("{:.4e}", v)); };
    // Record 4 of the chain (4 acceptances in 8 proposals); the running burn-in has seen only
    // this record: row 5, 1-based.
    const std::string body = real(0.5) + "," + real(0.125) + "," + pad("5") + ",";
    const std::string tail = "," + real(-2.5) + "," + real(1.25) + "," + real(-0.0625) + "," + real(3e-7) + "\n";
    specs.chain_file_format = "compact";
    herd::mcmc::detail::RunningBurnin b1;
    CHECK(herd::mcmc::detail::chain_rows(specs, tf, b1, 4, r, 7) ==
          pad("7") + "," + pad("1") + "," + body + pad("3") + tail);
    specs.chain_file_format = "verbose";
    herd::mcmc::detail::RunningBurnin b2;
    const std::string row = pad("7") + "," + pad("1") + "," + body + pad("1") + tail;
    std::string out = "kept";
    herd::mcmc::detail::append_chain_rows(out, specs, tf, b2, 4, r, 7);
    CHECK(out == "kept" + row + row + row);
  }
}
