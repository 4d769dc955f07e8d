// ParaDRAM's sample refinement (see refinement.hpp).
#include "herd/mcmc/refinement.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <utility>

#include <unistd.h>

#include <fmt/format.h>

#include "herd/core/error.hpp"
#include "herd/io/atomic_file.hpp"
#include "herd/mcmc/autocorrelation.hpp"

namespace herd::mcmc {

namespace {
/// refined_weights state by state: kept(w) of each state's weight, in order, gives its refined
/// weight, the number of its w verbose draws at positions ceil(k skip), k = 1, 2, ... (the same
/// operations for the in-memory and out-of-core refinements).
class Thinning {
 public:
  explicit Thinning(double skip) : skip_(skip), next_(skip) {}
  std::int64_t kept(std::int64_t w) {
    cum_ += static_cast<double>(w);
    std::int64_t c = 0;
    while (next_ <= cum_) {
      ++c;
      next_ += skip_;
    }
    return c;
  }

 private:
  double skip_;
  double next_;  // verbose position (1-based, real) of the next kept draw
  double cum_ = 0;
};

/// The rounds' schedule of both refinements (ParaDRAM's): thin the compact chain while a
/// round's IAC summary is at least 2 and fewer than max_rounds thinnings were made, then the
/// same on the verbose chain (weights counted) with the limit doubled, then stop. With one
/// stage (kCompactOnly, kVerboseOnly) that stage alone, up to max_rounds thinnings.
class RoundSchedule {
 public:
  enum class Next { kThin, kNextStage, kStop };
  explicit RoundSchedule(const RefinementOptions& o)
      : verbose_(o.stages == RefinementStages::kVerboseOnly),
        last_stage_(o.stages != RefinementStages::kCompactThenVerbose),
        limit_(o.max_rounds) {}
  /// Whether the rounds are on the verbose chain.
  bool verbose() const { return verbose_; }
  /// What follows a round whose IAC summary is `skip` (kThin counts the thinning). A NaN skip
  /// (constant columns) compares false: no refinement needed.
  Next after(double skip) {
    if (skip >= 2.0 && thinnings_ < limit_) {
      ++thinnings_;
      return Next::kThin;
    }
    if (verbose_ || last_stage_) return Next::kStop;
    verbose_ = true;
    limit_ *= 2;
    return Next::kNextStage;
  }

 private:
  bool verbose_;
  bool last_stage_;  // one stage only: it ends the refinement
  std::size_t limit_;
  std::size_t thinnings_ = 0;
};
}  // namespace

std::vector<std::int64_t> refined_weights(std::span<const std::int64_t> weights, double skip) {
  HERD_REQUIRE(std::isfinite(skip) && skip >= 1.0, "refined_weights: skip is {}, but must be finite and >= 1", skip);
  std::vector<std::int64_t> out(weights.size(), 0);
  Thinning thin(skip);
  for (std::size_t i = 0; i < weights.size(); ++i) {
    HERD_REQUIRE(weights[i] >= 0, "refined_weights: weights[{}] is {}, but must be >= 0", i, weights[i]);
    out[i] = thin.kept(weights[i]);
  }
  return out;
}

namespace {

/// Lower-case ASCII copy.
std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out)
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  return out;
}

}  // namespace

