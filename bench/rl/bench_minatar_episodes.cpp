// Episode returns and lengths of a uniformly random policy on a MinAtar game, one
// "return,length" line per episode on stdout (read by minatar_validate.py).
// Usage: bench_minatar_episodes <env id> <episodes> <seed>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "herd/core/rng.hpp"
#include "herd/rl/registry.hpp"

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s <env id> <episodes> <seed>\n", argv[0]);
    return 2;
  }
  try {
    auto env = herd::rl::make_env(argv[1]);
    const long episodes = std::stol(argv[2]);
    const std::uint64_t seed = std::stoull(argv[3]);
    if (episodes < 1) {
      std::fprintf(stderr, "episodes is %ld, but must be at least 1\n", episodes);
      return 2;
    }
    const auto n = static_cast<std::uint32_t>(env->action_space().n());
    std::vector<float> obs(env->obs_dim());
    herd::RngCursor policy = herd::RngStream(seed, 0, herd::RngPurpose::kPolicy).at(0);
    env->reset(seed, obs.data());
    std::printf("return,length\n");
    for (long e = 0; e < episodes; ++e) {
      if (e > 0) env->reset(obs.data());
      double ret = 0;
      long len = 0;
      for (;;) {
        const auto a = static_cast<std::int64_t>(policy.next_u32() % n);
        const auto r = env->step(a, obs.data());
        ret += r.reward;
        ++len;
        if (r.terminated || r.truncated) break;
      }
      std::printf("%g,%ld\n", ret, len);
    }
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "bench_minatar_episodes: %s\n", ex.what());
    return 1;
  }
  return 0;
}
