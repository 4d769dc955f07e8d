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
// Usage: bench_env_pool [--seconds S] [--repeats R] [--python EXE] [--no-gym]
//   S: seconds per configuration (default 1.0), split into R rounds (default 5);
//   EXE: the Python with the peers (default: $HERD_BENCH_PYTHON, else the venv that
//   bench/peer-venv makes with PyPI's gymnasium and envpool).
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

}  // namespace

// "min/median/max" of a sample as a JSON array.
nlohmann::json spread(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return {v.front(), median(v), v.back()};
}

int main(int argc, char** argv) {
  double seconds = 1.0;
  int repeats = 5;
  bool gym = true;
  std::string python = std::getenv("HERD_BENCH_PYTHON") ? std::getenv("HERD_BENCH_PYTHON") : "";
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
  };
  std::vector<Config> configs;
  for (std::size_t threads : {1u, 2u})
    for (std::size_t n : {16u, 256u, 4096u}) configs.push_back({threads, n, false});
  for (std::size_t n : {256u, 4096u}) configs.push_back({2, n, true});
  std::vector<Result> results(configs.size());
  std::map<std::string, std::vector<double>> peers;  // "impl/threads/num_envs" -> rates
  std::map<std::string, std::string> versions;
  const double slice = seconds / repeats;
  for (int round = 0; round < repeats; ++round) {
    for (std::size_t c = 0; c < configs.size(); ++c) {
      Result r = run_herd(configs[c].threads, configs[c].n, configs[c].async, slice, 1);
      if (round == 0) results[c] = r;
      else results[c].all.push_back(r.all.front());
      std::fprintf(stderr, "round %d herd %-5s threads %zu envs %5zu: %.3g steps/s\n", round + 1, r.mode.c_str(),
                   r.threads, r.num_envs, r.all.front());
    }
    if (!gym) continue;
    int status = 0;
    const std::string out = read_command(
        fmt::format("'{}' '{}' --seconds {} --repeats 1", python, HERD_BENCH_GYM_SCRIPT, slice), &status);
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
      const std::string key = fmt::format("{}/{}/{}", j["impl"].get<std::string>(), j.value("threads", 1),
                                          j["num_envs"].get<int>());
      for (const double v : j["steps_per_s_all"]) peers[key].push_back(v);
      versions[j["impl"].get<std::string>()] = j.value("version", "");
    }
  }
  nlohmann::json doc;
  doc["benchmark"] = "CartPole-v1 random-action env steps/s (min, median, max over rounds)";
  doc["rounds"] = repeats;
  doc["peers"] = peer_note;
  doc["peer_versions"] = versions;
  for (Result& r : results) {
    r.median = median(r.all);
    nlohmann::json row = {{"impl", "herd"}, {"mode", r.mode}, {"threads", r.threads}, {"num_envs", r.num_envs},
                          {"batch_size", r.batch_size}, {"steps_per_s", spread(r.all)},
                          {"steps_per_s_per_thread_median", r.median / static_cast<double>(r.threads)}};
    for (const auto& [key, v] : peers) {
      const auto impl = key.substr(0, key.find('/'));
      const auto rest = key.substr(key.find('/') + 1);
      const std::size_t t = std::stoul(rest.substr(0, rest.find('/')));
      const std::size_t n = std::stoul(rest.substr(rest.find('/') + 1));
      // Gymnasium's vector envs are single-threaded: compare every herd row with them;
      // EnvPool rows are compared at the same thread count.
      if (n != r.num_envs || (impl == "envpool" && t != r.threads)) continue;
      row["ratio_vs_" + impl] = r.median / median(v);
    }
    doc["herd"].push_back(row);
  }
  for (const auto& [key, v] : peers) doc["peer_results"][key] = spread(v);
  std::printf("%s\n", doc.dump(2).c_str());
  return 0;
}