std::optional<RefinementOptions> parse_refinement_method(std::string_view method, std::string& why) {
  // Tokens separated by '-' or white space: the estimator first, then the qualifiers.
  std::vector<std::string> tokens;
  std::string cur;
  for (const char c : method) {
    if (c == '-' || c == ' ' || c == '\t') {
      if (!cur.empty()) tokens.push_back(lower(cur));
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) tokens.push_back(lower(cur));
  if (tokens.empty()) {
    why =
        "it names no estimator: expected BatchMeans, CutOffAutoCorr or MaxCumSumAutoCorr, optionally with -compact "
        "or -verbose and -avg, -med, -min or -max";
    return std::nullopt;
  }
  const std::string& est = tokens.front();
  RefinementOptions o;
  if (est == "batchmeans" || est == "batch_means") o.estimator = IacEstimator::kBatchMeans;
  else if (est == "cutoffautocorr" || est == "cutoff_autocorr") o.estimator = IacEstimator::kCutoffAutoCorr;
  else if (est == "maxcumsumautocorr" || est == "max_cumsum_autocorr") o.estimator = IacEstimator::kMaxCumSumAutoCorr;
  else {
    why = fmt::format(
        "\"{}\" is not an estimator: expected BatchMeans, CutOffAutoCorr or MaxCumSumAutoCorr, "
        "optionally with -compact or -verbose and -avg, -med, -min or -max",
        tokens.front());
    return std::nullopt;
  }
  bool stage_set = false, summary_set = false;
  for (std::size_t i = 1; i < tokens.size(); ++i) {
    const std::string& t = tokens[i];
    bool stage = true;
    RefinementStages st{};
    IacSummary su{};
    if (t == "compact") st = RefinementStages::kCompactOnly;
    else if (t == "verbose") st = RefinementStages::kVerboseOnly;
    else {
      stage = false;
      if (t == "avg" || t == "average") su = IacSummary::kAverage;
      else if (t == "med" || t == "median") su = IacSummary::kMedian;
      else if (t == "min" || t == "minimum") su = IacSummary::kMin;
      else if (t == "max" || t == "maximum") su = IacSummary::kMax;
      else {
        why = fmt::format(
            "\"{}\" is not a qualifier: expected compact or verbose (the chain) and avg, med, min or "
            "max (the summary of the variables' IACs)",
            t);
        return std::nullopt;
      }
    }
    bool& set = stage ? stage_set : summary_set;
    if (set) {
      why = fmt::format("\"{}\" is a second {} qualifier: give at most one of {}", t, stage ? "chain" : "summary",
                        stage ? "compact or verbose" : "avg, med, min or max");
      return std::nullopt;
    }
    set = true;
    if (stage) o.stages = st;
    else o.summary = su;
  }
  return o;
}

std::string refinement_method_name(const RefinementOptions& o) {
  std::string s = o.estimator == IacEstimator::kCutoffAutoCorr      ? "cutoff_autocorr"
                  : o.estimator == IacEstimator::kMaxCumSumAutoCorr ? "max_cumsum_autocorr"
                                                                    : "batch_means";
  if (o.stages == RefinementStages::kCompactOnly) s += "-compact";
  if (o.stages == RefinementStages::kVerboseOnly) s += "-verbose";
  if (o.summary == IacSummary::kMedian) s += "-median";
  if (o.summary == IacSummary::kMin) s += "-min";
  if (o.summary == IacSummary::kMax) s += "-max";
  return s;
}

namespace {

AutocorrIac autocorr_of(IacEstimator e) {
  return e == IacEstimator::kCutoffAutoCorr ? AutocorrIac::kCutoff : AutocorrIac::kMaxCumSum;
}

/// autocorr_iacs_weighted of the `np` states in play, state k's row `row(k)`, with `weights`
/// (empty: the compact stage's unit weights).
template <class Row>
std::vector<double> autocorr_iacs(IacEstimator e, std::size_t np, std::size_t nv, std::span<const std::int64_t> weights,
                                  Row&& row) {
  return autocorr_iacs_weighted(
      autocorr_of(e), np, nv,
      [&](std::size_t k, std::int64_t& w) -> const double* {
        w = weights.empty() ? 1 : weights[k];
        return row(k);
      },
      weights.empty());
}

double summarize_iac(std::vector<double> v, IacSummary how) {
  switch (how) {
    case IacSummary::kAverage: {
      double s = 0;
      for (double x : v) s += x;
      return s / static_cast<double>(v.size());
    }
    case IacSummary::kMax:
      return *std::max_element(v.begin(), v.end());
    case IacSummary::kMin:
      return *std::min_element(v.begin(), v.end());
    case IacSummary::kMedian: {
      std::sort(v.begin(), v.end());
      const std::size_t n = v.size();
      return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
    }
  }
  return v.front();
}

/// The rounds of refine_sample over `n` states with `weights` (empty: all 1; checked here,
/// then kept as the weights in play, thinned in place). `iacs(index, np, weights)` gives the
/// batch-means IACs of the `np` states in play: the states `index` (increasing), or the
/// states 0 .. np - 1 when `index` is empty (before the first thinning when every weight is
/// positive: no index of every state is made), with those weights (empty: the compact
/// stage's unit weights). A thinning calls `moved(from, to)` for each state that keeps a
/// weight, in order (the state in play at position `from` is now at position `to` <= from),
/// then `thinned(index)` with the states now in play.
template <class Iacs, class Moved, class Thinned>
RefinedSample refine_rounds(std::size_t n, std::vector<std::int64_t> weights, const RefinementOptions& options,
                            Iacs&& iacs, Moved&& moved, Thinned&& thinned) {
  HERD_REQUIRE(weights.empty() || weights.size() == n,
               "refine_sample: weights has {} elements, but there are {} states", weights.size(), n);
  if (weights.empty()) weights.assign(n, 1);
  std::size_t positive = 0;
  for (std::size_t i = 0; i < n; ++i) {
    HERD_REQUIRE(weights[i] >= 0, "refine_sample: weights[{}] is {}, but must be >= 0", i, weights[i]);
    positive += weights[i] > 0 ? 1 : 0;
  }
  HERD_REQUIRE(positive > 0, "refine_sample: the weights sum to 0");
  RefinedSample r;
  r.weight = std::move(weights);
  // r.index is the identity (left empty) until the first thinning when every state is in play.
  bool identity = positive == n;
  if (!identity) {
    r.index.reserve(positive);
    std::size_t to = 0;
    for (std::size_t i = 0; i < n; ++i)
      if (r.weight[i] > 0) {
        r.index.push_back(i);
        r.weight[to++] = r.weight[i];
      }
    r.weight.resize(to);
    r.weight.shrink_to_fit();
  }
  const auto finish = [&] {
    if (identity) {
      r.index.resize(r.weight.size());
      for (std::size_t i = 0; i < r.index.size(); ++i) r.index[i] = i;
    }
    return std::move(r);
  };
  if (r.weight.size() == 1) return finish();  // nothing to refine (ParaMonte: IAC 0)

  RoundSchedule schedule(options);
  for (;;) {
    const bool verbose = schedule.verbose();
    RefinementRound round;
    round.verbose_stage = verbose;
    round.compact_size = r.weight.size();
    round.verbose_size = 0;
    for (std::int64_t w : r.weight) round.verbose_size += w;
    round.iac = iacs(std::span<const std::size_t>(r.index), r.weight.size(),
                     verbose ? std::span<const std::int64_t>(r.weight) : std::span<const std::int64_t>());
    round.iac_summary = summarize_iac(round.iac, options.summary);
    const double skip = round.iac_summary;
    const std::int64_t total = round.verbose_size;
    r.rounds.push_back(std::move(round));
    const RoundSchedule::Next next = schedule.after(skip);
    if (next == RoundSchedule::Next::kNextStage) continue;
    if (next == RoundSchedule::Next::kStop) break;
    // refined_weights(r.weight, skip), computed state by state and stored in place: the
    // states that keep a weight move down (no array of the new weights beside the old).
    HERD_REQUIRE(std::isfinite(skip), "refined_weights: skip is {}, but must be finite and >= 1", skip);
    std::vector<std::size_t> kept_index;  // the kept states when r.index is the identity
    if (identity)
      kept_index.reserve(std::min(r.weight.size(), static_cast<std::size_t>(static_cast<double>(total) / skip) + 1));
    Thinning thin(skip);
    std::size_t to = 0;
    for (std::size_t k = 0; k < r.weight.size(); ++k) {
      const std::int64_t c = thin.kept(r.weight[k]);
      if (c == 0) continue;
      if (identity) kept_index.push_back(k);
      else r.index[to] = r.index[k];
      r.weight[to] = c;
      moved(k, to);
      ++to;
    }
    r.weight.resize(to);
    r.weight.shrink_to_fit();
    if (identity) {
      r.index = std::move(kept_index);
      identity = false;
    } else {
      r.index.resize(to);
    }
    r.index.shrink_to_fit();
    thinned(std::span<const std::size_t>(r.index));
    if (r.weight.size() <= 1) break;
  }
  return finish();
}

}  // namespace

RefinedSample refine_sample(std::span<const double> states, std::span<const std::int64_t> weights, std::size_t num_vars,
                            const RefinementOptions& options) {
  HERD_REQUIRE(num_vars > 0, "refine_sample: num_vars is 0, but must be positive");
  HERD_REQUIRE(states.size() % num_vars == 0 && !states.empty(),
               "refine_sample: states has {} elements, but must be a positive multiple of "
               "num_vars = {}",
               states.size(), num_vars);
  return refine_rounds(
      states.size() / num_vars, std::vector<std::int64_t>(weights.begin(), weights.end()), options,
      [&](std::span<const std::size_t> index, std::size_t np, std::span<const std::int64_t> w) {
        if (options.estimator == IacEstimator::kBatchMeans) return batch_means_iacs(states, num_vars, index, w);
        return autocorr_iacs(options.estimator, np, num_vars, w,
                             [&](std::size_t k) { return states.data() + (index.empty() ? k : index[k]) * num_vars; });
      },
      [](std::size_t, std::size_t) {}, [](std::span<const std::size_t>) {});
}

RefinedSample refine_sample(std::size_t n, std::size_t num_vars, const RowSource& row,
                            std::vector<std::int64_t> weights, const RefinementOptions& options) {
  HERD_REQUIRE(num_vars > 0, "refine_sample: num_vars is 0, but must be positive");
  HERD_REQUIRE(n > 0, "refine_sample: there are no states");
  // The rows of the states in play, once a thinning has left so few that they take at most
  // 16 bytes per state of the chain (twice the weights the refinement started with); row k
  // of `held` is the k-th state in play. Until then every round reads them through `row`.
  std::vector<double> held;
  bool holding = false;
  return refine_rounds(
      n, std::move(weights), options,
      [&](std::span<const std::size_t> index, std::size_t np, std::span<const std::int64_t> w) {
        if (options.estimator != IacEstimator::kBatchMeans)
          return autocorr_iacs(options.estimator, np, num_vars, w, [&](std::size_t k) {
            return holding ? held.data() + k * num_vars : row(index.empty() ? k : index[k]);
          });
        if (holding) return batch_means_iacs(held, num_vars, {}, w);
        if (index.empty()) return batch_means_iacs_by_row(np, num_vars, row, w);
        return batch_means_iacs_by_row(
            np, num_vars, [&](std::size_t k) { return row(index[k]); }, w);
      },
      [&](std::size_t from, std::size_t to) {
        if (holding && from != to)
          std::copy_n(held.begin() + static_cast<std::ptrdiff_t>(from * num_vars), num_vars,
                      held.begin() + static_cast<std::ptrdiff_t>(to * num_vars));
      },
      [&](std::span<const std::size_t> index) {
        if (holding) {
          held.resize(index.size() * num_vars);  // the kept rows were moved down
          return;
        }
        if (index.size() * num_vars > 2 * n) return;
        held.resize(index.size() * num_vars);
        for (std::size_t k = 0; k < index.size(); ++k) {
          const double* x = row(index[k]);
          std::copy(x, x + num_vars, held.begin() + static_cast<std::ptrdiff_t>(k * num_vars));
        }
        holding = true;
      });
}

StateRecords::StateRecords(const std::string& dir, std::size_t num_vars)
    : dir_(dir), nv_(num_vars), per_(std::max<std::size_t>(256, std::size_t{32768} / (2 + num_vars))) {
  fd_ = io::create_unlinked_scratch(dir, ".herd-refine-", path_);
  if (fd_ < 0) fail("creating");
}

StateRecords::~StateRecords() {
  if (fd_ >= 0) ::close(fd_);
}

StateRecords::StateRecords(StateRecords&& o) noexcept
    : fd_(std::exchange(o.fd_, -1)),
      path_(std::move(o.path_)),
      dir_(std::move(o.dir_)),
      nv_(o.nv_),
      per_(o.per_),
      n_(std::exchange(o.n_, 0)),
      total_(std::exchange(o.total_, 0)),
      windex_(std::move(o.windex_)),
      wweight_(std::move(o.wweight_)),
      wvalues_(std::move(o.wvalues_)) {}

StateRecords& StateRecords::operator=(StateRecords&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(o.fd_, -1);
    path_ = std::move(o.path_);
    dir_ = std::move(o.dir_);
    nv_ = o.nv_;
    per_ = o.per_;
    n_ = std::exchange(o.n_, 0);
    total_ = std::exchange(o.total_, 0);
    windex_ = std::move(o.windex_);
    wweight_ = std::move(o.wweight_);
    wvalues_ = std::move(o.wvalues_);
  }
  return *this;
}

