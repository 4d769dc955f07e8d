#include "herd/rl/dqn_trainer.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <ostream>
#include <set>
#include <sstream>

#include "herd/core/error.hpp"
#include "herd/core/memory.hpp"
#include "herd/io/checkpoint.hpp"
#include "herd/io/hdf5.hpp"
#include "herd/rl/network.hpp"
#include "herd/rl/registry.hpp"
#include "resume_settings.hpp"
#include "run_common.hpp"
#include "sampler_state.hpp"

namespace herd::rl {

namespace {

constexpr std::uint32_t kKindVersion = 1;
constexpr std::uint32_t kReplayStream = 0xFFFFFF00u;  // sampling draws, disjoint from env ids
constexpr std::uint32_t kEvalEnv = 1u << 20;

using detail::now_seconds;
constexpr const char* kWho = "rl::DqnTrainer::load_checkpoint";
constexpr const char* kRankKind = "herd.rl.dqn.rank";  // a rank's own state in a checkpoint of several ranks

const std::vector<std::string>& fixed_on_resume() {
  static const std::vector<std::string> keys = {"algorithm",
                                                "env.id",
                                                "env.library",
                                                "env.symbol",
                                                "env.frame_stack",
                                                "sampler.num_envs",
                                                "network.hidden",
                                                "network.activation",
                                                "network.conv_channels",
                                                "network.conv_kernels",
                                                "network.conv_strides",
                                                "network.conv_padding",
                                                "dqn.buffer_size",
                                                "dqn.n_step",
                                                "dqn.dueling",
                                                "dqn.prioritized",
                                                "dqn.optimizer",
                                                "dqn.rmsprop_centered"};
  return keys;
}

std::unique_ptr<QNetwork> make_q_network(const TrainConfig& c, const Env& env, Device device) {
  // The encoder (network.conv_* and network.hidden): weighted layer k draws from
  // RngStream(seed, 0, kInit).at(k); the heads from RngStream(seed, 100, kInit).
  const EncoderSpec spec = c.agent.encoder();
  const std::vector<std::int64_t>& shape = env.observation_space().shape();
  std::int64_t features = 0;
  auto enc = make_encoder(shape, spec, device, RngStream(c.seed, 0, RngPurpose::kInit), 0, &features);
  // Rows reach the encoder as [n, C, H, W] with convolutions, else as [n, obs_dim].
  const std::vector<std::int64_t> rows =
      spec.conv.empty() ? std::vector<std::int64_t>{static_cast<std::int64_t>(env.obs_dim())} : shape;
  return std::make_unique<QNetwork>(std::move(enc), features, rows, env.action_space().n(), c.dqn.dueling,
                                    RngStream(c.seed, 100, RngPurpose::kInit), 0, device);
}

ReplayBufferOptions replay_options(const TrainConfig& c, std::size_t obs_dim, bool u8) {
  ReplayBufferOptions r;
  r.capacity = static_cast<std::size_t>(c.dqn.buffer_size);
  r.num_envs = static_cast<std::size_t>(c.sampler_options.num_envs);
  r.obs_dim = obs_dim;
  r.frame_stack = c.frame_stack;
  r.uint8_obs = u8;
  r.n_step = c.dqn.n_step;
  r.gamma = c.dqn.gamma;
  r.prioritized = c.dqn.prioritized;
  r.alpha = c.dqn.alpha;
  r.priority_eps = c.dqn.priority_eps;
  return r;
}

}  // namespace

bool replay_uint8(const Space& s) {
  // Integer bounds do not make integer values (a Box(0, 1) of real features): the space
  // must declare them.
  if (!s.is_box() || s.values() != BoxValues::kInteger) return false;
  for (std::size_t i = 0; i < s.dim(); ++i) {
    const double lo = s.low()[i], hi = s.high()[i];
    if (!(lo >= 0 && hi <= 255) || lo != std::floor(lo) || hi != std::floor(hi)) return false;
  }
  return true;
}

namespace {

/// The parts of `dqn_memory_need`: the replay buffer (dqn.buffer_size), the sampled batches
/// (dqn.batch_size) and the envs' buffers (sampler.num_envs).
std::array<double, 3> dqn_memory_parts(const TrainConfig& c, std::size_t obs_dim, bool uint8_obs) {
  const double replay = ReplayBuffer::memory_need(replay_options(c, obs_dim, uint8_obs));
  const double B = c.sampler_options.num_envs, n = c.dqn.batch_size;
  double width = 0;
  for (const auto h : c.agent.hidden) width += static_cast<double>(h);
  const double batches = n * (8.0 * static_cast<double>(obs_dim) + 40.0) + 3.0 * n * width * 4.0 * 2.0;
  const double envs = B * (12.0 * static_cast<double>(obs_dim) + 64.0) + B * width * 4.0 * 2.0;
  return {replay, batches, envs};
}

/// Refuses a run above max_memory (or the memory available) naming the settings that need
/// most of it: each part of at least a quarter of the need, the largest first.
void check_dqn_memory(const TrainConfig& c, std::size_t obs_dim, bool uint8_obs) {
  const std::array<double, 3> parts = dqn_memory_parts(c, obs_dim, uint8_obs);
  const double need = parts[0] + parts[1] + parts[2];
  const std::array<std::string, 3> what = {
      "a replay buffer of " + std::to_string(c.dqn.buffer_size) + " transitions (dqn.buffer_size)",
      "batches of " + std::to_string(c.dqn.batch_size) + " transitions (dqn.batch_size)",
      std::to_string(c.sampler_options.num_envs) + " envs (sampler.num_envs)"};
  const std::array<const char*, 3> keys = {"dqn.buffer_size", "dqn.batch_size", "sampler.num_envs"};
  std::array<std::size_t, 3> order = {0, 1, 2};
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return parts[a] > parts[b]; });
  std::string described, hint;
  for (const std::size_t k : order) {
    if (!described.empty() && parts[k] < 0.25 * need) break;
    described += (described.empty() ? "" : " and ") + what[k];
    hint += (hint.empty() ? "lower " : " or ") + std::string(keys[k]);
  }
  check_memory_need(need, c.max_memory, c.max_memory_prefix() + "DQN with " + described, hint);
}

}  // namespace

