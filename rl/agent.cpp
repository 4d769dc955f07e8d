#include "herd/rl/agent.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <optional>
#include <utility>

#include "herd/core/config.hpp"
#include "herd/core/error.hpp"
#if HERD_HAVE_CUDA
#include <cuda_runtime_api.h>

#include "cuda_memory.hpp"
#include "herd/core/cuda/cuda_check.hpp"
#include "herd/nn/cuda/kernels.hpp"
#endif

namespace herd::rl {

#if HERD_HAVE_CUDA
// Pinned host staging of a CUDA agent (see the class comment): input slots (observations,
// actions, gradients), the output pack (a call's outputs gathered on the device by
// device-to-device copies, then one device->host copy) and the event that marks the end
// of `backward`'s uploads.
struct ActorCriticAgent::DeviceIo {
  struct Pinned : detail::PinnedMemory {
    // At least `bytes` of pinned memory, 4 KiB or more (contents lost when it grows).
    void* get(std::size_t bytes) {
      reserve(std::max<std::size_t>(bytes, 4096));
      return p;
    }
  };
  enum class Kind { kFloat, kFloatToDouble, kInt64ToDouble };
  struct Fetch {
    Kind kind;
    void* dst;
    std::size_t n;
    std::size_t offset;  // bytes into the output pack
  };
  // Makes the agent's device current for a scope.
  struct Guard {
    int previous = 0;
    bool changed = false;
    explicit Guard(int device) {
      HERD_CUDA_CHECK(cudaGetDevice(&previous));
      if (previous != device) {
        HERD_CUDA_CHECK(cudaSetDevice(device));
        changed = true;
      }
    }
    ~Guard() {
      if (changed) cudaSetDevice(previous);
    }
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;
  };

  explicit DeviceIo(Device d) : device(d), stream(nn::compute_stream(d)) {
    Guard g(d.index);
    HERD_CUDA_CHECK(cudaEventCreateWithFlags(&uploaded, cudaEventDisableTiming));
  }
  ~DeviceIo() {
    if (uploaded) {
      cudaEventSynchronize(uploaded);
      cudaEventDestroy(uploaded);
    }
    if (pack) cudaFree(pack);
  }
  DeviceIo(const DeviceIo&) = delete;
  DeviceIo& operator=(const DeviceIo&) = delete;

  // An input slot of `bytes`, once the uploads of an earlier `backward` are done.
  void* stage_in(int slot, std::size_t bytes) {
    if (upload_pending) {
      HERD_CUDA_CHECK(cudaEventSynchronize(uploaded));
      upload_pending = false;
    }
    return in[slot].get(bytes);
  }
  void upload(nn::Tensor& dst, const void* src, std::size_t bytes) {
    if (bytes) HERD_CUDA_CHECK(cudaMemcpyAsync(dst.raw(), src, bytes, cudaMemcpyHostToDevice, stream));
  }
  // At least `bytes` of device memory for the output pack (call before a call's first
  // fetch; no copy into the pack is pending then: every call ends with `finish`).
  void reserve_pack(std::size_t bytes) {
    if (bytes <= pack_cap) return;
    if (pack) HERD_CUDA_CHECK(cudaFree(pack));
    pack = nullptr;
    pack_cap = 0;
    HERD_CUDA_CHECK(cudaMalloc(&pack, bytes));
    pack_cap = bytes;
  }
  // Enqueues a device-to-device copy of `bytes` of `src` into the output pack; `finish`
  // brings the whole pack back in one copy.
  void fetch(const nn::Tensor& src, std::size_t bytes, Kind kind, void* dst, std::size_t n) {
    const std::size_t at = pack_used;
    if (at + bytes > pack_cap) throw Error("rl::ActorCriticAgent: the device output pack is too small");
    if (bytes)
      HERD_CUDA_CHECK(
          cudaMemcpyAsync(static_cast<char*>(pack) + at, src.raw(), bytes, cudaMemcpyDeviceToDevice, stream));
    fetches.push_back({kind, dst, n, at});
    pack_used = (at + bytes + 255) / 256 * 256;
  }
  // Copies the pack to pinned memory, waits for the stream once, then converts the
  // fetched values into their destinations.
  void finish() {
    void* base = out.get(pack_used);
    if (pack_used) HERD_CUDA_CHECK(cudaMemcpyAsync(base, pack, pack_used, cudaMemcpyDeviceToHost, stream));
    HERD_CUDA_CHECK(cudaStreamSynchronize(stream));
    for (const Fetch& f : fetches) {
      const void* p = static_cast<const char*>(base) + f.offset;
      if (f.kind == Kind::kFloat) {
        std::memcpy(f.dst, p, f.n * sizeof(float));
      } else if (f.kind == Kind::kFloatToDouble) {
        const float* a = static_cast<const float*>(p);
        double* d = static_cast<double*>(f.dst);
        for (std::size_t i = 0; i < f.n; ++i) d[i] = a[i];
      } else {
        const std::int64_t* a = static_cast<const std::int64_t*>(p);
        double* d = static_cast<double*>(f.dst);
        for (std::size_t i = 0; i < f.n; ++i) d[i] = static_cast<double>(a[i]);
      }
    }
    fetches.clear();
    pack_used = 0;
  }

