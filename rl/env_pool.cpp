#include "herd/rl/env_pool.hpp"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>
#include <numeric>
#include <typeinfo>

#include <fmt/format.h>

#include "herd/core/error.hpp"
#include "herd/rl/registry.hpp"

namespace herd::rl {
namespace {

std::vector<std::unique_ptr<Env>> make_envs(const EnvPoolOptions& o) {
  HERD_REQUIRE(o.num_envs >= 1, "EnvPool: num_envs is {}, but must be >= 1", o.num_envs);
  HERD_REQUIRE(o.num_envs <= (std::size_t{1} << 31) - 1, "EnvPool: num_envs is {}, but must be < 2^31", o.num_envs);
  std::vector<std::unique_ptr<Env>> envs;
  envs.reserve(o.num_envs);
  for (std::size_t k = 0; k < o.num_envs; ++k) envs.push_back(make_env(o.env_id));
  return envs;
}

}  // namespace

EnvPool::EnvPool(const EnvPoolOptions& options) : envs_(make_envs(options)) { init(options); }

EnvPool::EnvPool(std::vector<std::unique_ptr<Env>> envs, const EnvPoolOptions& options) : envs_(std::move(envs)) {
  init(options);
}

EnvPool::~EnvPool() { pool_.reset(); }

void EnvPool::init(const EnvPoolOptions& o) {
  const std::size_t n = envs_.size();
  HERD_REQUIRE(n >= 1, "EnvPool: no environments were given, but at least one is needed");
  for (std::size_t k = 0; k < n; ++k) {
    HERD_REQUIRE(envs_[k] != nullptr, "EnvPool: environment {} is null", k);
  }
  batch_size_ = o.batch_size == 0 ? n : o.batch_size;
  HERD_REQUIRE(batch_size_ >= 1 && batch_size_ <= n,
               "EnvPool: batch_size is {}, but must be in [1, num_envs = {}] (0: num_envs)", o.batch_size, n);
  HERD_REQUIRE(o.num_threads >= 1, "EnvPool: num_threads is {}, but must be >= 1", o.num_threads);
  HERD_REQUIRE(o.max_episode_steps >= -1, "EnvPool: max_episode_steps is {}, but must be >= 0 (or -1: registered)",
               o.max_episode_steps);
  HERD_REQUIRE(o.min_task_seconds >= 0, "EnvPool: min_task_seconds is {}, but must be >= 0", o.min_task_seconds);
  num_threads_ = o.num_threads;
  seed_ = o.seed;
  min_task_ns_ = o.min_task_seconds * 1e9;
  const Env& e0 = *envs_[0];
  obs_dtype_ = o.obs_dtype;
  if (obs_dtype_ == ObsDtype::kUint8) {
    const Space& os = e0.observation_space();
    for (std::size_t i = 0; i < os.dim(); ++i)
      HERD_REQUIRE(os.low()[i] >= 0 && os.high()[i] <= 255,
                   "EnvPool: obs_dtype is uint8, but {} has observation bounds [{}, {}] at component {}; uint8 "
                   "batches need observations in [0, 255]",
                   e0.id(), os.low()[i], os.high()[i], i);
    // Bounds in [0, 255] alone do not make the values whole numbers: a Box(0, 1) of real
    // features would be rounded to 0 or 1 without a word.
    HERD_REQUIRE(os.values() == BoxValues::kInteger,
                 "EnvPool: obs_dtype is uint8, but {} declares real-valued observations (a Box of reals, not "
                 "of integers), which uint8 batches would round to whole numbers; uint8 needs integer observations "
                 "(BoxValues::kInteger; a C env's obs_integer = 1)",
                 e0.id());
  }
  obs_dim_ = e0.obs_dim();
  action_dim_ = e0.action_dim();
  env_ptrs_.resize(n);
  for (std::size_t k = 0; k < n; ++k) {
    Env& e = *envs_[k];
    HERD_REQUIRE(e.obs_dim() == obs_dim_ && e.action_dim() == action_dim_ &&
                     e.action_space().kind() == e0.action_space().kind() &&
                     e.action_space().n() == e0.action_space().n() &&
                     e.action_space().start() == e0.action_space().start(),
                 "EnvPool: environment {} ({}) has spaces {} / {}, but environment 0 ({}) has "
                 "{} / {}",
                 k, e.id(), e.observation_space().to_string(), e.action_space().to_string(), e0.id(),
                 e0.observation_space().to_string(), e0.action_space().to_string());
    e.set_global_id(static_cast<std::uint32_t>(o.first_global_id + k));
    if (o.max_episode_steps >= 0) e.set_max_episode_steps(o.max_episode_steps);
    homogeneous_ = homogeneous_ && typeid(e) == typeid(e0);
    env_ptrs_[k] = &e;
  }
  const bool u8 = obs_dtype_ == ObsDtype::kUint8;
  if (o.structure_of_arrays && homogeneous_ && !u8) store_ = e0.make_store(env_ptrs_.data(), n);
  obs_.assign(u8 ? 0 : n * obs_dim_, 0.0f);
  final_obs_.assign(u8 ? 0 : n * obs_dim_, 0.0f);
  obs_u8_.assign(u8 ? n * obs_dim_ : 0, 0);
  final_obs_u8_.assign(u8 ? n * obs_dim_ : 0, 0);
  rewards_.assign(n, 0.0);
  terminated_.assign(n, 0);
  truncated_.assign(n, 0);
  ids_.resize(n);
  std::iota(ids_.begin(), ids_.end(), 0);

  op_.assign(n, Op::kNone);
  pending_actions_.assign(n * action_dim_, 0.0);
  busy_.assign(n, 0);
  num_slots_ = (n + batch_size_ - 1) / batch_size_ + 2;
  const std::size_t rows = num_slots_ * batch_size_;
  r_ids_.assign(rows, -1);
  r_obs_.assign(u8 ? 0 : rows * obs_dim_, 0.0f);
  r_final_obs_.assign(u8 ? 0 : rows * obs_dim_, 0.0f);
  r_obs_u8_.assign(u8 ? rows * obs_dim_ : 0, 0);
  r_final_obs_u8_.assign(u8 ? rows * obs_dim_ : 0, 0);
  r_rewards_.assign(rows, 0.0);
  r_terminated_.assign(rows, 0);
  r_truncated_.assign(rows, 0);
  filled_ = std::make_unique<std::atomic<std::uint32_t>[]>(num_slots_);
  for (std::size_t s = 0; s < num_slots_; ++s) filled_[s].store(0);

  // Sync steps run on the workers and the calling thread; async steps on workers only.
  const std::size_t workers = batch_size_ == n && !o.async_workers ? num_threads_ - 1 : num_threads_;
  if (workers > 0) pool_ = std::make_unique<ThreadPool>(workers);
}

void EnvPool::check_sync_idle(const char* what) const {
  HERD_REQUIRE(num_in_flight_ == 0,
               "EnvPool::{}: {} environments are in flight in async mode, but sync calls need "
               "none; recv their results first",
               what, num_in_flight_);
}

void EnvPool::validate_actions(const double* actions, const std::int32_t* ids, std::size_t m, const char* what) const {
  const Space& space = envs_[0]->action_space();
  if (space.is_discrete()) {
    for (std::size_t i = 0; i < m; ++i) {
      if (!space.contains(actions + i)) {
        const std::size_t k = ids ? static_cast<std::size_t>(ids[i]) : i;
        throw InputError(fmt::format("EnvPool::{}: {}", what, envs_[k]->check_action(actions + i)));
      }
    }
    return;
  }
  const std::size_t total = m * action_dim_;
  for (std::size_t j = 0; j < total; ++j) {
    if (std::isnan(actions[j])) {
      const std::size_t i = j / action_dim_;
      const std::size_t k = ids ? static_cast<std::size_t>(ids[i]) : i;
      throw InputError(fmt::format("EnvPool::{}: {}", what, envs_[k]->check_action(actions + i * action_dim_)));
    }
  }
}

// ---------------------------------------------------------------------------------------
// Sync mode

void EnvPool::reset() {
  check_sync_idle("reset");
  auto body = [this](std::size_t b, std::size_t e) {
    if (obs_dtype_ == ObsDtype::kUint8) {
      std::vector<float> row(obs_dim_);
      for (std::size_t k = b; k < e; ++k) {
        envs_[k]->reset(seed_, row.data());
        obs_to_u8(row.data(), obs_dim_, obs_u8_.data() + k * obs_dim_);
      }
      return;
    }
    for (std::size_t k = b; k < e; ++k) envs_[k]->reset(seed_, obs_.data() + k * obs_dim_);
  };
  if (pool_) {
    pool_->parallel_for(0, envs_.size(), body);
  } else {
    body(0, envs_.size());
  }
  std::fill(rewards_.begin(), rewards_.end(), 0.0);
  std::fill(terminated_.begin(), terminated_.end(), 0);
  std::fill(truncated_.begin(), truncated_.end(), 0);
}

void EnvPool::step_range_u8(std::size_t b, std::size_t e, const double* actions) {
  const std::size_t od = obs_dim_, ad = action_dim_;
  std::uint8_t* obs = obs_u8_.data();
  if (homogeneous_) {
    env_ptrs_[b]->step_batch_u8(env_ptrs_.data() + b, e - b, actions + b * ad, obs + b * od, rewards_.data() + b,
                                terminated_.data() + b, truncated_.data() + b);
  } else {
    for (std::size_t k = b; k < e; ++k)
      env_ptrs_[k]->step_batch_u8(env_ptrs_.data() + k, 1, actions + k * ad, obs + k * od, rewards_.data() + k,
                                  terminated_.data() + k, truncated_.data() + k);
  }
  thread_local std::vector<float> row;
  for (std::size_t k = b; k < e; ++k) {
    if (terminated_[k] | truncated_[k]) {
      std::uint8_t* r = obs + k * od;
      std::memcpy(final_obs_u8_.data() + k * od, r, od);
      row.resize(od);
      env_ptrs_[k]->reset(row.data());
      obs_to_u8(row.data(), od, r);
    }
  }
}

void EnvPool::step_range(std::size_t b, std::size_t e, const double* actions) {
  if (obs_dtype_ == ObsDtype::kUint8) {
    step_range_u8(b, e, actions);
    return;
  }
  const std::size_t od = obs_dim_, ad = action_dim_;
  if (store_) {
    store_->step(b, e, actions + b * ad, obs_.data() + b * od, rewards_.data() + b, terminated_.data() + b,
                 truncated_.data() + b);
    store_->reset_done(b, e, terminated_.data() + b, truncated_.data() + b, obs_.data() + b * od,
                       final_obs_.data() + b * od);
    return;
  }
  if (homogeneous_) {
    env_ptrs_[b]->step_batch(env_ptrs_.data() + b, e - b, actions + b * ad, obs_.data() + b * od, rewards_.data() + b,
                             terminated_.data() + b, truncated_.data() + b);
  } else {
    for (std::size_t k = b; k < e; ++k) {
      const StepResult r = env_ptrs_[k]->step_unchecked(actions + k * ad, obs_.data() + k * od);
      rewards_[k] = r.reward;
      terminated_[k] = r.terminated;
      truncated_[k] = r.truncated;
    }
  }
  for (std::size_t k = b; k < e; ++k) {
    if (terminated_[k] | truncated_[k]) {
      float* row = obs_.data() + k * od;
      std::memcpy(final_obs_.data() + k * od, row, od * sizeof(float));
      env_ptrs_[k]->reset(row);
    }
  }
}

void EnvPool::step(std::span<const double> actions) {
  check_sync_idle("step");
  const std::size_t n = envs_.size();
  HERD_REQUIRE(actions.size() == n * action_dim_,
               "EnvPool::step: actions has {} values, but must have num_envs * action_dim = "
               "{} * {} = {}",
               actions.size(), n, action_dim_, n * action_dim_);
  validate_actions(actions.data(), nullptr, n, "step");
  step_validated(actions.data());
}

void EnvPool::step_validated(const double* a) {
  const std::size_t n = envs_.size();
  const auto t0 = std::chrono::steady_clock::now();
  std::size_t threads_used = 1;
  if (pool_ && n > 1) {
    const std::size_t threads = pool_->size() + 1;
    std::size_t grain = std::max<std::size_t>(1, (n + 2 * threads - 1) / (2 * threads));
    if (min_task_ns_ > 0 && env_step_ns_ > 0) {
      grain = std::max(grain, static_cast<std::size_t>(std::ceil(min_task_ns_ / env_step_ns_)));
    }
    if (grain < n) {
      pool_->parallel_for(
          0, n, [this, a](std::size_t b, std::size_t e) { step_range(b, e, a); }, grain);
      threads_used = std::min(threads, (n + grain - 1) / grain);
    } else {
      step_range(0, n, a);
    }
  } else {
    step_range(0, n, a);
  }
  if (pool_ && min_task_ns_ > 0) {
    // Cost per env step; parallel steps overestimate it (handoffs), which only errs
    // towards fewer, larger tasks.
    const double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t0).count();
    const double c = ns * static_cast<double>(threads_used) / static_cast<double>(n);
    env_step_ns_ = env_step_ns_ == 0 ? c : 0.75 * env_step_ns_ + 0.25 * c;
  }
}

