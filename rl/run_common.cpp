#include "run_common.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <sstream>
#include <string_view>
#include <utility>

#include <fmt/format.h>

#include "herd/core/config.hpp"
#include "herd/core/device.hpp"
#include "herd/core/error.hpp"
#include "herd/core/mpi_communicator.hpp"
#include "herd/rl/dqn_trainer.hpp"
#if HERD_HAVE_NCCL
#include <cuda_runtime_api.h>

#include "herd/core/cuda/cuda_check.hpp"
#include "herd/core/nccl_communicator.hpp"
#endif

namespace herd::rl::detail {

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::string format_eta(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  char buf[32];
  const long t = std::lround(s);  // s + 0.5 would round the double below 0.5 (and odd s >= 2^52) up
  if (t >= 3600) std::snprintf(buf, sizeof buf, "%ldh%02ldm", t / 3600, (t / 60) % 60);
  else if (t >= 60) std::snprintf(buf, sizeof buf, "%ldm%02lds", t / 60, t % 60);
  else std::snprintf(buf, sizeof buf, "%lds", t);
  return buf;
}

namespace {
std::vector<double> host_values(const nn::Tensor& t) {
  return t.is_cuda() ? t.to(Device::cpu()).to_vector() : t.to_vector();
}
}  // namespace

void save_tensors(io::CheckpointWriter& w, const std::string& p, const std::vector<nn::NamedTensor>& ts) {
  std::string names;
  for (const auto& t : ts) {
    names += t.name + "\n";
    w.add(p + t.name, host_values(t.tensor));
  }
  w.add_string(p + "names", names);
}

std::vector<nn::NamedTensor> load_tensors(const io::CheckpointReader& r, const std::string& p,
                                          std::vector<nn::NamedTensor> like, const std::string& who) {
  for (auto& t : like) {
    const auto v = r.get<double>(p + t.name);
    if (static_cast<std::int64_t>(v.size()) != t.tensor.numel())
      throw InputError(
          fmt::format("{}: \"{}{}\" has {} values in the checkpoint, but {} in this run (the network's "
                      "sizes follow the environment's observation and action sizes: was the "
                      "environment, e.g. an env.library, rebuilt with other sizes?)",
                      who, p, t.name, v.size(), t.tensor.numel()));
    t.tensor = nn::Tensor::from_vector(t.tensor.shape(), v, t.tensor.dtype());
  }
  return like;
}

void push_recent(std::deque<EpisodeInfo>& recent, const EpisodeInfo& e) {
  recent.push_back(e);
  if (recent.size() > kRecentWindow) recent.pop_front();
}

RecentStats recent_stats(const std::deque<EpisodeInfo>& recent) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  RecentStats s{nan, nan, nan, nan, nan, nan};
  if (recent.empty()) return s;
  s.min_return = s.max_return = recent.front().ret;
  s.min_length = s.max_length = static_cast<double>(recent.front().length);
  double ret = 0, len = 0;
  for (const auto& e : recent) {
    ret += e.ret;
    s.min_return = std::min(s.min_return, e.ret);
    s.max_return = std::max(s.max_return, e.ret);
    len += static_cast<double>(e.length);
    s.min_length = std::min(s.min_length, static_cast<double>(e.length));
    s.max_length = std::max(s.max_length, static_cast<double>(e.length));
  }
  s.mean_return = ret / static_cast<double>(recent.size());
  s.mean_length = len / static_cast<double>(recent.size());
  return s;
}

void save_recent(io::CheckpointWriter& w, const std::deque<EpisodeInfo>& recent) {
  std::vector<double> v;
  v.reserve(2 * recent.size());
  for (const auto& e : recent) {
    v.push_back(e.ret);
    v.push_back(static_cast<double>(e.length));
  }
  w.add("recent_episodes", v);
}

void load_recent(const io::CheckpointReader& r, std::deque<EpisodeInfo>& recent) {
  const auto v = r.get<double>("recent_episodes");
  recent.clear();
  for (std::size_t i = 0; i + 1 < v.size(); i += 2) recent.push_back({v[i], static_cast<std::int64_t>(v[i + 1])});
}

