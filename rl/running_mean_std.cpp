#include "herd/rl/running_mean_std.hpp"

#include <algorithm>
#include <cmath>

#include "herd/core/error.hpp"

namespace herd::rl {

RunningMeanStd::RunningMeanStd(std::size_t dim) : mean_(dim, 0.0), m2_(dim, 0.0) {
  HERD_REQUIRE(dim >= 1, "RunningMeanStd: dim is {}, but must be at least 1", dim);
}

void RunningMeanStd::update(const float* x, std::size_t n) {
  if (n == 0) return;
  const std::size_t d = dim();
  // Batch mean and M2, then merge (exact, and stable for large counts).
  std::vector<double> bmean(d, 0.0), bm2(d, 0.0);
  for (std::size_t r = 0; r < n; ++r) {
    for (std::size_t j = 0; j < d; ++j) {
      const double v = x[r * d + j];
      if (!std::isfinite(v))
        throw NumericalError(
            fmt::format("RunningMeanStd::update: row {} column {} is {}, but must be finite", r, j, v));
      bmean[j] += v;
    }
  }
  for (double& m : bmean) m /= static_cast<double>(n);
  for (std::size_t r = 0; r < n; ++r) {
    for (std::size_t j = 0; j < d; ++j) {
      const double dv = x[r * d + j] - bmean[j];
      bm2[j] += dv * dv;
    }
  }
  RunningMeanStd b(d);
  b.count_ = static_cast<double>(n);
  b.mean_ = std::move(bmean);
  b.m2_ = std::move(bm2);
  merge(b);
}

void RunningMeanStd::update(const float* x, std::size_t n, Communicator* comm) {
  if (comm == nullptr || comm->size() == 1) {
    update(x, n);
    return;
  }
  RunningMeanStd batch(dim());
  batch.update(x, n);
  const std::vector<double> mine = batch.state();
  const std::vector<double> all = comm->allgather(std::span<const double>(mine));
  const std::size_t w = mine.size();
  for (int r = 0; r < comm->size(); ++r) {
    batch.set_state(std::vector<double>(all.begin() + static_cast<std::ptrdiff_t>(r * w),
                                        all.begin() + static_cast<std::ptrdiff_t>((r + 1) * w)));
    merge(batch);
  }
}

void RunningMeanStd::merge(const RunningMeanStd& o) {
  HERD_REQUIRE(o.dim() == dim(), "RunningMeanStd::merge: dim is {}, but must be {}", o.dim(), dim());
  if (o.count_ == 0.0) return;
  const double n = count_ + o.count_;
  for (std::size_t j = 0; j < dim(); ++j) {
    const double delta = o.mean_[j] - mean_[j];
    mean_[j] += delta * o.count_ / n;
    m2_[j] += o.m2_[j] + delta * delta * count_ * o.count_ / n;
  }
  count_ = n;
}

std::vector<double> RunningMeanStd::var() const {
  std::vector<double> v(dim(), 0.0);
  if (count_ > 0.0) {
    for (std::size_t j = 0; j < dim(); ++j) v[j] = m2_[j] / count_;
  }
  return v;
}

void RunningMeanStd::normalize(const float* in, float* out, std::size_t n, double clip, double eps) const {
  const std::size_t d = dim();
  const std::vector<double> v = var();
  std::vector<double> inv(d);
  for (std::size_t j = 0; j < d; ++j) inv[j] = 1.0 / std::sqrt(v[j] + eps);
  for (std::size_t r = 0; r < n; ++r) {
    for (std::size_t j = 0; j < d; ++j) {
      const double z = (in[r * d + j] - mean_[j]) * inv[j];
      out[r * d + j] = static_cast<float>(std::clamp(z, -clip, clip));
    }
  }
}

std::vector<double> RunningMeanStd::state() const {
  std::vector<double> s;
  s.reserve(1 + 2 * dim());
  s.push_back(count_);
  s.insert(s.end(), mean_.begin(), mean_.end());
  s.insert(s.end(), m2_.begin(), m2_.end());
  return s;
}

void RunningMeanStd::set_state(const std::vector<double>& s) {
  HERD_REQUIRE(s.size() == 1 + 2 * dim(), "RunningMeanStd::set_state: state has {} values, but must have {}", s.size(),
               1 + 2 * dim());
  HERD_REQUIRE(s[0] >= 0.0, "RunningMeanStd::set_state: count is {}, but must be non-negative", s[0]);
  for (std::size_t j = 0; j < dim(); ++j)
    HERD_REQUIRE(s[1 + dim() + j] >= 0.0, "RunningMeanStd::set_state: m2[{}] is {}, but must be non-negative", j,
                 s[1 + dim() + j]);
  count_ = s[0];
  std::copy(s.begin() + 1, s.begin() + 1 + static_cast<std::ptrdiff_t>(dim()), mean_.begin());
  std::copy(s.begin() + 1 + static_cast<std::ptrdiff_t>(dim()), s.end(), m2_.begin());
}

RewardNormalizer::RewardNormalizer(std::size_t envs, double gamma) : gamma_(gamma), returns_(envs, 0.0), stats_(1) {
  HERD_REQUIRE(envs >= 1, "RewardNormalizer: envs is {}, but must be at least 1", envs);
  HERD_REQUIRE(gamma >= 0.0 && gamma <= 1.0, "RewardNormalizer: gamma is {}, but must be in [0, 1]", gamma);
}

void RewardNormalizer::step(const float* rewards, const std::uint8_t* dones, float* out, double clip, double eps) {
  const std::size_t b = returns_.size();
  std::vector<float> ret(b);
  for (std::size_t i = 0; i < b; ++i) {
    returns_[i] = returns_[i] * gamma_ + rewards[i];
    ret[i] = static_cast<float>(returns_[i]);
  }
  stats_.update(ret.data(), b, comm_);
  const double inv = 1.0 / std::sqrt(stats_.var()[0] + eps);
  for (std::size_t i = 0; i < b; ++i) {
    out[i] = static_cast<float>(std::clamp(rewards[i] * inv, -clip, clip));
    if (dones[i]) returns_[i] = 0.0;
  }
}

}  // namespace herd::rl
