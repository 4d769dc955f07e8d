// The DRAM kernel (dram.hpp).
#include "herd/mcmc/dram.hpp"

#include "dram_detail.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <exception>
#include <memory>
#include <thread>
#include <utility>

#include "herd/core/error.hpp"
#include "herd/core/log.hpp"
#include "herd/core/philox_lanes.hpp"
#include "herd/core/thread_pool.hpp"
#include "herd/core/timer.hpp"
#include "herd/mcmc/batched_dram_kernel.hpp"
#include "herd/mcmc/proposal_setup.hpp"

namespace herd::mcmc {

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();
constexpr int kMaxStages = 15;  // 1 + 14 delayed-rejection stages
constexpr int kMaxPath = kMaxStages + 1;
// Adaptation without a target acceptance rate: an update period with an acceptance rate
// below kStuckRate, in a chain whose acceptance rate so far is below kStuckOverall, halves
// the scale; one above kRecoverRate doubles it back (never above the scale factor). (A
// healthy chain's short stuck stretches, as in a funnel's neck, are left alone: halving
// there cost gp_pois_regr four fifths of its ESS.) The adapted covariance is shrunk towards the start proposal's guess
// with the weight of kPriorWeight x d^2 steps: an estimate from an autocorrelated random walk needs an effective size
// well above d, and a random walk's autocorrelation time grows with d.
// The halvings stop at kMinScaleFraction of the scale factor: unbounded, a chain that accepts
// nothing (a log density that is -inf or NaN everywhere but at the start) halved its scale to
// 0 after about 1075 updates, and its trials, equal to the current point, were then all
// accepted: a chain of one repeated state, exit status 0. At 2^-40 a trial still moves a point
// of size 1e3 by more than its last bit.
constexpr double kStuckRate = 0.01;
constexpr double kStuckOverall = 0.05;
constexpr double kRecoverRate = 0.5;
constexpr double kMinScaleFraction = 0x1p-40;
constexpr double kPriorWeight = 3.0;

// The shared per-chain math of the batched kernel (batched_dram_kernel.hpp): log1m_exp,
// the delayed-rejection recursion and y = x + L w (row dot products: the one arithmetic for
// trial points, shared by the kernel, `propose` and the batched kernel, so all give
// bit-identical points; the axpy form's short, variable-length loops cost twice as much at
// d = 10).
using batched::apply_factor;
using batched::cholesky;
using batched::log1m_exp;

// y = x + L w as apply_factor computes it, from the factor in blocks of 4 rows (lb, see
// DramSampler::chol_blocks_): rows 4b..4b+3 accumulate column by column in one 4-wide vector,
// so each row's sum runs over j = 0, 1, ..., i in apply_factor's order, starting from 0.0,
// with a separate multiply and add (no FMA: neither target enables it). The zeros above the
// diagonal add +-0 * w_j after a row's last term, which leaves the sum unchanged (it is never
// -0, starting from +0 in round-to-nearest), for finite w.
using Vec4 = double __attribute__((vector_size(32)));

[[gnu::always_inline]] inline void apply_factor_blocks(const double* lb, const double* w, const double* x, double* y,
                                                       int d) {
  const int nb = (d + 3) / 4;
  for (int b = 0; b < nb; ++b) {
    const double* col = lb + static_cast<std::size_t>(b) * d * 4;
    const int jend = std::min(d, 4 * b + 4);
    Vec4 acc = {0.0, 0.0, 0.0, 0.0};
    for (int j = 0; j < jend; ++j) {
      Vec4 l;
      __builtin_memcpy(&l, col + 4 * static_cast<std::size_t>(j), sizeof l);
      const Vec4 wj = {w[j], w[j], w[j], w[j]};
      acc += l * wj;
    }
    const int rows = std::min(4, d - 4 * b);
    for (int r = 0; r < rows; ++r) y[4 * b + r] = x[4 * b + r] + acc[r];
  }
}

// The same sums for NB = (d + 3) / 4 blocks, the blocks interleaved: column j feeds every
// block whose rows reach it (b >= j / 4), so the NB accumulators' add chains overlap instead
// of running one after the other (the chain of dependent adds, not the arithmetic, bounds
// the time: 22 adds in a row at d = 10 before, 10 now). Each block sees the same operations
// in the same order as in apply_factor_blocks, so the results are the same bits.
template <int NB>
[[gnu::always_inline]] inline void apply_factor_blocks_fixed(const double* lb, const double* w, const double* x,
                                                             double* y, int d) {
  static_assert(NB >= 1 && NB <= 4);
  const auto stride = static_cast<std::size_t>(d) * 4;
  // Four named accumulators (an array indexed in a loop went to the stack).
  Vec4 a0 = {0.0, 0.0, 0.0, 0.0}, a1 = a0, a2 = a0, a3 = a0;
  auto madd = [&](Vec4& acc, int b, int j, const Vec4& wj) {
    Vec4 l;
    __builtin_memcpy(&l, lb + static_cast<std::size_t>(b) * stride + 4 * static_cast<std::size_t>(j), sizeof l);
    acc += l * wj;
  };
  // Columns 4 b0 .. 4 b0 + 3 feed blocks b0 .. NB - 1.
  for (int j = 0; j < std::min(d, 4); ++j) {
    const Vec4 wj = {w[j], w[j], w[j], w[j]};
    madd(a0, 0, j, wj);
    if constexpr (NB > 1) madd(a1, 1, j, wj);
    if constexpr (NB > 2) madd(a2, 2, j, wj);
    if constexpr (NB > 3) madd(a3, 3, j, wj);
  }
  if constexpr (NB > 1)
    for (int j = 4; j < std::min(d, 8); ++j) {
      const Vec4 wj = {w[j], w[j], w[j], w[j]};
      madd(a1, 1, j, wj);
      if constexpr (NB > 2) madd(a2, 2, j, wj);
      if constexpr (NB > 3) madd(a3, 3, j, wj);
    }
  if constexpr (NB > 2)
    for (int j = 8; j < std::min(d, 12); ++j) {
      const Vec4 wj = {w[j], w[j], w[j], w[j]};
      madd(a2, 2, j, wj);
      if constexpr (NB > 3) madd(a3, 3, j, wj);
    }
  if constexpr (NB > 3)
    for (int j = 12; j < d; ++j) {
      const Vec4 wj = {w[j], w[j], w[j], w[j]};
      madd(a3, 3, j, wj);
    }
  const Vec4 acc[4] = {a0, a1, a2, a3};
  for (int b = 0; b < NB; ++b) {
    const int rows = std::min(4, d - 4 * b);
    for (int r = 0; r < rows; ++r) y[4 * b + r] = x[4 * b + r] + acc[b][r];
  }
}

[[gnu::always_inline]] inline void apply_factor_dispatch(const double* lb, const double* w, const double* x, double* y,
                                                         int d) {
  switch ((d + 3) / 4) {
    case 1:
      apply_factor_blocks_fixed<1>(lb, w, x, y, d);
      break;
    case 2:
      apply_factor_blocks_fixed<2>(lb, w, x, y, d);
      break;
    case 3:
      apply_factor_blocks_fixed<3>(lb, w, x, y, d);
      break;
    case 4:
      apply_factor_blocks_fixed<4>(lb, w, x, y, d);
      break;
    default:
      apply_factor_blocks(lb, w, x, y, d);
  }
}

__attribute__((target("avx2"))) void apply_factor_blocks_avx2(const double* lb, const double* w, const double* x,
                                                              double* y, int d) {
  apply_factor_dispatch(lb, w, x, y, d);
}

void apply_factor_blocks_generic(const double* lb, const double* w, const double* x, double* y, int d) {
  apply_factor_dispatch(lb, w, x, y, d);
}

bool cpu_has_avx2() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2");
#else
  return false;
#endif
}