double dqn_memory_need(const TrainConfig& c, std::size_t obs_dim, bool uint8_obs) {
  const std::array<double, 3> parts = dqn_memory_parts(c, obs_dim, uint8_obs);
  return parts[0] + parts[1] + parts[2];
}

DqnTrainer::DqnTrainer(const TrainConfig& c, std::string text, Communicator* comm)
    : config_(c), config_text_(std::move(text)) {
  if (comm == nullptr) {
    own_comm_ = std::make_unique<SelfCommunicator>();
    comm = own_comm_.get();
  }
  comm_ = comm;
  config_.ranks = comm_->size();
  // One rank per GPU (a plain "cuda": this rank's local GPU), the gradients averaged over
  // NCCL on the device, as PPO's Trainer does.
  config_.agent.device = detail::rank_device(config_.agent.device, c.device, *comm_, "rl::DqnTrainer");
  dev_comm_ = detail::make_device_comm(*comm_, config_.agent.device, c.device, "rl::DqnTrainer");
  const auto probe = make_env(c.env);
  if (!probe->action_space().is_discrete())
    throw InputError("rl::DqnTrainer: env \"" + c.env + "\" has the action space " + probe->action_space().to_string() +
                     ", but DQN needs a discrete one");
  const bool u8 = replay_uint8(probe->observation_space());
  check_dqn_memory(c, probe->obs_dim(), u8);
  EnvPoolOptions po;
  po.env_id = c.env;
  po.num_envs = static_cast<std::size_t>(c.sampler_options.num_envs);
  po.num_threads = c.sampler == "parallel" ? static_cast<std::size_t>(c.sampler_options.num_threads) : 1;
  po.seed = c.seed;
  po.max_episode_steps = c.sampler_options.max_episode_steps;
  // Rank r's envs have the global ids r * num_envs + k: their own reset and policy streams.
  first_gid_ = static_cast<std::uint32_t>(comm_->rank()) * static_cast<std::uint32_t>(po.num_envs);
  po.first_global_id = first_gid_;
  pool_ = std::make_unique<EnvPool>(po);
  pool_->reset();
  obs_.assign(pool_->obs().begin(), pool_->obs().end());
  const std::size_t B = pool_->num_envs();
  ep_ret_.assign(B, 0.0);
  ep_len_.assign(B, 0);
  actions_.assign(B, 0);
  num_actions_ = probe->action_space().n();
  online_ = make_q_network(config_, *probe, config_.agent.device);
  target_ = make_q_network(config_, *probe, config_.agent.device);
  target_->update_from(*online_, 1.0);
  dqn_ = std::make_unique<Dqn>(*online_, *target_, config_.dqn, comm_->size() > 1 ? comm_ : nullptr,
                               dev_comm_ ? &dev_comm_->comm() : nullptr);
  replay_ = std::make_unique<ReplayBuffer>(replay_options(config_, probe->obs_dim(), u8));
  eval_ = std::make_unique<detail::PeriodicEvaluation>(config_);
  wall_start_ = now_seconds();
}