std::size_t StateRecords::resident_bytes() const {
  return windex_.capacity() * sizeof(std::uint64_t) + wweight_.capacity() * sizeof(std::int64_t) +
         wvalues_.capacity() * sizeof(double);
}

void StateRecords::append(std::size_t index, std::int64_t weight, const double* values) {
  HERD_REQUIRE(fd_ >= 0, "StateRecords::append: no scratch file");
  if (windex_.capacity() < per_) {
    windex_.reserve(per_);
    wweight_.reserve(per_);
    wvalues_.reserve(per_ * nv_);
  }
  windex_.push_back(static_cast<std::uint64_t>(index));
  wweight_.push_back(weight);
  if (nv_ > 0) wvalues_.insert(wvalues_.end(), values, values + nv_);
  ++n_;
  total_ += weight;
  if (windex_.size() == per_) flush();
}

void StateRecords::flush() {
  const std::size_t len = windex_.size();
  if (len == 0) return;
  const std::uint64_t at = block_offset((n_ - len) / per_);
  if (!io::pwrite_all(fd_, windex_.data(), len * 8, at) ||
      !io::pwrite_all(fd_, wweight_.data(), len * 8, at + static_cast<std::uint64_t>(per_) * 8) ||
      (nv_ > 0 && !io::pwrite_all(fd_, wvalues_.data(), len * nv_ * 8, at + static_cast<std::uint64_t>(per_) * 16)))
    fail("writing");
  windex_.clear();
  wweight_.clear();
  wvalues_.clear();
}