// dst[0..n) = src[0..n) for the few doubles of a point, inline: GCC makes a plain copy loop
// a memmove call, which costs more than the copy itself at d = 10 (the empty asm hides the
// loop's pattern from it).
[[gnu::always_inline]] inline void copy_point(const double* src, int n, double* dst) {
  int i = 0;
  for (; i + 2 <= n; i += 2) {
    dst[i] = src[i];
    dst[i + 1] = src[i + 1];
    asm("" : "+r"(i));
  }
  if (i < n) dst[i] = src[i];
}

std::string lower_no_space(const std::string& s) {
  std::string r;
  for (char c : s)
    if (!std::isspace(static_cast<unsigned char>(c)))
      r += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return r;
}

}  // namespace

double dr_log_acceptance(int m, int d, const double* w, const double* lp, const double* scale, ProposalKind kind,
                         DrRule rule) {
  HERD_CHECK(m >= 1 && m < kMaxPath, "dr_log_acceptance: m is {}, but must be in [1, {}]", m, kMaxPath - 1);
  if (lp[m] == kNegInf) return kNegInf;
  if (m == 1) return std::min(0.0, lp[1] - lp[0]);
  if (rule == DrRule::kParaDramSimplified) {
    double mx = kNegInf;
    for (int j = 1; j < m; ++j) mx = std::max(mx, lp[j]);
    if (lp[m] <= mx) return kNegInf;
    // log(e^lp_m - e^mx) - log(e^lp_0 - e^mx)
    const double num = lp[m] + log1m_exp(mx - lp[m]);
    const double den = lp[0] + log1m_exp(mx - lp[0]);
    return std::min(0.0, num - den);
  }
  if (m == 2 && kind != ProposalKind::kUniform) {
    // One delayed-rejection stage (the common case): only the three sub-paths that alpha(0 -> 2)
    // needs, 0 -> 1, 2 -> 1 and 0 -> 2, by the same operations in the same order as
    // DrRecursion::log_alpha(0, 2), which also fills the unused 1 -> 0, 1 -> 2, 2 -> 0 and the
    // distance |w_2 - w_0| (two log1m_exp calls more). The numerator comes first: when it is
    // -inf the denominator does not matter.
    const double* w0 = w;
    const double* w1 = w + d;
    const double* w2 = w + 2 * static_cast<std::ptrdiff_t>(d);
    const double t21 = lp[1] == kNegInf ? kNegInf : (lp[1] - lp[2] < 0.0 ? lp[1] - lp[2] : 0.0);
    double q12 = 0.0;
    for (int i = 0; i < d; ++i) q12 += (w1[i] - w2[i]) * (w1[i] - w2[i]);
    const double c = scale[0];
    double num = lp[2];
    num += -0.5 * (q12 / (c * c)) + log1m_exp(t21);
    if (num == kNegInf) return kNegInf;
    const double t01 =
        lp[1] == kNegInf ? kNegInf : (lp[0] == kNegInf ? 0.0 : (lp[1] - lp[0] < 0.0 ? lp[1] - lp[0] : 0.0));
    double q01 = 0.0;
    for (int i = 0; i < d; ++i) q01 += (w0[i] - w1[i]) * (w0[i] - w1[i]);
    double den = lp[0];
    den += -0.5 * (q01 / (c * c)) + log1m_exp(t01);
    if (den == kNegInf) return 0.0;
    return num - den < 0.0 ? num - den : 0.0;
  }
  batched::DrRecursion<kMaxPath> r;
  r.d = d;
  r.w = w;
  r.lp = lp;
  r.scale = scale;
  r.uniform = kind == ProposalKind::kUniform;
  return r.log_alpha(0, m);
}

double DramSampler::parse_scale_factor(const std::string& text, int d) {
  const std::string s = lower_no_space(text);
  HERD_REQUIRE(!s.empty(), "dram: scale_factor is empty, but must be a number, \"gelman\" or a product");
  double v = 1.0;
  std::size_t pos = 0;
  while (pos <= s.size()) {
    const std::size_t star = s.find('*', pos);
    const std::string term = s.substr(pos, star == std::string::npos ? std::string::npos : star - pos);
    if (term == "gelman") {
      v *= 2.38 / std::sqrt(static_cast<double>(d));
    } else {
      std::size_t used = 0;
      double x = 0.0;
      try {
        x = std::stod(term, &used);
      } catch (...) {
        used = 0;
      }
      HERD_REQUIRE(used == term.size() && !term.empty(),
                   "dram: scale_factor is \"{}\"; the term \"{}\" is neither a number nor \"gelman\"", text, term);
      v *= x;
    }
    if (star == std::string::npos) break;
    pos = star + 1;
  }
  HERD_REQUIRE(std::isfinite(v) && v > 0, "dram: scale_factor \"{}\" is {}, but must be positive and finite", text, v);
  return v;
}

DramSampler::DramSampler(DramOptions options, PointLogDensity log_density)
    : options_(std::move(options)), f_(std::move(log_density)) {
  HERD_REQUIRE(static_cast<bool>(f_), "dram: the log density is empty");
  validate();
  reset();
}

