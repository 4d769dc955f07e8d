#include "herd/rl/agent.hpp"

#include <algorithm>
#include <cstring>

#include "herd/core/error.hpp"
#include "herd/nn/init.hpp"

namespace herd::rl {
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

std::unique_ptr<nn::Mlp> make_mlp(std::size_t in, const std::vector<std::int64_t>& hidden, std::int64_t out,
                                  nn::Activation act, double out_gain, std::uint64_t seed, std::uint32_t stream) {
  nn::MlpOptions o;
  o.sizes.push_back(static_cast<std::int64_t>(in));
  for (auto h : hidden) o.sizes.push_back(h);
  o.sizes.push_back(out);
  o.activation = act;
  o.init = nn::MlpInit::kOrthogonal;
  o.hidden_gain = std::sqrt(2.0);
  o.output_gain = out_gain;
  o.rng = RngStream(seed, stream, RngPurpose::kInit);
  auto m = std::make_unique<nn::Mlp>(o);
  m->set_input_grad(false);
  return m;
}

// The agent's networks as children of one container (see ActorCriticAgent::module).
class AgentModule final : public nn::Module {
 public:
  AgentModule(const std::vector<std::pair<std::string, nn::Module*>>& children)
      : nn::Module(nn::DType::kFloat32, Device::cpu()) {
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
    module_ = std::make_unique<AgentModule>(c);
  }
  return *module_;
}

ActorCriticAgent::ActorCriticAgent(std::size_t obs_dim, const Space& space, const AgentOptions& opt)
    : obs_dim_(obs_dim), action_dim_(space.dim()), discrete_(space.is_discrete()) {
  if (obs_dim == 0) throw InputError("rl::ActorCriticAgent: obs_dim is 0, but must be >= 1");
  if (opt.hidden.empty()) throw InputError("rl::ActorCriticAgent: hidden is empty, but needs at least one layer");
  for (auto h : opt.hidden)
    if (h < 1) throw InputError("rl::ActorCriticAgent: a hidden width is " + std::to_string(h) + ", but must be >= 1");
  const std::int64_t outputs = discrete_ ? space.n() : static_cast<std::int64_t>(action_dim_);
  if (opt.shared_trunk) {
    nn::MlpOptions o;
    o.sizes.push_back(static_cast<std::int64_t>(obs_dim));
    for (auto h : opt.hidden) o.sizes.push_back(h);
    if (o.sizes.size() < 2) o.sizes.push_back(opt.hidden.back());
    o.activation = opt.activation;
    o.activate_output = true;
    o.init = nn::MlpInit::kOrthogonal;
    o.hidden_gain = std::sqrt(2.0);
    o.output_gain = std::sqrt(2.0);
    o.rng = RngStream(opt.seed, 0, RngPurpose::kInit);
    trunk_ = std::make_unique<nn::Mlp>(o);
    trunk_->set_input_grad(false);
    const std::int64_t h = opt.hidden.back();
    const RngStream heads(opt.seed, 2, RngPurpose::kInit);
    pi_head_ = std::make_unique<nn::Linear>(h, outputs);
    vf_head_ = std::make_unique<nn::Linear>(h, 1);
    RngCursor c0 = heads.at(0), c1 = heads.at(1);
    nn::orthogonal_(pi_head_->weight().value, 0.01, c0);
    nn::constant_(pi_head_->bias().value, 0.0);
    nn::orthogonal_(vf_head_->weight().value, 1.0, c1);
    nn::constant_(vf_head_->bias().value, 0.0);
  } else {
    actor_ = make_mlp(obs_dim, opt.hidden, outputs, opt.activation, 0.01, opt.seed, 0);
    critic_ = make_mlp(obs_dim, opt.hidden, 1, opt.activation, 1.0, opt.seed, 1);
  }
  if (!discrete_)
    gauss_ = std::make_unique<nn::Gaussian>(static_cast<std::int64_t>(action_dim_), nn::DType::kFloat32,
                                            Device::cpu(), opt.init_log_std);
}

ActorCriticAgent::~ActorCriticAgent() = default;

void ActorCriticAgent::load_obs(const float* obs, std::size_t n, bool pad) {
  // Inference pads the batch with zero rows to a multiple of kRowBlock, so every row takes
  // the same full-packet path through the matrix products whatever n is: row i's outputs
  // then do not depend on the batch it is in (the alternating sampler's two half batches
  // give the parallel sampler's results bit for bit).
  const std::size_t m = pad ? (n + kRowBlock - 1) / kRowBlock * kRowBlock : n;
  obs_t_.resize({static_cast<std::int64_t>(m), static_cast<std::int64_t>(obs_dim_)}, nn::DType::kFloat32);
  float* x = obs_t_.data<float>();
  std::memcpy(x, obs, n * obs_dim_ * sizeof(float));
  std::fill(x + n * obs_dim_, x + m * obs_dim_, 0.0f);
}

const nn::Tensor& ActorCriticAgent::actor_forward(const float* obs, std::size_t n, bool pad) {
  load_obs(obs, n, pad);
  if (trunk_) h_ = &trunk_->forward(obs_t_);
  const nn::Tensor& out = trunk_ ? pi_head_->forward(*h_) : actor_->forward(obs_t_);
  if (discrete_) {
    cat_.set_logits(out);
    return out;
  }
  return gauss_->forward(out);
}

void ActorCriticAgent::act(const float* obs, std::size_t n, const RngStream* rng, std::uint64_t index,
                           double* actions, float* log_probs, float* values) {
  const nn::Tensor& head = actor_forward(obs, n, true);
  if (discrete_) {
    if (rng) cat_.sample(*rng, index, sample_t_);
    else cat_.mode(sample_t_);
    const std::int64_t* a = sample_t_.data<std::int64_t>();
    if (actions)
      for (std::size_t i = 0; i < n; ++i) actions[i] = static_cast<double>(a[i]);
    if (log_probs) copy_out(cat_.log_prob(sample_t_), log_probs, n);
  } else {
    if (rng) gauss_->sample(*rng, index, sample_t_);
    else sample_t_ = head.clone();
    const float* a = sample_t_.data<float>();
    if (actions)
      for (std::size_t i = 0; i < n * action_dim_; ++i) actions[i] = a[i];
    if (log_probs) copy_out(gauss_->log_prob(sample_t_), log_probs, n);
  }
  if (values) value(obs, n, values);
}

void ActorCriticAgent::value(const float* obs, std::size_t n, float* values) {
  load_obs(obs, n, true);
  if (trunk_) copy_out(vf_head_->forward(trunk_->forward(obs_t_)), values, n);
  else copy_out(critic_->forward(obs_t_), values, n);
}

void ActorCriticAgent::evaluate(const float* obs, const double* actions, std::size_t n) {
  actor_forward(obs, n, false);
  logp_.resize(n);
  ent_.resize(n);
  val_.resize(n);
  const auto N = static_cast<std::int64_t>(n);
  if (discrete_) {
    act_t_.resize({N}, nn::DType::kInt64);
    std::int64_t* a = act_t_.data<std::int64_t>();
    for (std::size_t i = 0; i < n; ++i) a[i] = static_cast<std::int64_t>(actions[i]);
    copy_out(cat_.log_prob(act_t_), logp_.data(), n);
    copy_out(cat_.entropy(), ent_.data(), n);
  } else {
    act_t_.resize({N, static_cast<std::int64_t>(action_dim_)}, nn::DType::kFloat32);
    float* a = act_t_.data<float>();
    for (std::size_t i = 0; i < n * action_dim_; ++i) a[i] = static_cast<float>(actions[i]);
    copy_out(gauss_->log_prob(act_t_), logp_.data(), n);
    copy_out(gauss_->entropy(), ent_.data(), n);
  }
  if (trunk_) {  // the trunk's output (still valid) feeds the value head
    copy_out(vf_head_->forward(*h_), val_.data(), n);
    return;
  }
  // obs_t_ still holds the observations (the actor's input must stay unchanged until
  // backward, so the critic gets its own copy).
  critic_in_.resize(obs_t_.shape(), nn::DType::kFloat32);
  critic_in_.copy_from(obs_t_);
  copy_out(critic_->forward(critic_in_), val_.data(), n);
}

void ActorCriticAgent::backward(const float* g_logp, const float* g_ent, const float* g_val) {
  const auto n = static_cast<std::int64_t>(logp_.size());
  grad_t_.resize({n}, nn::DType::kFloat32);
  float* g = grad_t_.data<float>();
  if (discrete_) {
    std::memcpy(g, g_logp, static_cast<std::size_t>(n) * sizeof(float));
    cat_.backward_log_prob(grad_t_);
    std::memcpy(g, g_ent, static_cast<std::size_t>(n) * sizeof(float));
    cat_.backward_entropy(grad_t_);
    policy_backward(cat_.grad_logits());
  } else {
    std::memcpy(g, g_logp, static_cast<std::size_t>(n) * sizeof(float));
    gauss_->backward_log_prob(grad_t_);
    std::memcpy(g, g_ent, static_cast<std::size_t>(n) * sizeof(float));
    gauss_->backward_entropy(grad_t_);
    policy_backward(gauss_->grad_mean());
  }
  nn::Tensor gv({n, 1}, nn::DType::kFloat32);
  std::memcpy(gv.data<float>(), g_val, static_cast<std::size_t>(n) * sizeof(float));
  if (!trunk_) {
    critic_->backward(gv);
    return;
  }
  // Shared trunk: dL/dh = policy head's + value head's input gradients.
  const nn::Tensor& gvh = vf_head_->backward(gv);
  float* a = gh_.data<float>();
  const float* b = gvh.data<float>();
  for (std::int64_t i = 0; i < gh_.numel(); ++i) a[i] += b[i];
  trunk_->backward(gh_);
}

void ActorCriticAgent::policy_backward(const nn::Tensor& grad_out) {
  if (!trunk_) {
    actor_->backward(grad_out);
    return;
  }
  const nn::Tensor& g = pi_head_->backward(grad_out);
  gh_.resize(g.shape(), nn::DType::kFloat32);
  gh_.copy_from(g);
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
    p.param->value.copy_from(found->tensor);
  }
}

}  // namespace herd::rl
