// Training throughput under mpiexec -n 1 and -n 2: PPO on CartPole-v1 with RL
// Zoo's settings (8 envs x 32 steps, 20 epochs, minibatch 256), data-parallel over the
// ranks. Two scalings, each measured with 1 and 2 ranks in the same run:
//   strong: 8 envs in all (2 ranks x 4), the same union minibatch: the same learning
//           problem, time per env step;
//   weak:   8 envs per rank (minibatch 256 per rank).
// Prints one JSON document: env steps/s over all ranks (median of the repeats) and the
// ratio 2 ranks / 1 rank.
//
// With --config FILE (a herd-rl configuration, e.g. examples/rl/cartpole_ppo_1024.toml),
// weak scaling of that configuration instead: every rank runs the file's envs, and the
// minibatches (num_minibatches) grow with the ranks, so each rank's share of a minibatch,
// and the compute between two gradient all-reduces, stays that of one rank. Rank and
// iteration counts as above; also prints the seconds per synchronisation point.
//
// Usage: bench_rl_train [--iterations N] [--repeats R] [--mpiexec EXE] [--config FILE]
// (internally it runs `EXE -n <ranks> bench_rl_train --worker ...` for each measurement).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "herd/core/mpi_communicator.hpp"
#include "herd/rl/trainer.hpp"

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// One measurement on the ranks of this job: prints "steps_per_s <value>" on rank 0.
int worker(int envs_per_rank, int minibatch, int iterations) {
  herd::MpiCommunicator comm;
  const int n = comm.size();
  std::string text;
  const auto c = herd::rl::resolve_train_config(
      herd::io::Config("<bench>"),
      {"sampler.num_envs=" + std::to_string(envs_per_rank), "algo.minibatch_size=" + std::to_string(minibatch),
       "total_steps=" + std::to_string(static_cast<long long>(iterations + 2) * n * envs_per_rank * 32),
       "output_prefix=bench_rl_train_tmp"},
      &text, n);
  herd::rl::Trainer t(c, text, &comm);
  t.iterate();  // warm-up
  t.iterate();
  comm.barrier();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iterations; ++i) t.iterate();
  comm.barrier();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (comm.rank() == 0)
    std::printf("steps_per_s %.1f\n", static_cast<double>(iterations) * c.steps_per_iteration() / s);
  return 0;
}

// One measurement of a configuration file on the ranks of this job (weak scaling).
int worker_config(const std::string& file, int iterations) {
  herd::MpiCommunicator comm;
  std::string text;
  auto c = herd::rl::load_train_config(file, {"output_prefix=bench_rl_train_tmp", "total_steps=1000000000"}, &text,
                                       comm.size());
  herd::rl::Trainer t(c, text, &comm);
  t.iterate();  // warm-up
  comm.barrier();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iterations; ++i) t.iterate();
  comm.barrier();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (comm.rank() == 0)
    std::printf("steps_per_s %.1f\nsyncs_per_iteration %d\n",
                static_cast<double>(iterations) * c.steps_per_iteration() / s,
                static_cast<int>(c.ppo.epochs *
                                 (c.ppo.minibatch_size > 0
                                      ? (c.steps_per_iteration() + c.ppo.minibatch_size - 1) / c.ppo.minibatch_size
                                      : 1)));
  return 0;
}

double measure(const std::string& mpiexec, const std::string& self, int ranks, int envs, int minibatch, int iterations,
               const std::string& config = "") {
  const std::string cmd =
      config.empty()
          ? fmt::format("'{}' -n {} '{}' --worker {} {} {}", mpiexec, ranks, self, envs, minibatch, iterations)
          : fmt::format("'{}' -n {} '{}' --worker-config '{}' {}", mpiexec, ranks, self, config, iterations);
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return 0;
  char line[256];
  double v = 0;
  while (std::fgets(line, sizeof line, p))
    if (std::strncmp(line, "steps_per_s ", 12) == 0) v = std::atof(line + 12);
  pclose(p);
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 5 && !std::strcmp(argv[1], "--worker"))
    return worker(std::atoi(argv[2]), std::atoi(argv[3]), std::atoi(argv[4]));
  if (argc == 4 && !std::strcmp(argv[1], "--worker-config")) return worker_config(argv[2], std::atoi(argv[3]));
  int iterations = 40, repeats = 3;
  std::string mpiexec = HERD_BENCH_MPIEXEC, config;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--iterations")) iterations = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--repeats")) repeats = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--mpiexec")) mpiexec = argv[i + 1];
    else if (!std::strcmp(argv[i], "--config")) config = argv[i + 1];
  }
  const std::string self = argv[0];
  if (!config.empty()) {
    // Interleaved: 1 rank, 2 ranks, 1 rank, ... so load changes hit both.
    std::vector<double> r1, r2;
    for (int k = 0; k < repeats; ++k) {
      r1.push_back(measure(mpiexec, self, 1, 0, 0, iterations, config));
      r2.push_back(measure(mpiexec, self, 2, 0, 0, iterations, config));
      std::fprintf(stderr, "repeat %d: 1 rank %.0f, 2 ranks %.0f env steps/s\n", k + 1, r1.back(), r2.back());
    }
    std::printf(
        "{\n  \"benchmark\": \"weak scaling of %s (env steps/s, all ranks)\",\n  \"iterations\": %d,\n"
        "  \"one_rank\": [%.0f, %.0f, %.0f],\n  \"two_ranks\": [%.0f, %.0f, %.0f],\n"
        "  \"ratio_of_medians\": %.3f\n}\n",
        config.c_str(), iterations, *std::min_element(r1.begin(), r1.end()), median(r1),
        *std::max_element(r1.begin(), r1.end()), *std::min_element(r2.begin(), r2.end()), median(r2),
        *std::max_element(r2.begin(), r2.end()), median(r2) / median(r1));
    return 0;
  }
  std::string rows;
  for (const std::string scaling : {"strong", "weak"}) {
    double one = 0;
    for (int ranks : {1, 2}) {
      const int envs = scaling == "strong" ? 8 / ranks : 8;
      const int mb = scaling == "strong" ? 256 : 256 * ranks;
      std::vector<double> r;
      r.reserve(static_cast<std::size_t>(std::max(repeats, 0)));
      for (int k = 0; k < repeats; ++k) r.push_back(measure(mpiexec, self, ranks, envs, mb, iterations));
      const double m = median(r);
      if (ranks == 1) one = m;
      if (!rows.empty()) rows += ",\n";
      rows += fmt::format(
          "    {{\"scaling\": \"{}\", \"ranks\": {}, \"envs_per_rank\": {}, \"steps_per_s\": {:.0f}{}}}", scaling,
          ranks, envs, m, ranks == 2 ? fmt::format(", \"ratio_vs_1_rank\": {:.3f}", m / one) : std::string());
    }
  }
  std::printf(
      "{\n  \"benchmark\": \"PPO CartPole-v1 training throughput (env steps/s, all ranks)\",\n"
      "  \"iterations\": %d,\n  \"results\": [\n%s\n  ]\n}\n",
      iterations, rows.c_str());
  return 0;
}