DramSampler::DramSampler(DramOptions options, BatchedLogDensity log_density) : options_(std::move(options)) {
  HERD_REQUIRE(static_cast<bool>(log_density), "dram: the log density is empty");
  batch_ = std::move(log_density);
  f_ = [b = batch_](const double* x, int d) {
    double out = 0.0;
    b(x, 1, d, &out);
    return out;
  };
  validate();
  reset();
}

void DramSampler::validate() {
  const DramOptions& o = options_;
  d_ = static_cast<int>(o.start_point.size());
  const int d = d_;
  HERD_REQUIRE(d > 0, "dram: start_point is empty, but must hold the d coordinates of the start");
  for (int i = 0; i < d; ++i)
    HERD_REQUIRE(std::isfinite(o.start_point[i]), "dram: start_point[{}] is {}, but must be finite", i,
                 o.start_point[i]);
  HERD_REQUIRE(o.chain_size >= 1, "dram: chain_size is {}, but must be >= 1", o.chain_size);
  HERD_REQUIRE(o.max_proposals >= 0, "dram: max_proposals is {}, but must be >= 0", o.max_proposals);
  auto start = detail::start_proposal(o.proposal_start_cov, o.proposal_start_std, d, "dram");
  start_cov_ = std::move(start.cov);
  start_chol_ = std::move(start.chol);
  scale0_ = parse_scale_factor(o.scale_factor, d);
  period_ = detail::adaptive_update_period(o.adaptive_update_period, d, "dram");
  HERD_REQUIRE(o.adaptive_update_count >= 0, "dram: adaptive_update_count is {}, but must be >= 0",
               o.adaptive_update_count);
  HERD_REQUIRE(o.greedy_adaptation_count >= 0, "dram: greedy_adaptation_count is {}, but must be >= 0",
               o.greedy_adaptation_count);
  if (!o.target_acceptance_rate.empty()) {
    HERD_REQUIRE(o.target_acceptance_rate.size() <= 2,
                 "dram: target_acceptance_rate has {} values, but must have 1 or 2", o.target_acceptance_rate.size());
    const double lo = o.target_acceptance_rate.front(), hi = o.target_acceptance_rate.back();
    HERD_REQUIRE(lo > 0 && hi <= 1 && lo <= hi,
                 "dram: target_acceptance_rate is [{}, {}], but must satisfy 0 < lo <= hi <= 1", lo, hi);
  }
  stage_scale_ =
      detail::stage_scales(o.delayed_rejection_count, o.delayed_rejection_scale_factors, d, kMaxStages, "dram");
  has_box_ = !o.domain_lower.empty() || !o.domain_upper.empty();
  detail::domain_box(o.domain_lower, o.domain_upper, d, "dram", lower_, upper_);
  for (int i = 0; i < d; ++i)
    HERD_REQUIRE(o.start_point[i] >= lower_[i] && o.start_point[i] <= upper_[i],
                 "dram: start_point[{}] is {}, but must lie in the domain [{}, {}]", i, o.start_point[i], lower_[i],
                 upper_[i]);
  has_ball_ = !o.domain_ball_center.empty() || !o.domain_ball_precision.empty();
  if (has_ball_) {
    HERD_REQUIRE(o.domain_ball_center.size() == static_cast<std::size_t>(d) &&
                     o.domain_ball_precision.size() == static_cast<std::size_t>(d) * d,
                 "dram: the ball domain has a centre of {} values and a precision of {}, but needs {} and {}",
                 o.domain_ball_center.size(), o.domain_ball_precision.size(), d, d * d);
    for (const double v : o.domain_ball_precision)
      HERD_REQUIRE(std::isfinite(v), "dram: the ball domain's precision has the value {}, but must be finite", v);
    HERD_REQUIRE(inside_ball(o.start_point.data()),
                 "dram: start_point is outside the ball domain (x - c)^T C^-1 (x - c) <= 1 (domain_ball_*)");
  }
  HERD_REQUIRE(o.domain_check_warn >= 0 && o.domain_check_stop >= 0,
               "dram: domain_check_warn and domain_check_stop are {} and {}, but must be >= 0 (0: never)",
               o.domain_check_warn, o.domain_check_stop);
  HERD_REQUIRE(o.burnin_adaptation_measure >= 0 && o.burnin_adaptation_measure <= 1,
               "dram: burnin_adaptation_measure is {}, but must be in [0, 1]", o.burnin_adaptation_measure);
  zig_ = &ziggurat_tables();
  const std::size_t np = stage_scale_.size() + 1;
  z_.resize(d);
  y_.resize(d);
  wpath_.assign(np * d, 0.0);
  lpath_.assign(np, 0.0);
  scratch_.assign(2 * static_cast<std::size_t>(d) + 4 * static_cast<std::size_t>(d) * d, 0.0);
  // Draw-ahead of proposal words: Gaussian proposals of up to 16 dimensions (one
  // ziggurat chunk); the uniform proposal draws a radius after its normals.
  use_ahead_ = o.proposal == ProposalKind::kNormal && d <= 16;
  ahead_words_ = 4 * ((2 * d + 3) / 4);
  if (use_ahead_) {
    ahead_prop_.assign(static_cast<std::size_t>(kAhead) * ahead_words_, 0u);
    ahead_acc_.assign(4 * kAhead, 0u);
  }
  dr_ahead_ = use_ahead_ && stage_scale_.size() == 2;
  if (dr_ahead_) ahead_dr_.assign(static_cast<std::size_t>(kAhead) * ahead_words_, 0u);
  ahead_valid_ = false;
}

void DramSampler::refill_ahead(std::uint64_t k0) {
  const auto words = static_cast<std::size_t>(ahead_words_);
  philox_blocks_by_index(prop_rng_, k0, 0, ahead_words_ / 4, kAhead, ahead_prop_.data(), words);
  if (dr_ahead_) philox_blocks_by_index(dr_rng_, k0, 0, ahead_words_ / 4, kAhead, ahead_dr_.data(), words);
  philox_blocks_by_index(acc_rng_, k0, 0, kAhead, ahead_acc_.data());
  ahead_k0_ = k0;
  ahead_valid_ = true;
}

