#include "herd/rl/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <ostream>
#include <sstream>

#include "herd/core/error.hpp"
#include "herd/io/checkpoint.hpp"
#include "herd/io/hdf5.hpp"
#include "herd/rl/registry.hpp"

namespace herd::rl {
namespace {

constexpr const char* kKind = "herd.rl.trainer";
constexpr std::uint32_t kKindVersion = 1;
constexpr std::size_t kWindow = 100;

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Named tensors as sections: "<p>names" (newline-separated), "<p><name>" float64 values.
void save_tensors(io::CheckpointWriter& w, const std::string& p, const std::vector<nn::NamedTensor>& ts) {
  std::string names;
  for (const auto& t : ts) {
    names += t.name + "\n";
    w.add(p + t.name, t.tensor.to_vector());
  }
  w.add_string(p + "names", names);
}

// Restores into `like` (current tensors: names and shapes) from the checkpoint.
std::vector<nn::NamedTensor> load_tensors(const io::CheckpointReader& r, const std::string& p,
                                          std::vector<nn::NamedTensor> like) {
  for (auto& t : like) {
    const auto v = r.get<double>(p + t.name);
    if (static_cast<std::int64_t>(v.size()) != t.tensor.numel())
      throw InputError("rl::Trainer::load_checkpoint: \"" + t.name + "\" has " + std::to_string(v.size()) +
                       " values in the checkpoint, but " + std::to_string(t.tensor.numel()) + " in this run");
    t.tensor = nn::Tensor::from_vector(t.tensor.shape(), v, nn::DType::kFloat64);
  }
  return like;
}

std::string format_eta(double s) {
  if (!std::isfinite(s) || s < 0) return "?";
  char buf[32];
  const auto t = static_cast<long>(s + 0.5);
  if (t >= 3600) std::snprintf(buf, sizeof buf, "%ldh%02ldm", t / 3600, (t / 60) % 60);
  else if (t >= 60) std::snprintf(buf, sizeof buf, "%ldm%02lds", t / 60, t % 60);
  else std::snprintf(buf, sizeof buf, "%lds", t);
  return buf;
}

}  // namespace

Trainer::Trainer(const TrainConfig& c, std::string text) : config_(c), config_text_(std::move(text)) {
  sampler_ = make_sampler(c.sampler, c.sampler_options);
  const auto probe = make_env(c.env);  // spaces of the agent
  agent_ = std::make_unique<ActorCriticAgent>(probe->obs_dim(), probe->action_space(), c.agent);
  if (c.algorithm == "a2c") algo_ = std::make_unique<A2c>(*agent_, c.a2c());
  else if (c.algorithm == "ppo") algo_ = std::make_unique<Ppo>(*agent_, c.ppo);
  else throw InputError("rl::Trainer: algorithm is \"" + c.algorithm + "\", but must be \"ppo\" or \"a2c\"");
  wall_start_ = now_seconds();
}

Trainer::~Trainer() = default;

double Trainer::recent_mean_return() const {
  if (recent_.empty()) return std::numeric_limits<double>::quiet_NaN();
  double s = 0;
  for (const auto& e : recent_) s += e.ret;
  return s / static_cast<double>(recent_.size());
}

void Trainer::iterate() {
  const double t0 = now_seconds();
  sampler_->clear_episodes();
  sampler_->collect(*agent_, buffer_);
  for (const auto& e : sampler_->episodes()) {
    recent_.push_back(e);
    if (recent_.size() > kWindow) recent_.pop_front();
  }
  buffer_.compute_advantages(config_.gamma, config_.gae_lambda);
  const double progress =
      1.0 - static_cast<double>(iteration_) / static_cast<double>(config_.num_iterations());
  const UpdateStats st = algo_->update(buffer_, progress, iteration_);
  ++iteration_;
  const double t1 = now_seconds();
  CurveRow row;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  double mn = nan, mx = nan, len = nan;
  if (!recent_.empty()) {
    mn = mx = recent_.front().ret;
    len = 0;
    for (const auto& e : recent_) {
      mn = std::min(mn, e.ret);
      mx = std::max(mx, e.ret);
      len += static_cast<double>(e.length);
    }
    len /= static_cast<double>(recent_.size());
  }
  row = {static_cast<double>(iteration_), static_cast<double>(env_steps()), wall_offset_ + (t1 - wall_start_),
         recent_mean_return(), mn, mx, len, st.policy_loss, st.value_loss, st.entropy, st.approx_kl,
         st.clip_fraction, st.explained_variance,
         static_cast<double>(config_.steps_per_iteration()) / std::max(t1 - t0, 1e-9), st.learning_rate,
         st.clip_range};
  curve_.push_back(row);
}

void Trainer::run(std::ostream* progress, std::int64_t stop_after) {
  const std::int64_t first = iteration_;
  const double start = now_seconds();
  while (!done() && (stop_after < 0 || iteration_ - first < stop_after)) {
    iterate();
    if (config_.checkpoint_period > 0 && iteration_ % config_.checkpoint_period == 0 && !done())
      save_checkpoint(checkpoint_path());
    if (progress && config_.progress_period > 0 &&
        (iteration_ % config_.progress_period == 0 || done())) {
      const double el = now_seconds() - start;
      const double sps = static_cast<double>((iteration_ - first) * config_.steps_per_iteration()) / std::max(el, 1e-9);
      const double left = static_cast<double>((config_.num_iterations() - iteration_) * config_.steps_per_iteration());
      char buf[256];
      std::snprintf(buf, sizeof buf, "iter %lld/%lld  steps %lld  %.0f steps/s  mean return %.2f  ETA %s\n",
                    static_cast<long long>(iteration_), static_cast<long long>(config_.num_iterations()),
                    static_cast<long long>(env_steps()), sps, recent_mean_return(), format_eta(left / sps).c_str());
      *progress << buf << std::flush;
    }
  }
  if (done()) {
    save_checkpoint(checkpoint_path());
    write_output(output_path());
  } else if (stop_after >= 0) {
    save_checkpoint(checkpoint_path());
  }
}

void Trainer::save_checkpoint(const std::string& path) const {
  io::CheckpointWriter w(kKind, kKindVersion);
  w.add_string("config", config_text_);
  w.add_value("iteration", iteration_);
  w.add_value("wall_seconds", wall_offset_ + (now_seconds() - wall_start_));
  save_tensors(w, "params/", agent_->state_dict());
  save_tensors(w, "optimizer/", algo_->optimizer().state());
  sampler_->save(w, "sampler/");
  std::vector<double> recent;
  for (const auto& e : recent_) {
    recent.push_back(e.ret);
    recent.push_back(static_cast<double>(e.length));
  }
  w.add("recent_episodes", recent);
  std::vector<double> curve;
  for (const auto& r : curve_) curve.insert(curve.end(), r.begin(), r.end());
  w.add("curve", curve);
  w.commit(path);
}

void Trainer::load_checkpoint(const std::string& path) {
  io::CheckpointReader r(path);
  r.expect_kind(kKind, kKindVersion);
  iteration_ = r.value<std::int64_t>("iteration");
  wall_offset_ = r.value<double>("wall_seconds");
  wall_start_ = now_seconds();
  agent_->load_state_dict(load_tensors(r, "params/", agent_->state_dict()));
  algo_->optimizer().load_state(load_tensors(r, "optimizer/", algo_->optimizer().state()));
  sampler_->load(r, "sampler/");
  const auto recent = r.get<double>("recent_episodes");
  recent_.clear();
  for (std::size_t i = 0; i + 1 < recent.size(); i += 2)
    recent_.push_back({recent[i], static_cast<std::int64_t>(recent[i + 1])});
  const auto curve = r.get<double>("curve");
  curve_.clear();
  for (std::size_t i = 0; i + kCurveColumns.size() <= curve.size(); i += kCurveColumns.size()) {
    CurveRow row;
    std::copy(curve.begin() + static_cast<std::ptrdiff_t>(i),
              curve.begin() + static_cast<std::ptrdiff_t>(i + kCurveColumns.size()), row.begin());
    curve_.push_back(row);
  }
}

void Trainer::write_output(const std::string& path) const {
  io::H5File f = io::H5File::create_atomic(path);
  io::H5Group root = f.root();
  root.set_attribute("config", config_text_);
  root.set_attribute("env", config_.env);
  root.set_attribute("algorithm", config_.algorithm);
  io::H5Group curve = root.create_group("curve");
  for (std::size_t c = 0; c < kCurveColumns.size(); ++c) {
    std::vector<double> col;
    col.reserve(curve_.size());
    for (const auto& r : curve_) col.push_back(r[c]);
    curve.write(kCurveColumns[c], col);
  }
  io::H5Group pol = root.create_group("policy");
  for (const auto& t : agent_->state_dict()) {
    std::vector<hsize_t> shape;
    for (auto d : t.tensor.shape().dims()) shape.push_back(static_cast<hsize_t>(d));
    const auto v = t.tensor.to_vector();
    std::vector<float> fv(v.begin(), v.end());
    pol.write(t.name, fv, shape);
  }
  io::H5Group rms = root.create_group("obs_rms");
  const RunningMeanStd& o = sampler_->obs_rms();
  rms.write("mean", o.mean());
  rms.write("var", o.var());
  rms.write_scalar("count", o.count());
  f.commit();
}

EvalResult evaluate_policy(ActorCriticAgent& agent, const std::string& env_id, const RunningMeanStd* rms,
                           int episodes, bool stochastic, std::uint64_t seed) {
  if (episodes < 1) throw InputError("rl::evaluate_policy: episodes is " + std::to_string(episodes) + ", but must be >= 1");
  auto env = make_env(env_id);
  const std::uint32_t gid = 1u << 20;
  env->set_global_id(gid);
  const std::size_t D = env->obs_dim(), A = env->action_dim();
  const bool discrete = env->action_space().is_discrete();
  const std::int64_t start = discrete ? env->action_space().start() : 0;
  std::vector<float> obs(D), nobs(D);
  std::vector<double> act(A);
  const RngStream rng(seed, gid, RngPurpose::kPolicy);
  std::uint64_t draw = 0;
  EvalResult res;
  for (int e = 0; e < episodes; ++e) {
    if (e == 0) env->reset(seed, obs.data());
    else env->reset(obs.data());
    double ret = 0;
    for (;;) {
      if (rms) rms->normalize(obs.data(), nobs.data(), 1);
      else nobs = obs;
      agent.act(nobs.data(), 1, stochastic ? &rng : nullptr, draw++, act.data(), nullptr, nullptr);
      if (discrete) act[0] += static_cast<double>(start);
      const StepResult s = env->step(std::span<const double>(act), obs.data());
      ret += s.reward;
      if (s.terminated || s.truncated) break;
    }
    res.returns.push_back(ret);
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

EvalResult evaluate_checkpoint(const std::string& path, int episodes, bool stochastic) {
  io::CheckpointReader r(path);
  r.expect_kind(kKind, kKindVersion);
  std::string text;
  const TrainConfig c = parse_train_config(r.string("config"), &text);
  TrainConfig small = c;
  small.sampler_options.num_envs = 1;
  small.sampler = "serial";
  auto env = make_env(c.env);
  ActorCriticAgent agent(env->obs_dim(), env->action_space(), c.agent);
  agent.load_state_dict(load_tensors(r, "params/", agent.state_dict()));
  RunningMeanStd rms(env->obs_dim());
  const bool norm = c.sampler_options.normalize_obs;
  if (norm) rms.set_state(r.get<double>("sampler/obs_rms"));
  return evaluate_policy(agent, c.env, norm ? &rms : nullptr, episodes, stochastic, c.seed + 1);
}

}  // namespace herd::rl
