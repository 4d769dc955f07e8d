#include "herd/rl/replay_buffer.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <sstream>

#include "herd/core/error.hpp"

namespace herd::rl {

// ---------------------------------------------------------------------------------------
// SumTree

SumTree::SumTree(std::size_t capacity) : capacity_(capacity) {
  if (capacity == 0) throw InputError("rl::SumTree: capacity is 0, but must be >= 1");
  while (size_ < capacity) size_ *= 2;
  nodes_.assign(2 * size_, 0.0);
}

void SumTree::set(std::size_t i, double value) {
  if (i >= capacity_)
    throw InputError("rl::SumTree::set: leaf " + std::to_string(i) + " is out of range (capacity " +
                     std::to_string(capacity_) + ")");
  if (!(value >= 0.0) || !std::isfinite(value)) {
    std::ostringstream m;
    m << "rl::SumTree::set: leaf " << i << " value is " << value << ", but must be finite and >= 0";
    throw InputError(m.str());
  }
  std::size_t j = size_ + i;
  nodes_[j] = value;
  for (j /= 2; j >= 1; j /= 2) nodes_[j] = nodes_[2 * j] + nodes_[2 * j + 1];
}

std::size_t SumTree::find(double prefix) const {
  if (!(nodes_[1] > 0.0)) throw InputError("rl::SumTree::find: the total is 0: no leaf can be drawn");
  std::size_t j = 1;
  while (j < size_) {
    const double left = nodes_[2 * j], right = nodes_[2 * j + 1];
    // Right only when the prefix lies past the left sum and the right subtree has mass;
    // a prefix pushed past the total by rounding ends on the last positive leaf.
    if (prefix < left || !(right > 0.0)) {
      j = 2 * j;
    } else {
      prefix -= left;
      j = 2 * j + 1;
    }
  }
  return j - size_;
}

void SumTree::assign(std::span<const double> leaves) {
  if (leaves.size() != capacity_)
    throw InputError("rl::SumTree::assign: " + std::to_string(leaves.size()) + " leaves given, but the tree has " +
                     std::to_string(capacity_));
  for (std::size_t i = 0; i < capacity_; ++i) {
    const double v = leaves[i];
    if (!(v >= 0.0) || !std::isfinite(v)) {
      std::ostringstream m;
      m << "rl::SumTree::assign: leaf " << i << " value is " << v << ", but must be finite and >= 0";
      throw InputError(m.str());
    }
  }
  std::fill(nodes_.begin(), nodes_.end(), 0.0);
  std::copy(leaves.begin(), leaves.end(), nodes_.begin() + static_cast<std::ptrdiff_t>(size_));
  for (std::size_t j = size_ - 1; j >= 1; --j) nodes_[j] = nodes_[2 * j] + nodes_[2 * j + 1];
}

// ---------------------------------------------------------------------------------------
// ReplayBuffer

namespace {

std::size_t tree_leaves(std::size_t n) {
  std::size_t s = 1;
  while (s < n) s *= 2;
  return s;
}

}  // namespace

ReplayBuffer::ReplayBuffer(const ReplayBufferOptions& o) : opt_(o) {
  const auto bad = [](const std::string& what) { throw InputError("rl::ReplayBuffer: " + what); };
  if (o.num_envs == 0) bad("num_envs is 0, but must be >= 1");
  if (o.obs_dim == 0) bad("obs_dim is 0, but must be >= 1");
  if (o.frame_stack < 1 || o.obs_dim % static_cast<std::size_t>(o.frame_stack) != 0)
    bad("frame_stack is " + std::to_string(o.frame_stack) + ", but must be >= 1 and divide obs_dim " +
        std::to_string(o.obs_dim));
  if (o.n_step < 1) bad("n_step is " + std::to_string(o.n_step) + ", but must be >= 1");
  if (!(o.gamma >= 0.0 && o.gamma <= 1.0)) bad("gamma is " + std::to_string(o.gamma) + ", but must be in [0, 1]");
  if (!(o.alpha >= 0.0) || !std::isfinite(o.alpha)) bad("alpha is " + std::to_string(o.alpha) + ", but must be >= 0");
  if (!(o.priority_eps > 0.0) || !std::isfinite(o.priority_eps))
    bad("priority_eps is " + std::to_string(o.priority_eps) + ", but must be > 0");
  per_env_ = o.capacity / o.num_envs;
  // A ring holds a transition's n steps, its bootstrap slot and the k - 1 frames before it.
  const std::size_t need = static_cast<std::size_t>(o.n_step) + static_cast<std::size_t>(o.frame_stack) + 1;
  if (per_env_ < need)
    bad("capacity " + std::to_string(o.capacity) + " over " + std::to_string(o.num_envs) + " envs gives " +
        std::to_string(per_env_) + " slots per env, but n_step " + std::to_string(o.n_step) +
        (o.frame_stack > 1 ? " and frame_stack " + std::to_string(o.frame_stack) + " need" : std::string(" needs")) +
        " at least " + std::to_string(need) + " (raise the buffer size to >= " + std::to_string(need * o.num_envs) +
        ")");
  frame_dim_ = o.obs_dim / static_cast<std::size_t>(o.frame_stack);
  const std::size_t n = per_env_ * o.num_envs;
  if (o.uint8_obs) obs_u8_.assign(n * frame_dim_, 0);
  else obs_f32_.assign(n * frame_dim_, 0.0f);
  actions_.assign(n, 0);
  rewards_.assign(n, 0.0f);
  flags_.assign(n, 0);
  written_.assign(o.num_envs, 0);
  tree_ = SumTree(n);
}

double ReplayBuffer::bytes_per_slot() const {
  const double slots = static_cast<double>(per_env_ * opt_.num_envs);
  return static_cast<double>(frame_dim_) * (opt_.uint8_obs ? 1.0 : 4.0) + 9.0 +
         16.0 * static_cast<double>(tree_leaves(per_env_ * opt_.num_envs)) / slots;
}

double ReplayBuffer::memory_need(const ReplayBufferOptions& o) {
  // Whole slots per env, rounded down as the constructor does (the remainder is not allocated).
  const std::size_t per_env = o.num_envs ? o.capacity / o.num_envs : 0;
  const double per = static_cast<double>(per_env);
  const double slots = per * static_cast<double>(o.num_envs);
  const double frame = static_cast<double>(o.obs_dim) / static_cast<double>(std::max(o.frame_stack, 1));
  return slots * (frame * (o.uint8_obs ? 1.0 : 4.0) + 9.0) +
         16.0 * static_cast<double>(tree_leaves(static_cast<std::size_t>(std::max(slots, 1.0))));
}

void ReplayBuffer::invalidate(std::size_t s) {
  if (!(flags_[s] & kValid)) return;
  flags_[s] = static_cast<std::uint8_t>(flags_[s] & ~kValid);
  --valid_;
  tree_.set(s, 0.0);
}

void ReplayBuffer::forget(std::size_t env, std::uint64_t pos) {
  if (opt_.frame_stack == 1 || pos < per_env_) return;
  // The frame of position pos - T goes: the transitions after it whose stacks reach back to
  // it (no episode start in between) cannot be rebuilt any more.
  for (std::uint64_t j = 1; j < static_cast<std::uint64_t>(opt_.frame_stack); ++j) {
    const std::size_t s = slot(env, pos - per_env_ + j);
    if (flags_[s] & kFirst) break;
    invalidate(s);
  }
}

void ReplayBuffer::write_slot(std::size_t s, const float* obs, std::int32_t action, float reward, std::uint8_t flags) {
  invalidate(s);
  // The newest frame of a stack (the whole observation without one).
  obs += (static_cast<std::size_t>(opt_.frame_stack) - 1) * frame_dim_;
  const std::size_t D = frame_dim_;
  if (opt_.uint8_obs) {
    std::uint8_t* dst = obs_u8_.data() + s * D;
    for (std::size_t i = 0; i < D; ++i) dst[i] = static_cast<std::uint8_t>(obs[i]);
  } else {
    std::copy(obs, obs + D, obs_f32_.data() + s * D);
  }
  actions_[s] = action;
  rewards_[s] = reward;
  flags_[s] = flags;
}

void ReplayBuffer::validate(std::size_t s) {
  flags_[s] |= kValid;
  ++valid_;
  tree_.set(s, opt_.prioritized ? std::pow(max_priority_, opt_.alpha) : 1.0);
}

void ReplayBuffer::read_frame(std::size_t s, float* out) const {
  const std::size_t D = frame_dim_;
  if (opt_.uint8_obs) {
    const std::uint8_t* src = obs_u8_.data() + s * D;
    for (std::size_t i = 0; i < D; ++i) out[i] = static_cast<float>(src[i]);
  } else {
    std::copy(obs_f32_.data() + s * D, obs_f32_.data() + (s + 1) * D, out);
  }
}

void ReplayBuffer::read_obs(std::size_t s, float* out) const {
  // Newest frame last; before the episode's first slot its first frame repeats (the
  // frame-stack wrapper's reset padding).
  for (int j = opt_.frame_stack - 1; j >= 0; --j) {
    read_frame(s, out + static_cast<std::size_t>(j) * frame_dim_);
    if (j > 0 && !(flags_[s] & kFirst)) s = previous(s);
  }
}

namespace {

// Whether an added observation component equals the value the replay rebuilds, bit for bit
// (uint8 storage: as numbers, the added value being an integer in [0, 255]). Bit equality is
// meant for float storage: a NaN frame is the same frame again, -0 and +0 are not.
bool same_value(float added, float rebuilt, bool uint8) {
  return uint8 ? added == rebuilt : std::bit_cast<std::uint32_t>(added) == std::bit_cast<std::uint32_t>(rebuilt);
}

[[noreturn]] void refuse_stack(std::size_t env, bool final_obs, std::size_t component, std::size_t frame_dim, int k,
                               float got, float want, const char* why) {
  std::ostringstream m;
  m << "rl::ReplayBuffer::add: env " << env << (final_obs ? " final" : "") << " observation component " << component
    << " (frame " << component / frame_dim << " of its stack of " << k << ") is " << got << ", but " << why << " "
    << want << " (with frame_stack " << k << " the replay stores each frame once and rebuilds the stacks: an "
    << "observation's older frames must be the frames before it in its episode, the first frame standing in for "
       "those before the episode's start, as the frame-stack wrapper makes them)";
  throw InputError(m.str());
}

}  // namespace

void ReplayBuffer::check_stack(std::size_t env, const float* obs, bool first, std::size_t last) const {
  const std::size_t k = static_cast<std::size_t>(opt_.frame_stack), F = frame_dim_;
  const float* newest = obs + (k - 1) * F;
  // Older frames, newest first: the stored frames of the slots before it in the episode
  // (from `last` back), or the first frame repeated.
  std::size_t s = last;
  for (std::size_t j = k - 1; j-- > 0;) {
    for (std::size_t i = 0; i < F; ++i) {
      const float want = first            ? newest[i]
                         : opt_.uint8_obs ? static_cast<float>(obs_u8_[s * F + i])
                                          : obs_f32_[s * F + i];
      if (!same_value(obs[j * F + i], want, opt_.uint8_obs))
        refuse_stack(env, false, j * F + i, F, opt_.frame_stack, obs[j * F + i], want,
                     first ? "the frames stored make it the episode's first frame,"
                           : "the frames stored before it in "
                             "its episode make it");
    }
    if (!first && !(flags_[s] & kFirst)) s = previous(s);
  }
}

void ReplayBuffer::check_final_stack(std::size_t env, const float* obs, const float* final_obs) const {
  // The episode's last observation: the one acted on moved one frame on.
  const std::size_t F = frame_dim_, older = (static_cast<std::size_t>(opt_.frame_stack) - 1) * F;
  for (std::size_t i = 0; i < older; ++i)
    if (!same_value(final_obs[i], obs[F + i], opt_.uint8_obs))
      refuse_stack(env, true, i, F, opt_.frame_stack, final_obs[i], obs[F + i],
                   "as the observation acted on moved one frame on it must be");
}

void ReplayBuffer::add(const float* obs, const std::int64_t* actions, const double* rewards,
                       const std::uint8_t* terminated, const std::uint8_t* truncated, const float* final_obs) {
  const std::size_t B = opt_.num_envs, D = opt_.obs_dim;
  if (opt_.uint8_obs) {
    // Checked before anything is stored: a value uint8 cannot hold exactly is refused.
    for (std::size_t b = 0; b < B; ++b)
      for (int which = 0; which < 2; ++which) {
        if (which == 1 && !(truncated[b] && !terminated[b])) continue;
        const float* row = (which == 0 ? obs : final_obs) + b * D;
        for (std::size_t i = 0; i < D; ++i) {
          const float v = row[i];
          if (!(v >= 0.0f && v <= 255.0f) || v != std::floor(v)) {
            std::ostringstream m;
            m << "rl::ReplayBuffer::add: env " << b << (which ? " final" : "") << " observation component " << i
              << " is " << v
              << ", but uint8 replay storage needs integers in [0, 255] (it was chosen because the env declares "
                 "integer observations within [0, 255]: a Box of integers, a C env's obs_integer = 1 with "
                 "obs_low/obs_high; an env that writes other values must declare them real)";
            throw InputError(m.str());
          }
        }
      }
  }
  // Whether each env's observation starts an episode (its previous slot ended one).
  const auto first_of_episode = [&](std::size_t b) {
    return written_[b] == 0 || (flags_[slot(b, written_[b] - 1)] & (kTerminated | kFinal)) != 0;
  };
  const std::size_t k = static_cast<std::size_t>(opt_.frame_stack);
  if (k > 1) {
    // Checked before anything is stored: the rebuilt stacks must be the observations.
    for (std::size_t b = 0; b < B; ++b) {
      const bool first = first_of_episode(b);
      check_stack(b, obs + b * D, first, first ? 0 : slot(b, written_[b] - 1));
      if (truncated[b] && !terminated[b]) check_final_stack(b, obs + b * D, final_obs + b * D);
    }
  }
  const auto n = static_cast<std::uint64_t>(opt_.n_step);
  for (std::size_t b = 0; b < B; ++b) {
    const std::uint64_t pos = written_[b];
    const bool term = terminated[b] != 0, trunc = truncated[b] != 0;
    const bool first = first_of_episode(b);
    forget(b, pos);
    const auto flags =
        static_cast<std::uint8_t>((term ? kTerminated : 0) | (trunc ? kTruncated : 0) | (first ? kFirst : 0));
    write_slot(slot(b, pos), obs + b * D, static_cast<std::int32_t>(actions[b]), static_cast<float>(rewards[b]), flags);
    written_[b] = pos + 1;
    // The transition n slots back now has its n steps and its bootstrap observation (this one).
    if (pos >= n) {
      const std::size_t s = slot(b, pos - n);
      if (!(flags_[s] & (kValid | kFinal))) validate(s);
    }
    if (term || trunc) {
      // The episode ended here: this step and the earlier ones of the episode within n
      // steps have their (shorter) horizon.
      for (std::uint64_t k = 0; k < n && k <= pos; ++k) {
        const std::size_t s = slot(b, pos - k);
        if (k > 0 && (flags_[s] & (kTerminated | kTruncated | kFinal))) break;  // an earlier episode
        if (!(flags_[s] & kValid)) validate(s);
      }
      if (trunc && !term) {
        // The episode's last observation, for bootstrapping the truncated transitions.
        forget(b, pos + 1);
        write_slot(slot(b, pos + 1), final_obs + b * D, 0, 0.0f, kFinal);
        written_[b] = pos + 2;
      }
    }
  }
  added_ += B;
}

void ReplayBuffer::sample(std::size_t batch, RngCursor& rng, double beta, ReplaySample& out) const {
  if (batch == 0) throw InputError("rl::ReplayBuffer::sample: batch is 0, but must be >= 1");
  if (valid_ == 0) throw InputError("rl::ReplayBuffer::sample: no transition can be sampled yet");
  const std::size_t D = opt_.obs_dim;
  out.obs.resize(batch * D);
  out.next_obs.resize(batch * D);
  out.actions.resize(batch);
  out.returns.resize(batch);
  out.discounts.resize(batch);
  out.weights.resize(batch);
  out.indices.resize(batch);
  out.steps.resize(batch);
  const double total = tree_.total();
  for (std::size_t i = 0; i < batch; ++i) {
    const double u = rng.uniform();
    const double prefix =
        opt_.prioritized ? (static_cast<double>(i) + u) * (total / static_cast<double>(batch)) : u * total;
    out.indices[i] = tree_.find(prefix);
  }
  double wmax = 0.0;
  const double gamma = opt_.gamma;
  for (std::size_t i = 0; i < batch; ++i) {
    const std::size_t s = static_cast<std::size_t>(out.indices[i]);
    const std::size_t env = s / per_env_, pos = s % per_env_;
    double g = 0.0, disc = 1.0;
    bool term = false;
    int m = 0;
    for (int k = 0; k < opt_.n_step; ++k) {
      const std::size_t sk = env * per_env_ + (pos + static_cast<std::size_t>(k)) % per_env_;
      g += disc * static_cast<double>(rewards_[sk]);
      disc *= gamma;
      m = k + 1;
      if (flags_[sk] & kTerminated) {
        term = true;
        break;
      }
      if (flags_[sk] & kTruncated) break;
    }
    const std::size_t boot = env * per_env_ + (pos + static_cast<std::size_t>(m)) % per_env_;
    read_obs(s, out.obs.data() + i * D);
    read_obs(boot, out.next_obs.data() + i * D);
    out.actions[i] = actions_[s];
    out.returns[i] = g;
    out.discounts[i] = term ? 0.0 : disc;
    out.steps[i] = m;
    if (opt_.prioritized) {
      const double p = tree_.get(s) / total;
      out.weights[i] = std::pow(static_cast<double>(valid_) * p, -beta);
      wmax = std::max(wmax, out.weights[i]);
    } else {
      out.weights[i] = 1.0;
    }
  }
  if (opt_.prioritized && wmax > 0.0)
    for (auto& w : out.weights) w /= wmax;
}

void ReplayBuffer::update_priorities(std::span<const std::uint64_t> indices, std::span<const double> td_errors) {
  if (indices.size() != td_errors.size())
    throw InputError("rl::ReplayBuffer::update_priorities: " + std::to_string(indices.size()) + " indices but " +
                     std::to_string(td_errors.size()) + " TD errors");
  if (!opt_.prioritized) return;
  for (std::size_t i = 0; i < indices.size(); ++i) {
    if (std::isnan(td_errors[i]))
      throw InputError("rl::ReplayBuffer::update_priorities: the TD error of slot " + std::to_string(indices[i]) +
                       " is NaN");
    const auto s = static_cast<std::size_t>(indices[i]);
    if (s >= flags_.size() || !(flags_[s] & kValid)) continue;
    const double p = std::abs(td_errors[i]) + opt_.priority_eps;
    max_priority_ = std::max(max_priority_, p);
    tree_.set(s, std::pow(p, opt_.alpha));
  }
}

void ReplayBuffer::save(io::CheckpointWriter& w, const std::string& p) const {
  std::vector<std::uint64_t> sizes = {opt_.num_envs,
                                      opt_.obs_dim,
                                      per_env_,
                                      opt_.uint8_obs ? 1u : 0u,
                                      static_cast<std::uint64_t>(opt_.n_step),
                                      opt_.prioritized ? 1u : 0u};
  w.add(p + "shape", sizes);
  w.add(p + "written", written_);
  w.add_value(p + "added", added_);
  w.add_value(p + "max_priority", max_priority_);
  w.add_value(p + "frame_stack", static_cast<std::uint64_t>(opt_.frame_stack));
  // The filled slots of every ring, in env order.
  const std::size_t D = frame_dim_;
  std::vector<std::uint8_t> ou8;
  std::vector<float> of32, rew;
  std::vector<std::int32_t> act;
  std::vector<std::uint8_t> flags;
  std::vector<double> prio;
  for (std::size_t b = 0; b < opt_.num_envs; ++b) {
    const std::size_t filled = static_cast<std::size_t>(std::min<std::uint64_t>(written_[b], per_env_));
    const std::size_t first = b * per_env_;
    if (opt_.uint8_obs)
      ou8.insert(ou8.end(), obs_u8_.begin() + static_cast<std::ptrdiff_t>(first * D),
                 obs_u8_.begin() + static_cast<std::ptrdiff_t>((first + filled) * D));
    else
      of32.insert(of32.end(), obs_f32_.begin() + static_cast<std::ptrdiff_t>(first * D),
                  obs_f32_.begin() + static_cast<std::ptrdiff_t>((first + filled) * D));
    for (std::size_t s = first; s < first + filled; ++s) {
      act.push_back(actions_[s]);
      rew.push_back(rewards_[s]);
      flags.push_back(flags_[s]);
      if (opt_.prioritized) prio.push_back(tree_.get(s));
    }
  }
  if (opt_.uint8_obs) w.add(p + "obs_u8", ou8);
  else w.add(p + "obs_f32", of32);
  w.add(p + "actions", act);
  w.add(p + "rewards", rew);
  w.add(p + "flags", flags);
  if (opt_.prioritized) w.add(p + "priorities", prio);
}

void ReplayBuffer::load(const io::CheckpointReader& r, const std::string& p) {
  const auto sizes = r.get<std::uint64_t>(p + "shape");
  const std::vector<std::uint64_t> mine = {opt_.num_envs,
                                           opt_.obs_dim,
                                           per_env_,
                                           opt_.uint8_obs ? 1u : 0u,
                                           static_cast<std::uint64_t>(opt_.n_step),
                                           opt_.prioritized ? 1u : 0u};
  if (sizes != mine) {
    std::ostringstream m;
    m << "rl::ReplayBuffer::load: the checkpoint's replay buffer has (envs, obs_dim, slots per env, uint8, n_step, "
         "prioritized) = (";
    for (std::size_t i = 0; i < sizes.size(); ++i) m << (i ? ", " : "") << sizes[i];
    m << "), but this run's has (";
    for (std::size_t i = 0; i < mine.size(); ++i) m << (i ? ", " : "") << mine[i];
    m << ")";
    throw InputError(m.str());
  }
  // Checkpoints from before frames were stored once hold whole observations (no frame_stack).
  const std::uint64_t stack = r.has(p + "frame_stack") ? r.value<std::uint64_t>(p + "frame_stack") : 1;
  if (stack != static_cast<std::uint64_t>(opt_.frame_stack))
    throw InputError("rl::ReplayBuffer::load: the checkpoint's replay buffer stores " +
                     (stack > 1 ? "the newest of " + std::to_string(stack) + " stacked frames per slot"
                                : std::string("whole observations")) +
                     ", but this run's stores " +
                     (opt_.frame_stack > 1 ? "the newest of " + std::to_string(opt_.frame_stack) + " stacked frames"
                                           : std::string("whole observations")) +
                     " (a checkpoint written before frames were stored once cannot be resumed with a frame stack)");
  const auto written = r.get<std::uint64_t>(p + "written");
  if (written.size() != opt_.num_envs) throw InputError("rl::ReplayBuffer::load: the write counters do not match");
  std::size_t total = 0;
  for (const auto c : written) total += static_cast<std::size_t>(std::min<std::uint64_t>(c, per_env_));
  const std::size_t D = frame_dim_;
  const auto act = r.get<std::int32_t>(p + "actions");
  const auto rew = r.get<float>(p + "rewards");
  const auto flags = r.get<std::uint8_t>(p + "flags");
  std::vector<std::uint8_t> ou8;
  std::vector<float> of32;
  if (opt_.uint8_obs) ou8 = r.get<std::uint8_t>(p + "obs_u8");
  else of32 = r.get<float>(p + "obs_f32");
  std::vector<double> prio;
  if (opt_.prioritized) prio = r.get<double>(p + "priorities");
  if (act.size() != total || rew.size() != total || flags.size() != total ||
      (opt_.uint8_obs ? ou8.size() : of32.size()) != total * D || (opt_.prioritized && prio.size() != total))
    throw InputError("rl::ReplayBuffer::load: the checkpoint's replay arrays do not match its write counters");
  std::fill(flags_.begin(), flags_.end(), 0);
  std::vector<double> leaves(flags_.size(), 0.0);
  std::size_t at = 0;
  valid_ = 0;
  for (std::size_t b = 0; b < opt_.num_envs; ++b) {
    const std::size_t filled = static_cast<std::size_t>(std::min<std::uint64_t>(written[b], per_env_));
    for (std::size_t k = 0; k < filled; ++k, ++at) {
      const std::size_t s = b * per_env_ + k;
      if (opt_.uint8_obs)
        std::copy(ou8.begin() + static_cast<std::ptrdiff_t>(at * D),
                  ou8.begin() + static_cast<std::ptrdiff_t>((at + 1) * D),
                  obs_u8_.begin() + static_cast<std::ptrdiff_t>(s * D));
      else
        std::copy(of32.begin() + static_cast<std::ptrdiff_t>(at * D),
                  of32.begin() + static_cast<std::ptrdiff_t>((at + 1) * D),
                  obs_f32_.begin() + static_cast<std::ptrdiff_t>(s * D));
      actions_[s] = act[at];
      rewards_[s] = rew[at];
      flags_[s] = flags[at];
      if (flags_[s] & kValid) {
        ++valid_;
        leaves[s] = opt_.prioritized ? prio[at] : 1.0;
      }
    }
  }
  tree_.assign(leaves);
  written_ = written;
  added_ = r.value<std::uint64_t>(p + "added");
  max_priority_ = r.value<double>(p + "max_priority");
}

}  // namespace herd::rl