void write_parameters(io::H5Group& root, const std::string& name, const std::vector<nn::NamedTensor>& tensors) {
  io::H5Group g = root.create_group(name);
  for (const auto& t : tensors) {
    std::vector<hsize_t> shape;
    for (auto d : t.tensor.shape().dims()) shape.push_back(static_cast<hsize_t>(d));
    const auto v = host_values(t.tensor);
    std::vector<float> fv(v.begin(), v.end());
    g.write(t.name, fv, shape);
  }
}

std::vector<io::TbScalar> tensorboard_scalars(std::span<const char* const> names, std::span<const double> values,
                                              std::size_t time_from, const std::vector<std::string>& skip) {
  std::vector<io::TbScalar> out;
  for (std::size_t c = 2; c < values.size() && c < names.size(); ++c) {
    const std::string name = names[c];
    if (std::find(skip.begin(), skip.end(), name) != skip.end()) continue;
    const char* section = c <= 3 || c >= time_from ? "time/" : c <= 9 ? "rollout/" : "train/";
    out.push_back({section + name, values[c]});
  }
  return out;
}

std::unique_ptr<io::TensorBoardWriter> open_tensorboard(const std::string& dir, std::int64_t env_steps) {
  auto tb = std::make_unique<io::TensorBoardWriter>(dir);
  tb->add_session_start(env_steps + 1);
  return tb;
}

std::vector<EpisodeInfo> gather_episodes(Communicator& comm, const std::vector<EpisodeInfo>& mine) {
  if (comm.size() == 1) return mine;
  std::vector<EpisodeInfo> all;
  const std::int64_t n = static_cast<std::int64_t>(mine.size());
  const auto counts = comm.allgather(std::span<const std::int64_t>(&n, 1));
  const std::int64_t most = *std::max_element(counts.begin(), counts.end());
  std::vector<double> send(static_cast<std::size_t>(2 * most), 0.0);
  for (std::size_t i = 0; i < mine.size(); ++i) {
    send[2 * i] = mine[i].ret;
    send[2 * i + 1] = static_cast<double>(mine[i].length);
  }
  const auto recv = comm.allgather(std::span<const double>(send));
  for (std::size_t r = 0; r < counts.size(); ++r)
    for (std::int64_t i = 0; i < counts[r]; ++i) {
      const std::size_t at = r * static_cast<std::size_t>(2 * most) + static_cast<std::size_t>(2 * i);
      all.push_back({recv[at], static_cast<std::int64_t>(recv[at + 1])});
    }
  return all;
}

bool add_rank_sections(io::CheckpointWriter& w, Communicator& comm, const std::string& prefix, const char* kind,
                       const std::function<void(io::CheckpointWriter&)>& write) {
  io::CheckpointWriter sw(kind, 1);
  write(sw);
  const std::vector<std::byte> mine = sw.serialize();
  const auto n = static_cast<std::int64_t>(mine.size());
  const auto sizes = comm.allgather(std::span<const std::int64_t>(&n, 1));
  const auto most = static_cast<std::size_t>(*std::max_element(sizes.begin(), sizes.end()));
  std::vector<std::uint8_t> send(most, 0), recv(comm.rank() == 0 ? most * sizes.size() : 0);
  std::memcpy(send.data(), mine.data(), mine.size());
  comm.gather(send.data(), recv.data(), most, DataType::kUint8, 0);
  if (comm.rank() != 0) return false;
  for (std::size_t r = 0; r < sizes.size(); ++r)
    w.add_bytes(prefix + "rank" + std::to_string(r),
                std::span<const std::byte>(reinterpret_cast<const std::byte*>(recv.data() + r * most),
                                           static_cast<std::size_t>(sizes[r])));
  return true;
}

io::CheckpointReader rank_section(const io::CheckpointReader& r, const std::string& path, const std::string& prefix,
                                  int rank, const char* kind) {
  const std::string section = prefix + "rank" + std::to_string(rank);
  io::CheckpointReader sr(r.bytes(section), path + ":" + section);
  sr.expect_kind(kind, 1);
  return sr;
}

