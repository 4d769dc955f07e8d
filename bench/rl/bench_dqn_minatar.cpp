// Training throughput of DQN with the MinAtar paper's network and hyperparameters
// (examples/rl/minatar_breakout_dqn.toml: one 3x3 convolution with 16 channels, 128 units,
// a gradient step of 32 transitions per frame) on MinAtar Breakout, with 1 and 2 nn threads,
// against the same run with no training (uniformly random actions, env steps and replay
// insertion only: learning_starts beyond the run), measured in the same process. Frames are env steps
// (MinAtar has no frame skip). Prints one JSON document: frames/s (median over the repeats,
// after one warm-up iteration that passes learning_starts), gradient steps/s, the acting-only
// frames/s and the ratio.
//
// Usage: bench_dqn_minatar [--iterations N] [--repeats R] [--envs B] [--batch K]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "herd/nn/module.hpp"
#include "herd/rl/dqn_trainer.hpp"

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Result {
  double frames_per_s, grad_steps_per_s;
};

Result measure(int threads, int iterations, int envs, int batch, bool train) {
  herd::nn::set_num_threads(threads);
  const long long per_iter = 1000LL * envs;
  std::vector<std::string> sets = {"output_prefix=bench_dqn_minatar_tmp",
                                   "sampler.num_steps=1000",
                                   "sampler.num_envs=" + std::to_string(envs),
                                   "dqn.batch_size=" + std::to_string(batch),
                                   "total_steps=" + std::to_string((iterations + 1) * per_iter),
                                   "dqn.learning_starts=" + std::string(train ? "500" : "1000000000000")};
  std::string text;
  const auto c =
      herd::rl::load_train_config(std::string(HERD_EXAMPLES_DIR) + "/minatar_breakout_dqn.toml", sets, &text);
  herd::rl::DqnTrainer t(c, text);
  t.iterate();  // warm-up: past learning_starts, buffers allocated
  const auto g0 = t.gradient_steps();
  const auto w0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iterations; ++i) t.iterate();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - w0).count();
  return {static_cast<double>(iterations * per_iter) / wall, static_cast<double>(t.gradient_steps() - g0) / wall};
}

}  // namespace

int main(int argc, char** argv) {
  int iterations = 3, repeats = 3, envs = 1, batch = 32;
  for (int i = 1; i + 1 < argc; ++i) {
    if (!std::strcmp(argv[i], "--iterations")) iterations = std::max(1, std::atoi(argv[++i]));
    else if (!std::strcmp(argv[i], "--repeats")) repeats = std::max(1, std::atoi(argv[++i]));
    else if (!std::strcmp(argv[i], "--envs")) envs = std::max(1, std::atoi(argv[++i]));
    else if (!std::strcmp(argv[i], "--batch")) batch = std::max(1, std::atoi(argv[++i]));
  }
  std::printf(
      "{\n  \"benchmark\": \"dqn_minatar_training_frames_per_s\",\n  \"env\": \"MinAtar/Breakout-v1\",\n"
      "  \"envs\": %d,\n  \"batch_size\": %d,\n  \"results\": [\n",
      envs, batch);
  for (int threads = 1; threads <= 2; ++threads) {
    std::vector<double> fps, gps, act;
    for (int r = 0; r < repeats; ++r) {
      const Result a = measure(threads, iterations, envs, batch, true);
      fps.push_back(a.frames_per_s);
      gps.push_back(a.grad_steps_per_s);
      act.push_back(measure(threads, iterations, envs, batch, false).frames_per_s);
    }
    std::printf(
        "    {\"threads\": %d, \"frames_per_s\": %.1f, \"gradient_steps_per_s\": %.1f, "
        "\"acting_only_frames_per_s\": %.1f, \"ratio_training_to_acting\": %.4f}%s\n",
        threads, median(fps), median(gps), median(act), median(fps) / median(act), threads < 2 ? "," : "");
  }
  std::printf("  ]\n}\n");
  for (const char* ext : {".ckpt", ".h5", "_progress.csv"})
    std::filesystem::remove(std::string("bench_dqn_minatar_tmp") + ext);
  return 0;
}
