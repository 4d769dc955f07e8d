#pragma once
/// @file running_mean_std.hpp
/// Running mean and variance of vectors, for observation and reward normalisation
/// (Stable-Baselines3's `VecNormalize`), with an exact merge of partial statistics
/// (Chan, Golub & LeVeque 1979) so that ranks can combine theirs with an all-reduce.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "herd/core/communicator.hpp"

namespace herd::rl {

/// Per-dimension running mean and (population) variance in double precision.
/// Not thread-safe: one owner updates it.
class RunningMeanStd {
 public:
  /// @param dim number of dimensions (>= 1). @throws herd::InputError if dim < 1
  explicit RunningMeanStd(std::size_t dim = 1);

  /// Adds a batch `x` of `n` rows, row-major `[n, dim]`. Non-finite values are an error.
  /// @throws herd::NumericalError naming the row and column of a NaN or Inf.
  void update(const float* x, std::size_t n);
  /// Adds every rank's batch: each rank's `[n, dim]` batch statistics (count, mean, M2) are
  /// all-gathered and merged in rank order (Chan, Golub & LeVeque 1979), so every rank ends
  /// with the same statistics, equal (up to rounding) to one update with the union of the
  /// batches. `comm` null or of one rank: `update(x, n)`. Collective when `comm` has more
  /// than one rank (`n` may differ between ranks; `dim` may not).
  /// @throws herd::NumericalError as `update`; herd::CommunicationError
  void update(const float* x, std::size_t n, Communicator* comm);
  /// Merges another statistic of the same dimension (exact parallel update).
  /// @throws herd::InputError on a dimension mismatch
  void merge(const RunningMeanStd& other);

  std::size_t dim() const { return mean_.size(); }
  /// Number of rows seen (a double, as in SB3, so merged statistics stay exact).
  double count() const { return count_; }
  const std::vector<double>& mean() const { return mean_; }
  /// Population variance per dimension (0 before any update).
  std::vector<double> var() const;

  /// Writes (x - mean) / sqrt(var + eps), clipped to [-clip, clip], for `n` rows `[n, dim]`.
  /// `in` and `out` may alias.
  void normalize(const float* in, float* out, std::size_t n, double clip = 10.0, double eps = 1e-8) const;

  /// Flat state for checkpoints and all-reduces: [count, mean[dim], m2[dim]] (m2 = sum of
  /// squared deviations), `1 + 2 dim` doubles.
  std::vector<double> state() const;
  /// Restores a state written by `state()`. @throws herd::InputError on a wrong length or a
  /// negative count or m2.
  void set_state(const std::vector<double>& s);

 private:
  double count_ = 0.0;
  std::vector<double> mean_, m2_;
};

/// Reward scaling as in Stable-Baselines3's VecNormalize: rewards are divided by the
/// standard deviation of the discounted return, tracked per env and reset when an episode
/// ends. Not thread-safe.
class RewardNormalizer {
 public:
  /// @param envs number of environments B; @param gamma discount of the tracked return
  RewardNormalizer(std::size_t envs, double gamma);
  /// Updates the statistics with one step of rewards `[B]` and done flags `[B]` and writes
  /// the scaled rewards, clipped to [-clip, clip], to `out` `[B]` (may alias `rewards`).
  void step(const float* rewards, const std::uint8_t* dones, float* out, double clip = 10.0, double eps = 1e-8);
  /// Merges the return statistics across the ranks of `comm` at every `step` (see
  /// `RunningMeanStd::update`; `step` becomes collective). Null: this process alone.
  void set_communicator(Communicator* comm) { comm_ = comm; }
  RunningMeanStd& stats() { return stats_; }
  const RunningMeanStd& stats() const { return stats_; }
  /// Discounted returns in progress, `[B]` (part of a checkpoint).
  std::vector<double>& returns() { return returns_; }

 private:
  double gamma_;
  Communicator* comm_ = nullptr;
  std::vector<double> returns_;
  RunningMeanStd stats_;
};

}  // namespace herd::rl
