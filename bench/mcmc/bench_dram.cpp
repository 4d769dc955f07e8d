// DRAM kernel benchmark: 10-D Gaussian with AR(1) correlation 0.5, delayed
// rejection off, the compact chain streamed to a binary file. Reports steps/s, ESS/s
// (Geyer's initial monotone sequence ESS from herd::mcmc::ess_mean, minimum over variables, by wall clock) and the
// sampler's own overhead per step (total time minus the log-density time) in ns.
// The same-run baseline is the log density itself, timed on the chain's own points;
// ParaDRAM 1.5.1's figures measured on this workload (690 ns/step, 20k ESS/s with binary
// output) are printed for the ratios. Prints one JSON object; median of `repeats` runs.
// On a loaded machine every wall time stretches; thread CPU times stretch less, and the
// overhead in units of the same-run log-density time is the most stable figure. Compare
// against the reference numbers (ParaDRAM, the goal) only from a quiet machine: check that
// bench_rng's Philox block takes about 11 ns there.
//
// Usage: bench_dram [steps=2000000] [repeats=3] [chain_file=bench_dram_chain.bin]
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <time.h>

#include "herd/core/timer.hpp"
#include "herd/mcmc/chain_sink.hpp"
#include "herd/mcmc/diagnostics.hpp"
#include "herd/mcmc/dram.hpp"
#include "herd/mcmc/targets.hpp"

namespace {

// CPU time of the calling thread in seconds: less sensitive than wall time to other
// processes on a shared machine (they still slow it through shared cores and caches).
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const long steps = argc > 1 ? std::atol(argv[1]) : 2000000;
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 3;
  const std::string path = argc > 3 ? argv[3] : "bench_dram_chain.bin";
  const int d = 10;
  const auto target = herd::mcmc::MultivariateNormal::ar1(d, 0.5);

  std::vector<double> t_step, t_ld, t_over, ess_s, steps_s, acc, cpu_step, cpu_ld, ratio;
  for (int rep = 0; rep < repeats; ++rep) {
    herd::mcmc::DramOptions o;
    o.start_point.assign(d, 0.0);
    o.chain_size = steps + 1;
    o.max_proposals = steps;
    o.seed = 12345 + rep;
    herd::mcmc::DramSampler sampler(o, [&target](const double* x, int n) { return target(x, n); });
    herd::mcmc::DramResult r;
    double cpu_run = 0.0;
    {
      herd::mcmc::BinaryChainSink sink(path);
      const double c0 = thread_cpu_seconds();
      r = sampler.run(sink);
      cpu_run = thread_cpu_seconds() - c0;
    }
    // Log-density cost on the chain's own points (the same-run baseline).
    const auto chain = herd::mcmc::read_binary_chain(path);
    const std::size_t npts = chain.size();
    double sink_v = 0.0;
    const double c1 = thread_cpu_seconds();
    herd::Timer tl;
    const long reps_ld = std::max<long>(1, r.evaluations / static_cast<long>(npts));
    for (long k = 0; k < reps_ld; ++k)
      for (std::size_t i = 0; i < npts; ++i) sink_v += target(chain.point(i), d);
    const double n_ld = static_cast<double>(reps_ld * static_cast<long>(npts));
    const double ld_ns = tl.seconds() * 1e9 / n_ld;
    const double ld_cpu_ns = (thread_cpu_seconds() - c1) * 1e9 / n_ld;
    if (sink_v == 42.0) std::puts("");  // keep the loop
    // ESS of the verbose chain after burn-in.
    const std::int64_t burn_steps = r.burnin < static_cast<std::int64_t>(npts)
                                        ? static_cast<std::int64_t>(chain.step[static_cast<std::size_t>(r.burnin)])
                                        : 0;
    const auto verbose = chain.verbose(burn_steps);
    const std::size_t nv = verbose.size() / d;
    double min_ess = 1e300;
    std::vector<double> col(nv);
    for (int j = 0; j < d; ++j) {
      for (std::size_t i = 0; i < nv; ++i) col[i] = verbose[i * d + j];
      min_ess = std::min(min_ess, herd::mcmc::ess_mean(herd::mcmc::DrawsView(col, 1, col.size())));
    }
    const double ns_step = r.seconds * 1e9 / static_cast<double>(r.proposals);
    const double evals_per_step = static_cast<double>(r.evaluations) / static_cast<double>(r.proposals);
    t_step.push_back(ns_step);
    t_ld.push_back(ld_ns);
    t_over.push_back(ns_step - evals_per_step * ld_ns);
    const double cpu_ns_step = cpu_run * 1e9 / static_cast<double>(r.proposals);
    cpu_step.push_back(cpu_ns_step);
    cpu_ld.push_back(ld_cpu_ns);
    ratio.push_back((cpu_ns_step - evals_per_step * ld_cpu_ns) / ld_cpu_ns);
    // ESS/s by wall clock over the whole run; the ESS is of the post-burn-in part.
    ess_s.push_back(min_ess / r.seconds);
    steps_s.push_back(static_cast<double>(r.proposals) / r.seconds);
    acc.push_back(r.acceptance_rate);
  }
  std::remove(path.c_str());
  const double paradram_ns = 690.0, paradram_ess_s = 20000.0;
  std::printf(
      "{\n  \"benchmark\": \"dram_ar1_10d\",\n  \"steps\": %ld,\n  \"repeats\": %d,\n"
      "  \"ns_per_step\": %.1f,\n  \"steps_per_s\": %.0f,\n  \"log_density_ns\": %.1f,\n"
      "  \"overhead_ns_per_step\": %.1f,\n  \"min_ess_per_s\": %.0f,\n  \"acceptance_rate\": %.3f,\n"
      "  \"goal_overhead_ns\": 120,\n  \"paradram_ns_per_step\": %.0f,\n  \"paradram_ess_per_s\": %.0f,\n"
      "  \"speedup_vs_paradram_steps\": %.2f,\n  \"ess_per_s_ratio_vs_paradram\": %.2f,\n"
      "  \"cpu_ns_per_step\": %.1f,\n  \"cpu_log_density_ns\": %.1f,\n"
      "  \"cpu_overhead_ns_per_step\": %.1f,\n  \"overhead_over_log_density\": %.2f\n}\n",
      steps, repeats, median(t_step), median(steps_s), median(t_ld), median(t_over), median(ess_s), median(acc),
      paradram_ns, paradram_ess_s, paradram_ns / median(t_step), median(ess_s) / paradram_ess_s, median(cpu_step),
      median(cpu_ld), median(ratio) * median(cpu_ld), median(ratio));
  return 0;
}