void EnvPool::step(std::span<const std::int64_t> actions) {
  const Space& space = envs_[0]->action_space();
  HERD_REQUIRE(space.is_discrete(), "EnvPool::step: int64 actions were given, but the action space is {}",
               space.to_string());
  const std::size_t n = envs_.size();
  HERD_REQUIRE(actions.size() == n,
               "EnvPool::step: actions has {} values, but must have "
               "num_envs = {}",
               actions.size(), n);
  action_scratch_.resize(n);
  const std::int64_t lo = space.start(), hi = space.start() + space.n();
  // Converted first, checked together (no branch per env); the first invalid one is named.
  bool valid = true;
  double* const scratch = action_scratch_.data();
  constexpr std::int64_t kExact = std::int64_t{1} << 51;
  if (lo > -kExact && hi < kExact) {
    // a - lo in [0, 2^52) as a double by its bits (exponent of 2^52), then + lo: exactly
    // static_cast<double>(a) for every valid a; all in 64-bit lanes, so the compiler
    // vectorises it. Validity: (a - lo) and (hi - 1 - a), in wrapping arithmetic, both
    // have the sign bit clear exactly when lo <= a < hi (|lo|, |hi| < 2^51).
    const auto ulo = static_cast<std::uint64_t>(lo), uhi1 = static_cast<std::uint64_t>(hi - 1);
    const double dlo = static_cast<double>(lo);
    std::uint64_t bad = 0;
    for (std::size_t k = 0; k < n; ++k) {
      const auto a = static_cast<std::uint64_t>(actions[k]);
      const std::uint64_t off = a - ulo;
      bad |= off | (uhi1 - a);
      const std::uint64_t bits = (off & ((std::uint64_t{1} << 52) - 1)) | 0x4330000000000000u;
      scratch[k] = (std::bit_cast<double>(bits) - 0x1p52) + dlo;
    }
    valid = (bad >> 63) == 0;
  } else {
    for (std::size_t k = 0; k < n; ++k) {
      const std::int64_t a = actions[k];
      valid &= (a >= lo) & (a < hi);
      scratch[k] = static_cast<double>(a);
    }
  }
  for (std::size_t k = 0; !valid && k < n; ++k) {
    const std::int64_t a = actions[k];
    HERD_REQUIRE(a >= lo && a < hi, "EnvPool::step: {} (env {}): action is {}, but must be an integer in [{}, {})",
                 envs_[k]->id(), envs_[k]->global_id(), a, space.start(), space.start() + space.n());
  }
  check_sync_idle("step");
  step_validated(action_scratch_.data());
}