DqnTrainer::~DqnTrainer() = default;

bool DqnTrainer::done() const {
  return iteration_ >= config_.num_iterations() || eval_->reached_stop_return(iteration_);
}

double DqnTrainer::recent_mean_return() const { return detail::recent_stats(recent_).mean_return; }

double DqnTrainer::epsilon() const {
  const DqnOptions& q = config_.dqn;
  return exploration_epsilon(env_steps(), config_.total_steps, q.exploration_initial_eps, q.exploration_final_eps,
                             q.exploration_fraction);
}

void DqnTrainer::vector_step() {
  const std::size_t B = pool_->num_envs();
  const DqnOptions& q = config_.dqn;
  const double eps = epsilon();
  const bool warmup = env_steps() < q.learning_starts;
  bool any_greedy = false;
  std::vector<std::uint8_t> greedy(B, 0);
  for (std::size_t k = 0; k < B; ++k) {
    RngCursor cur =
        RngStream(config_.seed, first_gid_ + static_cast<std::uint32_t>(k), RngPurpose::kPolicy).at(vector_steps_);
    const double u = cur.uniform();
    if (warmup || u < eps) {
      actions_[k] = static_cast<std::int64_t>(cur.below(static_cast<std::uint32_t>(num_actions_)));
    } else {
      greedy[k] = 1;
      any_greedy = true;
    }
  }
  if (any_greedy) {
    greedy_.resize(B);
    online_->greedy_actions(obs_.data(), static_cast<std::int64_t>(B), greedy_.data());
    for (std::size_t k = 0; k < B; ++k)
      if (greedy[k]) actions_[k] = greedy_[k];
  }
  const std::int64_t start = pool_->action_space().start();
  std::vector<std::int64_t> env_actions(actions_);
  for (auto& a : env_actions) a += start;
  pool_->step(std::span<const std::int64_t>(env_actions));
  const auto rew = pool_->rewards();
  const auto term = pool_->terminated();
  const auto trunc = pool_->truncated();
  replay_->add(obs_.data(), actions_.data(), rew.data(), term.data(), trunc.data(), pool_->final_obs().data());
  for (std::size_t k = 0; k < B; ++k) {
    ep_ret_[k] += rew[k];
    ++ep_len_[k];
    if (term[k] || trunc[k]) {
      finished_.push_back({ep_ret_[k], ep_len_[k]});
      ep_ret_[k] = 0;
      ep_len_[k] = 0;
    }
  }
  std::copy(pool_->obs().begin(), pool_->obs().end(), obs_.begin());
  const std::int64_t before = env_steps();
  ++vector_steps_;
  const std::int64_t after = env_steps();
  if (after / q.target_update_interval > before / q.target_update_interval) target_->update_from(*online_, q.tau);
  if (vector_steps_ % static_cast<std::uint64_t>(q.train_freq) == 0 && after >= q.learning_starts) train_round();
}

