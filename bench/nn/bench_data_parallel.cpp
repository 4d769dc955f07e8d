// DataParallel on CPU ranks: the share of all-reduce time hidden behind
// backward. Run under `mpiexec -n 2 bench_data_parallel [--sizes=1024,1024,1024,1024]
// [--batch=64] [--bucket_mb=1] [--iters=30]`. Rank 0 prints one JSON object (medians):
//   backward_s     forward + backward alone (no communication)
//   allreduce_s    the same buckets all-reduced alone: all started non-blocking back to
//                  back, then waited (the cheapest way to move them; the baseline)
//   allreduce_blocking_s  the same, one blocking all-reduce after another
//   dp_s           forward + DataParallel::backward (all-reduces overlapped, averaged)
//   wait_s         of dp_s, time spent waiting in finish() (exposed communication)
//   hidden_share   (backward_s + allreduce_s - dp_s) / allreduce_s, clamped to [0, 1]:
//                  the share of the communication time that backward absorbed
//   exposed_share  wait_s / allreduce_s: communication left to wait for after backward
// MPICH progresses non-blocking collectives only inside MPI calls; DataParallel tests its
// requests at each layer boundary. MPICH_ASYNC_PROGRESS=1 adds a progress thread.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "app_main.hpp"
#include "herd/core/mpi_communicator.hpp"
#include "herd/core/rng.hpp"
#include "herd/nn/data_parallel.hpp"
#include "herd/nn/losses.hpp"
#include "herd/nn/mlp.hpp"

using namespace herd;
using namespace herd::nn;
using Clock = std::chrono::steady_clock;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

std::vector<std::int64_t> parse_sizes(const std::string& s) {
  std::vector<std::int64_t> out;
  std::size_t pos = 0;
  while (pos < s.size()) {
    std::size_t next = s.find(',', pos);
    if (next == std::string::npos) next = s.size();
    out.push_back(std::stoll(s.substr(pos, next - pos)));
    pos = next + 1;
  }
  return out;
}

int run_main(int argc, char** argv) {
  std::vector<std::int64_t> sizes{1024, 1024, 1024, 1024};
  std::int64_t batch = 64;
  double bucket_mb = 1.0;
  int iters = 30;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--sizes=", 0) == 0) sizes = parse_sizes(a.substr(8));
    else if (a.rfind("--batch=", 0) == 0) batch = std::stoll(a.substr(8));
    else if (a.rfind("--bucket_mb=", 0) == 0) bucket_mb = std::stod(a.substr(12));
    else if (a.rfind("--iters=", 0) == 0) iters = std::stoi(a.substr(8));
    else {
      std::fprintf(stderr, "bench_data_parallel: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  MpiCommunicator comm;
  MlpOptions o;
  o.sizes = sizes;
  o.dtype = DType::kFloat32;
  Mlp model(o);
  model.set_input_grad(false);
  Tensor x({batch, sizes.front()}, DType::kFloat32), y({batch, sizes.back()}, DType::kFloat32);
  RngCursor c = RngStream(5, static_cast<std::uint32_t>(comm.rank()), RngPurpose::kUser).at(0);
  for (std::int64_t i = 0; i < x.numel(); ++i) x.set_item(i, c.normal());
  for (std::int64_t i = 0; i < y.numel(); ++i) y.set_item(i, c.normal());
  MseLoss loss;

  // 1. forward + backward alone.
  std::vector<double> t_bwd;
  for (int it = 0; it < iters + 3; ++it) {
    comm.barrier();
    const auto t0 = Clock::now();
    loss.forward(model.forward(x), y);
    model.zero_grad();
    model.backward(loss.backward());
    if (it >= 3) t_bwd.push_back(since(t0));
  }

  DataParallelOptions dpo;
  dpo.bucket_bytes = static_cast<std::size_t>(bucket_mb * 1024 * 1024);
  DataParallel dp(model, comm, dpo);

  // 2. the same buckets all-reduced alone, blocking, one after another.
  std::vector<float> flat(static_cast<std::size_t>(model.parameter_count()), 1.0f);
  std::vector<double> t_ar;
  for (int it = 0; it < iters + 3; ++it) {
    comm.barrier();
    const auto t0 = Clock::now();
    std::size_t off = 0;
    for (std::size_t b = 0; b < dp.bucket_count(); ++b) {
      comm.allreduce(flat.data() + off, dp.bucket_elements(b), DataType::kFloat32, ReduceOp::kSum);
      off += dp.bucket_elements(b);
    }
    if (it >= 3) t_ar.push_back(since(t0));
  }

  // 2b. the same buckets, all started non-blocking, then waited.
  std::vector<double> t_ar_async;
  std::vector<std::unique_ptr<CommRequest>> reqs;
  for (int it = 0; it < iters + 3; ++it) {
    comm.barrier();
    const auto t0 = Clock::now();
    std::size_t off = 0;
    for (std::size_t b = 0; b < dp.bucket_count(); ++b) {
      reqs.push_back(
          comm.allreduce_async(flat.data() + off, dp.bucket_elements(b), DataType::kFloat32, ReduceOp::kSum));
      off += dp.bucket_elements(b);
    }
    for (auto& r : reqs) r->wait();
    reqs.clear();
    if (it >= 3) t_ar_async.push_back(since(t0));
  }

  // 3. forward + DataParallel backward.
  std::vector<double> t_dp, t_wait, in_bwd;
  for (int it = 0; it < iters + 3; ++it) {
    comm.barrier();
    const auto t0 = Clock::now();
    loss.forward(dp.forward(x), y);
    model.zero_grad();
    dp.backward(loss.backward());
    if (it >= 3) {
      t_dp.push_back(since(t0));
      t_wait.push_back(dp.stats().wait_seconds);
      in_bwd.push_back(static_cast<double>(dp.stats().buckets_in_backward));
    }
  }
  const double bwd = median(t_bwd), ar = median(t_ar_async), dps = median(t_dp);
  const double hidden = std::clamp((bwd + ar - dps) / ar, 0.0, 1.0);
  if (comm.rank() == 0) {
    nlohmann::json j;
    std::string s;
    for (auto v : sizes) {
      if (!s.empty()) s += '-';
      s += std::to_string(v);
    }
    j["model"] = "mlp " + s + " tanh float32";
    j["ranks"] = comm.size();
    j["batch"] = batch;
    j["parameters"] = model.parameter_count();
    j["bucket_mb"] = bucket_mb;
    j["buckets"] = dp.bucket_count();
    j["buckets_started_in_backward"] = median(in_bwd);
    j["backward_s"] = bwd;
    j["allreduce_s"] = ar;
    j["allreduce_blocking_s"] = median(t_ar);
    j["dp_s"] = dps;
    j["wait_s"] = median(t_wait);
    j["hidden_share"] = hidden;
    j["exposed_share"] = median(t_wait) / ar;
    const char* ap = std::getenv("MPICH_ASYNC_PROGRESS");
    j["mpich_async_progress"] = ap ? ap : "";
    std::printf("%s\n", j.dump(2).c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return herd::apps::guarded_main("bench_data_parallel", run_main, argc, argv); }