void DramSampler::reset() {
  const int d = d_;
  DramState s;
  s.ndim = d;
  s.chain_id = options_.chain_id;
  s.point = options_.start_point;
  s.scale = scale0_;
  s.stage_accepted.assign(stage_scale_.size(), 0);
  // The start proposal's implied guess of the target covariance, C0 / scale_factor^2: the
  // prior the adapted covariance is shrunk towards while few unique states are known.
  prior_cov_.resize(start_cov_.size());
  for (std::size_t q = 0; q < start_cov_.size(); ++q) prior_cov_[q] = start_cov_[q] / (scale0_ * scale0_);
  s.chol = start_chol_;  // initial proposal factor
  s.mean.assign(d, 0.0);
  s.m2.assign(static_cast<std::size_t>(d) * d, 0.0);
  state_ = std::move(s);
  ahead_valid_ = false;
  refresh_proposal_cov();
  prop_rng_ = RngStream(options_.seed, state_.chain_id, RngPurpose::kProposal);
  acc_rng_ = RngStream(options_.seed, state_.chain_id, RngPurpose::kAcceptance);
  dr_rng_ = RngStream(options_.seed, state_.chain_id, RngPurpose::kDelayedRejection);
  chol_warned_ = false;
  bad_trials_in_row_ = nan_trials_in_row_ = 0;
  nan_warned_ = true;  // a NaN at the start point is the error below, not also a warning
  const std::int64_t nans = state_.nan_count;
  const double lp = evaluate(state_.point.data());
  nan_warned_ = false;
  if (!(lp > kNegInf)) {
    // The value and the point, so that the user can evaluate the density there themselves.
    std::string point;
    for (int i = 0; i < d && i < 10; ++i) point += fmt::format("{}{}", i > 0 ? ", " : "", state_.point[i]);
    if (d > 10) point += fmt::format(", ... ({} values)", d);
    throw InputError(fmt::format(
        "dram: the log density at start_point [{}] is {}; the start must be inside the support of the target{}", point,
        state_.nan_count > nans ? "NaN" : "-inf",
        state_.nan_count > nans ? " (a NaN also comes from an error in the log density itself)" : ""));
  }
  state_.log_density = lp;
  state_.best_index.push_back(0);
  state_.best_log_density.push_back(lp);
}

void DramSampler::set_state(DramState s) {
  HERD_REQUIRE(s.ndim == d_ && s.point.size() == static_cast<std::size_t>(d_) &&
                   s.chol.size() == static_cast<std::size_t>(d_) * d_,
               "dram: set_state: the state has dimension {}, but the sampler has {}", s.ndim, d_);
  HERD_REQUIRE(s.stage_accepted.size() == stage_scale_.size(),
               "dram: set_state: the state has {} stages, but the options give {}", s.stage_accepted.size(),
               stage_scale_.size());
  state_ = std::move(s);
  cur_stage_ = 0;
  bad_trials_in_row_ = nan_trials_in_row_ = 0;
  ahead_valid_ = false;
  refresh_proposal_cov();
  prop_rng_ = RngStream(options_.seed, state_.chain_id, RngPurpose::kProposal);
  acc_rng_ = RngStream(options_.seed, state_.chain_id, RngPurpose::kAcceptance);
  dr_rng_ = RngStream(options_.seed, state_.chain_id, RngPurpose::kDelayedRejection);
}

double DramSampler::evaluate(const double* y) {
  double v;
  try {
    v = f_(y, d_);
  } catch (const std::exception& e) {
    ++state_.evaluations;
    throw Error(fmt::format("dram: chain {}: the log density threw at proposal {}: {}", state_.chain_id,
                            state_.proposal_number, e.what()));
  } catch (...) {
    ++state_.evaluations;
    throw Error(fmt::format("dram: chain {}: the log density threw an unknown exception at proposal {}",
                            state_.chain_id, state_.proposal_number));
  }
  return check_value(v);
}

void DramSampler::count_out_of_domain_trial(bool nan) {
  ++bad_trials_in_row_;
  if (nan) ++nan_trials_in_row_;
  const std::int64_t n = bad_trials_in_row_, nans = nan_trials_in_row_;
  const std::int64_t warn = options_.domain_check_warn, stop = options_.domain_check_stop;
  const bool stops = stop > 0 && n >= stop;
  if (!stops && !(warn > 0 && n % warn == 0)) return;
  const std::string what =
      nans == 0   ? "fell outside the domain"
      : nans == n ? "had a NaN log density"
                  : fmt::format("fell outside the domain ({}) or had a NaN log density ({})", n - nans, nans);
  const std::string limit = stop > 0 ? fmt::to_string(stop) : std::string("0, never");
  if (stops)
    throw Error(
        fmt::format("dram: chain {}: {} trials in a row, up to proposal {}, {}: the run stops at "
                    "max_num_domain_check_to_stop (maxNumDomainCheckToStop) = {}; check the domain, the "
                    "start point and the log density",
                    state_.chain_id, n, state_.proposal_number, what, limit));
  HERD_LOG_WARN(
      "dram: chain {}: {} trials in a row, up to proposal {}, {} (the run stops at "
      "max_num_domain_check_to_stop = {})",
      state_.chain_id, n, state_.proposal_number, what, limit);
}

double DramSampler::check_value(double v) {
  ++state_.evaluations;
  if (std::isnan(v)) [[unlikely]] {
    ++state_.nan_count;
    if (state_.proposal_number > 0 || cur_stage_ > 0) count_out_of_domain_trial(true);
    if (!nan_warned_) {
      nan_warned_ = true;
      HERD_LOG_WARN(
          "dram: chain {}: the log density is NaN at proposal {}; NaN counts as -inf (further "
          "NaNs are counted silently; the total is in the result)",
          state_.chain_id, state_.proposal_number);
    }
    return kNegInf;
  }
  bad_trials_in_row_ = nan_trials_in_row_ = 0;
  if (v == std::numeric_limits<double>::infinity()) [[unlikely]]
    throw NumericalError(
        fmt::format("dram: chain {}: the log density is +inf at proposal {}, but must be "
                    "finite or -inf",
                    state_.chain_id, state_.proposal_number));
  return v;
}

void DramSampler::draw_direction(RngCursor& c, double* z) const {
  ziggurat_normals(c, *zig_, z, d_);
  if (options_.proposal == ProposalKind::kUniform) {
    double n2 = 0.0;
    for (int i = 0; i < d_; ++i) n2 += z[i] * z[i];
    const double r = std::pow(c.uniform(), 1.0 / d_) / std::sqrt(n2);
    for (int i = 0; i < d_; ++i) z[i] *= r;
  }
}