void DqnTrainer::train_round() {
  const DqnOptions& q = config_.dqn;
  if (comm_->size() == 1 && replay_->size() == 0) return;  // n-step horizons not complete yet
  if (!replay_ready_ && comm_->size() > 1) {
    // Gradient steps are collective: they start once every rank's replay holds a complete
    // n-step transition (the count never drops back to 0).
    std::int32_t ready = replay_->size() > 0 ? 1 : 0;
    comm_->allreduce(std::span<std::int32_t>(&ready, 1), ReduceOp::kMin);
    if (!ready) return;
    replay_ready_ = true;
  }
  const double t0 = now_seconds();
  const std::int64_t rounds = q.gradient_steps < 0
                                  ? static_cast<std::int64_t>(q.train_freq) * config_.sampler_options.num_envs
                                  : q.gradient_steps;
  const double frac = std::min(1.0, static_cast<double>(env_steps()) / static_cast<double>(config_.total_steps));
  const double beta = q.beta0 + (1.0 - q.beta0) * frac;
  for (std::int64_t j = 0; j < rounds; ++j) {
    // Rank r's j-th batch: draw j * ranks + r (one rank: draw j).
    RngCursor cur =
        RngStream(config_.seed, kReplayStream, RngPurpose::kShuffle)
            .at(grad_steps_ * static_cast<std::uint64_t>(comm_->size()) + static_cast<std::uint64_t>(comm_->rank()));
    replay_->sample(static_cast<std::size_t>(q.batch_size), cur, beta, batch_);
    DqnStepStats st;
    try {
      st = dqn_->train_step(batch_, &td_);
    } catch (const NumericalError& e) {
      throw NumericalError(std::string(e.what()) + " at iteration " + std::to_string(iteration_ + 1) +
                           ", gradient step " + std::to_string(grad_steps_ + 1));
    }
    if (q.prioritized) replay_->update_priorities(batch_.indices, td_);
    ++grad_steps_;
    sum_loss_ += st.loss;
    sum_q_ += st.q_mean;
    sum_target_ += st.target_mean;
    sum_norm_ += st.grad_norm;
    ++n_stats_;
  }
  train_seconds_ += now_seconds() - t0;
}

