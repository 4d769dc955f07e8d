// MLP 64-256-256-16 (tanh, float32): forward and a full train step (zero_grad, forward,
// MSE, backward, Adam) at batch 32, 256, 4096 with 1 and 2 threads (issue #8), against
// PyTorch CPU on the same work in the same run (bench_mlp_torch.py) when it is importable.
// Prints Google Benchmark's table, then a ratio table and one JSON object (medians).
// Flags: --no_torch (skip the baseline), --python=PATH (default /usr/bin/python3),
// --quick (fewer repetitions), --torch_passive (baseline with OMP_WAIT_POLICY=PASSIVE),
// plus Google Benchmark's own flags. The herd train step turns off the input gradient of
// the first layer (`set_input_grad(false)`), matching PyTorch, whose input has no
// requires_grad.
#include <benchmark/benchmark.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

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

// Collects the median of each benchmark while printing the usual console table.
class Collector : public benchmark::ConsoleReporter {
 public:
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const auto& r : runs) {
      if (r.run_type == Run::RT_Aggregate && r.aggregate_name != "median") continue;
      // Milliseconds (all benchmarks use kMillisecond).
      medians[r.run_name.function_name] = r.GetAdjustedRealTime();
    }
    ConsoleReporter::ReportRuns(runs);
  }
  std::map<std::string, double> medians;
};

std::string run_capture(const std::string& cmd) {
  std::string out;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  while (std::size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  pclose(p);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  bool torch = true, quick = false, torch_passive = false;
  std::string python = "/usr/bin/python3";
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--no_torch")) torch = false;
    else if (!std::strcmp(argv[i], "--quick")) quick = true;
    else if (!std::strcmp(argv[i], "--torch_passive")) torch_passive = true;
    else if (!std::strncmp(argv[i], "--python=", 9)) python = argv[i] + 9;
    else args.push_back(argv[i]);
  }
  int bargc = static_cast<int>(args.size());
  const int reps = quick ? 3 : 5;
  for (int threads : {1, 2})
    for (std::int64_t batch : {32, 256, 4096}) {
      const std::string suffix = fmt::format("/{}/{}", batch, threads);
      benchmark::RegisterBenchmark(fmt::format("forward{}", suffix).c_str(), bm_forward, batch, threads)
          ->Unit(benchmark::kMillisecond)->Repetitions(reps)->ReportAggregatesOnly(true)
          ->MinTime(quick ? 0.1 : 0.3)->UseRealTime();
      benchmark::RegisterBenchmark(fmt::format("train{}", suffix).c_str(), bm_train, batch, threads)
          ->Unit(benchmark::kMillisecond)->Repetitions(reps)->ReportAggregatesOnly(true)
          ->MinTime(quick ? 0.1 : 0.3)->UseRealTime();
    }
  benchmark::Initialize(&bargc, args.data());
  Collector rep;
  benchmark::RunSpecifiedBenchmarks(&rep);

  nlohmann::json out;
  out["herd_ms"] = rep.medians;
  if (torch) {
    // PyTorch's OpenMP threads spin while they wait (libgomp's default), which on a shared,
    // loaded machine can make its 2-thread runs pathologically slow; --torch_passive runs
    // the baseline with OMP_WAIT_POLICY=PASSIVE (which in turn slows its 1-thread runs).
    const char* policy = std::getenv("OMP_WAIT_POLICY");
    out["torch_omp_wait_policy"] = torch_passive ? "PASSIVE" : (policy ? policy : "default");
    const std::string cmd = fmt::format("{}{} {}{} 2>/dev/null", torch_passive ? "OMP_WAIT_POLICY=PASSIVE " : "",
                                        python, HERD_BENCH_TORCH_SCRIPT, quick ? " --quick" : "");
    const std::string text = run_capture(cmd);
    nlohmann::json tj = nlohmann::json::parse(text, nullptr, false);
    if (tj.is_discarded() || !tj.is_object()) {
      out["torch"] = fmt::format("skipped: baseline did not run ({})", python);
    } else if (tj.contains("skipped")) {
      out["torch"] = tj["skipped"];
    } else {
      out["torch"] = tj["torch"];
      out["torch_blas_info"] = tj["blas_info"];
      out["torch_blas_loaded"] = tj["blas_loaded"];
      std::printf("\nPyTorch %s, %s, loaded: %s\n", tj["torch"].get<std::string>().c_str(),
                  tj["blas_info"].get<std::string>().c_str(), tj["blas_loaded"].dump().c_str());
      std::printf("%-18s %12s %12s %10s\n", "benchmark", "herd ms", "torch ms", "speedup");
      for (const auto& r : tj["results"]) {
        const std::string name = r["name"];
        const double t = r["ms"];
        out["torch_ms"][name] = t;
        if (!rep.medians.count(name)) continue;
        const double h = rep.medians[name];
        out["speedup"][name] = t / h;
        std::printf("%-18s %12.4f %12.4f %9.2fx\n", name.c_str(), h, t, t / h);
      }
    }
  } else {
    out["torch"] = "skipped: --no_torch";
  }
  std::cout << out.dump() << std::endl;
  benchmark::Shutdown();
  return 0;
}