std::int64_t checkpoint_ranks(const io::CheckpointReader& r) {
  return r.has("ranks") ? r.value<std::int64_t>("ranks") : 1;
}

void require_same_ranks(const std::string& who, const std::string& path, std::int64_t saved, int now) {
  if (saved != now)
    throw InputError(who + ": " + path + " was written by a run of " + std::to_string(saved) +
                     " rank(s), but this run has " + std::to_string(now) +
                     "; resume it with the same number of ranks (mpiexec -n " + std::to_string(saved) + ")");
}

EvalResult run_episodes(Env& env, float* obs, std::uint64_t seed, int episodes, std::int64_t max_episode_steps,
                        const std::function<StepResult()>& step) {
  EvalResult res;
  for (int e = 0; e < episodes; ++e) {
    if (e == 0) env.reset(seed, obs);
    else env.reset(obs);
    while (!res.add_step(step(), max_episode_steps)) {
    }
  }
  double m = 0;
  for (double r : res.returns) m += r;
  m /= static_cast<double>(res.returns.size());
  double v = 0;
  for (double r : res.returns) v += (r - m) * (r - m);
  res.mean = m;
  res.std = std::sqrt(v / static_cast<double>(res.returns.size()));
  return res;
}

RunEnd run_iterations(TrainingRun& run, Communicator& comm, std::ostream* progress, std::int64_t stop_after,
                      const volatile std::sig_atomic_t* interrupt, const RunHooks& hooks, int& interrupted_by) {
  const TrainConfig& config = run.config();
  if (comm.rank() != 0) progress = nullptr;
  const std::int64_t first = run.iteration();
  const double start = now_seconds();
  double last_checkpoint = start;
  interrupted_by = 0;
  RunEnd end = RunEnd::kDone;
  while (!run.done()) {
    if (stop_after >= 0 && run.iteration() - first >= stop_after) {
      end = RunEnd::kStopped;
      break;
    }
    hooks.iterate();
    const std::int64_t iteration = run.iteration();
    // Rank 0's clock decides a checkpoint by time; a stop requested on any rank stops all
    // (the largest request value wins).
    std::array<std::int32_t, 2> flags = {interrupt ? static_cast<std::int32_t>(*interrupt) : 0,
                                         comm.rank() == 0 && config.checkpoint_period_seconds > 0 &&
                                                 now_seconds() - last_checkpoint >= config.checkpoint_period_seconds
                                             ? 1
                                             : 0};
    if (comm.size() > 1) comm.allreduce(std::span<std::int32_t>(flags), ReduceOp::kMax);
    if (progress && config.progress_period > 0 && (iteration % config.progress_period == 0 || run.done() || flags[0])) {
      const double el = now_seconds() - start;
      const double sps = static_cast<double>((iteration - first) * config.steps_per_iteration()) / std::max(el, 1e-9);
      const double left = static_cast<double>((config.num_iterations() - iteration) * config.steps_per_iteration());
      char buf[256];
      std::snprintf(buf, sizeof buf, "iter %lld/%lld  steps %lld  %.0f steps/s  mean return %.2f",
                    static_cast<long long>(iteration), static_cast<long long>(config.num_iterations()),
                    static_cast<long long>(hooks.env_steps()), sps, hooks.mean_return());
      *progress << buf << (hooks.progress_detail ? hooks.progress_detail() : std::string()) << "  ETA "
                << format_eta(left / sps) << "\n"
                << std::flush;
    }
    if (run.done()) break;
    if (flags[0]) {
      interrupted_by = flags[0];
      end = RunEnd::kInterrupted;
      break;
    }
    if ((config.checkpoint_period > 0 && iteration % config.checkpoint_period == 0) || flags[1]) {
      run.save_checkpoint(run.checkpoint_path());
      last_checkpoint = now_seconds();
    }
  }
  run.save_checkpoint(run.checkpoint_path());
  if (end == RunEnd::kDone && comm.rank() == 0) run.write_output(run.output_path());
  return end;
}