void DqnTrainer::iterate() {
  const double t0 = now_seconds();
  sum_loss_ = sum_q_ = sum_target_ = sum_norm_ = 0;
  n_stats_ = 0;
  train_seconds_ = 0;
  for (int s = 0; s < config_.sampler_options.num_steps; ++s) vector_step();
  // The iteration's finished episodes of every rank (rank order) into the window.
  for (const EpisodeInfo& e : detail::gather_episodes(*comm_, finished_)) {
    detail::push_recent(recent_, e);
    episodes_total_ += 1;
  }
  finished_.clear();
  // Valid transitions over all ranks' replay buffers; the ranks' loss, Q and target sums
  // (every rank made the same number of gradient steps): averages over all ranks' batches.
  double replay_size = static_cast<double>(replay_->size());
  if (comm_->size() > 1) {
    std::array<double, 4> sums = {replay_size, sum_loss_, sum_q_, sum_target_};
    comm_->allreduce(std::span<double>(sums), ReduceOp::kSum);
    const double inv = 1.0 / static_cast<double>(comm_->size());
    replay_size = sums[0];
    sum_loss_ = sums[1] * inv;
    sum_q_ = sums[2] * inv;
    sum_target_ = sums[3] * inv;
  }
  ++iteration_;
  const double t1 = now_seconds();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const detail::RecentStats w = detail::recent_stats(recent_);
  const double ns = n_stats_ ? static_cast<double>(n_stats_) : nan;
  const auto spi = static_cast<double>(config_.steps_per_iteration());
  const double frac = std::min(1.0, static_cast<double>(env_steps()) / static_cast<double>(config_.total_steps));
  const double beta = config_.dqn.prioritized ? config_.dqn.beta0 + (1.0 - config_.dqn.beta0) * frac : nan;
  const double sample_s = std::max(t1 - t0 - train_seconds_, 1e-9);
  curve_.push_back({static_cast<double>(iteration_),
                    static_cast<double>(env_steps()),
                    wall_offset_ + (t1 - wall_start_),
                    w.mean_return,
                    w.min_return,
                    w.max_return,
                    w.mean_length,
                    w.min_length,
                    w.max_length,
                    episodes_total_,
                    sum_loss_ / ns,
                    sum_q_ / ns,
                    sum_target_ / ns,
                    sum_norm_ / ns,
                    epsilon(),
                    beta,
                    dqn_->optimizer().lr(),
                    static_cast<double>(grad_steps_),
                    replay_size,
                    spi / std::max(t1 - t0, 1e-9),
                    spi / sample_s,
                    train_seconds_ > 0 ? spi / train_seconds_ : nan,
                    nan,  // the evaluation columns: NaN unless `evaluate_if_due` evaluates after this iteration
                    nan,
                    nan,
                    nan,
                    nan});
}

// After an iteration: evaluation when it passed a multiple of eval.every_steps, greedy (or
// epsilon-greedy with the final epsilon) on a host copy of the online network, its columns
// in the iteration's curve row, its line to `progress` (rank 0). Returns true for a new best
// mean. Collective.
bool DqnTrainer::evaluate_if_due(std::ostream* progress) {
  return eval_->after_iteration(
      *comm_, iteration_, env_steps(), config_.steps_per_iteration(),
      std::span<double>(curve_.back()).last(kEvalCurveColumns.size()), comm_->rank() == 0 ? progress : nullptr,
      [this](int episodes, bool stochastic, std::uint64_t seed, std::int64_t cap) {
        if (!eval_q_) eval_q_ = make_q_network(config_, *make_env(config_.env), Device::cpu());
        eval_q_->load_state_dict(online_->state_dict());
        return evaluate_q_network(*eval_q_, config_.env, episodes, stochastic ? config_.dqn.exploration_final_eps : 0.0,
                                  seed, cap);
      });
}

std::vector<double> DqnTrainer::progress_values(const std::vector<double>& row) const {
  static const std::array<const char*, kDqnProgressColumns.size()> from = {"iteration",
                                                                           "env_steps",
                                                                           "wall_seconds",
                                                                           "episodes",
                                                                           "return_mean",
                                                                           "return_min",
                                                                           "return_max",
                                                                           "episode_length",
                                                                           "episode_length_min",
                                                                           "episode_length_max",
                                                                           "loss",
                                                                           "q_mean",
                                                                           "epsilon",
                                                                           "learning_rate",
                                                                           "gradient_steps",
                                                                           "replay_size",
                                                                           "sample_steps_per_second",
                                                                           "train_steps_per_second"};
  std::vector<double> out;
  for (const char* name : from)
    for (std::size_t c = 0; c < kDqnCurveColumns.size(); ++c)
      if (std::string(kDqnCurveColumns[c]) == name) out.push_back(row[c]);
  if (eval_->enabled())
    out.insert(out.end(), row.end() - static_cast<std::ptrdiff_t>(kEvalCurveColumns.size()), row.end());
  return out;
}