EnvBatch EnvPool::batch() const {
  return EnvBatch{ids_, obs_, rewards_, terminated_, truncated_, final_obs_, obs_u8_, final_obs_u8_};
}

// ---------------------------------------------------------------------------------------
// Async mode

void EnvPool::run_one(std::int32_t id) {
  // acq_rel: the claims form a chain of synchronisation, so a row of a reused slot is
  // written only after the caller released that slot (its recv of the next batch): enough
  // claims precede this one that one of them comes from a send made after that recv.
  const std::uint64_t row = next_row_.fetch_add(1, std::memory_order_acq_rel);
  const std::size_t slot = static_cast<std::size_t>((row / batch_size_) % num_slots_);
  const std::size_t r = slot * batch_size_ + static_cast<std::size_t>(row % batch_size_);
  Env& env = *envs_[static_cast<std::size_t>(id)];
  const bool u8 = obs_dtype_ == ObsDtype::kUint8;
  thread_local std::vector<float> staging;  // the float32 row of a uint8 pool
  if (u8) staging.resize(obs_dim_);
  float* o = u8 ? staging.data() : r_obs_.data() + r * obs_dim_;
  double reward = 0.0;
  bool term = false, trunc = false;
  try {
    if (op_[static_cast<std::size_t>(id)] == Op::kReset) {
      env.reset(seed_, o);
    } else {
      const StepResult res =
          env.step_unchecked(pending_actions_.data() + static_cast<std::size_t>(id) * action_dim_, o);
      reward = res.reward;
      term = res.terminated;
      trunc = res.truncated;
      if (term || trunc) {
        if (u8) obs_to_u8(o, obs_dim_, r_final_obs_u8_.data() + r * obs_dim_);
        else std::memcpy(r_final_obs_.data() + r * obs_dim_, o, obs_dim_ * sizeof(float));
        env.reset(o);
      }
    }
    if (u8) obs_to_u8(o, obs_dim_, r_obs_u8_.data() + r * obs_dim_);
  } catch (...) {
    std::lock_guard<std::mutex> lock(error_mutex_);
    if (!error_) error_ = std::current_exception();
  }
  r_ids_[r] = id;
  r_rewards_[r] = reward;
  r_terminated_[r] = term;
  r_truncated_[r] = trunc;
  if (filled_[slot].fetch_add(1, std::memory_order_acq_rel) + 1 == batch_size_) {
    filled_[slot].notify_all();
  }
}

