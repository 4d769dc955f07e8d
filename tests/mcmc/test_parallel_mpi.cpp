// MPI tests of parallel.hpp, run by CTest under mpiexec -n 2 and -n 3:
// multi-chain layouts give bit-identical chains; fork-join equals the serial chain;
// different inputs on different ranks are detected.
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "herd/core/error.hpp"
#include "herd/core/mpi_communicator.hpp"
#include "herd/mcmc/parallel.hpp"

using namespace herd::mcmc;

namespace {

double banana(const double* x, int d) {
  double q = 0.0;
  for (int i = 0; i < d; ++i) q += x[i] * x[i];
  const double b = x[1] + 0.1 * x[0] * x[0];
  return -0.5 * (q - x[1] * x[1] + b * b);
}

DramOptions opts(int dr) {
  DramOptions o;
  o.start_point = {0.3, -0.2, 0.1};
  o.chain_size = 300;
  o.seed = 11;
  o.delayed_rejection_count = dr;
  o.domain_lower = {-4, -6, -4};
  o.domain_upper = {4, 3, 4};
  return o;
}

bool same_chain(const MemoryChainSink& a, const MemoryChainSink& b) {
  return a.chain_id == b.chain_id && a.step == b.step && a.weight == b.weight && a.log_density == b.log_density &&
         a.dr_stage == b.dr_stage && a.accept_prob == b.accept_prob && a.adapt_measure == b.adapt_measure &&
         a.points == b.points;
}

}  // namespace

TEST_CASE("parallel MPI: multi-chain is bit-identical across rank/thread layouts", "[mcmc][mpi]") {
  herd::MpiCommunicator comm;
  const int n = comm.size();
  for (int dr : {0, 1}) {
    const DramOptions o = opts(dr);
    const MultiChainRun m = run_multi_chain(o, banana, true, comm, 2, 2);
    if (comm.rank() == 0) {
      // All 2n chains as one process running them serially.
      std::vector<MemoryChainSink> ref(static_cast<std::size_t>(2 * n));
      std::vector<ChainSink*> ptr;
      ptr.reserve(ref.size());
      for (auto& s : ref) ptr.push_back(&s);
      const std::vector<DramResult> rr = DramSampler(o, banana).run_chains(ptr, 1);
      REQUIRE(m.chains.size() == ref.size());
      for (std::size_t i = 0; i < ref.size(); ++i) {
        CHECK(same_chain(m.chains[i], ref[i]));
        CHECK(m.results[i].proposals == rr[i].proposals);
        CHECK(m.results[i].burnin == rr[i].burnin);
        // The whole result comes over, not only the counters: the report draws every
        // chain's final proposal covariance (rank 0 had only its own chains').
        CHECK(m.results[i].chain_id == rr[i].chain_id);
        CHECK(m.results[i].evaluations == rr[i].evaluations);
        CHECK(m.results[i].stage_accepted == rr[i].stage_accepted);
        CHECK(m.results[i].chol_failures == rr[i].chol_failures);
        CHECK(m.results[i].adaptive_updates_deferred == rr[i].adaptive_updates_deferred);
        CHECK(m.results[i].proposal_cov.size() == 9);
        CHECK(m.results[i].proposal_cov == rr[i].proposal_cov);
        CHECK(m.results[i].adapted_cov == rr[i].adapted_cov);
      }
    } else {
      CHECK(m.chains.size() == 2);
    }
  }
}

TEST_CASE("parallel MPI: fork-join is bit-identical to the serial chain", "[mcmc][mpi]") {
  herd::MpiCommunicator comm;
  for (int dr : {0, 2}) {
    DramOptions o = opts(dr);
    o.target_acceptance_rate = {0.1, 0.2};
    MemoryChainSink serial, fj;
    const DramResult rs = DramSampler(o, banana).run(serial);
    const ForkJoinRun r = run_fork_join(o, banana, comm, fj);
    CHECK(same_chain(serial, fj));
    CHECK(r.result.proposals == rs.proposals);
    CHECK(r.result.evaluations == rs.evaluations);
    CHECK(r.rounds < rs.proposals);
    std::int64_t total = 0;
    for (auto v : r.rank_proposals) total += v;
    CHECK(total == rs.proposals);
  }
}

TEST_CASE("parallel MPI: resumable fork-join resumes a serial checkpoint and writes the serial record", "[mcmc][mpi]") {
  herd::MpiCommunicator comm;
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("herd_test_fj_resume_np" + std::to_string(comm.size()));
  DramOptions o = opts(1);
  o.chain_size = 600;
  auto files = [&dir](const char* name) {
    ResumableOptions f;
    f.chain_path = (dir / (std::string(name) + ".chain")).string();
    f.checkpoint_path = (dir / (std::string(name) + ".ckpt")).string();
    f.period_steps = 50;
    f.period_seconds = 0.0;
    return f;
  };
  const ResumableOptions ref = files("ref"), x = files("x");
  if (comm.rank() == 0) {
    fs::remove_all(dir);
    fs::create_directories(dir);
    run_resumable(o, banana, ref);
    // A serial run that stops (the log density throws) after its checkpoints at 50, 100, ...
    int calls = 0;
    auto crashing = [&calls](const double* p, int d) -> double {
      if (++calls > 400) throw std::runtime_error("stop");
      return banana(p, d);
    };
    CHECK_THROWS(run_resumable(o, crashing, x));
  }
  comm.barrier();
  NullChainSink none;
  const ForkJoinRun r = run_fork_join(o, banana, comm, none, &x);
  CHECK(r.resumed);
  CHECK_FALSE(r.already_complete);
  const ForkJoinRun again = run_fork_join(o, banana, comm, none, &x);
  CHECK(again.already_complete);
  CHECK(again.result.proposals == r.result.proposals);
  CHECK(again.result.burnin == r.result.burnin);
  if (comm.rank() == 0) {
    CHECK(r.checkpoints > 1);
    const auto read = [](const fs::path& p) {
      std::ifstream in(p, std::ios::binary);
      return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    };
    const std::string a = read(dir / "ref.chain");
    CHECK(a.size() > 1000);
    CHECK(a == read(dir / "x.chain"));
    fs::remove_all(dir);
  }
}

TEST_CASE("parallel MPI: different inputs on different ranks are detected", "[mcmc][mpi]") {
  herd::MpiCommunicator comm;
  DramOptions o = opts(0);
  CHECK_NOTHROW(check_same_input(comm, dram_options_hash(o)));
  if (comm.rank() == comm.size() - 1) o.seed = 99;
  CHECK_THROWS_AS(check_same_input(comm, dram_options_hash(o)), herd::InputError);
}

TEST_CASE("parallel MPI: fork-join ends on every rank when one rank's log density throws", "[mcmc][mpi]") {
  herd::MpiCommunicator comm;
  const bool bad_rank = comm.rank() == comm.size() - 1;
  long calls = 0;
  auto f = [&](const double* x, int d) {
    if (bad_rank && ++calls > 50) throw std::runtime_error("injected");
    return banana(x, d);
  };
  DramOptions o = opts(0);
  NullChainSink sink;
  try {
    run_fork_join(o, f, comm, sink);
    FAIL("no exception");
  } catch (const herd::Error& e) {
    const std::string what = e.what();
    INFO(what);
    CHECK(what.find("rank " + std::to_string(comm.size() - 1)) != std::string::npos);
    if (bad_rank) CHECK(what.find("injected") != std::string::npos);
  }
  comm.barrier();
}
