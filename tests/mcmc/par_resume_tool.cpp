// Helper of the kill-and-resume test: runs chains_per_rank chains per rank of
// a 10-D Gaussian with a slowed log density, resumably (checkpoints every period
// proposals) under <dir>/run_<id>.chain|.ckpt; rank 0 writes <dir>/done at the end.
// Usage: par_resume_tool <dir> <chains_per_rank> <period_steps> <chain_size>
// With HERD_TEST_FAIL_AFTER=n in the environment the log density of the last rank throws
// after n calls (the fault test: every rank must end, naming the failed rank).
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <stdexcept>
#include <string>

#include "herd/core/mpi_communicator.hpp"
#include "herd/mcmc/parallel.hpp"

namespace {
double slow_gauss(const double* x, int d) {
  // About 20 microseconds: the run lasts long enough to be killed at random moments.
  const auto t0 = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - t0 < std::chrono::microseconds(20)) {
  }
  double q = 0.0;
  for (int i = 0; i < d; ++i) q += x[i] * x[i] / (1.0 + i);
  return -0.5 * q;
}

int run_main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s dir chains_per_rank period_steps chain_size\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  auto comm = herd::make_world_communicator();
  int rc = 0;
  const char* fail = std::getenv("HERD_TEST_FAIL_AFTER");
  const long fail_after = (fail && comm->rank() == comm->size() - 1) ? std::atol(fail) : -1;
  std::atomic<long> calls{0};
  auto density = [&](const double* x, int d) {
    if (fail_after >= 0 && ++calls > fail_after) throw std::runtime_error("injected failure");
    return slow_gauss(x, d);
  };
  try {
    herd::mcmc::abort_all_on_error(*comm, [&] {
      herd::mcmc::check_launch(comm->size());
      herd::mcmc::DramOptions o;
      o.start_point.assign(10, 1.0);
      o.chain_size = std::atoll(argv[4]);
      o.seed = 2026;
      o.delayed_rejection_count = 1;
      herd::mcmc::check_same_input(*comm, herd::mcmc::dram_options_hash(o));
      herd::mcmc::run_multi_chain(o, density, true, *comm, std::atoi(argv[2]), 0, dir + "/run", std::atoll(argv[3]));
      comm->barrier();
      if (comm->rank() == 0) std::ofstream(dir + "/done") << "done\n";
    });
  } catch (const std::exception& e) {  // one rank: abort_all_on_error rethrows
    std::fprintf(stderr, "herd: rank 0 of 1 failed: %s\n", e.what());
    rc = 1;
  }
  comm.reset();
  herd::MpiEnvironment::finalize();
  return rc;
}
}  // namespace

int main(int argc, char** argv) {
  // What escapes run_main (MPI could not start, say) is one error line and exit status 1, not
  // std::terminate.
  try {
    return run_main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "par_resume_tool: error: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "par_resume_tool: error: unknown exception\n");
  }
  return 1;
}
