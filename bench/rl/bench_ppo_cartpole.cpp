// Wall time from the start of PPO training on CartPole-v1 (RL Zoo settings: herd-rl's
// defaults) to a mean return >= 475 over the last 100 training episodes. Median over fixed
// seeds; prints one JSON document. With --peer, Stable-Baselines3's PPO with the same
// settings (sb3_ppo_cartpole.py, one torch thread) is measured in the same run, interleaved
// seed by seed (herd seed 0, SB3 seed 0, herd seed 1, ...) so load changes hit both sides,
// in the venv that bench/peer-venv makes from PyPI (or the Python given by --python); the
// speedup is the ratio of the two medians. Without a measured peer no ratio is printed. CPU
// seconds (std::clock) are printed beside wall seconds because these machines are shared.
//
// Usage: bench_ppo_cartpole [--seeds N] [--max-steps S] [--peer [--python EXE]]
//        bench_ppo_cartpole --throughput [--steps S] [--sampler KIND --threads N]
//        bench_ppo_cartpole --config FILE --threshold R [--seeds N] [--first-seed K]
//                           [--max-steps S] [--nn-threads T] [--set key=value]...
// --config: time to a threshold from process start, for any herd-rl configuration: each
// seed runs in a fresh child process (this program, exec'd), timed by the parent from
// before the spawn to the child's exit, which the child calls as soon as the mean return
// of the last 100 training episodes reaches R (so loading, reading the configuration,
// building envs and networks and training are all in it; nothing is written). Prints the
// per-seed wall and CPU seconds (the child's user + system time) and min/median.
// --throughput instead prints end-to-end PPO training throughput (env steps/s:
// sampling with inference, GAE and the update, as `herd-rl train` runs) of the CartPole-v1
// presets examples/rl/cartpole_ppo{,_256,_1024,_4096}.toml over at least S env steps
// each (default 2e5, after one untimed iteration), the sampling-only rate (`collect` with
// inference) of the same configuration, CPU seconds per wall second, and the ratio to the
// 8-env preset measured in the same run. KIND/N override sampler.kind/num_threads.
#include <spawn.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app_main.hpp"
#include "herd/io/config.hpp"
#include "herd/nn/module.hpp"
#include "herd/rl/trainer.hpp"

namespace {

double wall_now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }
double cpu_now() { return static_cast<double>(std::clock()) / CLOCKS_PER_SEC; }

// End-to-end and sampling-only env steps/s of each CartPole preset (see the usage above).
int throughput(long long min_steps, const std::string& sampler, int threads) {
  const std::vector<std::string> presets = {"cartpole_ppo", "cartpole_ppo_256", "cartpole_ppo_1024",
                                            "cartpole_ppo_4096"};
  std::printf("{\n  \"benchmark\": \"ppo_cartpole_throughput\",\n  \"min_env_steps\": %lld,\n  \"configs\": [\n",
              min_steps);
  double base = 0;
  for (std::size_t i = 0; i < presets.size(); ++i) {
    std::vector<std::string> sets = {"output_prefix=bench_ppo_throughput", "total_steps=1000000000"};
    if (!sampler.empty()) sets.push_back("sampler.kind=" + sampler);
    if (threads > 0) sets.push_back("sampler.num_threads=" + std::to_string(threads));
    std::string text;
    const auto cfg =
        herd::rl::load_train_config(std::string(HERD_EXAMPLES_DIR) + "/" + presets[i] + ".toml", sets, &text);
    herd::rl::Trainer t(cfg, text);
    t.iterate();  // warm-up: buffers, threads
    const std::int64_t s0 = t.env_steps();
    double w0 = wall_now(), c0 = cpu_now();
    do t.iterate();
    while (t.env_steps() - s0 < min_steps || t.iteration() < 4);
    const double train_sps = static_cast<double>(t.env_steps() - s0) / (wall_now() - w0);
    const double train_cpu = (cpu_now() - c0) / (wall_now() - w0);
    herd::rl::RolloutBuffer buf;
    std::int64_t n = 0;
    w0 = wall_now();
    do {
      t.sampler().collect(t.agent(), buf);
      n += cfg.steps_per_iteration();
    } while (n < min_steps);
    const double sample_sps = static_cast<double>(n) / (wall_now() - w0);
    if (i == 0) base = train_sps;
    std::printf(
        "    {\"preset\": \"%s\", \"num_envs\": %d, \"num_steps\": %d, \"epochs\": %d, \"minibatch_size\": %d, "
        "\"train_env_steps_per_s\": %.0f, \"sample_env_steps_per_s\": %.0f, \"cpu_per_wall\": %.2f, "
        "\"train_ratio_vs_8_envs\": %.2f}%s\n",
        presets[i].c_str(), cfg.sampler_options.num_envs, cfg.sampler_options.num_steps, cfg.ppo.epochs,
        cfg.ppo.minibatch_size, train_sps, sample_sps, train_cpu, train_sps / base, i + 1 < presets.size() ? "," : "");
    std::fflush(stdout);
  }
  std::printf("  ],\n  \"gpu_goal_env_steps_per_s\": 2000000\n}\n");
  std::remove("bench_ppo_throughput.ckpt");
  return 0;
}

