// Sampler throughput: env steps/s including policy inference (64-64 tanh MLP
// actor and critic, sampled actions) for the serial, parallel and alternating samplers on
// Acrobot-v1, where one env step costs about as much as one row of inference. Prints one
// JSON document: per configuration the median steps/s over the repeats, the costs of the
// two halves measured alone (env step per env, inference per row), and the ratio
// alternating / parallel at the same thread count, measured in the same run, and the
// process CPU time per wall second (how many cores the configuration actually got).
//
// Usage: bench_sampler [--seconds S] [--repeats R] [--env ID] [--envs B] [--threads N]
//                      [--sleep-us D] [--hidden H]
//   S: seconds per configuration (default 1.0), split into R timed repeats (default 5);
//   B: one env count instead of 16, 64, 256; N: one thread count instead of 1, 2;
//   D > 0: a latency-bound env instead ("Sleepy-v0": 6 observations, 3 actions, each step
//   sleeps D microseconds, as a simulator waiting on I/O or another process would), which
//   needs no core while it waits, so the overlap shows even on a machine without a spare
//   core; H: hidden width of the two-layer MLPs (default 64).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "herd/rl/alternating_sampler.hpp"
#include "herd/rl/registry.hpp"
#include "herd/rl/sampler.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using namespace herd::rl;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double g_cpu_per_wall = 0;  // process CPU seconds / wall seconds of the last `rates`

// Median over `repeats` of (work per call) / (seconds per call), each repeat ~seconds/repeats.
template <class F>
std::vector<double> rates(F&& call, double work, double seconds, int repeats) {
  call();  // warm-up (buffers, thread start)
  std::vector<double> out;
  const std::clock_t c0 = std::clock();
  const auto w0 = Clock::now();
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = Clock::now();
    int calls = 0;
    do {
      call();
      ++calls;
    } while (seconds_since(t0) < seconds / repeats);
    out.push_back(work * calls / seconds_since(t0));
  }
  g_cpu_per_wall = static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC / seconds_since(w0);
  return out;
}

// A latency-bound environment: 6 observations, 3 actions, each step sleeps `g_sleep_us`.
int g_sleep_us = 0;
class SleepyEnv final : public Env {
 public:
  SleepyEnv()
      : Env("Sleepy-v0", Space::box(std::vector<double>(6, -10.0), std::vector<double>(6, 10.0)), Space::discrete(3), 6,
            500) {}
  std::vector<double> get_state() const override { return {s_, s_ + 6}; }
  void observe(float* obs) const override {
    for (int i = 0; i < 6; ++i) obs[i] = static_cast<float>(s_[i]);
  }

 protected:
  void reset_impl(herd::RngCursor& rng, float* obs) override {
    for (double& x : s_) x = rng.uniform() - 0.5;
    observe(obs);
  }
  StepResult step_impl(const double* action, float* obs) override {
    std::this_thread::sleep_for(std::chrono::microseconds(g_sleep_us));
    for (int i = 0; i < 6; ++i) s_[i] = 0.9 * s_[i] + 0.1 * (action[0] - 1.0);
    observe(obs);
    StepResult r;
    r.reward = -1.0;
    return r;
  }
  void set_state_impl(const double* state) override { std::copy(state, state + 6, s_); }

 private:
  double s_[6] = {};
};

}  // namespace

int main(int argc, char** argv) {
  double seconds = 1.0;
  int repeats = 5;
  std::string env_id = "Acrobot-v1";
  std::vector<int> envs = {16, 64, 256}, thread_counts = {1, 2};
  int hidden = 64;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--seconds")) seconds = std::stod(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--repeats")) repeats = std::stoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--env")) env_id = argv[i + 1];
    else if (!std::strcmp(argv[i], "--envs")) envs = {std::stoi(argv[i + 1])};
    else if (!std::strcmp(argv[i], "--threads")) thread_counts = {std::stoi(argv[i + 1])};
    else if (!std::strcmp(argv[i], "--sleep-us")) g_sleep_us = std::stoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--hidden")) hidden = std::stoi(argv[i + 1]);
  }
  const int T = 32;
  if (g_sleep_us > 0) {
    register_env("Sleepy-v0", [] { return std::make_unique<SleepyEnv>(); });
    env_id = "Sleepy-v0";
  }
  auto probe = make_env(env_id);
  AgentOptions ao;  // two tanh layers of `hidden`, separate actor and critic
  ao.hidden = {hidden, hidden};
  ActorCriticAgent agent(probe->obs_dim(), probe->action_space(), ao);
  std::string rows;
  for (int B : envs) {
    // The two halves alone: env steps (sync pool, 1 thread) and inference (act on B rows).
    EnvPoolOptions po;
    po.env_id = env_id;
    po.num_envs = static_cast<std::size_t>(B);
    EnvPool pool(po);
    pool.reset();
    std::vector<std::int64_t> acts(static_cast<std::size_t>(B), 0);
    const double env_rate = median(rates([&] { pool.step(std::span<const std::int64_t>(acts)); }, B, seconds, repeats));
    std::vector<float> obs(static_cast<std::size_t>(B) * probe->obs_dim(), 0.1f), lp(B), val(B);
    std::vector<double> act(static_cast<std::size_t>(B) * probe->action_dim());
    const herd::RngStream rng(1, 0, herd::RngPurpose::kPolicy);
    std::uint64_t idx = 0;
    const double inf_rate = median(rates(
        [&] { agent.act(obs.data(), static_cast<std::size_t>(B), &rng, idx++, act.data(), lp.data(), val.data()); }, B,
        seconds, repeats));
    double par[257] = {};
    for (const std::string kind : {"serial", "parallel", "alternating"}) {
      for (int threads : thread_counts) {
        if (kind == "serial" && threads > 1) continue;
        SamplerOptions so;
        so.env_id = env_id;
        so.num_envs = B;
        so.num_steps = T;
        so.num_threads = threads;
        auto s = make_sampler(kind, so);
        RolloutBuffer buf;
        const auto r = rates([&] { s->collect(agent, buf); }, static_cast<double>(B) * T, seconds, repeats);
        const double m = median(r);
        if (kind == "parallel") par[threads] = m;
        std::string extra;
        if (kind == "alternating") extra = fmt::format(", \"ratio_vs_parallel\": {:.3f}", m / par[threads]);
        if (!rows.empty()) rows += ",\n";
        rows += fmt::format(
            "    {{\"num_envs\": {}, \"sampler\": \"{}\", \"threads\": {}, \"steps_per_s\": {:.0f}{}, "
            "\"cpu_per_wall\": {:.2f}, \"env_ns_per_step\": {:.1f}, \"inference_ns_per_row\": {:.1f}}}",
            B, kind, threads, m, extra, g_cpu_per_wall, 1e9 / env_rate, 1e9 / inf_rate);
      }
    }
  }
  std::printf(
      "{\n  \"benchmark\": \"sampler throughput (env steps/s incl. inference)\",\n  \"env\": \"%s\",\n"
      "  \"sleep_us_per_env_step\": %d,\n  \"policy\": \"%d-%d tanh MLP actor + critic\",\n"
      "  \"num_steps\": %d,\n  \"results\": [\n%s\n  ]\n}\n",
      env_id.c_str(), g_sleep_us, hidden, hidden, T, rows.c_str());
  return 0;
}