Device rank_device(const Device& configured, const std::string& device_text, Communicator& comm,
                   const std::string& who) {
  const bool per_rank = configured.is_cuda() && comm.size() > 1 && device_text == "cuda";
  return data_parallel_device(configured, device_text, comm.size(), comm.rank(), node_local_rank(comm),
                              per_rank ? cuda_device_count() : 0, who);
}

#if HERD_HAVE_NCCL
struct DeviceComm::Impl {
  cudaStream_t stream = nullptr;
  std::unique_ptr<NcclCommunicator> nccl;
};

DeviceComm::DeviceComm(Communicator& bootstrap, int device) : impl_(std::make_unique<Impl>()) {
  HERD_CUDA_CHECK(cudaSetDevice(device));
  HERD_CUDA_CHECK(cudaStreamCreateWithFlags(&impl_->stream, cudaStreamNonBlocking));
  try {
    // NcclCommunicator makes `device` current for this thread, as wanted.
    impl_->nccl = std::make_unique<NcclCommunicator>(bootstrap, impl_->stream, device);
  } catch (...) {
    cudaStreamDestroy(impl_->stream);
    throw;
  }
}

DeviceComm::~DeviceComm() {
  impl_->nccl.reset();
  if (impl_->stream) cudaStreamDestroy(impl_->stream);
}

Communicator& DeviceComm::comm() { return *impl_->nccl; }
#else
struct DeviceComm::Impl {};

DeviceComm::DeviceComm(Communicator& bootstrap, int device) {
  (void)bootstrap;
  (void)device;
  throw InputError("rl::DeviceComm: this build of herd has no NCCL");
}

DeviceComm::~DeviceComm() = default;

Communicator& DeviceComm::comm() { throw InputError("rl::DeviceComm: this build of herd has no NCCL"); }
#endif

std::unique_ptr<DeviceComm> make_device_comm(Communicator& comm, const Device& device, const std::string& device_text,
                                             const std::string& who) {
  if (!device.is_cuda() || comm.size() <= 1) return nullptr;
  if (const std::string why = multi_gpu_refusal(device, comm.size()); !why.empty())
    throw InputError(who + ": device is \"" + device_text + "\" with " + std::to_string(comm.size()) + " ranks, but " +
                     why);
  return std::make_unique<DeviceComm>(comm, device.index);
}

}  // namespace herd::rl::detail

