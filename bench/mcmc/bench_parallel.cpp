// Parallel DRAM benchmarks. Run under `mpiexec -n N bench_parallel <mode>`.
//   multi [chain_size=200000]: multi_chain throughput on the 10-D Gaussian (AR(1) 0.5
//     correlation), one chain per rank, against the ideal N x (one chain alone, measured
//     first in the same run).
//   forkjoin [chain_size=1500] [ms=1]: single_chain (fork-join) speedup for a log density
//     of about `ms` milliseconds (busy wait), against the serial chain measured first in
//     the same run (on rank 0 while the other ranks wait) and against ParaDRAM's
//     cyclic-geometric prediction (Shahmoradi & Bagheri 2020), both of the speedup (with the
//     measured communication time) and of the proposals decided per round (load-independent).
//   checkpoint [chain_size=2000000] [period=5s]: checkpoint cost as a share of run time
//     (serial; the chain file and state written every `period` proposals, or seconds with
//     an "s" suffix; default: the default period of `ResumableOptions`), against the same
//     chain streamed to a binary chain file without checkpoints.
// Prints one JSON object on rank 0.
#include <unistd.h>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "herd/core/mpi_communicator.hpp"
#include "herd/core/timer.hpp"
#include "herd/mcmc/parallel.hpp"

using namespace herd::mcmc;

namespace {

double gauss10(const double* x, int d) {
  // AR(1) precision (tridiagonal) with rho = 0.5.
  const double rho = 0.5, c = 1.0 / (1.0 - rho * rho);
  double q = 0.0;
  for (int i = 0; i < d; ++i) {
    const double diag = (i == 0 || i == d - 1) ? 1.0 : 1.0 + rho * rho;
    q += c * diag * x[i] * x[i];
    if (i + 1 < d) q -= 2.0 * c * rho * x[i] * x[i + 1];
  }
  return -0.5 * q;
}

double g_ms = 1.0;
double slow(const double* x, int d) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto dt = std::chrono::duration<double, std::milli>(g_ms);
  while (std::chrono::steady_clock::now() - t0 < dt) {
  }
  return gauss10(x, d);
}

DramOptions base(std::int64_t n) {
  DramOptions o;
  o.start_point.assign(10, 0.5);
  o.chain_size = n;
  o.seed = 5;
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "multi";
  auto comm = herd::make_world_communicator();
  const int rank = comm->rank(), size = comm->size();
  abort_all_on_error(*comm, [&] {
    check_launch(size);
    if (mode == "multi") {
      const std::int64_t n = argc > 2 ? std::atoll(argv[2]) : 200000;
      DramOptions o = base(n);
      double alone = 0.0;
      if (rank == 0) {
        NullChainSink s;
        const DramResult r = DramSampler(o, gauss10).run(s);
        alone = static_cast<double>(r.proposals) / r.seconds;
      }
      comm->barrier();
      const MultiChainRun m = run_multi_chain(o, gauss10, true, *comm, 1, 1);
      const double secs = comm->allreduce_value(m.seconds, herd::ReduceOp::kMax);
      if (rank == 0) {
        double steps = 0;
        for (const auto& r : m.results) steps += static_cast<double>(r.proposals);
        const double rate = steps / secs;
        std::printf(
            "{\"mode\": \"multi\", \"ranks\": %d, \"steps_per_s\": %.4g, \"one_chain_alone_steps_per_s\": %.4g, "
            "\"ideal_steps_per_s\": %.4g, \"efficiency\": %.3f}\n",
            size, rate, alone, alone * size, rate / (alone * size));
      }
    } else if (mode == "forkjoin") {
      const std::int64_t n = argc > 2 ? std::atoll(argv[2]) : 1500;
      g_ms = argc > 3 ? std::atof(argv[3]) : 1.0;
      DramOptions o = base(n);
      double serial = 0.0;
      if (rank == 0) {
        NullChainSink s;
        serial = DramSampler(o, slow).run(s).seconds;
      }
      comm->barrier();
      NullChainSink s;
      const ForkJoinRun r = run_fork_join(o, slow, *comm, s);
      if (rank == 0) {
        std::printf(
            "{\"mode\": \"forkjoin\", \"ranks\": %d, \"eval_ms\": %.3g, \"proposals\": %lld, \"rounds\": %lld, "
            "\"acceptance_rate\": %.4f, \"serial_s\": %.4g, \"forkjoin_s\": %.4g, \"speedup\": %.3f, "
            "\"predicted_speedup\": %.3f, \"proposals_per_round\": %.4f, "
            "\"predicted_proposals_per_round\": %.4f, \"comm_ms_per_round_rank0\": %.4g, \"rank_accepted\": [",
            size, g_ms, static_cast<long long>(r.result.proposals), static_cast<long long>(r.rounds),
            r.result.acceptance_rate, serial, r.seconds, serial / r.seconds, r.predicted_speedup,
            static_cast<double>(r.result.proposals) / static_cast<double>(std::max<std::int64_t>(1, r.rounds)),
            fork_join_predicted_speedup(r.result.acceptance_rate, size, 1.0, 0.0),
            1e3 * r.comm_seconds / static_cast<double>(std::max<std::int64_t>(1, r.rounds)));
        for (int i = 0; i < size; ++i)
          std::printf("%s%lld", i ? ", " : "", static_cast<long long>(r.rank_accepted[static_cast<std::size_t>(i)]));
        std::printf("]}\n");
      }
    } else if (mode == "checkpoint") {
      const std::int64_t n = argc > 2 ? std::atoll(argv[2]) : 2000000;
      const std::string ps = argc > 3 ? argv[3] : "";
      ResumableOptions f;
      if (!ps.empty() && ps.back() == 's') {
        f.period_seconds = std::atof(ps.c_str());
      } else if (!ps.empty()) {
        f.period_steps = std::atoll(ps.c_str());
        f.period_seconds = 0.0;
      }
      if (rank == 0) {
        DramOptions o = base(n);
        const auto dir = std::filesystem::temp_directory_path() / ("herd_bench_ckpt_" + std::to_string(::getpid()));
        std::filesystem::create_directories(dir);
        double plain = 0.0;
        {
          BinaryChainSink s((dir / "plain.bin").string());
          plain = DramSampler(o, gauss10).run(s).seconds;
        }
        f.chain_path = (dir / "c.chain").string();
        f.checkpoint_path = (dir / "c.ckpt").string();
        herd::Timer t;
        const ResumableRun r = run_resumable(o, gauss10, f);
        const double total = t.seconds();
        std::filesystem::remove_all(dir);
        std::printf(
            "{\"mode\": \"checkpoint\", \"proposals\": %lld, \"period_steps\": %lld, \"period_s\": %g, "
            "\"checkpoints\": %lld, "
            "\"plain_s\": %.4g, \"resumable_s\": %.4g, \"checkpoint_s\": %.4g, \"checkpoint_share\": %.4f, "
            "\"overhead_vs_plain\": %.4f}\n",
            static_cast<long long>(r.result.proposals), static_cast<long long>(f.period_steps), f.period_seconds,
            static_cast<long long>(r.checkpoints), plain, total, r.checkpoint_seconds, r.checkpoint_seconds / total,
            total / plain - 1.0);
      }
    }
  });
  comm.reset();
  herd::MpiEnvironment::finalize();
  return 0;
}