void DramSampler::propose(std::uint64_t k, int stage, const double* point, const double* chol, double* out) const {
  HERD_REQUIRE(stage >= 1 && stage <= static_cast<int>(stage_scale_.size()),
               "dram: propose: stage is {}, but must be in [1, {}]", stage, stage_scale_.size());
  const int d = d_;
  std::vector<double> z(d);
  if (stage == 1) {
    auto c = prop_rng_.at(k);
    draw_direction(c, z.data());
  } else {
    auto c = dr_rng_.at(k);
    for (int s = 2; s <= stage; ++s) draw_direction(c, z.data());
  }
  // Same arithmetic as step(): w = c_s z, then y = x + L w.
  const double cs = stage_scale_[stage - 1];
  if (stage > 1)
    for (int i = 0; i < d; ++i) z[i] *= cs;
  apply_factor(chol, z.data(), point, out, d);
}

double DramSampler::acceptance_uniform(std::uint64_t k, int stage) const {
  HERD_REQUIRE(stage >= 1 && stage <= static_cast<int>(stage_scale_.size()),
               "dram: acceptance_uniform: stage is {}, but must be in [1, {}]", stage, stage_scale_.size());
  auto c = acc_rng_.at(k);
  double u = c.uniform();
  for (int s = 2; s <= stage; ++s) u = c.uniform();
  return u;
}

void DramSampler::write_current(ChainSink& sink) {
  DramState& s = state_;
  ChainRecord r;
  r.chain_id = s.chain_id;
  r.step = s.record_step;
  r.weight = s.weight;
  r.log_density = s.log_density;
  r.dr_stage = s.record_stage;
  r.accept_prob = s.record_accept_prob;
  r.adapt_measure = s.record_adapt_measure;
  r.point = s.point.data();
  r.ndim = d_;
  sink.write(r);
  if (s.record_adapt_measure > options_.burnin_adaptation_measure) s.last_index_over_measure = s.records_written;
  ++s.records_written;
}

void DramSampler::accept(const double* y, double lp, int stage, double alpha, ChainSink& sink) {
  DramState& s = state_;
  write_current(sink);
  if (s.updates_done < options_.adaptive_update_count) {
    const std::int64_t w = s.weight - s.current_counted;
    if (w > 0 || s.current_counted == 0) {
      s.pending_points.insert(s.pending_points.end(), s.point.begin(), s.point.end());
      s.pending_weights.push_back(static_cast<double>(w));
      s.pending_new.push_back(s.current_counted == 0 ? 1 : 0);
    }
  }
  copy_point(y, d_, s.point.data());
  s.log_density = lp;
  s.weight = 1;
  s.record_step = s.proposal_number + 1;
  s.record_stage = stage;
  s.record_accept_prob = alpha;
  s.record_adapt_measure = 0.0;
  s.current_counted = 0;
  ++s.accepted;
  ++s.stage_accepted[stage - 1];
  ++s.accepted_since_update;
  if (lp > s.best_log_density.back()) {
    s.best_index.push_back(s.records_written);
    s.best_log_density.push_back(lp);
  }
}

// y = x + L w for the current state; returns whether y is inside the domain box.
bool DramSampler::trial_point(const double* w, double* y) const {
  const int d = d_;
  static const bool avx2 = cpu_has_avx2();
  if (avx2) apply_factor_blocks_avx2(chol_blocks_.data(), w, state_.point.data(), y, d);
  else apply_factor_blocks_generic(chol_blocks_.data(), w, state_.point.data(), y, d);
  if (has_ball_ && !inside_ball(y)) return false;
  if (!has_box_) return true;
  unsigned inside = 1;  // branch-free: a data-dependent branch per coordinate mispredicts
  for (int i = 0; i < d; ++i)
    inside &= static_cast<unsigned>(y[i] >= lower_[i]) & static_cast<unsigned>(y[i] <= upper_[i]);
  return inside != 0;
}

bool DramSampler::inside_ball(const double* y) const {
  const int d = d_;
  const double* c = options_.domain_ball_center.data();
  const double* p = options_.domain_ball_precision.data();
  double q = 0.0;
  for (int i = 0; i < d; ++i) {
    double row = 0.0;
    for (int j = 0; j < d; ++j) row += p[static_cast<std::size_t>(i) * d + j] * (y[j] - c[j]);
    q += (y[i] - c[i]) * row;
  }
  return q <= 1.0;
}

void DramSampler::begin_proposal() {
  DramState& s = state_;
  const std::uint64_t k = s.proposal_number;
  if (use_ahead_) {
    if (!ahead_valid_ || k < ahead_k0_ || k - ahead_k0_ >= static_cast<std::uint64_t>(kAhead)) refill_ahead(k);
    const std::size_t lane = static_cast<std::size_t>(k - ahead_k0_);
    const std::uint32_t* w = ahead_prop_.data() + lane * static_cast<std::size_t>(ahead_words_);
    ziggurat_normals_from_words(w, d_, *zig_, z_.data(), [&] {
      RngCursor c = prop_rng_.at(k);
      c.skip_u32(2 * d_);
      return c;
    });
    const std::uint32_t* a = ahead_acc_.data() + 4 * lane;
    acc_u1_ = u64_to_uniform(static_cast<std::uint64_t>(a[0]) | (static_cast<std::uint64_t>(a[1]) << 32));
  } else {
    auto pc = prop_rng_.at(k);
    draw_direction(pc, z_.data());
    acc_cur_ = acc_rng_.at(k);
  }
  cur_inside_ = trial_point(z_.data(), y_.data());
  if (!cur_inside_) {
    ++s.out_of_domain;
    count_out_of_domain_trial(false);
  }
  cur_stage_ = 1;
}