void EnvPool::dispatch(const std::int32_t* ids, std::size_t m) {
  if (!pool_) {
    for (std::size_t i = 0; i < m; ++i) run_one(ids[i]);
    return;
  }
  // One task per worker and two per worker for large sends: few queue operations, and
  // each task publishes its envs' results one by one as they finish.
  const std::size_t chunks = (m >= 64 ? 2 : 1) * pool_->size();
  const std::size_t grain = std::max<std::size_t>(1, (m + chunks - 1) / chunks);
  for (std::size_t b = 0; b < m; b += grain) {
    const std::size_t e = std::min(m, b + grain);
    pool_->submit([this, chunk = std::vector<std::int32_t>(ids + b, ids + e)] {
      for (const std::int32_t id : chunk) run_one(id);
    });
  }
}

void EnvPool::async_reset() {
  HERD_REQUIRE(num_in_flight_ == 0,
               "EnvPool::async_reset: {} environments are in flight, but none may be; recv "
               "their results first",
               num_in_flight_);
  const std::size_t n = envs_.size();
  for (std::size_t k = 0; k < n; ++k) {
    op_[k] = Op::kReset;
    busy_[k] = 1;
  }
  num_in_flight_ = n;
  dispatch(ids_.data(), n);
}

void EnvPool::send(std::span<const double> actions, std::span<const std::int32_t> env_ids) {
  const std::size_t m = env_ids.size();
  HERD_REQUIRE(actions.size() == m * action_dim_,
               "EnvPool::send: actions has {} values, but must have len(env_ids) * action_dim "
               "= {} * {} = {}",
               actions.size(), m, action_dim_, m * action_dim_);
  const std::size_t n = envs_.size();
  std::size_t i = 0;
  try {
    for (; i < m; ++i) {
      const std::int32_t id = env_ids[i];
      HERD_REQUIRE(id >= 0 && static_cast<std::size_t>(id) < n,
                   "EnvPool::send: env_ids[{}] is {}, but must be in [0, {})", i, id, n);
      HERD_REQUIRE(busy_[static_cast<std::size_t>(id)] == 0,
                   "EnvPool::send: env {} is {}, but its previous result has not been received "
                   "(or it appears twice in env_ids)",
                   id, busy_[static_cast<std::size_t>(id)] == 2 ? "listed twice" : "in flight");
      busy_[static_cast<std::size_t>(id)] = 2;  // provisional, undone on error
    }
    validate_actions(actions.data(), env_ids.data(), m, "send");
  } catch (...) {
    for (std::size_t j = 0; j < i; ++j) busy_[static_cast<std::size_t>(env_ids[j])] = 0;
    throw;
  }
  for (std::size_t j = 0; j < m; ++j) {
    const auto k = static_cast<std::size_t>(env_ids[j]);
    busy_[k] = 1;
    op_[k] = Op::kStep;
    std::copy_n(actions.data() + j * action_dim_, action_dim_, pending_actions_.data() + k * action_dim_);
  }
  num_in_flight_ += m;
  dispatch(env_ids.data(), m);
}