// Runs a command and returns its stdout (empty on failure; *status gets the exit status).
std::string run_capture(const std::string& cmd, int* status) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) {
    *status = -1;
    return out;
  }
  char buf[4096];
  while (std::fgets(buf, sizeof buf, p)) out += buf;
  const int st = pclose(p);
  *status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

// One SB3 run (sb3_ppo_cartpole.py) for `seed`; a JSON object, or {"error": ...}.
nlohmann::json sb3_run(const std::string& python, int seed, long long max_steps) {
  int st = 0;
  const std::string out = run_capture("'" + python + "' '" + HERD_BENCH_SB3_SCRIPT + "' --seed " +
                                          std::to_string(seed) + " --max-steps " + std::to_string(max_steps),
                                      &st);
  // The JSON is the last line (torch or gymnasium may print warnings before it).
  std::string line = out;
  while (!line.empty() && line.back() == '\n') line.pop_back();
  line = line.substr(line.find_last_of('\n') == std::string::npos ? 0 : line.find_last_of('\n') + 1);
  auto j = nlohmann::json::parse(line, nullptr, false);
  if (st != 0 || j.is_discarded() || !j.contains("seconds")) {
    return {{"error", "sb3_ppo_cartpole.py exited " + std::to_string(st)}};
  }
  return j;
}