bool DramSampler::finish_stage(double lp, ChainSink& sink) {
  DramState& s = state_;
  const int d = d_;
  const int st = cur_stage_;
  const int nst = static_cast<int>(stage_scale_.size());
  if (!cur_inside_) lp = kNegInf;
  const double u = (st == 1 && use_ahead_) ? acc_u1_ : (st == 2 && dr_ahead_) ? acc_u2_ : acc_cur_.uniform();
  double la;
  if (st == 1) {
    la = std::min(0.0, lp - s.log_density);
  } else {
    lpath_[st] = lp;
    // Most second stages are rejected: a cheap bound decides those without the two
    // log1m_exp of the exact ratio (alpha is kept only on acceptance).
    if (st == 2 && options_.proposal != ProposalKind::kUniform && options_.dr_rule == DrRule::kExact &&
        detail::dr2_surely_rejects(wpath_.data(), lpath_.data(), stage_scale_[0], u, d))
      la = kNegInf;
    else
      la = dr_log_acceptance(st, d, wpath_.data(), lpath_.data(), stage_scale_.data(), options_.proposal,
                             options_.dr_rule);
  }
  // exp(-inf) is +0 exactly: no libm call for the (frequent) -inf of a second stage; nor
  // for a u above a cheap upper bound of exp(la) (most rejections; alpha is not kept then).
  const double alpha = la == 0.0 ? 1.0 : la == kNegInf ? 0.0 : u >= detail::exp_upper_bound(la) ? 0.0 : std::exp(la);
  if (u < alpha) {
    accept(y_.data(), lp, st, alpha, sink);
    end_proposal();
    return false;
  }
  if (st == nst) {
    ++s.weight;
    end_proposal();
    return false;
  }
  // Delayed rejection: the path x = p_0, p_1, ... in whitened coordinates w (p = x + L w).
  double* w = wpath_.data();
  if (st == 1) {
    std::fill(w, w + d, 0.0);
    std::copy(z_.begin(), z_.end(), w + d);
    lpath_[0] = s.log_density;
    lpath_[1] = lp;
    if (!dr_ahead_) {
      dr_cur_ = dr_rng_.at(s.proposal_number);
      if (use_ahead_) {  // the DR stages' uniforms follow the first one
        acc_cur_ = acc_rng_.at(s.proposal_number);
        (void)acc_cur_.uniform();
      }
    }
  }
  if (st == 1 && dr_ahead_) {
    // The words drawn ahead: the same normals as draw_direction(dr_rng_.at(k)), and the
    // uniform after the first one of the acceptance stream.
    const std::uint64_t k = s.proposal_number;
    const std::size_t lane = static_cast<std::size_t>(k - ahead_k0_);
    ziggurat_normals_from_words(ahead_dr_.data() + lane * static_cast<std::size_t>(ahead_words_), d, *zig_, z_.data(),
                                [&] {
                                  RngCursor c = dr_rng_.at(k);
                                  c.skip_u32(2 * d);
                                  return c;
                                });
    const std::uint32_t* a = ahead_acc_.data() + 4 * lane;
    acc_u2_ = u64_to_uniform(static_cast<std::uint64_t>(a[2]) | (static_cast<std::uint64_t>(a[3]) << 32));
  } else {
    draw_direction(dr_cur_, z_.data());
  }
  const double cs = stage_scale_[st];
  double* ws = w + static_cast<std::size_t>(st + 1) * d;
  for (int i = 0; i < d; ++i) ws[i] = cs * z_[i];
  cur_inside_ = trial_point(ws, y_.data());
  if (!cur_inside_) {
    ++s.out_of_domain;
    count_out_of_domain_trial(false);
  }
  cur_stage_ = st + 1;
  return true;
}

void DramSampler::end_proposal() {
  DramState& s = state_;
  cur_stage_ = 0;
  ++s.proposal_number;
  ++s.proposals_since_update;
  if (s.proposals_since_update >= period_ && s.updates_done < options_.adaptive_update_count) adapt();
}

void DramSampler::step(ChainSink& sink) {
  begin_proposal();
  for (;;) {
    const double lp = cur_inside_ ? evaluate(y_.data()) : kNegInf;
    if (!finish_stage(lp, sink)) break;
  }
  if ((state_.proposal_number & (ChainSink::kTickProposals - 1)) == 0)
    sink.tick(state_.proposal_number, state_.records_written);
}

void DramSampler::merge_pending(bool greedy) {
  DramState& s = state_;
  const int d = d_;
  const auto du = static_cast<std::size_t>(d);
  // The current state's weight not yet merged joins the batch.
  {
    const std::int64_t w = s.weight - s.current_counted;
    if (w > 0) {
      s.pending_points.insert(s.pending_points.end(), s.point.begin(), s.point.end());
      s.pending_weights.push_back(static_cast<double>(w));
      s.pending_new.push_back(s.current_counted == 0 ? 1 : 0);
    }
    s.current_counted = s.weight;
  }
  const std::size_t m = s.pending_weights.size();
  if (m == 0) return;
  // Weighted batch mean and scatter, then Chan, Golub & LeVeque's pairwise update.
  // Plain loops on preallocated buffers: this runs every few dozen steps.
  double* mb = scratch_.data();  // [d]
  std::fill(mb, mb + d, 0.0);
  double wb = 0.0;
  std::int64_t fresh = 0;
  for (std::size_t i = 0; i < m; ++i) {
    const double w = greedy ? static_cast<double>(s.pending_new[i]) : s.pending_weights[i];
    fresh += s.pending_new[i];
    if (w == 0.0) continue;
    wb += w;
    const double* x = s.pending_points.data() + i * du;
    for (int k = 0; k < d; ++k) mb[k] += w * x[k];
  }
  if (wb > 0) {
    for (int k = 0; k < d; ++k) mb[k] /= wb;
    double* c = mb + d;  // [d] centred point
    for (std::size_t i = 0; i < m; ++i) {
      const double w = greedy ? static_cast<double>(s.pending_new[i]) : s.pending_weights[i];
      if (w == 0.0) continue;
      const double* x = s.pending_points.data() + i * du;
      for (int k = 0; k < d; ++k) c[k] = x[k] - mb[k];
      for (int r = 0; r < d; ++r) {
        const double wr = w * c[r];
        double* row = s.m2.data() + static_cast<std::size_t>(r) * du;
        for (int k = 0; k <= r; ++k) row[k] += wr * c[k];
      }
    }
    const double wa = s.cov_weight, wn = wa + wb, f = wa * wb / wn;
    for (int k = 0; k < d; ++k) c[k] = mb[k] - s.mean[k];
    for (int r = 0; r < d; ++r) {
      double* row = s.m2.data() + static_cast<std::size_t>(r) * du;
      for (int k = 0; k <= r; ++k) row[k] += f * c[r] * c[k];
    }
    for (int r = 0; r < d; ++r)  // mirror the lower triangle
      for (int k = r + 1; k < d; ++k)
        s.m2[static_cast<std::size_t>(r) * du + k] = s.m2[static_cast<std::size_t>(k) * du + r];
    for (int k = 0; k < d; ++k) s.mean[k] += (wb / wn) * c[k];
    s.cov_weight = wn;
  }
  s.cov_unique += fresh;
  s.pending_points.clear();
  s.pending_weights.clear();
  s.pending_new.clear();
}

