// MinAtar EnvPool random-action steps/s with float32 and uint8 observation batches
// (ObsDtype), sync mode, 1 and 2 threads, 16 to 4096 envs. Actions come from a pre-drawn
// table (64 steps x num_envs, cycled), so drawing them is not timed. Prints one JSON
// document: per configuration the median steps/s over the repeats, and the ratio
// uint8 / float32.
//
// Usage: bench_minatar_pool [--seconds S] [--repeats R] [--env ID]...
//   S: seconds per configuration (default 1.0), split into R timed repeats (default 5);
//   ID: MinAtar ids (default MinAtar/Breakout-v1 and MinAtar/Freeway-v1).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "herd/core/rng.hpp"
#include "herd/rl/env_pool.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double steps_per_second(const std::string& id, herd::rl::ObsDtype dtype, std::size_t threads, std::size_t n,
                        double seconds, int repeats) {
  constexpr std::size_t kTable = 64;
  herd::rl::EnvPoolOptions o;
  o.env_id = id;
  o.num_envs = n;
  o.num_threads = threads;
  o.seed = 1;
  o.obs_dtype = dtype;
  herd::rl::EnvPool pool(o);
  const auto na = static_cast<std::uint32_t>(pool.action_space().n());
  std::vector<std::int64_t> table(kTable * n);
  const herd::RngStream rng(2024, 0, herd::RngPurpose::kPolicy);
  for (std::size_t i = 0; i < table.size(); ++i) table[i] = rng.u32(i) % na;
  pool.reset();
  std::size_t t = 0;
  auto step = [&] {
    pool.step(std::span<const std::int64_t>(table.data() + (t % kTable) * n, n));
    ++t;
  };
  for (int w = 0; w < 3; ++w) step();  // warm-up (thread start, the pool's cost estimate)
  std::vector<double> rates;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = Clock::now();
    std::size_t steps = 0;
    double el = 0;
    do {
      step();
      steps += n;
      el = std::chrono::duration<double>(Clock::now() - t0).count();
    } while (el < seconds / repeats);
    rates.push_back(static_cast<double>(steps) / el);
  }
  return median(rates);
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 1.0;
  int repeats = 5;
  std::vector<std::string> ids;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--seconds") && i + 1 < argc) seconds = std::atof(argv[++i]);
    else if (!std::strcmp(argv[i], "--repeats") && i + 1 < argc) repeats = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--env") && i + 1 < argc) ids.push_back(argv[++i]);
    else {
      std::fprintf(stderr, "usage: %s [--seconds S] [--repeats R] [--env ID]...\n", argv[0]);
      return 2;
    }
  }
  if (ids.empty()) ids = {"MinAtar/Breakout-v1", "MinAtar/Freeway-v1"};
  std::printf(
      "{\n  \"benchmark\": \"MinAtar EnvPool random-action steps/s, float32 vs uint8 observation batches\",\n"
      "  \"seconds_per_config\": %g, \"repeats\": %d,\n  \"results\": [\n",
      seconds, repeats);
  bool first = true;
  for (const auto& id : ids)
    for (const std::size_t threads : {1u, 2u})
      for (const std::size_t n : {16u, 64u, 256u, 1024u, 4096u}) {
        const double f = steps_per_second(id, herd::rl::ObsDtype::kFloat32, threads, n, seconds, repeats);
        const double u = steps_per_second(id, herd::rl::ObsDtype::kUint8, threads, n, seconds, repeats);
        std::printf(
            "%s    {\"env\": \"%s\", \"threads\": %zu, \"num_envs\": %zu, \"float32_steps_per_s\": %.0f, "
            "\"uint8_steps_per_s\": %.0f, \"uint8_over_float32\": %.3f}",
            first ? "" : ",\n", id.c_str(), threads, n, f, u, u / f);
        std::fflush(stdout);
        first = false;
      }
  std::printf("\n  ]\n}\n");
  return 0;
}