void EnvPool::send(std::span<const std::int64_t> actions, std::span<const std::int32_t> env_ids) {
  const Space& space = envs_[0]->action_space();
  HERD_REQUIRE(space.is_discrete(), "EnvPool::send: int64 actions were given, but the action space is {}",
               space.to_string());
  HERD_REQUIRE(actions.size() == env_ids.size(),
               "EnvPool::send: actions has {} values, but "
               "env_ids has {}",
               actions.size(), env_ids.size());
  std::vector<double> a(actions.size());
  for (std::size_t i = 0; i < actions.size(); ++i) {
    HERD_REQUIRE(actions[i] >= space.start() && actions[i] < space.start() + space.n(),
                 "EnvPool::send: action for env {} is {}, but must be an integer in [{}, {})", env_ids[i], actions[i],
                 space.start(), space.start() + space.n());
    a[i] = static_cast<double>(actions[i]);
  }
  send(std::span<const double>(a), env_ids);
}

EnvBatch EnvPool::recv() {
  const std::size_t bs = batch_size_;
  HERD_REQUIRE(num_in_flight_ >= bs,
               "EnvPool::recv: {} environments are in flight, but a batch needs batch_size = "
               "{}; send more first",
               num_in_flight_, bs);
  // The caller is done with the previous batch: its slot may be refilled.
  if (received_batches_ > 0) filled_[(received_batches_ - 1) % num_slots_].store(0);
  const std::size_t slot = static_cast<std::size_t>(received_batches_ % num_slots_);
  for (;;) {
    const std::uint32_t v = filled_[slot].load(std::memory_order_acquire);
    if (v == bs) break;
    filled_[slot].wait(v, std::memory_order_acquire);
  }
  ++received_batches_;
  num_in_flight_ -= bs;
  const std::size_t r0 = slot * bs;
  for (std::size_t j = 0; j < bs; ++j) busy_[static_cast<std::size_t>(r_ids_[r0 + j])] = 0;
  {
    std::lock_guard<std::mutex> lock(error_mutex_);
    if (error_) {
      std::exception_ptr e = error_;
      error_ = nullptr;
      std::rethrow_exception(e);
    }
  }
  const std::size_t od = obs_dim_;
  EnvBatch out{std::span<const std::int32_t>(r_ids_.data() + r0, bs),
               {},
               std::span<const double>(r_rewards_.data() + r0, bs),
               std::span<const std::uint8_t>(r_terminated_.data() + r0, bs),
               std::span<const std::uint8_t>(r_truncated_.data() + r0, bs),
               {},
               {},
               {}};
  if (obs_dtype_ == ObsDtype::kUint8) {
    out.obs_u8 = std::span<const std::uint8_t>(r_obs_u8_.data() + r0 * od, bs * od);
    out.final_obs_u8 = std::span<const std::uint8_t>(r_final_obs_u8_.data() + r0 * od, bs * od);
  } else {
    out.obs = std::span<const float>(r_obs_.data() + r0 * od, bs * od);
    out.final_obs = std::span<const float>(r_final_obs_.data() + r0 * od, bs * od);
  }
  return out;
}

}  // namespace herd::rl