namespace herd::rl::detail {

namespace {

// The trainers write the evaluation's values into the last columns of their curve rows.
template <std::size_t N>
constexpr bool ends_with_eval_columns(const std::array<const char*, N>& columns) {
  const std::size_t first = N - kEvalCurveColumns.size();
  for (std::size_t k = 0; k < kEvalCurveColumns.size(); ++k)
    if (std::string_view(columns[first + k]) != kEvalCurveColumns[k]) return false;
  return true;
}
static_assert(ends_with_eval_columns(kCurveColumns));
static_assert(ends_with_eval_columns(kDqnCurveColumns));

}  // namespace

std::vector<std::vector<double>> load_curve(const io::CheckpointReader& r, std::span<const char* const> columns,
                                            std::span<const char* const> legacy) {
  std::vector<std::string> saved(legacy.begin(), legacy.end());
  if (r.has("curve_columns")) {
    saved.clear();
    std::istringstream in(r.string("curve_columns"));
    for (std::string line; std::getline(in, line);) saved.push_back(line);
  }
  std::vector<std::ptrdiff_t> to(saved.size(), -1);  // saved column -> current column
  for (std::size_t k = 0; k < saved.size(); ++k)
    for (std::size_t c = 0; c < columns.size(); ++c)
      if (saved[k] == columns[c]) to[k] = static_cast<std::ptrdiff_t>(c);
  const auto flat = r.get<double>("curve");
  std::vector<std::vector<double>> rows;
  for (std::size_t i = 0; !saved.empty() && i + saved.size() <= flat.size(); i += saved.size()) {
    std::vector<double> row(columns.size(), std::numeric_limits<double>::quiet_NaN());
    for (std::size_t k = 0; k < saved.size(); ++k)
      if (to[k] >= 0) row[static_cast<std::size_t>(to[k])] = flat[i + k];
    rows.push_back(std::move(row));
  }
  return rows;
}

PeriodicEvaluation::PeriodicEvaluation(const TrainConfig& c)
    : every_(c.eval_every_steps),
      episodes_(c.eval_episodes),
      stochastic_(c.eval_stochastic),
      save_best_(c.eval_save_best),
      max_episode_steps_(c.eval_max_episode_steps),
      seed_(c.seed),
      best_path_(c.output_prefix + "_best.ckpt"),
      stop_return_(c.eval_stop_return) {}

bool PeriodicEvaluation::reached_stop_return(std::int64_t iteration) const {
  return stop_return_ && !records_.empty() && records_.back().iteration == iteration &&
         records_.back().result.mean >= *stop_return_;
}

bool PeriodicEvaluation::due(std::int64_t env_steps, std::int64_t steps_per_iteration) const {
  return every_ > 0 && env_steps / every_ > (env_steps - steps_per_iteration) / every_;
}

bool PeriodicEvaluation::evaluate(Communicator& comm, std::int64_t iteration, std::int64_t env_steps,
                                  const std::function<EvalResult(int, bool, std::uint64_t, std::int64_t)>& evaluate) {
  const std::uint64_t seed = seed_ + 1 + static_cast<std::uint64_t>(records_.size() + 1);
  Record rec{iteration, env_steps, {}, stochastic_, max_episode_steps_};
  if (comm.rank() == 0) rec.result = evaluate(episodes_, stochastic_, seed, max_episode_steps_);
  if (comm.size() > 1) {
    // [episodes, truncated, capped, mean, std, returns..., lengths...] from rank 0.
    std::array<std::int64_t, 1> n = {static_cast<std::int64_t>(rec.result.returns.size())};
    comm.broadcast(std::span<std::int64_t>(n), 0);
    std::vector<double> v(5 + 2 * static_cast<std::size_t>(n[0]));
    if (comm.rank() == 0) {
      v[1] = static_cast<double>(rec.result.truncated);
      v[2] = static_cast<double>(rec.result.capped);
      v[3] = rec.result.mean;
      v[4] = rec.result.std;
      for (std::size_t e = 0; e < rec.result.returns.size(); ++e) {
        v[5 + e] = rec.result.returns[e];
        v[5 + rec.result.returns.size() + e] = static_cast<double>(rec.result.lengths[e]);
      }
    }
    comm.broadcast(std::span<double>(v), 0);
    if (comm.rank() != 0) {
      const auto e = static_cast<std::size_t>(n[0]);
      rec.result.truncated = static_cast<std::size_t>(v[1]);
      rec.result.capped = static_cast<std::size_t>(v[2]);
      rec.result.mean = v[3];
      rec.result.std = v[4];
      rec.result.returns.assign(v.begin() + 5, v.begin() + 5 + static_cast<std::ptrdiff_t>(e));
      for (std::size_t k = 0; k < e; ++k) rec.result.lengths.push_back(static_cast<std::int64_t>(v[5 + e + k]));
    }
  }
  bool best = true;
  for (const Record& r : records_) best = best && rec.result.mean > r.result.mean;
  records_.push_back(std::move(rec));
  return best;
}

bool PeriodicEvaluation::after_iteration(
    Communicator& comm, std::int64_t iteration, std::int64_t env_steps, std::int64_t steps_per_iteration,
    std::span<double> row_tail, std::ostream* progress,
    const std::function<EvalResult(int, bool, std::uint64_t, std::int64_t)>& evaluate_fn) {
  if (!due(env_steps, steps_per_iteration)) return false;
  const bool best = evaluate(comm, iteration, env_steps, evaluate_fn);
  const auto v = columns(iteration);
  std::copy(v.begin(), v.end(), row_tail.begin());
  if (progress) *progress << line(best) << std::flush;
  return best;
}

std::array<double, kEvalCurveColumns.size()> PeriodicEvaluation::columns(std::int64_t iteration) const {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::array<double, kEvalCurveColumns.size()> out;
  out.fill(nan);
  for (const Record& r : records_) {
    if (r.iteration != iteration) continue;
    const EvalResult& e = r.result;
    double len = 0;
    for (const auto l : e.lengths) len += static_cast<double>(l);
    out = {e.mean, e.std, *std::min_element(e.returns.begin(), e.returns.end()),
           *std::max_element(e.returns.begin(), e.returns.end()), len / static_cast<double>(e.lengths.size())};
  }
  return out;
}

std::vector<io::TbScalar> PeriodicEvaluation::tensorboard_scalars(std::int64_t iteration) const {
  const auto v = columns(iteration);
  if (std::isnan(v[0])) return {};
  return {{"eval/return_mean", v[0]}, {"eval/return_std", v[1]}, {"eval/length_mean", v[4]}};
}

std::string PeriodicEvaluation::line(bool new_best) const {
  if (records_.empty()) return {};
  const Record& r = records_.back();
  const auto v = columns(r.iteration);
  std::string s = fmt::format(
      "eval  steps {}  return {:.2f} +- {:.2f} (min {:.6g}, max {:.6g}) over {} episode{}  "
      "length {:.1f}",
      r.env_steps, v[0], v[1], v[2], v[3], r.result.returns.size(), r.result.returns.size() == 1 ? "" : "s", v[4]);
  if (r.result.capped > 0)
    s += fmt::format("  ({} cut off at eval.max_episode_steps = {})", r.result.capped, max_episode_steps_);
  if (new_best) s += save_best_ ? "  new best -> " + best_path_ : std::string("  new best");
  s += "\n";
  if (reached_stop_return(r.iteration))
    s += fmt::format("eval  mean return {:.2f} >= eval.stop_return = {}: training stops after iteration {}\n", v[0],
                     *stop_return_, r.iteration);
  return s;
}

void PeriodicEvaluation::save(io::CheckpointWriter& w) const {
  std::vector<std::int64_t> it, steps, n, trunc, capped, stochastic, cap;
  std::vector<double> ret, len;
  for (const Record& r : records_) {
    stochastic.push_back(r.stochastic ? 1 : 0);
    cap.push_back(r.max_episode_steps);
    it.push_back(r.iteration);
    steps.push_back(r.env_steps);
    n.push_back(static_cast<std::int64_t>(r.result.returns.size()));
    trunc.push_back(static_cast<std::int64_t>(r.result.truncated));
    capped.push_back(static_cast<std::int64_t>(r.result.capped));
    ret.insert(ret.end(), r.result.returns.begin(), r.result.returns.end());
    for (const auto l : r.result.lengths) len.push_back(static_cast<double>(l));
  }
  w.add("eval/iteration", it);
  w.add("eval/env_steps", steps);
  w.add("eval/episodes", n);
  w.add("eval/truncated", trunc);
  w.add("eval/capped", capped);
  w.add("eval/stochastic", stochastic);
  w.add("eval/max_episode_steps", cap);
  w.add("eval/returns", ret);
  w.add("eval/lengths", len);
}

void PeriodicEvaluation::load(const io::CheckpointReader& r, std::int64_t iteration) {
  records_.clear();
  if (!r.has("eval/iteration")) return;
  const auto it = r.get<std::int64_t>("eval/iteration"), steps = r.get<std::int64_t>("eval/env_steps"),
             n = r.get<std::int64_t>("eval/episodes"), trunc = r.get<std::int64_t>("eval/truncated"),
             capped = r.get<std::int64_t>("eval/capped");
  const auto ret = r.get<double>("eval/returns"), len = r.get<double>("eval/lengths");
  // The settings of each evaluation (a checkpoint of an older version: the current ones).
  const bool has_settings = r.has("eval/stochastic");
  const auto stochastic =
      has_settings ? r.get<std::int64_t>("eval/stochastic") : std::vector<std::int64_t>(it.size(), stochastic_ ? 1 : 0);
  const auto cap = has_settings ? r.get<std::int64_t>("eval/max_episode_steps")
                                : std::vector<std::int64_t>(it.size(), max_episode_steps_);
  std::size_t total = 0;
  for (const auto k : n) total += static_cast<std::size_t>(std::max<std::int64_t>(k, 0));
  if (steps.size() != it.size() || n.size() != it.size() || trunc.size() != it.size() || capped.size() != it.size() ||
      stochastic.size() != it.size() || cap.size() != it.size() || ret.size() != total || len.size() != total)
    throw IoError("rl: the checkpoint's eval/ sections disagree in length (a damaged file)");
  std::size_t at = 0;
  for (std::size_t k = 0; k < it.size(); ++k) {
    Record rec{it[k], steps[k], {}, stochastic[k] != 0, cap[k]};
    const auto e = static_cast<std::size_t>(n[k]);
    rec.result.returns.assign(ret.begin() + static_cast<std::ptrdiff_t>(at),
                              ret.begin() + static_cast<std::ptrdiff_t>(at + e));
    for (std::size_t j = 0; j < e; ++j) rec.result.lengths.push_back(static_cast<std::int64_t>(len[at + j]));
    at += e;
    rec.result.truncated = static_cast<std::size_t>(trunc[k]);
    rec.result.capped = static_cast<std::size_t>(capped[k]);
    double m = 0, v = 0;
    for (const double x : rec.result.returns) m += x;
    m /= static_cast<double>(std::max<std::size_t>(e, 1));
    for (const double x : rec.result.returns) v += (x - m) * (x - m);
    rec.result.mean = m;
    rec.result.std = std::sqrt(v / static_cast<double>(std::max<std::size_t>(e, 1)));
    if (rec.iteration <= iteration && e > 0) records_.push_back(std::move(rec));
  }
}

void PeriodicEvaluation::write(io::H5Group& root) const {
  if (records_.empty()) return;
  io::H5Group g = root.create_group("eval");
  std::size_t width = 0;
  for (const Record& r : records_) width = std::max(width, r.result.returns.size());
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> number, it, steps, mean, sd, len_mean, trunc, capped, returns, lengths;
  std::vector<double> episode(width);
  for (std::size_t e = 0; e < width; ++e) episode[e] = static_cast<double>(e);
  double best = -std::numeric_limits<double>::infinity(), best_steps = nan;
  for (std::size_t k = 0; k < records_.size(); ++k) {
    const Record& r = records_[k];
    const auto v = columns(r.iteration);
    number.push_back(static_cast<double>(k + 1));
    it.push_back(static_cast<double>(r.iteration));
    steps.push_back(static_cast<double>(r.env_steps));
    mean.push_back(r.result.mean);
    sd.push_back(r.result.std);
    len_mean.push_back(v[4]);
    trunc.push_back(static_cast<double>(r.result.truncated));
    capped.push_back(static_cast<double>(r.result.capped));
    for (std::size_t e = 0; e < width; ++e) {
      const bool has = e < r.result.returns.size();
      returns.push_back(has ? r.result.returns[e] : nan);
      lengths.push_back(has ? static_cast<double>(r.result.lengths[e]) : nan);
    }
    if (r.result.mean > best) {
      best = r.result.mean;
      best_steps = static_cast<double>(r.env_steps);
    }
  }
  g.create_coordinate<double>("evaluation", number);
  g.create_dimension("episode", width);
  const std::pair<const char*, const std::vector<double>*> per_eval[] = {
      {"iteration", &it},         {"env_steps", &steps}, {"return_mean", &mean}, {"return_std", &sd},
      {"length_mean", &len_mean}, {"truncated", &trunc}, {"capped", &capped}};
  for (const auto& [name, values] : per_eval) g.write_variable<double>(name, *values, {"evaluation"});
  g.write_variable<double>("returns", returns, {"evaluation", "episode"});
  g.write_variable<double>("lengths", lengths, {"evaluation", "episode"});
  // The settings of the last evaluation: the current eval.* keys may differ (changed on
  // resume, or evaluation turned off).
  const Record& last = records_.back();
  g.set_attribute("episodes", static_cast<std::int64_t>(last.result.returns.size()));
  g.set_attribute("stochastic", static_cast<std::int64_t>(last.stochastic ? 1 : 0));
  g.set_attribute("max_episode_steps", last.max_episode_steps);
  g.set_attribute("best_return_mean", best);
  g.set_attribute("best_env_steps", best_steps);
}

}  // namespace herd::rl::detail
