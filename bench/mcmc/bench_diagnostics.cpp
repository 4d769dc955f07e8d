// All diagnostics (summarize) for chains x draws x params draws, against ArviZ's az.summary
// on the same draws in the same run when ArviZ is importable (bench/mcmc/arviz_baseline.py).
// Prints one JSON object; "ratio" is ArviZ's median wall time over ours, "ratio_cpu" the same
// for process CPU time (steadier on a shared machine).
//
// Measured on the shared 2-core development machine (load average 6-10 from other jobs),
// 64 x 100,000 x 10, one thread, ArviZ 0.23.4: herd 9.7 s CPU / 24 s wall (median of 3) vs
// az.summary 91 s CPU / 293 s wall: 9.3x CPU, 12x wall; earlier runs of the same build
// family gave 7.5-8.6x CPU and 6.8-9.5x wall. Parameter 0 agrees with ArviZ to 3e-14.
//
// Usage: bench_diagnostics [--chains 64] [--draws 100000] [--params 10] [--reps 3]
//                          [--threads 1] [--arviz-reps 1] [--python python3] [--no-arviz]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app_main.hpp"
#include "herd/core/thread_pool.hpp"
#include "herd/mcmc/diagnostics.hpp"

#ifndef HERD_ARVIZ_SCRIPT
#define HERD_ARVIZ_SCRIPT "arviz_baseline.py"
#endif

namespace {

/// [chains, draws, params] AR(1) draws, one LCG per series (as arviz_baseline.py).
std::vector<double> make_draws(std::size_t chains, std::size_t draws, std::size_t params) {
  const double a = 1664525.0, c = 1013904223.0, mod = 4294967296.0;
  std::vector<double> out(chains * draws * params);
  for (std::size_t p = 0; p < params; ++p) {
    const double phi = 0.5 + 0.045 * static_cast<double>(p);
    for (std::size_t ch = 0; ch < chains; ++ch) {
      double s = 12345.0 + 1000.0 * static_cast<double>(p * chains + ch);
      double x = 0;
      for (std::size_t t = 0; t < draws; ++t) {
        s = std::fmod(a * s + c, mod);
        x = phi * x + ((s + 0.5) / mod - 0.5);
        out[(ch * draws + t) * params + p] = x;
      }
    }
  }
  return out;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int run_main(int argc, char** argv) {
  std::size_t chains = 64, draws = 100000, params = 10, reps = 3, threads = 1, arviz_reps = 1;
  std::string python = "python3";
  bool use_arviz = true;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--chains") chains = std::stoul(next());
    else if (a == "--draws") draws = std::stoul(next());
    else if (a == "--params") params = std::stoul(next());
    else if (a == "--reps") reps = std::stoul(next());
    else if (a == "--threads") threads = std::stoul(next());
    else if (a == "--arviz-reps") arviz_reps = std::stoul(next());
    else if (a == "--python") python = next();
    else if (a == "--no-arviz") use_arviz = false;
    else {
      std::fprintf(stderr, "bench_diagnostics: unknown argument '%s'\n", a.c_str());
      return 2;
    }
  }
  const std::vector<double> x = make_draws(chains, draws, params);
  std::vector<herd::mcmc::DiagnosticSummary> result(params);
  std::vector<std::vector<double>> slices(std::max<std::size_t>(threads, 1));
  herd::ThreadPool pool(threads > 1 ? threads - 1 : 1);

  // One quantity at a time: gather its [chains, draws] slice, then summarize.
  std::vector<double> param_wall(params);
  auto run_param = [&](std::size_t p, std::vector<double>& slice) {
    const auto t0 = std::chrono::steady_clock::now();
    slice.resize(chains * draws);
    for (std::size_t i = 0; i < chains * draws; ++i) slice[i] = x[i * params + p];
    result[p] = herd::mcmc::summarize(herd::mcmc::DrawsView(slice, chains, draws));
    param_wall[p] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  std::vector<double> times, cpu;
  for (std::size_t r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    const std::clock_t c0 = std::clock();
    if (threads <= 1) {
      for (std::size_t p = 0; p < params; ++p) run_param(p, slices[0]);
    } else {
      std::vector<std::vector<double>> local(params);
      pool.parallel_for_each(
          0, params, [&](std::size_t p) { run_param(p, local[p]); }, 1);
    }
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    cpu.push_back(static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC);
  }
  nlohmann::json out;
  out["benchmark"] = "diagnostics_summary";
  out["chains"] = chains;
  out["draws"] = draws;
  out["params"] = params;
  out["threads"] = threads;
  out["herd_seconds"] = times;
  out["herd_median_s"] = median(times);
  out["herd_cpu_seconds"] = cpu;
  out["herd_param_wall_s_last_rep"] = param_wall;
  out["herd_cpu_median_s"] = median(cpu);
  const auto& s0 = result[0];
  out["herd_param0"] = {{"mean", s0.mean},           {"sd", s0.sd},
                        {"mcse_mean", s0.mcse_mean}, {"mcse_sd", s0.mcse_sd},
                        {"ess_bulk", s0.ess_bulk},   {"ess_tail", s0.ess_tail},
                        {"r_hat", s0.rhat}};
  out["arviz"] = nullptr;
  if (use_arviz) {
    const std::string cmd = python + " " + HERD_ARVIZ_SCRIPT + " " + std::to_string(chains) + " " +
                            std::to_string(draws) + " " + std::to_string(params) + " " + std::to_string(arviz_reps);
    std::string text;
    if (FILE* f = popen(cmd.c_str(), "r")) {
      char buf[4096];
      std::size_t n;
      while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
      const int status = pclose(f);
      if (status == 0 && !text.empty()) {
        const auto j = nlohmann::json::parse(text, nullptr, false);
        if (!j.is_discarded()) {
          out["arviz"] = j;
          const double az = median(j["seconds"].get<std::vector<double>>());
          out["arviz_median_s"] = az;
          out["ratio"] = az / median(times);
          const double az_cpu = median(j["cpu_seconds"].get<std::vector<double>>());
          out["arviz_cpu_median_s"] = az_cpu;
          out["ratio_cpu"] = az_cpu / median(cpu);
          // Cross-check: ArviZ's numbers for parameter 0 against ours.
          double worst = 0;
          for (const char* k : {"mean", "sd", "mcse_mean", "mcse_sd", "ess_bulk", "ess_tail", "r_hat"}) {
            const double a = j["param0"][k].get<double>(), b = out["herd_param0"][k].get<double>();
            worst = std::max(worst, std::fabs(a - b) / std::fabs(a));
          }
          out["max_rel_diff_vs_arviz_param0"] = worst;
        }
      } else {
        out["arviz_skipped"] = "python or arviz not available (exit status " + std::to_string(status) + ")";
      }
    }
  }
  std::printf("%s\n", out.dump(2).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return herd::apps::guarded_main("bench_diagnostics", run_main, argc, argv); }