void DqnTrainer::open_logs() {
  csv_.reset();
  tb_.reset();
  if (comm_->rank() != 0) return;  // rank 0 writes the logs
  std::vector<std::string> columns(kDqnProgressColumns.begin(), kDqnProgressColumns.end());
  if (eval_->enabled()) columns.insert(columns.end(), kEvalCurveColumns.begin(), kEvalCurveColumns.end());
  csv_ = std::make_unique<ProgressCsv>(
      progress_path(), columns,
      std::vector<std::string>{"iteration", "env_steps", "episodes", "gradient_steps", "replay_size"});
  if (iteration_ == 0) {
    csv_->start();
  } else {
    std::vector<std::vector<double>> rows;
    for (const auto& r : curve_) rows.push_back(progress_values(r));
    csv_->resume_values(rows);
  }
  if (config_.tensorboard) tb_ = detail::open_tensorboard(tensorboard_dir(), env_steps());
}

RunEnd DqnTrainer::run(std::ostream* progress, std::int64_t stop_after, const volatile std::sig_atomic_t* interrupt) {
  open_logs();
  detail::RunHooks hooks;
  hooks.iterate = [this, progress] {
    iterate();
    const bool best = evaluate_if_due(progress);
    const std::vector<double> values = progress_values(curve_.back());
    if (csv_) csv_->append_values(values);
    if (tb_) {
      std::vector<io::TbScalar> s = detail::tensorboard_scalars(kDqnProgressColumns, values, 16);
      const auto ev = eval_->tensorboard_scalars(iteration_);
      s.insert(s.end(), ev.begin(), ev.end());
      tb_->add_scalars(env_steps(), s);
    }
    if (best && eval_->save_best()) save_checkpoint(eval_->best_path());
  };
  hooks.env_steps = [this] { return env_steps(); };
  hooks.mean_return = [this] { return recent_mean_return(); };
  hooks.progress_detail = [this] {
    const auto& row = curve_.back();
    char buf[96];
    // Before learning_starts no update has run: no loss or Q value to show (NaN in the CSV).
    if (std::isnan(row[10]) && std::isnan(row[11]))
      std::snprintf(buf, sizeof buf, "  eps %.3f  (no update yet: learning_starts)", epsilon());
    else std::snprintf(buf, sizeof buf, "  eps %.3f  loss %.4g  q %.3g", epsilon(), row[10], row[11]);
    return std::string(buf);
  };
  const RunEnd end = detail::run_iterations(*this, *comm_, progress, stop_after, interrupt, hooks, interrupted_by_);
  csv_.reset();
  tb_.reset();
  return end;
}

// This rank's own state: replay buffer, env states and reset streams, current
// observations, episode accumulators.
void DqnTrainer::save_local(io::CheckpointWriter& w) const {
  replay_->save(w, "replay/");
  std::vector<double> states;
  std::vector<std::uint64_t> streams;  // per env: seed, episode, elapsed steps
  for (std::size_t k = 0; k < pool_->num_envs(); ++k) {
    const Env& e = pool_->env(k);
    const auto st = e.get_state();
    states.insert(states.end(), st.begin(), st.end());
    streams.push_back(e.seed());
    streams.push_back(e.episode());
    streams.push_back(static_cast<std::uint64_t>(e.elapsed_steps()));
  }
  w.add("env_states", states);
  w.add("env_streams", streams);
  w.add("obs", obs_);
  w.add("ep_ret", ep_ret_);
  w.add("ep_len", ep_len_);
}

void DqnTrainer::save_checkpoint(const std::string& path) const {
  io::CheckpointWriter w(kDqnCheckpointKind, kKindVersion);
  // Every rank's own state as a nested checkpoint "rank<r>", gathered on rank 0 (which
  // alone writes the file); one process writes it at the top level.
  if (comm_->size() == 1) save_local(w);
  else if (!detail::add_rank_sections(w, *comm_, "", kRankKind, [this](io::CheckpointWriter& rw) { save_local(rw); }))
    return;
  w.add_value("ranks", static_cast<std::int64_t>(comm_->size()));
  w.add_string("config", config_text_);
  w.add_value("iteration", iteration_);
  w.add_value("wall_seconds", wall_offset_ + (now_seconds() - wall_start_));
  w.add_value("vector_steps", vector_steps_);
  w.add_value("gradient_steps", grad_steps_);
  detail::save_tensors(w, "online/", online_->state_dict());
  detail::save_tensors(w, "target/", target_->state_dict());
  detail::save_tensors(w, "optimizer/", dqn_->optimizer().state());
  detail::save_recent(w, recent_);
  w.add_value("episodes_total", episodes_total_);
  detail::save_curve(w, curve_, kDqnCurveColumns);
  eval_->save(w);
  w.commit(path);
}