double median(std::vector<double> v) {
  if (v.empty()) return -1;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

// The child of --config: trains one seed and exits at once when the threshold is reached.
int child_run(const std::string& config, const std::vector<std::string>& sets, double threshold, long long max_steps,
              int nn_threads) {
  herd::nn::set_num_threads(nn_threads);
  std::string text;
  const auto cfg = herd::rl::load_train_config(config, sets, &text);
  herd::rl::Trainer t(cfg, text);
  bool reached = false;
  while (!t.done() && t.env_steps() < max_steps) {
    t.iterate();
    if (t.recent_episodes() >= 100 && t.recent_mean_return() >= threshold) {
      reached = true;
      break;
    }
  }
  const double mean = t.recent_episodes() > 0 ? t.recent_mean_return() : 0.0;
  std::printf(
      "{\"reached\": %s, \"env_steps\": %lld, \"iterations\": %lld, \"episodes\": %zu, \"mean_return\": %.2f}\n",
      reached ? "true" : "false", static_cast<long long>(t.env_steps()), static_cast<long long>(t.iteration()),
      t.recent_episodes(), mean);
  std::fflush(stdout);
  std::_Exit(0);  // no teardown: the time counted ends here
}

int config_runs(const char* self, const std::string& config, const std::vector<std::string>& sets, double threshold,
                int first_seed, int seeds, long long max_steps, int nn_threads) {
  std::vector<double> walls, cpus;
  nlohmann::json runs = nlohmann::json::array();
  for (int s = first_seed; s < first_seed + seeds; ++s) {
    std::vector<std::string> args = {self,           "--child",
                                     "--config",     config,
                                     "--threshold",  std::to_string(threshold),
                                     "--max-steps",  std::to_string(max_steps),
                                     "--nn-threads", std::to_string(nn_threads),
                                     "--set",        "seed=" + std::to_string(s),
                                     "--set",        "output_prefix=/tmp/bench_ppo_child"};
    for (const auto& kv : sets) args.insert(args.end(), {"--set", kv});
    std::vector<char*> argv;
    argv.reserve(args.size() + 1);
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    int fds[2];
    if (pipe(fds) != 0) return 1;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    pid_t pid = 0;
    const double w0 = wall_now();
    if (posix_spawn(&pid, self, &fa, nullptr, argv.data(), environ) != 0) return 1;
    close(fds[1]);
    std::string out;
    char buf[4096];
    ssize_t k;
    while ((k = read(fds[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<std::size_t>(k));
    close(fds[0]);
    int status = 0;
    rusage ru{};
    wait4(pid, &status, 0, &ru);
    const double wall = wall_now() - w0;
    posix_spawn_file_actions_destroy(&fa);
    const double cpu = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                       1e-6 * static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
    auto j = nlohmann::json::parse(out.substr(0, out.find('\n')), nullptr, false);
    if (j.is_discarded()) j = {{"error", "child exited " + std::to_string(status) + ": " + out}};
    j["seed"] = s;
    j["wall_seconds"] = wall;
    j["cpu_seconds"] = cpu;
    if (j.value("reached", false)) {
      walls.push_back(wall);
      cpus.push_back(cpu);
    }
    std::fprintf(stderr, "seed %d: %s\n", s, j.dump().c_str());
    runs.push_back(std::move(j));
  }
  nlohmann::json doc = {{"benchmark", "time_to_threshold_from_process_start"},
                        {"config", config},
                        {"set", sets},
                        {"threshold", threshold},
                        {"criterion", "mean return of the last 100 training episodes"},
                        {"nn_threads", nn_threads},
                        {"runs", runs},
                        {"reached", walls.size()},
                        {"seeds", seeds}};
  if (!walls.empty()) {
    doc["min_wall_seconds"] = *std::min_element(walls.begin(), walls.end());
    doc["median_wall_seconds"] = median(walls);
    doc["max_wall_seconds"] = *std::max_element(walls.begin(), walls.end());
    doc["median_cpu_seconds"] = median(cpus);
  }
  std::printf("%s\n", doc.dump(2).c_str());
  return 0;
}

namespace {

int run_main(int argc, char** argv) {
  int seeds = 5;
  long long max_steps = 200000;
  bool tp = false;
  long long tp_steps = 200000;
  std::string sampler;
  int threads = 0;
  bool peer = false, child = false;
  std::string python, config;
  std::vector<std::string> sets;
  double threshold = 475.0;
  int first_seed = 0, nn_threads = 1;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--throughput")) tp = true;
    else if (!std::strcmp(argv[i], "--peer")) peer = true;
    else if (!std::strcmp(argv[i], "--child")) child = true;
    else if (i + 1 >= argc) break;
    else if (!std::strcmp(argv[i], "--config")) config = argv[++i];
    else if (!std::strcmp(argv[i], "--set")) sets.emplace_back(argv[++i]);
    else if (!std::strcmp(argv[i], "--threshold")) threshold = std::atof(argv[++i]);
    else if (!std::strcmp(argv[i], "--first-seed")) first_seed = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--nn-threads")) nn_threads = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--seeds")) seeds = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--max-steps")) max_steps = std::atoll(argv[++i]);
    else if (!std::strcmp(argv[i], "--steps")) tp_steps = std::atoll(argv[++i]);
    else if (!std::strcmp(argv[i], "--sampler")) sampler = argv[++i];
    else if (!std::strcmp(argv[i], "--threads")) threads = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--python")) python = argv[++i];
  }
  if (child) return child_run(config, sets, threshold, max_steps, nn_threads);
  if (!config.empty()) {
    char self[4096];
    const ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0) return 1;
    self[len] = 0;
    return config_runs(self, config, sets, threshold, first_seed, seeds, max_steps, nn_threads);
  }
  herd::nn::set_num_threads(1);
  if (tp) return throughput(tp_steps, sampler, threads);
  std::string peer_note = "not measured (run with --peer)";
  if (peer && python.empty()) {
    int st = 0;
    python = run_capture(std::string("'") + HERD_BENCH_PEER_VENV + "' torch stable-baselines3 gymnasium", &st);
    while (!python.empty() && (python.back() == '\n' || python.back() == ' ')) python.pop_back();
    if (st != 0 || python.empty()) {
      peer = false;
      peer_note = "not measured (bench/peer-venv failed)";
    }
  }
  std::vector<double> times, cpus, peer_times, peer_cpus;
  std::vector<long long> steps;
  nlohmann::json peer_runs = nlohmann::json::array();
  std::printf("{\n  \"benchmark\": \"ppo_cartpole_time_to_475\",\n  \"runs\": [\n");
  for (int s = 0; s < seeds; ++s) {
    std::string text;
    const auto cfg = herd::rl::resolve_train_config(herd::io::Config("<bench>"),
                                                    {"seed=" + std::to_string(s), "output_prefix=bench_ppo"}, &text);
    const auto t0 = std::chrono::steady_clock::now();
    const std::clock_t c0 = std::clock();
    herd::rl::Trainer t(cfg, text);
    bool reached = false;
    while (!t.done() && t.env_steps() < max_steps) {
      t.iterate();
      if (t.recent_episodes() >= 100 && t.recent_mean_return() >= 475.0) {
        reached = true;
        break;
      }
    }
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double cpu = static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC;
    std::printf(
        "    {\"seed\": %d, \"reached\": %s, \"seconds\": %.3f, \"cpu_seconds\": %.3f, \"env_steps\": %lld}%s\n", s,
        reached ? "true" : "false", sec, cpu, static_cast<long long>(t.env_steps()), s + 1 < seeds ? "," : "");
    if (reached) {
      times.push_back(sec);
      cpus.push_back(cpu);
      steps.push_back(t.env_steps());
    }
    std::fflush(stdout);
    if (peer) {
      auto j = sb3_run(python, s, max_steps);
      if (j.contains("error")) {
        peer = false;
        peer_note = "not measured (" + j["error"].get<std::string>() + ")";
      } else if (j.value("reached", false)) {
        peer_times.push_back(j["seconds"].get<double>());
        peer_cpus.push_back(j["cpu_seconds"].get<double>());
      }
      peer_runs.push_back(std::move(j));
    }
  }
  std::sort(steps.begin(), steps.end());
  const double med = median(times);
  std::printf("  ],\n  \"reached\": %zu,\n  \"median_seconds\": %.3f,\n  \"median_env_steps\": %lld,\n", times.size(),
              med, steps.empty() ? -1LL : steps[steps.size() / 2]);
  std::printf("  \"median_cpu_seconds\": %.3f,\n", median(cpus));
  if (peer && !peer_times.empty() && med > 0) {
    const double pmed = median(peer_times);
    std::printf(
        "  \"sb3_runs\": %s,\n  \"sb3_reached\": %zu,\n  \"sb3_median_seconds\": %.3f,\n"
        "  \"sb3_median_cpu_seconds\": %.3f,\n  \"speedup_vs_sb3_median\": %.1f,\n",
        peer_runs.dump().c_str(), peer_times.size(), pmed, median(peer_cpus), pmed / med);
  } else {
    std::printf("  \"sb3\": \"%s\",\n",
                peer && peer_times.empty() ? "measured, but no SB3 run reached 475" : peer_note.c_str());
  }
  std::printf("  \"goal_seconds\": 0.5\n}\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return herd::apps::guarded_main("bench_ppo_cartpole", run_main, argc, argv); }