void DramSampler::refresh_proposal_cov() {
  const int d = d_;
  const auto du = static_cast<std::size_t>(d);

  prop_cov_.assign(du * du, 0.0);
  for (int i = 0; i < d; ++i)
    for (int j = 0; j <= i; ++j) {
      double v = 0.0;
      for (int k = 0; k <= j; ++k) v += state_.chol[i * du + k] * state_.chol[j * du + k];
      prop_cov_[i * du + j] = prop_cov_[j * du + i] = v;
    }
  const std::size_t nb = (du + 3) / 4;
  chol_blocks_.assign(nb * du * 4, 0.0);
  for (std::size_t b = 0; b < nb; ++b)
    for (std::size_t j = 0; j < du; ++j)
      for (std::size_t r = 0; r < 4; ++r) {
        const std::size_t i = 4 * b + r;
        if (i < du && j <= i) chol_blocks_[(b * du + j) * 4 + r] = state_.chol[i * du + j];
      }
}

void DramSampler::adapt() {
  DramState& s = state_;
  const int d = d_;
  const auto dd = static_cast<std::size_t>(d) * static_cast<std::size_t>(d);
  merge_pending(s.updates_done < options_.greedy_adaptation_count);
  const double scale_before = s.scale;
  if (s.proposals_since_update > 0) {
    const double r = static_cast<double>(s.accepted_since_update) / static_cast<double>(s.proposals_since_update);
    if (!options_.target_acceptance_rate.empty()) {
      const double lo = options_.target_acceptance_rate.front(), hi = options_.target_acceptance_rate.back();
      if (r < lo || r > hi) s.scale *= std::clamp(std::sqrt(r / (0.5 * (lo + hi))), 0.8, 1.25);
    } else if (r < kStuckRate &&
               static_cast<double>(s.accepted) < kStuckOverall * static_cast<double>(s.proposal_number)) {
      // A chain that accepts (almost) nothing never collects the d + 1 unique states an
      // update needs, and its covariance estimate would be degenerate: halve the scale.
      s.scale = std::max(0.5 * s.scale, kMinScaleFraction * scale0_);
    } else if (r > kRecoverRate && s.scale < scale0_) {
      s.scale = std::min(scale0_, 2.0 * s.scale);  // undo such halvings once it accepts freely
    }
  }
  s.accepted_since_update = 0;
  s.proposals_since_update = 0;
  if (s.cov_unique < d + 1 || !(s.cov_weight > 0)) {
    ++s.updates_deferred;
    if (s.scale != scale_before) {
      // No covariance estimate yet: rescale the current proposal itself.
      const double ratio = s.scale / scale_before;
      for (double& v : s.chol) v *= ratio;
      refresh_proposal_cov();
      // Hellinger distance of N(0, C) and N(0, ratio^2 C).
      const double h2 = 1.0 - std::exp(0.5 * d * std::log(2.0 * ratio / (1.0 + ratio * ratio)));
      s.record_adapt_measure = std::max(s.record_adapt_measure, std::sqrt(std::max(0.0, h2)));
    }
    return;
  }
  ++s.updates_done;
  double* cov = scratch_.data() + 2 * static_cast<std::size_t>(d);  // [d, d]
  double* lnew = cov + dd;                                          // [d, d]
  // Shrinkage towards the start proposal's covariance guess while few unique states are
  // known: with n ~ d states the sample covariance's smallest eigenvalues are near 0
  // (Marchenko-Pastur), and a proposal built on it stops moving in those directions.
  // Weight of the guess: kPriorWeight d^2 steps.
  const double n0 = kPriorWeight * static_cast<double>(d) * static_cast<double>(d);
  const double lambda = n0 / (s.cov_weight + n0);
  const double f = s.scale * s.scale * (1.0 - lambda) / s.cov_weight;
  const double g = s.scale * s.scale * lambda;
  for (std::size_t i = 0; i < dd; ++i) cov[i] = f * s.m2[i] + g * prior_cov_[i];
  if (!cholesky(cov, d, lnew)) {
    ++s.chol_failures;
    if (!chol_warned_) {
      chol_warned_ = true;
      HERD_LOG_WARN(
          "dram: chain {}: the adapted proposal covariance at proposal {} is not positive definite "
          "(numerically); the previous proposal is kept (further failures are counted silently; "
          "the total is in the result)",
          s.chain_id, s.proposal_number);
    }
    return;
  }
  // Adaptation measure: Hellinger distance between the old and new proposal Gaussians,
  // H^2 = 1 - |C0|^(1/4) |C1|^(1/4) / |(C0 + C1)/2|^(1/2).
  double* mid = lnew + dd;  // [d, d]
  double* lmid = mid + dd;  // [d, d]
  for (std::size_t i = 0; i < dd; ++i) mid[i] = 0.5 * (prop_cov_[i] + cov[i]);
  double h = 1.0;
  if (cholesky(mid, d, lmid)) {
    const double lbc = 0.25 * batched::log_det_lower(s.chol.data(), d) + 0.25 * batched::log_det_lower(lnew, d) -
                       0.5 * batched::log_det_lower(lmid, d);
    h = std::sqrt(std::max(0.0, 1.0 - std::exp(std::min(0.0, lbc))));
  }
  s.record_adapt_measure = std::max(s.record_adapt_measure, h);
  std::copy(lnew, lnew + dd, s.chol.begin());
  // The cached proposal covariance is recomputed from the factor (not copied from `cov`), so
  // that it is a function of the state alone and `set_state` restores it bit for bit.
  refresh_proposal_cov();
}

DramResult detail::dram_result_counters(const DramState& s) {
  DramResult r;
  r.chain_id = s.chain_id;
  r.proposals = static_cast<std::int64_t>(s.proposal_number);
  r.chain_size = s.records_written;
  r.acceptance_rate = r.proposals > 0 ? static_cast<double>(s.accepted) / static_cast<double>(r.proposals) : 0.0;
  r.stage_accepted = s.stage_accepted;
  r.evaluations = s.evaluations;
  r.nan_count = s.nan_count;
  r.out_of_domain = s.out_of_domain;
  r.adaptive_updates = s.updates_done;
  r.adaptive_updates_deferred = s.updates_deferred;
  r.chol_failures = s.chol_failures;
  return r;
}