std::vector<std::string> DqnTrainer::resume_conflicts(const std::string& path) const {
  io::CheckpointReader r(path);
  if (r.kind() == "herd.rl.trainer") {
    const auto saved = detail::config_values(r.string("config"));
    const auto it = saved.find("algorithm");
    return {"algorithm = \"dqn\" (the checkpoint has " + (it == saved.end() ? std::string("\"ppo\"") : it->second) +
            ")"};
  }
  r.expect_kind(kDqnCheckpointKind, kKindVersion);
  return detail::resume_conflicts(r.string("config"), config_text_, fixed_on_resume());
}

void DqnTrainer::load_local(const io::CheckpointReader& r, const std::string& path) {
  // Checked before anything changes.
  const std::size_t B = pool_->num_envs(), S = pool_->env(0).state_dim();
  const auto states = r.get<double>("env_states");
  const auto streams = r.get<std::uint64_t>("env_streams");
  auto obs = r.get<float>("obs");
  auto ep_ret = r.get<double>("ep_ret");
  auto ep_len = r.get<std::int64_t>("ep_len");
  if (streams.size() != 3 * B || obs.size() != obs_.size() || ep_ret.size() != B || ep_len.size() != B)
    throw InputError(std::string(kWho) + ": " + path + " holds " + std::to_string(streams.size() / 3) +
                     " environments, but this run has " + std::to_string(B));
  detail::require_env_state_size(std::string(kWho) + ": " + path, pool_->env(0), states.size(), B);
  replay_->load(r, "replay/");
  for (std::size_t k = 0; k < B; ++k) {
    Env& e = pool_->env(k);
    e.restore_stream(streams[3 * k], streams[3 * k + 1]);
    e.set_state(std::span<const double>(states.data() + k * S, S));
    e.set_elapsed_steps(static_cast<std::int64_t>(streams[3 * k + 2]));
  }
  obs_ = std::move(obs);
  ep_ret_ = std::move(ep_ret);
  ep_len_ = std::move(ep_len);
}

void DqnTrainer::load_checkpoint(const std::string& path) {
  detail::throw_if_conflicts(kWho, path, resume_conflicts(path));
  io::CheckpointReader r(path);
  r.expect_kind(kDqnCheckpointKind, kKindVersion);
  const std::int64_t ranks = detail::checkpoint_ranks(r);
  detail::require_same_ranks(kWho, path, ranks, comm_->size());
  changed_on_resume_ = detail::trajectory_changes(r.string("config"), config_text_);
  // The networks and optimizer state are read and checked before the run's state changes.
  auto online = detail::load_tensors(r, "online/", online_->state_dict(), kWho);
  auto target = detail::load_tensors(r, "target/", target_->state_dict(), kWho);
  auto optimizer = detail::load_tensors(r, "optimizer/", dqn_->optimizer().state(), kWho);
  if (ranks == 1) load_local(r, path);
  else load_local(detail::rank_section(r, path, "", comm_->rank(), kRankKind), path);
  online_->load_state_dict(online);
  target_->load_state_dict(target);
  dqn_->optimizer().load_state(optimizer);
  // The optimizer state holds the learning rate it ran with: a resumed run takes this
  // run's dqn.learning_rate (the same unless changed on resume, which is reported).
  dqn_->optimizer().set_lr(config_.dqn.learning_rate);
  iteration_ = r.value<std::int64_t>("iteration");
  wall_offset_ = r.value<double>("wall_seconds");
  wall_start_ = now_seconds();
  vector_steps_ = r.value<std::uint64_t>("vector_steps");
  grad_steps_ = r.value<std::uint64_t>("gradient_steps");
  detail::load_recent(r, recent_);
  episodes_total_ = r.value<double>("episodes_total");
  replay_ready_ = false;  // re-agreed at the next training round
  finished_.clear();
  // The curve by column name (a checkpoint of an older version lacks the evaluation
  // columns: NaN), and the evaluations.
  curve_ = detail::load_curve(r, kDqnCurveColumns, std::span<const char* const>(kDqnCurveColumns).first(22));
  eval_->load(r, iteration_);
}

