// CartPole-v1 random-action steps/s of herd's EnvPool (1 and 2 threads; 16, 256, 4096 envs;
// sync mode, plus async mode with batch_size = num_envs / 2), beside Gymnasium's numpy
// CartPoleVectorEnv and SyncVectorEnv and, when it imports, EnvPool (sail-sg, 1 and 2
// threads), measured in the same run by bench_gymnasium.py. The sides are interleaved round
// by round (herd round 1, peers round 1, herd round 2, ...; a round times every
// configuration once for S/R seconds) so load changes on a shared machine hit both. Prints
// one JSON document with min/median/max over the rounds and the ratios of the medians.
// Actions come from a pre-drawn table (64 steps x num_envs, cycled) on both sides, so
// drawing them is not timed.
//
// SIMD rows (also for Acrobot-v1, without peers): one thread, sync mode, 16 to 4096 envs, at every SIMD level of the
// batched CartPole step this CPU supports (scalar, avx2, avx512; herd::rl::set_env_simd), with steps per CPU second of
// the process ("per core": on a shared machine wall-clock rates fall with the load, CPU-time rates much less) beside
// the wall-clock rate; the Gymnasium numpy vector env is measured at the same env counts, also per CPU second.
//
// Usage: bench_env_pool [--seconds S] [--repeats R] [--python EXE] [--no-gym] [--simd-only]
//   S: seconds per configuration (default 1.0), split into R rounds (default 5);
//   EXE: the Python with the peers (default: $HERD_BENCH_PYTHON, else the venv that
//   bench/peer-venv makes with PyPI's gymnasium and envpool); --simd-only: only the
//   one-thread rows of the SIMD levels, at 16 to 4096 envs (the peers still run unless --no-gym).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "app_main.hpp"
#include "herd/core/rng.hpp"
#include "herd/rl/env_pool.hpp"
#include "herd/rl/envs.hpp"

namespace {

using Clock = std::chrono::steady_clock;

// Process CPU seconds (all threads).
double cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

struct Result {
  std::string env = "CartPole-v1", impl, mode, simd;
  std::size_t threads = 1, num_envs = 0, batch_size = 0;
  double median = 0;
  std::vector<double> all, cpu_all;  // env steps per wall second, per CPU second
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

Result run_herd(std::size_t threads, std::size_t n, bool async, double seconds, int repeats, herd::rl::EnvSimd level,
                const std::string& env_id) {
  constexpr std::size_t kTable = 64;
  herd::rl::set_env_simd(level);
  herd::rl::EnvPoolOptions o;
  o.env_id = env_id;
  o.num_envs = n;
  o.num_threads = threads;
  o.batch_size = async ? n / 2 : n;
  o.seed = 1;
  herd::rl::EnvPool pool(o);
  std::vector<std::int64_t> table(kTable * n);
  const herd::RngStream rng(2024, 0, herd::RngPurpose::kPolicy);
  const auto num_actions = static_cast<std::uint32_t>(pool.env(0).action_space().n());
  for (std::size_t i = 0; i < table.size(); ++i) table[i] = rng.u32(i) % num_actions;
  const std::size_t b = pool.batch_size();
  std::vector<std::int64_t> acts(b);
  std::size_t t = 0;
  // One "iteration": n env steps.
  auto iterate = [&] {
    if (!async) {
      pool.step(std::span<const std::int64_t>(table.data() + (t % kTable) * n, n));
    } else {
      // Two batches of n/2 = n env steps; each received env is sent its next action.
      for (int h = 0; h < 2; ++h) {
        const herd::rl::EnvBatch r = pool.recv();
        for (std::size_t j = 0; j < b; ++j) acts[j] = table[(t % kTable) * n + r.env_ids[j]];
        pool.send(std::span<const std::int64_t>(acts), r.env_ids);
      }
    }
    ++t;
  };
  if (!async) {
    pool.reset();
  } else {
    pool.async_reset();
    // Keep n envs in flight: step the reset results once.
    for (int h = 0; h < 2; ++h) {
      const herd::rl::EnvBatch r = pool.recv();
      for (std::size_t j = 0; j < b; ++j) acts[j] = table[r.env_ids[j]];
      pool.send(std::span<const std::int64_t>(acts), r.env_ids);
    }
  }
  // Warm up, then size a block to about 1 ms.
  std::size_t block = 1;
  for (;;) {
    const auto t0 = Clock::now();
    for (std::size_t i = 0; i < block; ++i) iterate();
    const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
    if (dt > 1e-3) break;
    block *= 2;
  }
  Result res;
  res.impl = "herd";
  res.env = env_id;
  res.simd = herd::rl::env_simd_name(level);
  res.mode = async ? "async" : "sync";
  res.threads = threads;
  res.num_envs = n;
  res.batch_size = b;
  for (int r = 0; r < repeats; ++r) {
    std::size_t iters = 0;
    const auto t0 = Clock::now();
    const double c0 = cpu_seconds();
    double dt = 0;
    do {
      for (std::size_t i = 0; i < block; ++i) iterate();
      iters += block;
      dt = std::chrono::duration<double>(Clock::now() - t0).count();
    } while (dt < seconds / repeats);
    res.all.push_back(static_cast<double>(iters * n) / dt);
    res.cpu_all.push_back(static_cast<double>(iters * n) / (cpu_seconds() - c0));
  }
  if (async) {  // drain what is in flight
    while (pool.in_flight() >= b) pool.recv();
  }
  res.median = median(res.all);
  return res;
}

std::string read_command(const std::string& cmd, int* status) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) {
    *status = -1;
    return out;
  }
  char buf[4096];
  std::size_t k;
  while ((k = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, k);
  *status = pclose(p);
  return out;
}

}  // namespace

