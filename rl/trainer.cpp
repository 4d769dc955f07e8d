#include "herd/rl/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>
#include <ostream>
#include <set>
#include <sstream>

#include "herd/core/error.hpp"
#include "herd/core/memory.hpp"
#include "herd/io/checkpoint.hpp"
#include "herd/io/hdf5.hpp"
#include "herd/rl/dqn_trainer.hpp"
#include "herd/rl/registry.hpp"
#include "resume_settings.hpp"
#include "run_common.hpp"

namespace herd::rl {

namespace {

using detail::now_seconds;

constexpr const char* kKind = "herd.rl.trainer";
constexpr std::uint32_t kKindVersion = 1;
constexpr const char* kWho = "rl::Trainer::load_checkpoint";

// Settings a resumed run cannot change: they fix the shapes of the state in the checkpoint
// (the networks' parameters, the optimizer's state, the environments' states).
const std::vector<std::string>& fixed_on_resume() {
  static const std::vector<std::string> keys = {"env.id",
                                                "env.library",
                                                "env.symbol",
                                                "env.frame_stack",
                                                "sampler.num_envs",
                                                "network.hidden",
                                                "network.shared_trunk",
                                                "network.conv_channels",
                                                "network.conv_kernels",
                                                "network.conv_strides",
                                                "network.conv_padding",
                                                "algo.optimizer"};
  return keys;
}

// The curve's columns before the episode count, length range and the sampling and training
// rates were added (checkpoints without "curve_columns").
std::span<const char* const> legacy_curve_columns() { return std::span<const char* const>(kCurveColumns).first(16); }

std::size_t curve_index(const char* name) {
  for (std::size_t c = 0; c < kCurveColumns.size(); ++c)
    if (std::strcmp(kCurveColumns[c], name) == 0) return c;
  throw Error(std::string("rl::Trainer: no curve column ") + name);
}

}  // namespace

bool is_wall_clock_column(const std::string& name) {
  return name == "wall_seconds" || name == "steps_per_second" || name == "sample_steps_per_second" ||
         name == "train_steps_per_second";
}

ProgressRow Trainer::progress_row(const CurveRow& r) {
  // CSV column -> curve column.
  static const std::array<std::size_t, kProgressColumns.size()> from = [] {
    std::array<std::size_t, kProgressColumns.size()> f{};
    const char* names[] = {"iteration",
                           "env_steps",
                           "wall_seconds",
                           "episodes",
                           "return_mean",
                           "return_min",
                           "return_max",
                           "episode_length",
                           "episode_length_min",
                           "episode_length_max",
                           "policy_loss",
                           "value_loss",
                           "entropy",
                           "approx_kl",
                           "clip_fraction",
                           "explained_variance",
                           "learning_rate",
                           "sample_steps_per_second",
                           "train_steps_per_second"};
    for (std::size_t c = 0; c < f.size(); ++c) f[c] = curve_index(names[c]);
    return f;
  }();
  ProgressRow p{};
  for (std::size_t c = 0; c < p.size(); ++c) p[c] = r[from[c]];
  return p;
}

std::vector<io::TbScalar> Trainer::tensorboard_scalars(const CurveRow& r) const {
  const ProgressRow p = progress_row(r);
  std::vector<std::string> skip;
  if (config_.algorithm == "a2c") skip = {"approx_kl", "clip_fraction"};
  return detail::tensorboard_scalars(kProgressColumns, p, 17, skip);
}

double training_memory_need(const TrainConfig& c, std::size_t obs_dim, std::size_t action_dim) {
  const double n = static_cast<double>(c.sampler_options.num_envs) * c.sampler_options.num_steps;
  // The rollout buffer: observations (float), actions (double) and eleven per-step floats.
  const double rollout = n * (4.0 * static_cast<double>(obs_dim) + 8.0 * static_cast<double>(action_dim) + 44.0);
  // One minibatch (the whole rollout for A2C, or for PPO minibatches larger than it):
  // its gathered copy, the shuffled indices and the activations and gradients of the
  // actor and critic layers.
  double width = 0;
  for (const auto h : c.agent.hidden) width += static_cast<double>(h);
  if (!c.agent.conv.empty()) {
    // Convolution outputs count like hidden widths: channels x height x width per layer.
    const std::vector<std::int64_t> shape = make_env(c.env)->observation_space().shape();
    if (shape.size() == 3) {
      std::int64_t h = shape[1], w = shape[2];
      for (const ConvLayerSpec& l : c.agent.conv) {
        h = std::max<std::int64_t>((h + 2 * l.padding - l.kernel) / l.stride + 1, 1);
        w = std::max<std::int64_t>((w + 2 * l.padding - l.kernel) / l.stride + 1, 1);
        width += static_cast<double>(l.channels) * static_cast<double>(h) * static_cast<double>(w);
      }
    }
  }
  const double mb = c.algorithm == "a2c" ? n : std::min(n, static_cast<double>(c.ppo.minibatch_size));
  const double update = mb * (4.0 * static_cast<double>(obs_dim) + 8.0 * static_cast<double>(action_dim) + 32.0) +
                        4.0 * n + mb * width * 4.0 * 8.0;
  return rollout + update;
}

Trainer::Trainer(const TrainConfig& c, std::string text, Communicator* comm)
    : config_(c), config_text_(std::move(text)) {
  if (comm == nullptr) {
    own_comm_ = std::make_unique<SelfCommunicator>();
    comm = own_comm_.get();
  }
  comm_ = comm;
  config_.ranks = comm_->size();
  SamplerOptions so = c.sampler_options;
  if (comm_->size() > 1) {
    so.comm = comm_;
    so.first_global_id = static_cast<std::uint32_t>(comm_->rank()) * static_cast<std::uint32_t>(so.num_envs);
  }
  config_.sampler_options = so;
  // The spaces of the agent, and the memory the run needs, before anything large is made.
  const auto probe = make_env(c.env);
  check_memory_need(training_memory_need(c, probe->obs_dim(), probe->action_space().dim()), c.max_memory,
                    c.max_memory_prefix() + "training with " + std::to_string(c.sampler_options.num_envs) + " envs x " +
                        std::to_string(c.sampler_options.num_steps) +
                        " steps per rollout (sampler.num_envs x "
                        "sampler.num_steps)",
                    "lower sampler.num_envs or sampler.num_steps");
  sampler_ = make_sampler(c.sampler, so);
  AgentOptions ao = c.agent;
  // One rank per GPU: a plain "cuda" means this rank's local GPU.
  ao.device = detail::rank_device(ao.device, c.device, *comm_, "rl::Trainer");
  config_.agent.device = ao.device;
  // Gradients of a CUDA agent under several ranks: NCCL on its GPU (refused without NCCL).
  dev_comm_ = detail::make_device_comm(*comm_, ao.device, c.device, "rl::Trainer");
  agent_ = std::make_unique<ActorCriticAgent>(probe->observation_space(), probe->action_space(), ao);
  Communicator* dp = comm_->size() > 1 ? comm_ : nullptr;
  Communicator* grads = dev_comm_ ? &dev_comm_->comm() : nullptr;
  if (c.algorithm == "a2c") algo_ = std::make_unique<A2c>(*agent_, c.a2c(), dp, grads);
  else if (c.algorithm == "ppo") algo_ = std::make_unique<Ppo>(*agent_, c.ppo, dp, grads);
  else throw InputError("rl::Trainer: algorithm is \"" + c.algorithm + "\", but must be \"ppo\" or \"a2c\"");
  eval_ = std::make_unique<detail::PeriodicEvaluation>(config_);
  wall_start_ = now_seconds();
}

Trainer::~Trainer() = default;

bool Trainer::done() const { return iteration_ >= config_.num_iterations() || eval_->reached_stop_return(iteration_); }

double Trainer::recent_mean_return() const { return detail::recent_stats(recent_).mean_return; }

void Trainer::iterate() {
  const double t0 = now_seconds();
  sampler_->clear_episodes();
  sampler_->collect(*agent_, buffer_);
  gather_episodes();
  const double t_sampled = now_seconds();
  const double progress = 1.0 - static_cast<double>(iteration_) / static_cast<double>(config_.num_iterations());
  // GAE then the update (both on the device for a CUDA agent: Ppo::learn).
  const UpdateStats st = algo_->learn(buffer_, config_.gamma, config_.gae_lambda, progress, iteration_);
  ++iteration_;
  const double t1 = now_seconds();
  const detail::RecentStats w = detail::recent_stats(recent_);
  const auto spi = static_cast<double>(config_.steps_per_iteration());
  curve_.push_back({static_cast<double>(iteration_),
                    static_cast<double>(env_steps()),
                    wall_offset_ + (t1 - wall_start_),
                    w.mean_return,
                    w.min_return,
                    w.max_return,
                    w.mean_length,
                    st.policy_loss,
                    st.value_loss,
                    st.entropy,
                    st.approx_kl,
                    st.clip_fraction,
                    st.explained_variance,
                    spi / std::max(t1 - t0, 1e-9),
                    st.learning_rate,
                    st.clip_range,
                    episodes_total_,
                    w.min_length,
                    w.max_length,
                    spi / std::max(t_sampled - t0, 1e-9),
                    spi / std::max(t1 - t_sampled, 1e-9)});
  // The evaluation columns: NaN unless `evaluate_if_due` evaluates after this iteration.
  std::fill(curve_.back().end() - static_cast<std::ptrdiff_t>(kEvalCurveColumns.size()), curve_.back().end(),
            std::numeric_limits<double>::quiet_NaN());
}

// After an iteration: evaluation when it passed a multiple of eval.every_steps, on a host
// copy of the agent (so that the training's state is untouched), its columns in the
// iteration's curve row, its line to `progress` (rank 0). Returns true for a new best mean.
// Collective.
bool Trainer::evaluate_if_due(std::ostream* progress) {
  return eval_->after_iteration(
      *comm_, iteration_, env_steps(), config_.steps_per_iteration(),
      std::span<double>(curve_.back()).last(kEvalCurveColumns.size()), comm_->rank() == 0 ? progress : nullptr,
      [this](int episodes, bool stochastic, std::uint64_t seed, std::int64_t cap) {
        if (!eval_agent_) {
          const auto env = make_env(config_.env);
          AgentOptions ao = config_.agent;
          ao.device = Device::cpu();
          eval_agent_ = std::make_unique<ActorCriticAgent>(env->observation_space(), env->action_space(), ao);
        }
        eval_agent_->load_state_dict(agent_->state_dict());
        const bool norm = config_.sampler_options.normalize_obs;
        return evaluate_policy(*eval_agent_, config_.env, norm ? &sampler_->obs_rms() : nullptr, episodes, stochastic,
                               seed, cap);
      });
}

std::vector<double> Trainer::csv_values(const CurveRow& row) const {
  const ProgressRow p = progress_row(row);
  std::vector<double> v(p.begin(), p.end());
  if (eval_->enabled()) v.insert(v.end(), row.end() - static_cast<std::ptrdiff_t>(kEvalCurveColumns.size()), row.end());
  return v;
}

// Every rank's finished episodes (rank order) into the recent window, on every rank.
void Trainer::gather_episodes() {
  const std::vector<EpisodeInfo> all = detail::gather_episodes(*comm_, sampler_->episodes());
  episodes_total_ += static_cast<double>(all.size());
  for (const auto& e : all) detail::push_recent(recent_, e);
}

void Trainer::open_logs() {
  csv_.reset();
  tb_.reset();
  if (comm_->rank() != 0) return;
  std::vector<std::string> blank;
  if (config_.algorithm == "a2c") blank = {"approx_kl", "clip_fraction"};  // one step at ratio 1: no such quantity
  std::vector<std::string> columns(kProgressColumns.begin(), kProgressColumns.end());
  if (eval_->enabled()) columns.insert(columns.end(), kEvalCurveColumns.begin(), kEvalCurveColumns.end());
  csv_ = std::make_unique<ProgressCsv>(progress_path(), columns,
                                       std::vector<std::string>{"iteration", "env_steps", "episodes"}, blank);
  if (iteration_ == 0) {
    csv_->start();
  } else {
    std::vector<std::vector<double>> rows;
    rows.reserve(curve_.size());
    for (const auto& r : curve_) rows.push_back(csv_values(r));
    csv_->resume_values(rows);
  }
  if (config_.tensorboard) tb_ = detail::open_tensorboard(tensorboard_dir(), env_steps());
}

void Trainer::log_row(const CurveRow& row) {
  if (csv_) csv_->append_values(csv_values(row));
  if (tb_) {
    std::vector<io::TbScalar> s = tensorboard_scalars(row);
    const auto ev = eval_->tensorboard_scalars(iteration_);
    s.insert(s.end(), ev.begin(), ev.end());
    tb_->add_scalars(static_cast<std::int64_t>(row[1]), s);
  }
}

RunEnd Trainer::run(std::ostream* progress, std::int64_t stop_after, const volatile std::sig_atomic_t* interrupt) {
  open_logs();
  detail::RunHooks hooks;
  hooks.iterate = [this, progress] {
    iterate();
    const bool best = evaluate_if_due(progress);
    log_row(curve_.back());
    if (best && eval_->save_best()) save_checkpoint(eval_->best_path());
  };
  hooks.env_steps = [this] { return env_steps(); };
  hooks.mean_return = [this] { return recent_mean_return(); };
  const RunEnd end = detail::run_iterations(*this, *comm_, progress, stop_after, interrupt, hooks, interrupted_by_);
  csv_.reset();
  tb_.reset();
  return end;
}

void Trainer::save_checkpoint(const std::string& path) const {
  io::CheckpointWriter w(kKind, kKindVersion);
  w.add_string("config", config_text_);
  w.add_value("iteration", iteration_);
  w.add_value("wall_seconds", wall_offset_ + (now_seconds() - wall_start_));
  detail::save_tensors(w, "params/", agent_->state_dict());
  detail::save_tensors(w, "optimizer/", algo_->optimizer().state());
  w.add_value("ranks", static_cast<std::int64_t>(comm_->size()));
  if (comm_->size() == 1) {
    sampler_->save(w, "sampler/");
  } else {
    // Every rank's sampler state as one section "sampler/rank<r>" (a nested checkpoint),
    // gathered on rank 0; the merged (identical) observation statistics for `eval`.
    if (!detail::add_rank_sections(w, *comm_, "sampler/", "herd.rl.sampler",
                                   [this](io::CheckpointWriter& sw) { sampler_->save(sw, ""); }))
      return;
    w.add("sampler/obs_rms", sampler_->obs_rms().state());
  }
  detail::save_recent(w, recent_);
  detail::save_curve(w, curve_, kCurveColumns);
  w.add_value("episodes_total", episodes_total_);
  eval_->save(w);
  w.commit(path);
}

std::vector<std::string> Trainer::resume_conflicts(const std::string& path) const {
  io::CheckpointReader r(path);
  if (r.kind() == kDqnCheckpointKind) return {"algorithm = \"" + config_.algorithm + "\" (the checkpoint has \"dqn\")"};
  r.expect_kind(kKind, kKindVersion);
  return detail::resume_conflicts(r.string("config"), config_text_, fixed_on_resume());
}

void Trainer::load_checkpoint(const std::string& path) {
  detail::throw_if_conflicts("rl::Trainer::load_checkpoint", path, resume_conflicts(path));
  io::CheckpointReader r(path);
  r.expect_kind(kKind, kKindVersion);
  changed_on_resume_ = detail::trajectory_changes(r.string("config"), config_text_);
  iteration_ = r.value<std::int64_t>("iteration");
  wall_offset_ = r.value<double>("wall_seconds");
  wall_start_ = now_seconds();
  const std::int64_t ranks = detail::checkpoint_ranks(r);
  detail::require_same_ranks(kWho, path, ranks, comm_->size());
  agent_->load_state_dict(detail::load_tensors(r, "params/", agent_->state_dict(), kWho));
  algo_->optimizer().load_state(detail::load_tensors(r, "optimizer/", algo_->optimizer().state(), kWho));
  if (ranks == 1) {
    sampler_->load(r, "sampler/");
  } else {
    sampler_->load(detail::rank_section(r, path, "sampler/", comm_->rank(), "herd.rl.sampler"), "");
  }
  detail::load_recent(r, recent_);
  // The episode count (unknown in a checkpoint of an older version) and the curve by column
  // name (such a checkpoint has fewer columns: the others are NaN).
  episodes_total_ =
      r.has("episodes_total") ? r.value<double>("episodes_total") : std::numeric_limits<double>::quiet_NaN();
  curve_.clear();
  for (const auto& row : detail::load_curve(r, kCurveColumns, legacy_curve_columns())) {
    CurveRow c;
    std::copy(row.begin(), row.end(), c.begin());
    curve_.push_back(c);
  }
  eval_->load(r, iteration_);
}

void Trainer::write_output(const std::string& path) const {
  io::H5File f = io::H5File::create_atomic(path);
  io::H5Group root = f.root();
  detail::write_output_head(root, config_text_, config_.env, config_.algorithm, curve_, kCurveColumns);
  detail::write_parameters(root, "policy", agent_->state_dict());
  eval_->write(root);
  io::H5Group rms = root.create_group("obs_rms");
  const RunningMeanStd& o = sampler_->obs_rms();
  rms.write("mean", o.mean());
  rms.write("var", o.var());
  rms.write_scalar("count", o.count());
  f.commit();
}

bool EvalResult::add_step(const StepResult& step, std::int64_t max_episode_steps) {
  episode_return_ += step.reward;
  ++episode_length_;
  const bool cut = !step.terminated && !step.truncated && max_episode_steps > 0 && episode_length_ >= max_episode_steps;
  if (!(step.terminated || step.truncated || cut)) return false;
  returns.push_back(episode_return_);
  lengths.push_back(episode_length_);
  truncated += step.terminated ? 0 : 1;
  capped += cut ? 1 : 0;
  episode_return_ = 0;
  episode_length_ = 0;
  return true;
}

EvalResult evaluate_policy(ActorCriticAgent& agent, const std::string& env_id, const RunningMeanStd* rms, int episodes,
                           bool stochastic, std::uint64_t seed, std::int64_t max_episode_steps) {
  if (episodes < 1)
    throw InputError("rl::evaluate_policy: episodes is " + std::to_string(episodes) + ", but must be >= 1");
  if (max_episode_steps < 0)
    throw InputError("rl::evaluate_policy: max_episode_steps is " + std::to_string(max_episode_steps) +
                     ", but must be >= 0 (0: no cap)");
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
  return detail::run_episodes(*env, obs.data(), seed, episodes, max_episode_steps, [&] {
    if (rms) rms->normalize(obs.data(), nobs.data(), 1);
    else nobs = obs;
    agent.act(nobs.data(), 1, stochastic ? &rng : nullptr, draw++, act.data(), nullptr, nullptr);
    if (discrete) act[0] += static_cast<double>(start);
    return env->step(std::span<const double>(act), obs.data());
  });
}

EvalResult evaluate_checkpoint(const std::string& path, int episodes, bool stochastic, std::int64_t max_episode_steps) {
  io::CheckpointReader r(path);
  if (r.kind() == kDqnCheckpointKind) return evaluate_dqn_checkpoint(path, episodes, stochastic, max_episode_steps);
  r.expect_kind(kKind, kKindVersion);
  std::string text;
  const std::int64_t ranks = detail::checkpoint_ranks(r);  // the run's rank count (its minibatch checks depend on it)
  TrainConfig c;
  try {
    // Loads the env's library too (env.library), which may have moved since training.
    c = parse_train_config(r.string("config"), &text, static_cast<int>(ranks));
  } catch (const InputError& e) {
    throw InputError(path + ": " + e.what());
  }
  TrainConfig small = c;
  small.sampler_options.num_envs = 1;
  small.sampler = "serial";
  auto env = make_env(c.env);
  AgentOptions ao = c.agent;
  ao.device = Device::cpu();  // one env at a time: the host (a CUDA run's checkpoint works too)
  ActorCriticAgent agent(env->observation_space(), env->action_space(), ao);
  agent.load_state_dict(detail::load_tensors(r, "params/", agent.state_dict(), "rl::evaluate_checkpoint"));
  RunningMeanStd rms(env->obs_dim());
  const bool norm = c.sampler_options.normalize_obs;
  if (norm) rms.set_state(r.get<double>("sampler/obs_rms"));
  return evaluate_policy(agent, c.env, norm ? &rms : nullptr, episodes, stochastic, c.seed + 1,
                         max_episode_steps >= 0 ? max_episode_steps : c.eval_max_episode_steps);
}

}  // namespace herd::rl
