// Training throughput of PPO with the MinAtar paper's convolutional network (one 3x3
// convolution with 16 channels, a 128-unit layer; separate actor and critic) on MinAtar
// Breakout: the preset examples/rl/minatar_breakout_ppo.toml (64 envs x 128 steps, 4 epochs
// of 8 minibatches) with 1 thread (serial sampler, nn on the calling thread) and 2 threads
// (parallel sampler with 2 env-stepping threads, nn products on 2 threads). Frames are env
// steps (MinAtar has no frame skip). Prints one JSON document: end-to-end frames/s (median
// over the repeats, after one warm-up iteration), the rollout (sampling) and update
// (training) rates of the same iterations, and the CPU seconds per wall second.
//
// Usage: bench_ppo_minatar [--iterations N] [--repeats R] [--env ID]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "herd/nn/module.hpp"
#include "herd/rl/trainer.hpp"

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::size_t column(const char* name) {
  for (std::size_t c = 0; c < herd::rl::kCurveColumns.size(); ++c)
    if (!std::strcmp(herd::rl::kCurveColumns[c], name)) return c;
  std::fprintf(stderr, "bench_ppo_minatar: no curve column %s\n", name);
  std::exit(1);
}

struct Result {
  double frames_per_s, sample_per_s, train_per_s, cpu_per_wall;
};

Result measure(const std::string& env, int threads, int iterations) {
  herd::nn::set_num_threads(threads);
  std::vector<std::string> sets = {"env=" + env, "output_prefix=bench_ppo_minatar_tmp",
                                   "total_steps=" + std::to_string((iterations + 1) * 64LL * 128)};
  if (threads > 1) {
    sets.push_back("sampler.kind=parallel");
    sets.push_back("sampler.num_threads=" + std::to_string(threads));
  }
  std::string text;
  const auto c =
      herd::rl::load_train_config(std::string(HERD_EXAMPLES_DIR) + "/minatar_breakout_ppo.toml", sets, &text);
  herd::rl::Trainer t(c, text);
  t.iterate();  // warm-up: buffers, first allocations
  const std::size_t cs = column("sample_steps_per_second"), ct = column("train_steps_per_second");
  std::vector<double> sample, train;
  const auto w0 = std::chrono::steady_clock::now();
  const std::clock_t c0 = std::clock();
  for (int i = 0; i < iterations; ++i) {
    t.iterate();
    sample.push_back(t.curve().back()[cs]);
    train.push_back(t.curve().back()[ct]);
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
  const double cpu = static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC;
  return {static_cast<double>(iterations) * static_cast<double>(c.steps_per_iteration()) / wall, median(sample),
          median(train), cpu / wall};
}

}  // namespace

int main(int argc, char** argv) {
  int iterations = 4, repeats = 3;
  std::string env = "MinAtar/Breakout-v1";
  for (int i = 1; i + 1 < argc; ++i) {
    if (!std::strcmp(argv[i], "--iterations")) iterations = std::max(1, std::atoi(argv[++i]));
    else if (!std::strcmp(argv[i], "--repeats")) repeats = std::max(1, std::atoi(argv[++i]));
    else if (!std::strcmp(argv[i], "--env")) env = argv[++i];
  }
  std::printf("{\n  \"benchmark\": \"ppo_minatar_training_frames_per_s\",\n  \"env\": \"%s\",\n", env.c_str());
  std::printf("  \"network\": \"conv 16x3x3 s1 relu, dense 128 relu (actor and critic)\",\n");
  std::printf("  \"iterations\": %d,\n  \"frames_per_iteration\": %d,\n  \"runs\": [\n", iterations, 64 * 128);
  const int thread_counts[] = {1, 2};
  for (int k = 0; k < 2; ++k) {
    const int threads = thread_counts[k];
    std::vector<double> fps, sps, tps, cpw;
    for (int r = 0; r < repeats; ++r) {
      const Result m = measure(env, threads, iterations);
      fps.push_back(m.frames_per_s);
      sps.push_back(m.sample_per_s);
      tps.push_back(m.train_per_s);
      cpw.push_back(m.cpu_per_wall);
    }
    std::printf(
        "    {\"threads\": %d, \"frames_per_s\": %.0f, \"rollout_frames_per_s\": %.0f, "
        "\"update_frames_per_s\": %.0f, \"cpu_per_wall\": %.2f}%s\n",
        threads, median(fps), median(sps), median(tps), median(cpw), k == 0 ? "," : "");
    std::fflush(stdout);
  }
  std::printf("  ]\n}\n");
  std::remove("bench_ppo_minatar_tmp.ckpt");
  std::remove("bench_ppo_minatar_tmp.h5");
  return 0;
}
