// Ppo's device update (see "Device updates" in herd/rl/ppo.hpp): the rollout and the
// permutations uploaded in one copy, GAE and every minibatch on the device, one read-back.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>
#include <vector>

#include "herd/core/config.hpp"
#include "herd/core/error.hpp"
#include "herd/rl/ppo.hpp"
#if HERD_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "cuda_memory.hpp"
#include "herd/core/cuda/cuda_check.hpp"
#include "herd/rl/cuda/ppo_kernels.hpp"
#endif

namespace herd::rl {

#if HERD_HAVE_CUDA

namespace {

using detail::DeviceMemory;
using detail::PinnedMemory;

// Makes `device` current for the scope.
struct CurrentDevice {
  int previous = 0;
  bool changed = false;
  explicit CurrentDevice(int device) {
    HERD_CUDA_CHECK(cudaGetDevice(&previous));
    if (previous != device) {
      HERD_CUDA_CHECK(cudaSetDevice(device));
      changed = true;
    }
  }
  ~CurrentDevice() {
    if (changed) cudaSetDevice(previous);
  }
  CurrentDevice(const CurrentDevice&) = delete;
  CurrentDevice& operator=(const CurrentDevice&) = delete;
};

constexpr std::size_t kAlign = 256;
std::size_t align_up(std::size_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

}  // namespace

// The upload area holds, at the offsets below, the rollout `[T, B]` arrays, the
// permutations and (from `update`) the host's advantages and returns; `learn` writes the
// device GAE's advantages and returns at the same offsets. The read-back area holds
// [minibatches, 6] loss terms, the explained variance and the skip flag.
struct Ppo::DeviceState {
  Device device;
  cudaStream_t stream = nullptr;
  DeviceMemory up, back, aux, norm_sq;
  PinnedMemory up_host, back_host;
  bool in_flight = false;  // an upload or read-back may still be running
  // Offsets into `up`: the rollout, then Adam's {lr, step, step_size, inv_bc2_sqrt}, the
  // clip range, the minibatch counter and the minibatch starts (the graph's arguments).
  std::size_t obs = 0, act = 0, logp = 0, val = 0, rew = 0, fin = 0, last = 0, adv = 0, ret = 0, term = 0, trunc = 0,
              perm = 0, hyper = 0, clip = 0, counter = 0, starts = 0, up_bytes = 0;
  // The captured minibatch step: valid for `graph_len` samples while neither our buffers
  // (`layout`, the upload's offsets) nor any nn device buffer (`nn_epoch`) changed.
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  std::uint32_t graph_len = 0;
  std::uint64_t nn_epoch = 0, layout = 0;
  std::uint64_t layout_now = 0;  // bumped whenever a buffer or an offset changes
  // The last eager full minibatch (the warm-up a capture needs: buffers reached their sizes).
  bool warm = false;
  std::uint32_t warm_len = 0;
  std::uint64_t warm_epoch = 0, warm_layout = 0;
  std::vector<std::size_t> layout_offsets;
  std::size_t bad_offset = 0;
  void drop_graph() {
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    exec = nullptr;
    graph = nullptr;
  }
};

void Ppo::DeviceStateDeleter::operator()(DeviceState* d) const {
  if (d && d->in_flight) cudaStreamSynchronize(d->stream);  // best effort: no copy into freed memory
  if (d) d->drop_graph();
  delete d;
}

UpdateStats Ppo::update_on_device(const RolloutBuffer& buf, bool run_gae, double gamma, double lambda, double progress,
                                  std::int64_t iteration) {
  const PpoOptions& o = opt_options_;
  const std::size_t N = buf.size(), B = static_cast<std::size_t>(buf.envs), D = buf.obs_dim, A = buf.action_dim;
  HERD_REQUIRE(N > 0 && D == agent_.obs_dim() && A == agent_.action_dim(),
               "rl::Ppo::update: the rollout has {} samples of obs_dim {} and action_dim {}, but the agent takes "
               "obs_dim {} and action_dim {}",
               N, D, A, agent_.obs_dim(), agent_.action_dim());
  HERD_REQUIRE(buf.obs.size() == N * D && buf.actions.size() == N * A && buf.log_probs.size() == N &&
                   buf.values.size() == N && buf.rewards.size() == N && buf.terminated.size() == N &&
                   buf.truncated.size() == N && buf.final_values.size() == N && buf.last_values.size() == B &&
                   (run_gae || (buf.advantages.size() == N && buf.returns.size() == N)),
               "rl::Ppo::update: the rollout's arrays are not sized for {} steps of {} envs (call resize)", buf.steps,
               buf.envs);
  if (!dev_) {
    dev_.reset(new DeviceState);
    dev_->device = agent_.device();
    dev_->stream = nn::compute_stream(agent_.device());
  }
  DeviceState& d = *dev_;
  const CurrentDevice current(d.device.index);
  cudaStream_t st = d.stream;
  const bool discrete = agent_.discrete();

  UpdateStats stats;
  progress = std::clamp(progress, 0.0, 1.0);
  stats.learning_rate = (o.anneal_lr ? o.learning_rate * progress : o.learning_rate) * lr_warmup_factor(o, iteration);
  stats.clip_range = o.anneal_clip ? o.clip_range * progress : o.clip_range;
  opt_->set_lr(stats.learning_rate);
  const auto n = static_cast<std::uint32_t>(N);
  const auto local_mb = static_cast<std::uint32_t>(o.minibatch_size);
  const std::uint32_t mb = local_mb > 0 ? std::min<std::uint32_t>(n, local_mb) : n;
  const std::size_t E = static_cast<std::size_t>(o.epochs);
  const std::size_t per_epoch = (n + mb - 1) / mb, M = E * per_epoch;
  draw_permutations(n, mb, iteration);

  // Layout of the upload.
  std::size_t off = 0;
  auto take = [&off](std::size_t bytes) {
    const std::size_t at = off;
    off = align_up(off + bytes);
    return at;
  };
  d.obs = take(N * D * sizeof(float));
  d.act = take(discrete ? N * sizeof(std::int64_t) : N * A * sizeof(float));
  d.logp = take(N * sizeof(float));
  d.val = take(N * sizeof(float));
  d.rew = take(N * sizeof(float));
  d.fin = take(N * sizeof(float));
  d.last = take(B * sizeof(float));
  d.adv = take(N * sizeof(float));
  d.ret = take(N * sizeof(float));
  d.term = take(N);
  d.trunc = take(N);
  d.perm = take(E * N * sizeof(std::uint32_t));
  d.hyper = take(4 * sizeof(double));
  d.clip = take(sizeof(double));
  d.counter = take(sizeof(std::int32_t));
  d.starts = take(M * sizeof(std::uint32_t));
  const std::vector<std::size_t> layout_key = {d.obs,   d.act,  d.logp,    d.val,    d.rew,   d.fin,
                                               d.last,  d.adv,  d.ret,     d.term,   d.trunc, d.perm,
                                               d.hyper, d.clip, d.counter, d.starts, off};
  if (layout_key != d.layout_offsets) ++d.layout_now;  // the graph's pointers moved
  d.layout_offsets = layout_key;
  d.up_bytes = off;
  // The pinned areas are rewritten below: an earlier update that stopped by an exception
  // may still be copying from them.
  if (d.in_flight) {
    HERD_CUDA_CHECK(cudaStreamSynchronize(st));
    d.in_flight = false;
  }
  const std::size_t terms_bytes = align_up((6 * M + 1) * sizeof(double));
  const std::size_t back_bytes = terms_bytes + sizeof(std::int32_t);
  // Device buffers the graph points into: a reallocation (or a moved skip flag) makes it stale.
  const std::size_t caps[] = {d.up.cap, d.back.cap, d.aux.cap, d.norm_sq.cap};
  d.up.reserve(d.up_bytes);
  d.back.reserve(back_bytes);
  d.aux.reserve(4 * static_cast<std::size_t>(mb) * sizeof(float));
  d.norm_sq.reserve(sizeof(double));
  if (caps[0] != d.up.cap || caps[1] != d.back.cap || caps[2] != d.aux.cap || caps[3] != d.norm_sq.cap ||
      d.bad_offset != terms_bytes) {
    ++d.layout_now;
    d.bad_offset = terms_bytes;
  }
  d.up_host.reserve(d.up_bytes);
  d.back_host.reserve(back_bytes);

  // Pack on the host (actions as the agent's evaluate converts them) and upload once.
  const PinnedMemory& h = d.up_host;
  std::memcpy(h.at<float>(d.obs), buf.obs.data(), N * D * sizeof(float));
  if (discrete) {
    auto* a = h.at<std::int64_t>(d.act);
    for (std::size_t i = 0; i < N; ++i) a[i] = static_cast<std::int64_t>(buf.actions[i]);
  } else {
    auto* a = h.at<float>(d.act);
    for (std::size_t i = 0; i < N * A; ++i) a[i] = static_cast<float>(buf.actions[i]);
  }
  std::memcpy(h.at<float>(d.logp), buf.log_probs.data(), N * sizeof(float));
  std::memcpy(h.at<float>(d.val), buf.values.data(), N * sizeof(float));
  std::memcpy(h.at<float>(d.rew), buf.rewards.data(), N * sizeof(float));
  std::memcpy(h.at<float>(d.fin), buf.final_values.data(), N * sizeof(float));
  std::memcpy(h.at<float>(d.last), buf.last_values.data(), B * sizeof(float));
  if (!run_gae) {
    std::memcpy(h.at<float>(d.adv), buf.advantages.data(), N * sizeof(float));
    std::memcpy(h.at<float>(d.ret), buf.returns.data(), N * sizeof(float));
  }
  std::memcpy(h.at<std::uint8_t>(d.term), buf.terminated.data(), N);
  std::memcpy(h.at<std::uint8_t>(d.trunc), buf.truncated.data(), N);
  std::memcpy(h.at<std::uint32_t>(d.perm), perm_.data(), E * N * sizeof(std::uint32_t));
  auto* adam = dynamic_cast<nn::Adam*>(opt_.get());
  double* hyper_host = h.at<double>(d.hyper);
  hyper_host[0] = stats.learning_rate;
  hyper_host[1] = static_cast<double>(opt_->steps());
  hyper_host[2] = hyper_host[3] = 0.0;
  *h.at<double>(d.clip) = stats.clip_range;
  *h.at<std::int32_t>(d.counter) = 0;
  auto* starts = h.at<std::uint32_t>(d.starts);
  for (std::size_t e = 0, k = 0; e < E; ++e)
    for (std::uint32_t s = 0; s < n; s += mb) starts[k++] = static_cast<std::uint32_t>(e * N + s);
  d.in_flight = true;
  HERD_CUDA_CHECK(cudaMemcpyAsync(d.up.p, d.up_host.p, d.up_bytes, cudaMemcpyHostToDevice, st));

  float* adv = d.up.at<float>(d.adv);
  float* ret = d.up.at<float>(d.ret);
  const float* val_old = d.up.at<float>(d.val);
  if (run_gae)
    cuda::gae(d.up.at<float>(d.rew), val_old, d.up.at<std::uint8_t>(d.term), d.up.at<std::uint8_t>(d.trunc),
              d.up.at<float>(d.fin), d.up.at<float>(d.last), buf.steps, buf.envs, static_cast<float>(gamma),
              static_cast<float>(lambda), adv, ret, st);

  double* terms = d.back.at<double>(0);
  auto* bad = d.back.at<std::int32_t>(terms_bytes);
  HERD_CUDA_CHECK(cudaMemsetAsync(bad, 0, sizeof(std::int32_t), st));
  opt_->set_skip_flag(bad);
  double* hyper = d.up.at<double>(d.hyper);
  const double* clip = d.up.at<double>(d.clip);
  std::int32_t* counter = d.up.at<std::int32_t>(d.counter);
  const bool graphs = adam != nullptr && o.cuda_graph && graph_error_.empty();
  // One minibatch step of `len` samples; every argument is the same for every minibatch.
  auto step = [&](std::uint32_t len, bool capturing) {
    opt_->zero_grad();
    const ActorCriticAgent::DeviceBatch in = agent_.device_batch(len);
    float* aux = d.aux.at<float>(0);
    cuda::ppo_gather(d.up.at<std::uint32_t>(d.perm), d.up.at<std::uint32_t>(d.starts), counter, len,
                     d.up.at<float>(d.obs), static_cast<std::int64_t>(D),
                     discrete ? d.up.at<std::int64_t>(d.act) : nullptr, discrete ? nullptr : d.up.at<float>(d.act),
                     static_cast<std::int64_t>(A), adv, d.up.at<float>(d.logp), val_old, ret, in.obs,
                     in.discrete_actions, in.continuous_actions, aux, st);
    const ActorCriticAgent::DeviceEvaluation ev = agent_.evaluate_device(len);
    cuda::ppo_loss(ev.log_probs, ev.entropies, ev.values, aux, len, o.normalize_advantage, clip, o.clip_range_vf,
                   o.vf_coef, o.ent_coef, ev.grad, terms, counter, bad, st);
    agent_.backward_device();
    if (o.max_grad_norm > 0) nn::clip_grad_norm_on_device(params_, o.max_grad_norm, d.norm_sq.at<double>(0));
    if (adam) adam->step_with_device_hyper(hyper, !capturing);
    else opt_->step();
    cuda::next_minibatch(counter, st);
  };
  // Captures `step(len)` into d.graph/d.exec; false (graph_error_ set) when capture failed.
  auto capture = [&](std::uint32_t len) {
    d.drop_graph();
    HERD_CUDA_CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    try {
      step(len, true);
    } catch (const std::exception& e) {
      cudaGraph_t partial = nullptr;
      cudaStreamEndCapture(st, &partial);
      if (partial) cudaGraphDestroy(partial);
      cudaGetLastError();
      graph_error_ = e.what();
      return false;
    }
    const cudaError_t end = cudaStreamEndCapture(st, &d.graph);
    if (end != cudaSuccess || cudaGraphInstantiate(&d.exec, d.graph, 0) != cudaSuccess) {
      cudaGetLastError();
      d.drop_graph();
      graph_error_ = std::string("stream capture failed: ") + cudaGetErrorName(end);
      return false;
    }
    d.graph_len = len;
    d.nn_epoch = nn::detail::storage_replacements();
    d.layout = d.layout_now;
    ++graph_captures_;
    return true;
  };
  try {
    for (std::size_t e = 0; e < E; ++e) {
      for (std::uint32_t s = 0; s < n; s += mb) {
        const std::uint32_t len = std::min(mb, n - s);
        if (graphs && graph_error_.empty()) {
          const std::uint64_t epoch = nn::detail::storage_replacements();
          const bool graph_ok = d.exec && len == d.graph_len && epoch == d.nn_epoch && d.layout == d.layout_now;
          const bool warm_ok =
              d.warm && len == mb && len == d.warm_len && epoch == d.warm_epoch && d.warm_layout == d.layout_now;
          if (graph_ok || (warm_ok && capture(len))) {
            HERD_CUDA_CHECK(cudaGraphLaunch(d.exec, st));
            opt_->count_replayed_steps(1);
            ++graph_steps_;
            continue;
          }
          step(len, false);  // eager; a full minibatch is the warm-up of the next capture
          if (len == mb) {
            d.warm = true;
            d.warm_len = len;
            d.warm_epoch = nn::detail::storage_replacements();
            d.warm_layout = d.layout_now;
          }
          continue;
        }
        step(len, false);
      }
    }
    cuda::explained_variance(val_old, ret, static_cast<std::int64_t>(N), terms + 6 * M, st);
    HERD_CUDA_CHECK(cudaMemcpyAsync(d.back_host.p, d.back.p, back_bytes, cudaMemcpyDeviceToHost, st));
    nn::synchronize(d.device);  // the update's one host wait (and deferred input errors)
    d.in_flight = false;
  } catch (...) {
    opt_->set_skip_flag(nullptr);
    throw;
  }
  opt_->set_skip_flag(nullptr);

  const double* t = d.back_host.at<double>(0);
  for (std::size_t k = 0; k < M; ++k) {
    const double* L = t + 6 * k;
    if (!std::isfinite(L[0])) {
      // The optimizer skipped this step and every later one (the device flag).
      std::ostringstream m;
      m << "iteration " << iteration << ": the loss is " << L[0] << " (policy " << L[1] << ", value " << L[2]
        << ", entropy " << L[3] << "), training stopped";
      throw NumericalError(m.str());
    }
    stats.policy_loss += L[1];
    stats.value_loss += L[2];
    stats.entropy += L[3];
    stats.approx_kl += L[4];
    stats.clip_fraction += L[5];
  }
  const double c = static_cast<double>(M);
  stats.policy_loss /= c;
  stats.value_loss /= c;
  stats.entropy /= c;
  stats.approx_kl /= c;
  stats.clip_fraction /= c;
  stats.explained_variance = t[6 * M];
  return stats;
}

#else

void Ppo::DeviceStateDeleter::operator()(DeviceState*) const {}

UpdateStats Ppo::update_on_device(const RolloutBuffer&, bool, double, double, double, std::int64_t) {
  throw InputError("rl::Ppo: a device update needs a CUDA build of herd");
}

#endif

}  // namespace herd::rl
