// herd-rl on the GPU, two figures measured in one run on Device::cuda(0):
//
// 1. End to end: PPO on CartPole-v1 with 4096 envs (examples/rl/cartpole_ppo_4096.toml:
//    4096 envs x 4 steps, 10 epochs of 4 minibatches of 4096), parallel sampler with N
//    env threads, env steps/s of whole training iterations (sampling with inference, GAE,
//    update) with device = "cuda", and the same with device = "cpu" (nn threads = N) as the
//    baseline: ratio cuda / cpu. Also the sampling-only rate on cuda and the share of an
//    iteration spent in the update. Goal: 2e6 env steps/s end to end on an H200.
//
// 2. Samplers on the GPU: `collect` throughput (env steps/s, inference included) of the
//    parallel sampler (one EnvPool of N threads; inference of all B rows, then all envs
//    step) and the alternating sampler (two groups of B/2 in async pools of N/2 threads
//    each, so the same N threads in all; inference of one group overlaps the other's env
//    steps; rlpyt, Stooke & Abbeel 2018 §3), on CartPole-v1 and Acrobot-v1, B = 1024 and
//    4096, T = 32, with the two halves measured alone: t_env (one synchronous step of B envs
//    on N threads) and t_inf (one `act` of B rows on the GPU: upload, forward, sample, copy
//    back). Hidden share of inference = (t_parallel - t_alternating) / t_inf per step (1:
//    inference fully hidden; 0: nothing; negative: the alternating sampler's extra
//    hand-offs cost more than it hides).
//
// Figures are medians of 3 timed repeats. Prints a table and one JSON line per figure.
// Usage: bench_rl_gpu [--threads N] [--seconds S] [--steps M]
//   N: env threads (default min(hardware threads, 8)); S: seconds per sampler measurement
//   (default 0.6); M: minimum env steps per end-to-end measurement (default 1e6 on cuda;
//   the cpu baseline stops after 8 s). Other arguments (scripts/gpu-check passes Google
//   Benchmark flags) are ignored. Exits with 77 and a "SKIPPED" line without a CUDA device
//   (like the [gpu] tests).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "herd/core/device.hpp"
#include "herd/nn/module.hpp"
#include "herd/nn/tensor.hpp"
#include "herd/rl/registry.hpp"
#include "herd/rl/sampler.hpp"
#include "herd/rl/trainer.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using namespace herd;
using namespace herd::rl;

// The presets: $HERD_EXAMPLES_DIR when set (scripts/gpu-check sets it: the GPU machine has
// the tree at another path), else the source tree's examples/rl.
std::string examples_dir() {
  if (const char* e = std::getenv("HERD_EXAMPLES_DIR"); e && *e) return e;
  return HERD_EXAMPLES_DIR;
}

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Median over 3 repeats of seconds per call, each repeat about seconds / 3 (after a warm-up call).
template <class F>
double seconds_per_call(F&& call, double seconds) {
  call();
  std::vector<double> out;
  for (int r = 0; r < 3; ++r) {
    const auto t0 = Clock::now();
    int calls = 0;
    do {
      call();
      ++calls;
    } while (seconds_since(t0) < seconds / 3);
    out.push_back(seconds_since(t0) / calls);
  }
  return median(out);
}

struct EndToEnd {
  double train_sps = 0, sample_sps = 0, update_share = 0;
};