DramResult DramSampler::finish_result(double seconds) const {
  const DramState& s = state_;
  const int d = d_;
  DramResult r = detail::dram_result_counters(s);
  // Likelihood rule: first state with log density >= best - log(n); it is a prefix maximum.
  const double best = s.best_log_density.back();
  const double thr = best - std::log(static_cast<double>(std::max<std::int64_t>(1, s.records_written)));
  for (std::size_t i = 0; i < s.best_index.size(); ++i)
    if (s.best_log_density[i] >= thr) {
      r.burnin_likelihood = s.best_index[i];
      break;
    }
  r.burnin_adaptation = s.last_index_over_measure + 1;
  r.burnin = std::max(r.burnin_likelihood, r.burnin_adaptation);
  r.proposal_cov.assign(static_cast<std::size_t>(d) * d, 0.0);
  for (int i = 0; i < d; ++i)
    for (int j = 0; j < d; ++j) {
      double v = 0.0;
      for (int k = 0; k <= std::min(i, j); ++k)
        v += s.chol[static_cast<std::size_t>(i) * d + k] * s.chol[static_cast<std::size_t>(j) * d + k];
      r.proposal_cov[static_cast<std::size_t>(i) * d + j] = v;
    }
  if (s.cov_weight > 0) {
    r.adapted_cov.resize(static_cast<std::size_t>(d) * d);
    for (std::size_t i = 0; i < r.adapted_cov.size(); ++i) r.adapted_cov[i] = s.m2[i] / s.cov_weight;
  }
  r.seconds = seconds;
  return r;
}

bool DramSampler::done() const {
  const auto max_prop = static_cast<std::uint64_t>(options_.max_proposals);
  return state_.records_written + 1 >= options_.chain_size || (max_prop != 0 && state_.proposal_number >= max_prop);
}

DramResult DramSampler::run(ChainSink& sink) {
  Timer timer;
  sink.begin(state_.chain_id, d_);
  try {
    while (!done()) step(sink);
  } catch (...) {
    // Flush what was sampled (the current state with its weight so far), then report.
    cur_stage_ = 0;
    try {
      write_current(sink);
      sink.flush();
    } catch (...) {
    }
    throw;
  }
  write_current(sink);
  sink.flush();
  return finish_result(timer.seconds());
}

bool DramSampler::finished() const {
  const auto max_prop = static_cast<std::uint64_t>(options_.max_proposals);
  return state_.records_written + 1 >= options_.chain_size || (max_prop != 0 && state_.proposal_number >= max_prop);
}

DramResult DramSampler::finish(ChainSink& sink, double seconds) {
  write_current(sink);
  sink.flush();
  return finish_result(seconds);
}

std::vector<DramResult> DramSampler::run_chains(const std::vector<ChainSink*>& sinks, int num_threads) {
  const std::size_t n = sinks.size();
  std::vector<DramResult> results(n);
  for (std::size_t i = 0; i < n; ++i) HERD_REQUIRE(sinks[i] != nullptr, "dram: run_chains: sinks[{}] is null", i);
  auto run_one = [&](std::size_t i) {
    DramOptions o = options_;
    o.chain_id = options_.chain_id + static_cast<std::uint32_t>(i);
    DramSampler chain(std::move(o), f_);
    results[i] = chain.run(*sinks[i]);
  };
  if (batch_) return run_chains_batched(sinks);
  std::size_t threads =
      num_threads > 0 ? static_cast<std::size_t>(num_threads) : std::max(1u, std::thread::hardware_concurrency());
  threads = std::min(threads, n);
  if (!options_.log_density_thread_safe || threads <= 1) {
    for (std::size_t i = 0; i < n; ++i) run_one(i);
    return results;
  }
  // The calling thread works too, so a pool of threads - 1 workers gives `threads` in all.
  ThreadPool pool(threads - 1);
  pool.parallel_for_each(0, n, run_one, 1);
  return results;
}

std::vector<DramResult> DramSampler::run_chains_batched(const std::vector<ChainSink*>& sinks) {
  Timer timer;
  const std::size_t n = sinks.size();
  const int d = d_;
  std::vector<std::unique_ptr<DramSampler>> chains;
  chains.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    DramOptions o = options_;
    o.chain_id = options_.chain_id + static_cast<std::uint32_t>(i);
    chains.push_back(std::make_unique<DramSampler>(std::move(o), batch_));
    sinks[i]->begin(chains[i]->state_.chain_id, d);
  }
  std::vector<std::size_t> waiting;
  std::vector<double> x, lp;
  try {
    for (;;) {
      // Advance every chain to its next trial that needs the log density (trials outside
      // the domain are decided on the spot).
      waiting.clear();
      for (std::size_t i = 0; i < n; ++i) {
        DramSampler& c = *chains[i];
        for (;;) {
          if (c.cur_stage_ == 0) {
            if (c.done()) break;
            c.begin_proposal();
          }
          if (c.cur_inside_) {
            waiting.push_back(i);
            break;
          }
          c.finish_stage(kNegInf, *sinks[i]);
        }
      }
      if (waiting.empty()) break;
      const int m = static_cast<int>(waiting.size());
      x.resize(static_cast<std::size_t>(m) * d);
      lp.assign(static_cast<std::size_t>(m), 0.0);
      for (int j = 0; j < m; ++j)
        std::copy(chains[waiting[j]]->y_.begin(), chains[waiting[j]]->y_.end(),
                  x.begin() + static_cast<std::ptrdiff_t>(j) * d);
      try {
        batch_(x.data(), m, d, lp.data());
      } catch (const std::exception& e) {
        throw Error(fmt::format("dram: the batched log density threw ({} chains, {} points): {}", n, m, e.what()));
      } catch (...) {
        throw Error(fmt::format("dram: the batched log density threw an unknown exception ({} points)", m));
      }
      for (int j = 0; j < m; ++j) {
        DramSampler& c = *chains[waiting[j]];
        c.finish_stage(c.check_value(lp[j]), *sinks[waiting[j]]);
      }
    }
  } catch (...) {
    for (std::size_t i = 0; i < n; ++i) {
      try {
        chains[i]->cur_stage_ = 0;
        chains[i]->write_current(*sinks[i]);
        sinks[i]->flush();
      } catch (...) {
      }
    }
    throw;
  }
  std::vector<DramResult> results(n);
  const double secs = timer.seconds();
  for (std::size_t i = 0; i < n; ++i) {
    chains[i]->write_current(*sinks[i]);
    sinks[i]->flush();
    results[i] = chains[i]->finish_result(secs);
  }
  return results;
}

}  // namespace herd::mcmc