// "min/median/max" of a sample as a JSON array.
nlohmann::json spread(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v.front(), median(v), v.back()};
}

namespace {

int run_main(int argc, char** argv) {
  double seconds = 1.0;
  int repeats = 5;
  bool gym = true, simd_only = false;
  std::string python = std::getenv("HERD_BENCH_PYTHON") ? std::getenv("HERD_BENCH_PYTHON") : "";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--seconds" && i + 1 < argc) seconds = std::atof(argv[++i]);
    else if (a == "--repeats" && i + 1 < argc) repeats = std::max(1, std::atoi(argv[++i]));
    else if (a == "--python" && i + 1 < argc) python = argv[++i];
    else if (a == "--no-gym") gym = false;
    else if (a == "--simd-only") simd_only = true;
    else {
      std::fprintf(stderr, "usage: %s [--seconds S] [--repeats R] [--python EXE] [--no-gym] [--simd-only]\n", argv[0]);
      return 2;
    }
  }
  std::string peer_note = "not run (--no-gym)";
  if (gym && python.empty()) {
    int status = 0;
    // envpool has no wheel for every Python; without it the Gymnasium peers still run.
    python = read_command(std::string("'") + HERD_BENCH_PEER_VENV + "' gymnasium", &status);
    if (status == 0) read_command(std::string("'") + HERD_BENCH_PEER_VENV + "' envpool >/dev/null 2>&1", &status);
    while (!python.empty() && (python.back() == '\n' || python.back() == ' ')) python.pop_back();
    if (python.empty()) {
      gym = false;
      peer_note = "not run (bench/peer-venv failed)";
    }
  }
  struct Config {
    std::size_t threads, n;
    bool async;
    herd::rl::EnvSimd level;
    std::string env = "CartPole-v1";
  };
  const herd::rl::EnvSimd best = herd::rl::env_simd_supported();
  std::vector<Config> configs;
  for (std::size_t threads : {1u, 2u})
    for (std::size_t n : {16u, 256u, 4096u})
      if (!simd_only || threads == 1) configs.push_back({threads, n, false, best});
  if (!simd_only)
    for (std::size_t n : {256u, 4096u}) configs.push_back({2, n, true, best});
  for (int l = 0; l <= static_cast<int>(best); ++l) {
    if (static_cast<herd::rl::EnvSimd>(l) == best) {  // the 16/256/4096 rows exist already
      for (std::size_t n : {64u, 1024u}) configs.push_back({1, n, false, best});
      continue;
    }
    for (std::size_t n : {16u, 64u, 256u, 1024u, 4096u})
      configs.push_back({1, n, false, static_cast<herd::rl::EnvSimd>(l)});
  }
  // Acrobot (RK4, 28 libm calls per step on the SIMD levels, 48 on the scalar one).
  for (int l = 0; l <= static_cast<int>(best); ++l)
    for (std::size_t n : {16u, 256u, 4096u})
      configs.push_back({1, n, false, static_cast<herd::rl::EnvSimd>(l), "Acrobot-v1"});
  std::vector<Result> results(configs.size());
  std::map<std::string, std::vector<double>> peers;      // "impl/threads/num_envs" -> rates
  std::map<std::string, std::vector<double>> peers_cpu;  // the same per CPU second
  std::map<std::string, std::string> versions;
  const double slice = seconds / repeats;
  for (int round = 0; round < repeats; ++round) {
    for (std::size_t c = 0; c < configs.size(); ++c) {
      Result r =
          run_herd(configs[c].threads, configs[c].n, configs[c].async, slice, 1, configs[c].level, configs[c].env);
      if (round == 0) {
        results[c] = r;
      } else {
        results[c].all.push_back(r.all.front());
        results[c].cpu_all.push_back(r.cpu_all.front());
      }
      std::fprintf(stderr, "round %d herd %s %-5s %-6s threads %zu envs %5zu: %.3g steps/s, %.3g per CPU s\n",
                   round + 1, r.env.c_str(), r.mode.c_str(), r.simd.c_str(), r.threads, r.num_envs, r.all.front(),
                   r.cpu_all.front());
    }
    if (!gym) continue;
    int status = 0;
    const std::string out =
        read_command(fmt::format("'{}' '{}' --seconds {} --repeats 1", python, HERD_BENCH_GYM_SCRIPT, slice), &status);
    if (status != 0 || out.empty()) {
      peer_note = fmt::format("peers not importable by {} (status {}): ratios skipped", python, status);
      gym = false;
      continue;
    }
    peer_note = "measured in this run, interleaved with herd";
    std::size_t a = 0;
    while (a < out.size()) {
      std::size_t e = out.find('\n', a);
      if (e == std::string::npos) e = out.size();
      const auto j = nlohmann::json::parse(out.substr(a, e - a), nullptr, false);
      a = e + 1;
      if (j.is_discarded() || !j.contains("impl")) continue;
      const std::string key =
          fmt::format("{}/{}/{}", j["impl"].get<std::string>(), j.value("threads", 1), j["num_envs"].get<int>());
      for (const double v : j["steps_per_s_all"]) peers[key].push_back(v);
      if (j.contains("steps_per_cpu_s_all"))
        for (const double v : j["steps_per_cpu_s_all"]) peers_cpu[key].push_back(v);
      versions[j["impl"].get<std::string>()] = j.value("version", "");
    }
  }
  nlohmann::json doc;
  doc["benchmark"] = "CartPole-v1 (and Acrobot-v1 SIMD rows) random-action env steps/s (min, median, max over rounds)";
  doc["rounds"] = repeats;
  doc["simd_supported"] = herd::rl::env_simd_name(best);
  doc["peers"] = peer_note;
  doc["peer_versions"] = versions;
  for (Result& r : results) {
    r.median = median(r.all);
    nlohmann::json row = {{"env", r.env},
                          {"impl", "herd"},
                          {"mode", r.mode},
                          {"simd", r.simd},
                          {"threads", r.threads},
                          {"num_envs", r.num_envs},
                          {"batch_size", r.batch_size},
                          {"steps_per_s", spread(r.all)},
                          {"steps_per_s_per_thread_median", r.median / static_cast<double>(r.threads)},
                          {"steps_per_cpu_s", spread(r.cpu_all)}};
    // Against the scalar level of the same env count (one thread, sync), per CPU second.
    for (const Result& q : results)
      if (q.env == r.env && q.simd == "scalar" && q.threads == 1 && q.mode == "sync" && q.num_envs == r.num_envs &&
          r.threads == 1 && r.mode == "sync")
        row["cpu_ratio_vs_scalar"] = median(r.cpu_all) / median(q.cpu_all);
    for (const auto& [key, v] : peers) {
      const auto impl = key.substr(0, key.find('/'));
      const auto rest = key.substr(key.find('/') + 1);
      const std::size_t t = std::stoul(rest.substr(0, rest.find('/')));
      const std::size_t n = std::stoul(rest.substr(rest.find('/') + 1));
      // Gymnasium's vector envs are single-threaded: compare every herd row with them;
      // EnvPool rows are compared at the same thread count.
      if (n != r.num_envs || r.env != "CartPole-v1" || (impl == "envpool" && t != r.threads)) continue;
      row["ratio_vs_" + impl] = r.median / median(v);
      if (peers_cpu.count(key) && r.threads == 1)
        row["cpu_ratio_vs_" + impl] = median(r.cpu_all) / median(peers_cpu[key]);
    }
    doc["herd"].push_back(row);
  }
  for (const auto& [key, v] : peers) doc["peer_results"][key] = spread(v);
  for (const auto& [key, v] : peers_cpu) doc["peer_results_per_cpu_s"][key] = spread(v);
  std::printf("%s\n", doc.dump(2).c_str());
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return herd::apps::guarded_main("bench_env_pool", run_main, argc, argv); }