EndToEnd end_to_end(const std::string& device, int threads, long long min_steps, double max_seconds) {
  std::string text;
  const TrainConfig c =
      load_train_config(examples_dir() + "/cartpole_ppo_4096.toml",
                        {"device=" + device, "sampler.kind=parallel", "sampler.num_threads=" + std::to_string(threads),
                         "total_steps=1000000000", "output_prefix=bench_rl_gpu"},
                        &text);
  Trainer t(c, text);
  t.iterate();  // warm-up: buffers, threads, cuBLAS heuristics
  EndToEnd r;
  const std::int64_t s0 = t.env_steps();
  const auto t0 = Clock::now();
  do t.iterate();
  while ((t.env_steps() - s0 < min_steps && seconds_since(t0) < max_seconds) ||
         t.env_steps() - s0 < 2 * c.steps_per_iteration());
  const double train_s = seconds_since(t0);
  r.train_sps = static_cast<double>(t.env_steps() - s0) / train_s;
  RolloutBuffer buf;
  std::int64_t n = 0;
  const auto t1 = Clock::now();
  do {
    t.sampler().collect(t.agent(), buf);
    n += c.steps_per_iteration();
  } while (n < std::max<std::int64_t>(min_steps / 4, 4 * c.steps_per_iteration()) && seconds_since(t1) < max_seconds);
  r.sample_sps = static_cast<double>(n) / seconds_since(t1);
  // Share of an iteration outside sampling (GAE + update): 1 - train rate / sample rate.
  r.update_share = 1.0 - r.train_sps / r.sample_sps;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  if (cuda_device_count() == 0) {
    std::printf("SKIPPED: no CUDA device: %s\n", describe_devices().c_str());
    return kSkipReturnCode;
  }
  int threads = static_cast<int>(std::min(8u, std::max(2u, std::thread::hardware_concurrency())));
  double seconds = 0.6;
  long long steps = 1000000;
  for (int i = 1; i + 1 < argc; ++i) {
    if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--seconds")) seconds = std::atof(argv[++i]);
    else if (!std::strcmp(argv[i], "--steps")) steps = std::atoll(argv[++i]);
  }
  threads = std::max(threads, 2);
  std::printf("%s\nenv threads: %d\n", describe_devices().c_str(), threads);

  // 1. End to end, cuda against cpu.
  const EndToEnd g = end_to_end("cuda", threads, steps, 15.0);
  nn::set_num_threads(threads);
  const EndToEnd h = end_to_end("cpu", threads, steps, 8.0);
  nn::set_num_threads(1);
  std::printf("\nPPO CartPole-v1, 4096 envs x 4 steps, 10 epochs x 4 minibatches of 4096 (cartpole_ppo_4096)\n");
  std::printf("%-8s %16s %16s %14s\n", "device", "train steps/s", "sample steps/s", "update share");
  std::printf("%-8s %16.0f %16.0f %13.0f%%\n", "cuda", g.train_sps, g.sample_sps, 100 * g.update_share);
  std::printf("%-8s %16.0f %16.0f %13.0f%%\n", "cpu", h.train_sps, h.sample_sps, 100 * h.update_share);
  std::printf("ratio cuda / cpu (train): %.2fx; goal 2e6 steps/s: %.0f%% of it\n", g.train_sps / h.train_sps,
              100 * g.train_sps / 2e6);
  std::printf(
      "{\"benchmark\": \"rl_gpu_end_to_end\", \"preset\": \"cartpole_ppo_4096\", \"threads\": %d, "
      "\"cuda_train_env_steps_per_s\": %.0f, \"cpu_train_env_steps_per_s\": %.0f, \"ratio_cuda_vs_cpu\": %.3f, "
      "\"cuda_sample_env_steps_per_s\": %.0f, \"cuda_update_share\": %.3f, \"goal_env_steps_per_s\": 2000000}\n",
      threads, g.train_sps, h.train_sps, g.train_sps / h.train_sps, g.sample_sps, g.update_share);

  // 2. Alternating against parallel sampler, agent on the GPU.
  std::printf("\nSamplers on cuda (T = 32; times per step of B envs, microseconds)\n");
  std::printf("%-11s %6s %9s %9s %14s %14s %8s %8s\n", "env", "B", "t_env", "t_inf", "parallel/s", "alternating/s",
              "alt/par", "hidden");
  std::string json;
  for (const std::string env_id : {"CartPole-v1", "Acrobot-v1"}) {
    auto probe = make_env(env_id);
    AgentOptions ao;
    ao.device = Device::cuda(0);
    ActorCriticAgent agent(probe->obs_dim(), probe->action_space(), ao);
    for (int B : {1024, 4096}) {
      EnvPoolOptions po;
      po.env_id = env_id;
      po.num_envs = static_cast<std::size_t>(B);
      po.num_threads = static_cast<std::size_t>(threads);
      EnvPool pool(po);
      pool.reset();
      std::vector<std::int64_t> acts(static_cast<std::size_t>(B), 0);
      const double t_env = seconds_per_call([&] { pool.step(std::span<const std::int64_t>(acts)); }, seconds);
      std::vector<float> obs(static_cast<std::size_t>(B) * probe->obs_dim(), 0.1f), lp(B), val(B);
      std::vector<double> act(static_cast<std::size_t>(B) * probe->action_dim());
      const RngStream rng(1, 0, RngPurpose::kPolicy);
      std::uint64_t idx = 0;
      const double t_inf = seconds_per_call(
          [&] { agent.act(obs.data(), static_cast<std::size_t>(B), &rng, idx++, act.data(), lp.data(), val.data()); },
          seconds);
      double per_step[2] = {};
      for (int k = 0; k < 2; ++k) {
        SamplerOptions so;
        so.env_id = env_id;
        so.num_envs = B;
        so.num_steps = 32;
        so.num_threads = k == 0 ? threads : threads / 2;
        auto s = make_sampler(k == 0 ? "parallel" : "alternating", so);
        RolloutBuffer buf;
        per_step[k] = seconds_per_call([&] { s->collect(agent, buf); }, 2 * seconds) / 32;
      }
      const double hidden = (per_step[0] - per_step[1]) / t_inf;
      std::printf("%-11s %6d %9.1f %9.1f %14.0f %14.0f %7.2fx %7.0f%%\n", env_id.c_str(), B, 1e6 * t_env, 1e6 * t_inf,
                  B / per_step[0], B / per_step[1], per_step[0] / per_step[1], 100 * hidden);
      char line[512];
      std::snprintf(line, sizeof line,
                    "{\"benchmark\": \"rl_gpu_samplers\", \"env\": \"%s\", \"num_envs\": %d, \"threads\": %d, "
                    "\"env_us_per_step\": %.2f, \"inference_us_per_step\": %.2f, \"parallel_env_steps_per_s\": %.0f, "
                    "\"alternating_env_steps_per_s\": %.0f, \"ratio_alternating_vs_parallel\": %.3f, "
                    "\"inference_hidden_share\": %.3f}\n",
                    env_id.c_str(), B, threads, 1e6 * t_env, 1e6 * t_inf, B / per_step[0], B / per_step[1],
                    per_step[0] / per_step[1], hidden);
      json += line;
    }
  }
  std::printf("%s", json.c_str());
  std::remove("bench_rl_gpu.ckpt");
  return 0;
}