void StateRecords::finish() {
  flush();
  // Assigned fresh vectors (`= {}` would keep the capacity): the buffers are freed.
  windex_ = std::vector<std::uint64_t>();
  wweight_ = std::vector<std::int64_t>();
  wvalues_ = std::vector<double>();
}

void StateRecords::fail(const char* what) const {
  const int e = errno;
  throw IoError(fmt::format("{} the refinement's scratch file \"{}\" (unlinked once created) failed: {}", what, path_,
                            e != 0 ? std::strerror(e) : "unexpected end of file"));
}

StateRecords::Reader::Reader(const StateRecords& records, bool values)
    : rec_(&records), with_values_(values && records.nv_ > 0) {}

void StateRecords::Reader::load(std::size_t k) {
  const StateRecords& r = *rec_;
  HERD_REQUIRE(k < r.n_, "StateRecords::Reader: record {} of {}", k, r.n_);
  const std::size_t b = k / r.per_;
  first_ = b * r.per_;
  count_ = 0;
  const std::size_t len = std::min(r.per_, r.n_ - first_);
  if (index_.size() < r.per_) {
    index_.resize(r.per_);
    weight_.resize(r.per_);
    if (with_values_) values_.resize(r.per_ * r.nv_);
  }
  const std::uint64_t at = r.block_offset(b);
  if (!io::pread_all(r.fd_, index_.data(), len * 8, at) ||
      !io::pread_all(r.fd_, weight_.data(), len * 8, at + static_cast<std::uint64_t>(r.per_) * 8) ||
      (with_values_ &&
       !io::pread_all(r.fd_, values_.data(), len * r.nv_ * 8, at + static_cast<std::uint64_t>(r.per_) * 16)))
    r.fail("reading");
  count_ = len;
}