  Device device;
  cudaStream_t stream;
  std::array<Pinned, 3> in;  // 0 observations, 1 actions, 2 gradients
  Pinned out;                // the output pack on the host
  void* pack = nullptr;      // device memory: one call's outputs end to end (one copy back)
  std::size_t pack_cap = 0, pack_used = 0;
  std::vector<Fetch> fetches;
  cudaEvent_t uploaded = nullptr;
  bool upload_pending = false;
};
#else
struct ActorCriticAgent::DeviceIo {};
#endif

// Makes a CUDA agent's device current for the rest of the scope (kernel launches, events).
#if HERD_HAVE_CUDA
#define HERD_AGENT_DEVICE_SCOPE()                   \
  std::optional<DeviceIo::Guard> herd_agent_guard_; \
  if (io_) herd_agent_guard_.emplace(device_.index)
#else
#define HERD_AGENT_DEVICE_SCOPE() (void)0
#endif

namespace {

// Copies a float tensor of n elements to `out` (float32 or float64 storage).
void copy_out(const nn::Tensor& t, float* out, std::size_t n) {
  if (t.dtype() == nn::DType::kFloat32) {
    std::memcpy(out, t.data<float>(), n * sizeof(float));
  } else {
    const double* p = t.data<double>();
    for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<float>(p[i]);
  }
}

// The product of an observation shape (0 for an empty one: rejected by the constructor).
std::size_t shape_size(const std::vector<std::int64_t>& shape) {
  if (shape.empty()) return 0;
  std::size_t n = 1;
  for (auto d : shape) n *= static_cast<std::size_t>(std::max<std::int64_t>(d, 0));
  return n;
}

// make_encoder's layers followed by a Linear output layer of `out` units, orthogonal with
// gain `out_gain` or PyTorch's default as `spec.init` says (draws of index = number of
// encoder layers): without convolutions, the layers, names and values of
// nn::Mlp({in, hidden..., out}, orthogonal init).
std::unique_ptr<nn::Sequential> make_network(const std::vector<std::int64_t>& obs_shape, const EncoderSpec& spec,
                                             std::int64_t out, double out_gain, const RngStream& rng, Device device) {
  std::int64_t width = 0;
  auto net = make_encoder(obs_shape, spec, device, rng, 0, &width);
  const std::uint64_t k = spec.conv.size() + spec.hidden.size();
  auto& head = net->emplace<nn::Linear>(width, out, nn::DType::kFloat32, device, true, rng, k);
  if (spec.init == EncoderInit::kOrthogonal) init_orthogonal(head.weight(), head.bias(), out_gain, rng, k);
  net->set_input_grad(false);
  return net;
}

// The agent's networks as children of one container (see ActorCriticAgent::module).
class AgentModule final : public nn::Module {
 public:
  AgentModule(const std::vector<std::pair<std::string, nn::Module*>>& children, Device device)
      : nn::Module(nn::DType::kFloat32, device) {
    for (const auto& [name, m] : children) register_module(name, m);
  }
  const nn::Tensor& forward(const nn::Tensor&) override {
    throw InputError("rl::ActorCriticAgent::module: forward is not supported; call the agent's act/evaluate");
  }
  const nn::Tensor& backward(const nn::Tensor&) override {
    throw InputError("rl::ActorCriticAgent::module: backward is not supported; call the agent's backward");
  }
  std::string type_name() const override { return "ActorCriticAgent"; }
};

}  // namespace

nn::Module& ActorCriticAgent::module() {
  if (!module_) {
    std::vector<std::pair<std::string, nn::Module*>> c;
    if (trunk_) {
      c.emplace_back("trunk", trunk_.get());
      c.emplace_back("pi", pi_head_.get());
      c.emplace_back("vf", vf_head_.get());
    } else {
      c.emplace_back("pi", actor_.get());
      c.emplace_back("vf", critic_.get());
    }
    if (gauss_) c.emplace_back("dist", gauss_.get());
    module_ = std::make_unique<AgentModule>(c, device_);
  }
  return *module_;
}

ActorCriticAgent::ActorCriticAgent(const Space& observation_space, const Space& space, const AgentOptions& opt)
    : ActorCriticAgent(observation_space.is_box()
                           ? observation_space.shape()
                           : throw InputError("rl::ActorCriticAgent: the observation space is " +
                                              observation_space.to_string() + ", but must be a Box"),
                       space, opt) {}

ActorCriticAgent::ActorCriticAgent(std::size_t obs_dim, const Space& space, const AgentOptions& opt)
    : ActorCriticAgent(std::vector<std::int64_t>{static_cast<std::int64_t>(obs_dim)}, space, opt) {}

ActorCriticAgent::ActorCriticAgent(std::vector<std::int64_t> obs_shape, const Space& space, const AgentOptions& opt)
    : obs_shape_(std::move(obs_shape)),
      obs_dim_(shape_size(obs_shape_)),
      action_dim_(space.dim()),
      discrete_(space.is_discrete()),
      device_(opt.device) {
  if (device_.is_cuda()) {
    if (!HERD_HAVE_CUDA)
      throw InputError("rl::ActorCriticAgent: device is " + device_.str() +
                       ", but this build of herd has no CUDA support");
    const int count = cuda_device_count();
    if (device_.index < 0 || device_.index >= count)
      throw InputError("rl::ActorCriticAgent: device is " + device_.str() + ", but " + std::to_string(count) +
                       " CUDA device(s) are usable here (" + describe_devices() + ")");
#if HERD_HAVE_CUDA
    io_ = std::make_unique<DeviceIo>(device_);
#endif
  }
  if (obs_dim_ == 0) throw InputError("rl::ActorCriticAgent: obs_dim is 0, but must be >= 1");
  if (opt.hidden.empty() && opt.conv.empty())
    throw InputError("rl::ActorCriticAgent: hidden is empty, but needs at least one layer");
  for (auto h : opt.hidden)
    if (h < 1) throw InputError("rl::ActorCriticAgent: a hidden width is " + std::to_string(h) + ", but must be >= 1");
  const std::int64_t outputs = discrete_ ? space.n() : static_cast<std::int64_t>(action_dim_);
  const EncoderSpec spec = opt.encoder();
  if (opt.shared_trunk) {
    std::int64_t h = 0;
    trunk_ = make_encoder(obs_shape_, spec, device_, RngStream(opt.seed, 0, RngPurpose::kInit), 0, &h);
    trunk_->set_input_grad(false);
    const RngStream heads(opt.seed, 2, RngPurpose::kInit);
    pi_head_ = std::make_unique<nn::Linear>(h, outputs, nn::DType::kFloat32, device_, true, heads, 0);
    vf_head_ = std::make_unique<nn::Linear>(h, 1, nn::DType::kFloat32, device_, true, heads, 1);
    if (opt.init == EncoderInit::kOrthogonal) {
      init_orthogonal(pi_head_->weight(), pi_head_->bias(), 0.01, heads, 0);
      init_orthogonal(vf_head_->weight(), vf_head_->bias(), 1.0, heads, 1);
    }
  } else {
    actor_ = make_network(obs_shape_, spec, outputs, 0.01, RngStream(opt.seed, 0, RngPurpose::kInit), device_);
    critic_ = make_network(obs_shape_, spec, 1, 1.0, RngStream(opt.seed, 1, RngPurpose::kInit), device_);
  }
  if (!discrete_)
    gauss_ = std::make_unique<nn::Gaussian>(static_cast<std::int64_t>(action_dim_), nn::DType::kFloat32, device_,
                                            opt.init_log_std);
}

ActorCriticAgent::~ActorCriticAgent() = default;

void ActorCriticAgent::load_obs(const float* obs, std::size_t n, bool pad) {
  // Inference pads the batch with zero rows to a multiple of kRowBlock, so every row takes
  // the same full-packet path through the matrix products whatever n is: row i's outputs
  // then do not depend on the batch it is in (the alternating sampler's two half batches
  // give the parallel sampler's results bit for bit).
  const std::size_t m = pad ? (n + kRowBlock - 1) / kRowBlock * kRowBlock : n;
  obs_t_.resize({static_cast<std::int64_t>(m), static_cast<std::int64_t>(obs_dim_)}, nn::DType::kFloat32, device_);
#if HERD_HAVE_CUDA
  if (io_) {
    const std::size_t bytes = m * obs_dim_ * sizeof(float);
    // Room for the outputs of any call: actions (int64 or float32 rows), then log-probs,
    // entropies and values (float32), each 256-byte aligned.
    io_->reserve_pack(m * (8 * action_dim_ + 3 * sizeof(float)) + 4 * 256);
    float* x = static_cast<float*>(io_->stage_in(0, bytes));
    std::memcpy(x, obs, n * obs_dim_ * sizeof(float));
    std::fill(x + n * obs_dim_, x + m * obs_dim_, 0.0f);
    io_->upload(obs_t_, x, bytes);
    return;
  }
#endif
  float* x = obs_t_.data<float>();
  std::memcpy(x, obs, n * obs_dim_ * sizeof(float));
  std::fill(x + n * obs_dim_, x + m * obs_dim_, 0.0f);
}

void ActorCriticAgent::fetch(const nn::Tensor& t, float* out, std::size_t n) {
#if HERD_HAVE_CUDA
  if (io_) {
    io_->fetch(t, n * sizeof(float), DeviceIo::Kind::kFloat, out, n);
    return;
  }
#endif
  copy_out(t, out, n);
}

void ActorCriticAgent::wait_fetches() {
#if HERD_HAVE_CUDA
  if (io_) io_->finish();
#endif
}

const nn::Tensor& ActorCriticAgent::actor_forward(const float* obs, std::size_t n, bool pad) {
  load_obs(obs, n, pad);
  return policy_forward();
}

// The policy head's output for the observations in obs_t_ (categorical logits set).
const nn::Tensor& ActorCriticAgent::policy_forward() {
  if (trunk_) h_ = &trunk_->forward(obs_t_);
  const nn::Tensor& out = trunk_ ? pi_head_->forward(*h_) : actor_->forward(obs_t_);
  if (discrete_) {
    cat_.set_logits(out);
    return out;
  }
  return gauss_->forward(out);
}

void ActorCriticAgent::act(const float* obs, std::size_t n, const RngStream* rng, std::uint64_t index, double* actions,
                           float* log_probs, float* values) {
  HERD_AGENT_DEVICE_SCOPE();
  const nn::Tensor& head = actor_forward(obs, n, true);
  if (discrete_) {
    if (rng) cat_.sample(*rng, index, sample_t_);
    else cat_.mode(sample_t_);
#if HERD_HAVE_CUDA
    if (io_ && actions) io_->fetch(sample_t_, n * sizeof(std::int64_t), DeviceIo::Kind::kInt64ToDouble, actions, n);
#endif
    if (!io_ && actions) {
      const std::int64_t* a = sample_t_.data<std::int64_t>();
      for (std::size_t i = 0; i < n; ++i) actions[i] = static_cast<double>(a[i]);
    }
    if (log_probs) fetch(cat_.log_prob(sample_t_), log_probs, n);
  } else {
    if (rng) gauss_->sample(*rng, index, sample_t_);
    else sample_t_ = head.clone();
#if HERD_HAVE_CUDA
    if (io_ && actions)
      io_->fetch(sample_t_, n * action_dim_ * sizeof(float), DeviceIo::Kind::kFloatToDouble, actions, n * action_dim_);
#endif
    if (!io_ && actions) {
      const float* a = sample_t_.data<float>();
      for (std::size_t i = 0; i < n * action_dim_; ++i) actions[i] = a[i];
    }
    if (log_probs) fetch(gauss_->log_prob(sample_t_), log_probs, n);
  }
  // The critic reads the same (padded) observations; the actor's input is not needed
  // after `act`, so no copy is made.
  if (values) fetch(trunk_ ? vf_head_->forward(*h_) : critic_->forward(obs_t_), values, n);
  wait_fetches();
}

void ActorCriticAgent::value(const float* obs, std::size_t n, float* values) {
  HERD_AGENT_DEVICE_SCOPE();
  load_obs(obs, n, true);
  if (trunk_) fetch(vf_head_->forward(trunk_->forward(obs_t_)), values, n);
  else fetch(critic_->forward(obs_t_), values, n);
  wait_fetches();
}

void ActorCriticAgent::evaluate(const float* obs, const double* actions, std::size_t n) {
  HERD_AGENT_DEVICE_SCOPE();
  load_obs(obs, n, false);
  logp_.resize(n);
  ent_.resize(n);
  val_.resize(n);
  const auto N = static_cast<std::int64_t>(n);
  if (discrete_) {
    act_t_.resize({N}, nn::DType::kInt64, device_);
#if HERD_HAVE_CUDA
    if (io_) {
      auto* a = static_cast<std::int64_t*>(io_->stage_in(1, n * sizeof(std::int64_t)));
      for (std::size_t i = 0; i < n; ++i) a[i] = static_cast<std::int64_t>(actions[i]);
      io_->upload(act_t_, a, n * sizeof(std::int64_t));
    }
#endif
    if (!io_) {
      std::int64_t* a = act_t_.data<std::int64_t>();
      for (std::size_t i = 0; i < n; ++i) a[i] = static_cast<std::int64_t>(actions[i]);
    }
  } else {
    act_t_.resize({N, static_cast<std::int64_t>(action_dim_)}, nn::DType::kFloat32, device_);
    float* a = nullptr;
#if HERD_HAVE_CUDA
    if (io_) a = static_cast<float*>(io_->stage_in(1, n * action_dim_ * sizeof(float)));
#endif
    if (!io_) a = act_t_.data<float>();
    for (std::size_t i = 0; i < n * action_dim_; ++i) a[i] = static_cast<float>(actions[i]);
#if HERD_HAVE_CUDA
    if (io_) io_->upload(act_t_, a, n * action_dim_ * sizeof(float));
#endif
  }
  device_evaluated_ = false;
  const Outputs out = evaluate_forward();
  fetch(*out.log_probs, logp_.data(), n);
  fetch(*out.entropies, ent_.data(), n);
  fetch(*out.values, val_.data(), n);
  wait_fetches();
}

// The training forward pass on the minibatch in obs_t_ and act_t_ (no copies, no wait).
ActorCriticAgent::Outputs ActorCriticAgent::evaluate_forward() {
  policy_forward();
  Outputs out{};
  if (discrete_) {
    out.log_probs = &cat_.log_prob(act_t_);
    out.entropies = &cat_.entropy();
  } else {
    out.log_probs = &gauss_->log_prob(act_t_);
    out.entropies = &gauss_->entropy();
  }
  if (trunk_) {  // the trunk's output (still valid) feeds the value head
    out.values = &vf_head_->forward(*h_);
    return out;
  }
  // obs_t_ still holds the observations (the actor's input must stay unchanged until
  // backward, so the critic gets its own copy).
  critic_in_.resize(obs_t_.shape(), nn::DType::kFloat32, device_);
  if (io_) critic_in_.copy_from_async(obs_t_, nn::compute_stream(device_));
  else critic_in_.copy_from(obs_t_);
  out.values = &critic_->forward(critic_in_);
  return out;
}

ActorCriticAgent::DeviceBatch ActorCriticAgent::device_batch(std::size_t n) {
  if (!io_)
    throw InputError("rl::ActorCriticAgent::device_batch: the agent is on " + device_.str() +
                     ", but device batches need a CUDA agent");
  HERD_AGENT_DEVICE_SCOPE();
  const auto N = static_cast<std::int64_t>(n);
  obs_t_.resize({N, static_cast<std::int64_t>(obs_dim_)}, nn::DType::kFloat32, device_);
  DeviceBatch b;
  b.obs = obs_t_.data<float>();
  if (discrete_) {
    act_t_.resize({N}, nn::DType::kInt64, device_);
    b.discrete_actions = act_t_.data<std::int64_t>();
  } else {
    act_t_.resize({N, static_cast<std::int64_t>(action_dim_)}, nn::DType::kFloat32, device_);
    b.continuous_actions = act_t_.data<float>();
  }
  device_n_ = n;
  device_evaluated_ = false;
  return b;
}

ActorCriticAgent::DeviceEvaluation ActorCriticAgent::evaluate_device(std::size_t n) {
  if (!io_)
    throw InputError("rl::ActorCriticAgent::evaluate_device: the agent is on " + device_.str() +
                     ", but device evaluation needs a CUDA agent");
  if (n != device_n_ || !obs_t_.defined() || obs_t_.dim(0) != static_cast<std::int64_t>(n))
    throw InputError("rl::ActorCriticAgent::evaluate_device: n is " + std::to_string(n) +
                     ", but the last device_batch was for " + std::to_string(device_n_) + " samples");
  HERD_AGENT_DEVICE_SCOPE();
  const Outputs out = evaluate_forward();
  const auto N = static_cast<std::int64_t>(n);
  grad_t_.resize({3 * N}, nn::DType::kFloat32, device_);
  device_evaluated_ = true;
  return {out.log_probs->data<float>(), out.entropies->data<float>(), out.values->data<float>(), grad_t_.data<float>()};
}

void ActorCriticAgent::backward_device() {
  if (!device_evaluated_)
    throw InputError("rl::ActorCriticAgent::backward_device: no evaluate_device since the last backward");
  HERD_AGENT_DEVICE_SCOPE();
  device_evaluated_ = false;
  backward_from_grad(static_cast<std::int64_t>(device_n_));
}

void ActorCriticAgent::backward(const float* g_logp, const float* g_ent, const float* g_val) {
  HERD_AGENT_DEVICE_SCOPE();
  const auto n = static_cast<std::int64_t>(logp_.size());
  const auto un = static_cast<std::size_t>(n);
  // dL/d(log_prob), dL/d(entropy), dL/d(value) end to end in one [3n] tensor (one upload).
  grad_t_.resize({3 * n}, nn::DType::kFloat32, device_);
  float* g = nullptr;
#if HERD_HAVE_CUDA
  if (io_) g = static_cast<float*>(io_->stage_in(2, 3 * un * sizeof(float)));
#endif
  if (!io_) g = grad_t_.data<float>();
  std::memcpy(g, g_logp, un * sizeof(float));
  std::memcpy(g + un, g_ent, un * sizeof(float));
  std::memcpy(g + 2 * un, g_val, un * sizeof(float));
#if HERD_HAVE_CUDA
  if (io_) io_->upload(grad_t_, g, 3 * un * sizeof(float));
#endif
  backward_from_grad(n);
#if HERD_HAVE_CUDA
  if (io_) {
    // The next call that refills the staging buffers waits for this event.
    HERD_CUDA_CHECK(cudaEventRecord(io_->uploaded, io_->stream));
    io_->upload_pending = true;
  }
#endif
}

// Parameter gradients from grad_t_ ([3n]: dL/d log_prob, dL/d entropy, dL/d value) for
// the last training forward pass.
void ActorCriticAgent::backward_from_grad(std::int64_t n) {
  const nn::Tensor gl = grad_t_.slice(0, n), ge = grad_t_.slice(n, 2 * n);
  gv_ = grad_t_.slice(2 * n, 3 * n).reshape({n, 1});
  if (discrete_) {
    cat_.backward_log_prob(gl);
    cat_.backward_entropy(ge);
    policy_backward(cat_.grad_logits());
  } else {
    gauss_->backward_log_prob(gl);
    gauss_->backward_entropy(ge);
    policy_backward(gauss_->grad_mean());
  }
  if (!trunk_) {
    critic_->backward(gv_);
  } else {
    // Shared trunk: dL/dh = policy head's + value head's input gradients.
    const nn::Tensor& gvh = vf_head_->backward(gv_);
#if HERD_HAVE_CUDA
    if (io_) {
      nn::cuda::add<float>(gh_.data<float>(), gvh.data<float>(), gh_.data<float>(), gh_.numel(), io_->stream);
    }
#endif
    if (!io_) {
      float* a = gh_.data<float>();
      const float* b = gvh.data<float>();
      for (std::int64_t i = 0; i < gh_.numel(); ++i) a[i] += b[i];
    }
    trunk_->backward(gh_);
  }
}

void ActorCriticAgent::policy_backward(const nn::Tensor& grad_out) {
  if (!trunk_) {
    actor_->backward(grad_out);
    return;
  }
  const nn::Tensor& g = pi_head_->backward(grad_out);
  gh_.resize(g.shape(), nn::DType::kFloat32, device_);
  if (io_) gh_.copy_from_async(g, nn::compute_stream(device_));
  else gh_.copy_from(g);
}

std::vector<nn::NamedParameter> ActorCriticAgent::named_parameters() {
  std::vector<nn::NamedParameter> out;
  if (trunk_) {
    for (auto& p : trunk_->named_parameters()) out.push_back({"trunk." + p.name, p.param});
    for (auto& p : pi_head_->named_parameters()) out.push_back({"pi." + p.name, p.param});
    for (auto& p : vf_head_->named_parameters()) out.push_back({"vf." + p.name, p.param});
  } else {
    for (auto& p : actor_->named_parameters()) out.push_back({"pi." + p.name, p.param});
    for (auto& p : critic_->named_parameters()) out.push_back({"vf." + p.name, p.param});
  }
  if (gauss_)
    for (auto& p : gauss_->named_parameters()) out.push_back({"dist." + p.name, p.param});
  return out;
}

std::vector<nn::NamedTensor> ActorCriticAgent::state_dict() {
  std::vector<nn::NamedTensor> out;
  for (auto& p : named_parameters()) out.push_back({p.name, p.param->value.clone()});
  return out;
}

void ActorCriticAgent::load_state_dict(const std::vector<nn::NamedTensor>& state) {
  for (auto& p : named_parameters()) {
    const nn::NamedTensor* found = nullptr;
    for (const auto& s : state)
      if (s.name == p.name) found = &s;
    if (!found) throw InputError("rl::ActorCriticAgent::load_state_dict: parameter \"" + p.name + "\" is missing");
    if (found->tensor.numel() != p.param->value.numel())
      throw InputError("rl::ActorCriticAgent::load_state_dict: parameter \"" + p.name + "\" has shape " +
                       found->tensor.shape().str() + ", but must have " + p.param->value.shape().str());
    // Checkpoints hold float64 host tensors; device copies need float32 on both sides.
    nn::Tensor src = found->tensor;
    if (src.dtype() != nn::DType::kFloat32 && (src.is_cuda() || p.param->value.is_cuda())) {
      if (src.is_cuda()) src = src.to(Device::cpu());
      src = src.to(nn::DType::kFloat32);
    }
    p.param->value.copy_from(src);
  }
}

}  // namespace herd::rl
