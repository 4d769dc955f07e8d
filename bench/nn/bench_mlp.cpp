// MLP 64-256-256-16 (tanh, float32): forward and a full train step (zero_grad, forward,
// MSE, backward, Adam) at batch 32, 256, 4096 with 1 and 2 threads, against
// PyTorch CPU on the same work in the same run (bench_mlp_torch.py) when it is importable.
// The two sides are interleaved round by round (herd round 1, torch round 1, herd round 2,
// ...; each round times every case once) so load changes on a shared machine hit both; the
// tables give min/median/max over the rounds and the ratio of the medians, then one JSON
// object. Flags: --no_torch (skip the baseline), --python=PATH (default: the venv made by
// bench/peer-venv with PyPI's torch), --rounds=N (default 5), --quick (3 rounds, shorter
// timing), --torch_passive (baseline with OMP_WAIT_POLICY=PASSIVE),
// plus Google Benchmark's own flags. The herd train step turns off the input gradient of
// the first layer (`set_input_grad(false)`), matching PyTorch, whose input has no
// requires_grad.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "app_main.hpp"
#include "herd/core/rng.hpp"
#include "herd/nn/losses.hpp"
#include "herd/nn/mlp.hpp"
#include "herd/nn/optimizer.hpp"

using namespace herd;
using namespace herd::nn;

namespace {

Tensor random_tensor(const Shape& s, std::uint32_t stream) {
  Tensor t(s, DType::kFloat32);
  RngCursor c = RngStream(7, stream, RngPurpose::kUser).at(0);
  float* p = t.data<float>();
  for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = static_cast<float>(c.normal());
  return t;
}

MlpOptions mlp_options() {
  MlpOptions o;
  o.sizes = {64, 256, 256, 16};
  o.activation = Activation::kTanh;
  o.dtype = DType::kFloat32;
  return o;
}

void bm_forward(benchmark::State& st, std::int64_t batch, int threads) {
  set_num_threads(threads);
  Mlp mlp(mlp_options());
  mlp.eval();
  const Tensor x = random_tensor({batch, 64}, 1);
  for (auto _ : st) benchmark::DoNotOptimize(mlp.forward(x).raw());
  set_num_threads(1);
}

void bm_train(benchmark::State& st, std::int64_t batch, int threads) {
  set_num_threads(threads);
  Mlp mlp(mlp_options());
  mlp.set_input_grad(false);  // the input is data, as in PyTorch (no requires_grad)
  Adam adam(mlp.named_parameters(), 1e-4);
  MseLoss mse;
  const Tensor x = random_tensor({batch, 64}, 1);
  const Tensor y = random_tensor({batch, 16}, 2);
  for (auto _ : st) {
    adam.zero_grad();
    benchmark::DoNotOptimize(mse.forward(mlp.forward(x), y));
    mlp.backward(mse.backward());
    adam.step();
  }
  set_num_threads(1);
}

// Collects every timing (milliseconds; all benchmarks use kMillisecond) by name while
// printing the usual console table.
class Collector : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const auto& r : runs) samples[r.run_name.function_name].push_back(r.GetAdjustedRealTime());
    ConsoleReporter::ReportRuns(runs);
  }
  std::map<std::string, std::vector<double>> samples;
};

// {min, median, max} of a non-empty sample.
std::vector<double> summary(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return {v.front(), n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]), v.back()};
}

std::string run_capture(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  pclose(p);
  return out;
}

// Runs `cmd` and returns its stdout if it exits 0 (empty otherwise).
std::string run_checked(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  return pclose(p) == 0 ? out : std::string();
}

