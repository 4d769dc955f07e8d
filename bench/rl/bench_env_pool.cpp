// CartPole-v1 random-action steps/s of herd's EnvPool (1 and 2 threads; 16, 256, 4096 envs;
// sync mode, plus async mode with batch_size = num_envs / 2), beside Gymnasium 1.4.0's
// numpy CartPoleVectorEnv and SyncVectorEnv measured in the same run by
// bench_gymnasium.py when `gymnasium` imports. Prints one JSON document with medians and
// the ratios herd / Gymnasium. Actions come from a pre-drawn table (64 steps x num_envs,
// cycled) in both, so drawing them is not timed.
//
// Usage: bench_env_pool [--seconds S] [--repeats R] [--python EXE] [--no-gym]
//   S: seconds per configuration (default 1.0), split into R timed repeats (default 5);
//   EXE: the Python that has gymnasium (default: $HERD_BENCH_PYTHON, else python3).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "herd/core/rng.hpp"
#include "herd/rl/env_pool.hpp"

namespace {

using Clock = std::chrono::steady_clock;

struct Result {
  std::string impl, mode;
  std::size_t threads = 1, num_envs = 0, batch_size = 0;
  double median = 0;
  std::vector<double> all;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

Result run_herd(std::size_t threads, std::size_t n, bool async, double seconds, int repeats) {
  constexpr std::size_t kTable = 64;
  herd::rl::EnvPoolOptions o;
  o.env_id = "CartPole-v1";
  o.num_envs = n;
  o.num_threads = threads;
  o.batch_size = async ? n / 2 : n;
  o.seed = 1;
  herd::rl::EnvPool pool(o);
  std::vector<std::int64_t> table(kTable * n);
  const herd::RngStream rng(2024, 0, herd::RngPurpose::kPolicy);
  for (std::size_t i = 0; i < table.size(); ++i) table[i] = rng.u32(i) & 1;
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
  res.mode = async ? "async" : "sync";
  res.threads = threads;
  res.num_envs = n;
  res.batch_size = b;
  for (int r = 0; r < repeats; ++r) {
    std::size_t iters = 0;
    const auto t0 = Clock::now();
    double dt = 0;
    do {
      for (std::size_t i = 0; i < block; ++i) iterate();
      iters += block;
      dt = std::chrono::duration<double>(Clock::now() - t0).count();
    } while (dt < seconds / repeats);
    res.all.push_back(static_cast<double>(iters * n) / dt);
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

/// Extracts "impl/num_envs" -> median steps/s from bench_gymnasium.py's flat JSON lines
/// ({"impl": ..., "num_envs": ..., "steps_per_s_median": ...} one per line).
std::map<std::string, double> parse_gym(const std::string& text) {
  std::map<std::string, double> m;
  std::size_t pos = 0;
  while ((pos = text.find("\"impl\": \"", pos)) != std::string::npos) {
    const std::size_t a = pos + 9, e = text.find('"', a);
    const std::string impl = text.substr(a, e - a);
    const std::size_t ne = text.find("\"num_envs\": ", e);
    const std::size_t me = text.find("\"steps_per_s_median\": ", e);
    if (ne == std::string::npos || me == std::string::npos) break;
    const long n = std::strtol(text.c_str() + ne + 12, nullptr, 10);
    const double v = std::strtod(text.c_str() + me + 22, nullptr);
    m[impl + "/" + std::to_string(n)] = v;
    pos = e;
  }
  return m;
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 1.0;
  int repeats = 5;
  bool gym = true;
  std::string python = std::getenv("HERD_BENCH_PYTHON") ? std::getenv("HERD_BENCH_PYTHON") : "python3";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--seconds" && i + 1 < argc) seconds = std::atof(argv[++i]);
    else if (a == "--repeats" && i + 1 < argc) repeats = std::max(1, std::atoi(argv[++i]));
    else if (a == "--python" && i + 1 < argc) python = argv[++i];
    else if (a == "--no-gym") gym = false;
    else {
      std::fprintf(stderr, "usage: %s [--seconds S] [--repeats R] [--python EXE] [--no-gym]\n", argv[0]);
      return 2;
    }
  }
  std::vector<Result> results;
  for (std::size_t threads : {1u, 2u}) {
    for (std::size_t n : {16u, 256u, 4096u}) {
      results.push_back(run_herd(threads, n, false, seconds, repeats));
      std::fprintf(stderr, "herd sync  threads %zu envs %5zu: %.3g steps/s\n", threads, n,
                   results.back().median);
    }
  }
  for (std::size_t n : {256u, 4096u}) {
    results.push_back(run_herd(2, n, true, seconds, repeats));
    std::fprintf(stderr, "herd async threads 2 envs %5zu: %.3g steps/s\n", n, results.back().median);
  }

  std::map<std::string, double> g;
  std::string gym_note = "not run (--no-gym)";
  std::string gym_json = "null";
  if (gym) {
    int status = 0;
    const std::string cmd = fmt::format("'{}' '{}' --seconds {} --repeats {}", python,
                                        HERD_BENCH_GYM_SCRIPT, seconds, repeats);
    const std::string out = read_command(cmd, &status);
    if (status == 0 && !out.empty()) {
      g = parse_gym(out);
      gym_note = "measured in this run";
      // One JSON object per line -> a JSON array.
      gym_json = "[";
      std::size_t a = 0;
      while (a < out.size()) {
        std::size_t e = out.find('\n', a);
        if (e == std::string::npos) e = out.size();
        if (e > a) {
          if (gym_json.size() > 1) gym_json += ",";
          gym_json += "\n    ";
          gym_json.append(out, a, e - a);
        }
        a = e + 1;
      }
      gym_json += "\n  ]";
    } else {
      gym_note = fmt::format("gymnasium not importable by {} (status {}): ratios skipped",
                             python, status);
    }
  }
  std::printf("{\n  \"benchmark\": \"CartPole-v1 random-action env steps/s\",\n");
  std::printf("  \"gymnasium\": \"%s\",\n  \"herd\": [\n", gym_note.c_str());
  for (std::size_t i = 0; i < results.size(); ++i) {
    const Result& r = results[i];
    std::string ratios;
    for (const char* impl : {"gymnasium_numpy_vector", "gymnasium_sync_vector"}) {
      const auto it = g.find(std::string(impl) + "/" + std::to_string(r.num_envs));
      if (it != g.end() && it->second > 0) {
        ratios += fmt::format(", \"ratio_vs_{}\": {:.3g}", impl, r.median / it->second);
      }
    }
    std::printf("    {\"impl\": \"herd\", \"mode\": \"%s\", \"threads\": %zu, \"num_envs\": %zu, "
                "\"batch_size\": %zu, \"steps_per_s_median\": %.4g, \"steps_per_s_per_thread\": "
                "%.4g%s}%s\n",
                r.mode.c_str(), r.threads, r.num_envs, r.batch_size, r.median,
                r.median / static_cast<double>(r.threads), ratios.c_str(),
                i + 1 < results.size() ? "," : "");
  }
  std::printf("  ],\n  \"gymnasium_results\": %s\n}\n", gym_json.c_str());
  return 0;
}