void DqnTrainer::write_output(const std::string& path) const {
  io::H5File f = io::H5File::create_atomic(path);
  io::H5Group root = f.root();
  detail::write_output_head(root, config_text_, config_.env, config_.algorithm, curve_, kDqnCurveColumns);
  detail::write_parameters(root, "q_network", online_->state_dict());
  detail::write_parameters(root, "target_network", target_->state_dict());
  eval_->write(root);
  f.commit();
}

EvalResult evaluate_q_network(QNetwork& q, const std::string& env_id, int episodes, double epsilon, std::uint64_t seed,
                              std::int64_t max_episode_steps) {
  if (episodes < 1)
    throw InputError("rl::evaluate_q_network: episodes is " + std::to_string(episodes) + ", but must be >= 1");
  if (max_episode_steps < 0)
    throw InputError("rl::evaluate_q_network: max_episode_steps is " + std::to_string(max_episode_steps) +
                     ", but must be >= 0 (0: no cap)");
  auto env = make_env(env_id);
  env->set_global_id(kEvalEnv);
  const std::size_t D = env->obs_dim();
  const std::int64_t A = q.num_actions(), start = env->action_space().start();
  nn::Tensor obs(nn::Shape{1, static_cast<std::int64_t>(D)}, nn::DType::kFloat32);  // host
  const RngStream rng(seed, kEvalEnv, RngPurpose::kPolicy);
  std::uint64_t draw = 0;
  return detail::run_episodes(*env, obs.data<float>(), seed, episodes, max_episode_steps, [&] {
    RngCursor cur = rng.at(draw++);
    std::int64_t a;
    if (epsilon > 0 && cur.uniform() < epsilon) a = static_cast<std::int64_t>(cur.below(static_cast<std::uint32_t>(A)));
    else q.greedy_actions(obs.data<float>(), 1, &a);
    return env->step(a + start, obs.data<float>());
  });
}

EvalResult evaluate_dqn_checkpoint(const std::string& path, int episodes, bool stochastic,
                                   std::int64_t max_episode_steps) {
  io::CheckpointReader r(path);
  r.expect_kind(kDqnCheckpointKind, kKindVersion);
  std::string text;
  const TrainConfig c = parse_train_config(r.string("config"), &text, static_cast<int>(detail::checkpoint_ranks(r)));
  auto env = make_env(c.env);
  auto q = make_q_network(c, *env, Device::cpu());  // one env at a time: the host (a CUDA run's too)
  q->load_state_dict(detail::load_tensors(r, "online/", q->state_dict(), "rl::evaluate_dqn_checkpoint"));
  return evaluate_q_network(*q, c.env, episodes, stochastic ? c.dqn.exploration_final_eps : 0.0, c.seed + 1,
                            max_episode_steps >= 0 ? max_episode_steps : c.eval_max_episode_steps);
}

std::unique_ptr<TrainingRun> make_training_run(const TrainConfig& config, std::string config_text, Communicator* comm) {
  if (config.algorithm == "dqn") return std::make_unique<DqnTrainer>(config, std::move(config_text), comm);
  return std::make_unique<Trainer>(config, std::move(config_text), comm);
}

}  // namespace herd::rl