int run_main(int argc, char** argv) {
  bool torch = true, quick = false, torch_passive = false;
  int rounds = 5;
  std::string python;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--no_torch")) torch = false;
    else if (!std::strcmp(argv[i], "--quick")) quick = true;
    else if (!std::strcmp(argv[i], "--torch_passive")) torch_passive = true;
    else if (!std::strncmp(argv[i], "--python=", 9)) python = argv[i] + 9;
    else if (!std::strncmp(argv[i], "--rounds=", 9)) rounds = std::max(1, std::atoi(argv[i] + 9));
    else args.push_back(argv[i]);
  }
  if (quick) rounds = std::min(rounds, 3);
  int bargc = static_cast<int>(args.size());
  for (int threads : {1, 2})
    for (std::int64_t batch : {32, 256, 4096}) {
      const std::string suffix = fmt::format("/{}/{}", batch, threads);
      benchmark::RegisterBenchmark(fmt::format("forward{}", suffix).c_str(), bm_forward, batch, threads)
          ->Unit(benchmark::kMillisecond)
          ->MinTime(quick ? 0.1 : 0.3)
          ->UseRealTime();
      benchmark::RegisterBenchmark(fmt::format("train{}", suffix).c_str(), bm_train, batch, threads)
          ->Unit(benchmark::kMillisecond)
          ->MinTime(quick ? 0.1 : 0.3)
          ->UseRealTime();
    }
  benchmark::Initialize(&bargc, args.data());
  nlohmann::json out;
  std::string torch_cmd;
  if (torch && python.empty()) {
    python = run_checked(std::string("'") + HERD_BENCH_PEER_VENV + "' torch");
    while (!python.empty() && (python.back() == '\n' || python.back() == ' ')) python.pop_back();
    if (python.empty()) {
      torch = false;
      out["torch"] = "skipped: bench/peer-venv could not install torch";
    }
  }
  if (torch) {
    // PyTorch's OpenMP threads spin while they wait (libgomp's default), which on a shared,
    // loaded machine can make its 2-thread runs pathologically slow; --torch_passive runs
    // the baseline with OMP_WAIT_POLICY=PASSIVE (which in turn slows its 1-thread runs).
    const char* policy = std::getenv("OMP_WAIT_POLICY");
    out["torch_omp_wait_policy"] = torch_passive ? "PASSIVE" : (policy ? policy : "default");
    torch_cmd = fmt::format("{}'{}' '{}' --reps 1{} 2>/dev/null", torch_passive ? "OMP_WAIT_POLICY=PASSIVE " : "",
                            python, HERD_BENCH_TORCH_SCRIPT, quick ? " --quick" : "");
  }
  Collector rep;
  std::map<std::string, std::vector<double>> torch_ms;
  for (int r = 0; r < rounds; ++r) {
    benchmark::RunSpecifiedBenchmarks(&rep);
    if (!torch) continue;
    nlohmann::json tj = nlohmann::json::parse(run_capture(torch_cmd), nullptr, false);
    if (tj.is_discarded() || !tj.is_object()) {
      out["torch"] = fmt::format("skipped: baseline did not run ({})", python);
      torch = false;
    } else if (tj.contains("skipped")) {
      out["torch"] = tj["skipped"];
      torch = false;
    } else {
      out["torch"] = tj["torch"];
      out["torch_blas_info"] = tj["blas_info"];
      for (const auto& x : tj["results"]) torch_ms[x["name"].get<std::string>()].push_back(x["ms"].get<double>());
    }
  }
  out["rounds"] = rounds;
  std::printf("\n%-18s %26s", "benchmark", "herd ms min/median/max");
  if (!torch_ms.empty()) {
    std::printf(" %26s %9s\n", "torch ms min/median/max", "speedup");
    std::printf("(PyTorch %s, %s)\n", out["torch"].get<std::string>().c_str(),
                out["torch_blas_info"].get<std::string>().c_str());
  } else {
    std::printf("\n");
  }
  for (const auto& [name, v] : rep.samples) {
    const auto h = summary(v);
    out["herd_ms"][name] = h;
    std::printf("%-18s %8.4f %8.4f %8.4f", name.c_str(), h[0], h[1], h[2]);
    if (torch_ms.count(name)) {
      const auto t = summary(torch_ms[name]);
      out["torch_ms"][name] = t;
      out["speedup"][name] = t[1] / h[1];
      std::printf(" %8.4f %8.4f %8.4f %8.2fx", t[0], t[1], t[2], t[1] / h[1]);
    }
    std::printf("\n");
  }
  if (!out.contains("torch")) out["torch"] = "skipped: --no_torch";
  std::cout << out.dump() << std::endl;
  benchmark::Shutdown();
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return herd::apps::guarded_main("bench_mlp", run_main, argc, argv); }