RefinedStates refine_sample_out_of_core(std::size_t n, std::size_t num_vars, const WeightedRowSource& row,
                                        const std::function<std::int64_t(std::size_t)>& weight,
                                        const std::string& scratch_dir, const RefinementOptions& options) {
  HERD_REQUIRE(num_vars > 0, "refine_sample: num_vars is 0, but must be positive");
  HERD_REQUIRE(n > 0, "refine_sample: there are no states");
  std::size_t positive = 0;
  std::int64_t total = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const std::int64_t w = weight(i);
    HERD_REQUIRE(w >= 0, "refine_sample: weights[{}] is {}, but must be >= 0", i, w);
    positive += w > 0 ? 1 : 0;
    total += w;
  }
  HERD_REQUIRE(positive > 0, "refine_sample: the weights sum to 0");
  RefinedStates r;
  // The states in play: every state (`identity`, before the first thinning when every weight
  // is positive: read from `row` and `weight`), else the records `play` (index and weight;
  // with the rows once `holding`).
  bool identity = positive == n, holding = false;
  StateRecords play;
  std::size_t np = n;
  std::int64_t np_total = total;
  if (!identity) {
    play = StateRecords(scratch_dir, 0);
    for (std::size_t i = 0; i < n; ++i)
      if (const std::int64_t w = weight(i); w > 0) play.append(i, w, nullptr);
    play.finish();
    np = play.size();
  }
  const auto finish = [&] {
    if (identity) {
      play = StateRecords(scratch_dir, 0);
      for (std::size_t i = 0; i < n; ++i) play.append(i, weight(i), nullptr);
      play.finish();
    }
    r.states = std::move(play);
    return std::move(r);
  };
  if (np == 1) return finish();  // nothing to refine (ParaMonte: IAC 0)

  RoundSchedule schedule(options);
  for (;;) {
    const bool verbose = schedule.verbose();
    RefinementRound round;
    round.verbose_stage = verbose;
    round.compact_size = np;
    round.verbose_size = np_total;
    const bool batch_means = options.estimator == IacEstimator::kBatchMeans;
    const auto iacs = [&](const WeightedRowSource& rows) {
      return batch_means ? batch_means_iacs_weighted(np, num_vars, np_total, rows, !verbose)
                         : autocorr_iacs_weighted(autocorr_of(options.estimator), np, num_vars, rows, !verbose);
    };
    if (identity) {
      round.iac = iacs(row);
    } else {
      StateRecords::Reader rd(play);
      round.iac = iacs([&](std::size_t k, std::int64_t& w) -> const double* {
        if (holding) {
          w = rd.weight(k);
          return rd.values(k);
        }
        std::int64_t chain_w = 0;
        const double* x = row(rd.index(k), chain_w);
        w = rd.weight(k);
        return x;
      });
    }
    round.iac_summary = summarize_iac(round.iac, options.summary);
    const double skip = round.iac_summary;
    r.rounds.push_back(std::move(round));
    const RoundSchedule::Next next = schedule.after(skip);
    if (next == RoundSchedule::Next::kNextStage) continue;
    if (next == RoundSchedule::Next::kStop) break;
    // refined_weights of the weights in play, state by state, into the next records.
    HERD_REQUIRE(std::isfinite(skip), "refined_weights: skip is {}, but must be finite and >= 1", skip);
    StateRecords next_play(scratch_dir, holding ? num_vars : 0);
    Thinning thin(skip);
    if (identity) {
      for (std::size_t k = 0; k < n; ++k)
        if (const std::int64_t c = thin.kept(weight(k)); c > 0) next_play.append(k, c, nullptr);
    } else {
      StateRecords::Reader rd(play);
      for (std::size_t k = 0; k < np; ++k)
        if (const std::int64_t c = thin.kept(rd.weight(k)); c > 0)
          next_play.append(rd.index(k), c, holding ? rd.values(k) : nullptr);
    }
    next_play.finish();
    play = std::move(next_play);
    identity = false;
    np = play.size();
    np_total = play.total_weight();
    if (!holding && np * num_vars <= 2 * n) {
      // Few enough: their rows are read once more and kept with them.
      StateRecords held(scratch_dir, num_vars);
      StateRecords::Reader rd(play);
      for (std::size_t k = 0; k < np; ++k) {
        std::int64_t chain_w = 0;
        const std::size_t i = rd.index(k);
        const std::int64_t w = rd.weight(k);
        held.append(i, w, row(i, chain_w));
      }
      held.finish();
      play = std::move(held);
      holding = true;
    }
    if (np <= 1) break;
  }
  return finish();
}

}  // namespace herd::mcmc
