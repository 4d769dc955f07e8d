#pragma once
/// @file dram.hpp
/// The DRAM kernel: delayed-rejection adaptive Metropolis in the style of ParaMonte's
/// ParaDRAM (Shahmoradi & Bagheri 2020), with ParaDRAM's known flaws fixed.
///
/// - Random-walk Metropolis from a start point, Gaussian or uniform-in-ellipsoid proposal.
/// - Adaptive covariance (Haario, Saksman & Tamminen 2001) on ParaDRAM's schedule: every
///   `adaptive_update_period` proposals, up to `adaptive_update_count` times, the weighted
///   covariance of the states visited since the last update is merged into the running
///   covariance (Chan et al.'s pairwise update); the proposal covariance is that, shrunk
///   towards the start proposal's guess C0 / scale_factor^2 with the weight of 3 d^2 steps
///   (W C + 3 d^2 C0 / s0^2) / (W + 3 d^2) (so that an estimate from about d autocorrelated
///   states is not degenerate), times scale^2, Cholesky-factorised. Without a target
///   acceptance rate, an update period whose acceptance rate is below 1%, in a chain whose
///   acceptance rate so far is below 5%, halves the scale (a chain that accepts nothing
///   cannot collect states to adapt to; while no estimate
///   exists the current factor itself is halved), and one above 50% doubles it back, never
///   above the scale factor. A factor that fails, or is numerically singular
///   (a conditional variance below 1e-12 of the marginal one), is not used: the previous
///   proposal stays, the failure is counted and the first one logged. An update is
///   deferred (not counted) while the running estimate holds fewer than d + 1 unique
///   states, whose covariance is singular by construction. The adaptation measure of an
///   update is the Hellinger distance between the old and new proposal Gaussians.
/// - Delayed rejection (Tierney & Mira 1999; Mira 2001; Haario et al. 2006) with any
///   number of stages and per-stage scales and the *full* Hastings acceptance
///   probability, so detailed balance holds for any scales (ParaDRAM's simplified rule,
///   available as `DrRule::kParaDramSimplified` for comparison, does not).
/// - A domain box: a proposal outside it is a rejected step, never redrawn.
/// - Random numbers addressed by (seed, global chain id, purpose, proposal number)
///   (DESIGN.md §4), so a chain is the same whatever the threads or ranks that run it.
/// - The compact chain is streamed to a `ChainSink`.
///
/// Random-number layout of proposal number k of chain c (never change; it is part of
/// the reproducibility contract): stage-1 normals (ziggurat, then one uniform for the
/// radius of the uniform proposal) from `RngStream(seed, c, kProposal).at(k)`; the
/// acceptance uniforms of all stages, in stage order, from `(seed, c, kAcceptance).at(k)`;
/// the normals (and radius uniforms) of stages 2.. in stage order from
/// `(seed, c, kDelayedRejection).at(k)`.

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "herd/core/rng.hpp"
#include "herd/core/ziggurat.hpp"
#include "herd/mcmc/chain_sink.hpp"

namespace herd::mcmc {

/// Log density of one point: `x` has `d` values; returns the natural log of the
/// (unnormalised) target density. NaN counts as -inf (with a counted warning); +inf or an
/// exception stops the run.
using PointLogDensity = std::function<double(const double* x, int d)>;
/// Log density of many points: `x` is `[n, d]` row-major (host memory), `out` receives the
/// `[n]` values, as `PointLogDensity` would give them one by one. The one type of the
/// serial sampler's lock-step chains (`DramSampler`) and the batched sampler
/// (batched_dram.hpp).
using BatchedLogDensity = std::function<void(const double* x, int n, int d, double* out)>;

/// Shape of the proposal distribution (ParaDRAM's `proposalModel`).
enum class ProposalKind {
  kNormal,   ///< Gaussian N(x, C), C = L L^T
  kUniform,  ///< uniform in the ellipsoid {x + L u : |u| <= 1}
};

/// Acceptance rule of delayed-rejection stages >= 2.
enum class DrRule {
  kExact,               ///< full Hastings ratio (Mira 2001): detailed balance for any scales
  kParaDramSimplified,  ///< ParaDRAM's rule (ignores the proposal-density ratios); for comparison only
};

/// Options of a DRAM run; plain data, validated by `DramSampler`'s constructor.
/// Defaults follow ParaDRAM where it has one.
struct DramOptions {
  /// Start point `[d]`; its size sets the dimension. Required.
  std::vector<double> start_point;
  /// Number of unique states (compact chain records) to collect (ParaDRAM's chainSize),
  /// the start point included. The run also stops after `max_proposals` proposals if > 0.
  std::int64_t chain_size = 100000;
  std::int64_t max_proposals = 0;
  /// The run's 64-bit seed (Philox key).
  std::uint64_t seed = 1;
  /// Global id of the (first) chain: its RNG stream id. `run_chains` uses chain_id + i.
  std::uint32_t chain_id = 0;

  ProposalKind proposal = ProposalKind::kNormal;
  /// Initial proposal covariance `[d, d]` row-major (used as is, not scaled; ParaDRAM's
  /// specifications give it times scale_factor^2, see `to_dram_options`). Empty:
  /// diagonal with `proposal_start_std`^2 (empty: all ones). Divided by scale_factor^2, it
  /// is also the guess the adapted covariance is shrunk towards.
  std::vector<double> proposal_start_cov;
  std::vector<double> proposal_start_std;

  /// Scale factor of the adapted covariance: a number, "gelman" (2.38/sqrt(d)) or a
  /// product such as "0.5*gelman".
  std::string scale_factor = "gelman";
  /// Proposals between adaptive updates (rejected steps count, DR stages do not);
  /// 0 means 4*d.
  std::int64_t adaptive_update_period = 0;
  /// Maximum number of adaptive updates (0 disables adaptation).
  std::int64_t adaptive_update_count = std::numeric_limits<std::int64_t>::max();
  /// The first this-many updates weigh each unique state once (ParaDRAM's greedy adaptation).
  std::int64_t greedy_adaptation_count = 0;
  /// Desired acceptance rate range [lo, hi] (both in (0, 1], lo <= hi; lo == hi for a
  /// single value); empty: no rescaling. At each update the scale factor is multiplied
  /// by (observed / target)^(1/2), clamped to [0.8, 1.25], when the observed rate since the
  /// previous update is outside the range.
  std::vector<double> target_acceptance_rate;

  /// Number of delayed-rejection stages after the first (0: plain Metropolis).
  int delayed_rejection_count = 0;
  /// Per-stage factors, each multiplying the previous stage's Cholesky factor; size
  /// `delayed_rejection_count`, or 1 (used for every stage), or empty (0.5^(1/d)).
  std::vector<double> delayed_rejection_scale_factors;
  DrRule dr_rule = DrRule::kExact;

  /// Domain box `[d]` each; empty: unbounded. A trial outside is rejected without calling
  /// the log density (a rejected step: the Metropolis-Hastings ratio stays exact, where
  /// ParaDRAM redraws such proposals, a truncated proposal its symmetric ratio ignores).
  std::vector<double> domain_lower;
  std::vector<double> domain_upper;
  /// Ball domain (ParaMonte 2's domain = "ball") inside the box: the ellipsoid
  /// (x - c)^T P (x - c) <= 1 with centre c `[d]` and P = C^-1 `[d, d]` row-major (zero rows
  /// and columns for unbounded directions); both empty: no ball. Trials outside are rejected
  /// as outside the box.
  std::vector<double> domain_ball_center;
  std::vector<double> domain_ball_precision;
  /// ParaDRAM's maxNumDomainCheckToWarn / maxNumDomainCheckToStop: trials in a row (all
  /// stages) that fall outside the domain or whose log density is NaN before a warning
  /// (repeated at every multiple) / before the run stops with herd::Error; 0: never. A trial
  /// inside the domain with a non-NaN log density ends the run of them.
  std::int64_t domain_check_warn = 0;
  std::int64_t domain_check_stop = 0;

  /// Burn-in by adaptation: the burn-in ends after the last state whose adaptation
  /// measure exceeds this (ParaDRAM's burninAdaptationMeasure; 1 disables the rule).
  double burnin_adaptation_measure = 1.0;

  /// The log density may be called from several threads at once (`run_chains`).
  bool log_density_thread_safe = false;
};

/// The complete state of one chain, enough for an exact restart (checkpoints, later).
/// Plain data: every field is a scalar or a vector of scalars.
struct DramState {
  int ndim = 0;                       ///< dimension d
  std::uint32_t chain_id = 0;         ///< global chain id (RNG stream id)
  std::uint64_t proposal_number = 0;  ///< proposals made so far (= next proposal's number)

  // Current state and its compact record in progress.
  std::vector<double> point;          ///< current state `[d]`
  double log_density = 0.0;           ///< log density at `point`
  std::int64_t weight = 1;            ///< steps spent in `point` so far
  std::uint64_t record_step = 0;      ///< `ChainRecord::step` of the current state
  std::int32_t record_stage = 0;      ///< `ChainRecord::dr_stage` of the current state
  double record_accept_prob = 1.0;    ///< `ChainRecord::accept_prob` of the current state
  double record_adapt_measure = 0.0;  ///< `ChainRecord::adapt_measure` so far
  std::int64_t records_written = 0;   ///< compact records already handed to the sink

  // Adaptation.
  double scale = 1.0;                       ///< current scale factor (after acceptance-rate rescaling)
  std::vector<double> chol;                 ///< stage-1 proposal factor L, `[d, d]` row-major, lower
  std::vector<double> mean;                 ///< running weighted mean `[d]`
  std::vector<double> m2;                   ///< running sum w (x - mean)(x - mean)^T `[d, d]`
  double cov_weight = 0.0;                  ///< total weight in the running estimate
  std::int64_t cov_unique = 0;              ///< unique states in the running estimate
  std::vector<double> pending_points;       ///< states left since the last update `[m, d]`
  std::vector<double> pending_weights;      ///< their weights not yet merged
  std::vector<std::uint8_t> pending_new;    ///< 1 when the state was never merged before
  std::int64_t current_counted = 0;         ///< weight of the current state already merged
  std::int64_t updates_done = 0;            ///< adaptive updates attempted (failures included)
  std::int64_t updates_deferred = 0;        ///< skipped: fewer than d + 1 unique states so far
  std::int64_t chol_failures = 0;           ///< updates whose factorisation failed (previous proposal kept)
  std::int64_t accepted_since_update = 0;   ///< for acceptance-rate targeting
  std::int64_t proposals_since_update = 0;  ///< proposals since the last update (schedule)

  // Counters.
  std::int64_t accepted = 0;                 ///< accepted proposals (all stages)
  std::vector<std::int64_t> stage_accepted;  ///< accepted per stage (index 0 = stage 1)
  std::int64_t nan_count = 0;                ///< NaN log densities treated as -inf
  std::int64_t out_of_domain = 0;            ///< trials outside the domain (all stages)
  std::int64_t evaluations = 0;              ///< log-density calls

  // Burn-in trackers: prefix-maximum records (compact index, log density) and the last
  // compact index whose adaptation measure exceeded the threshold (-1: none).
  std::vector<std::int64_t> best_index;       ///< compact indices of prefix maxima
  std::vector<double> best_log_density;       ///< their log densities (increasing)
  std::int64_t last_index_over_measure = -1;  ///< see above
};

/// Summary of a finished run of one chain.
struct DramResult {
  std::uint32_t chain_id = 0;                  ///< global chain id
  std::int64_t proposals = 0;                  ///< steps (proposal numbers used)
  std::int64_t chain_size = 0;                 ///< unique states written (compact records)
  double acceptance_rate = 0.0;                ///< accepted / proposals
  std::vector<std::int64_t> stage_accepted;    ///< accepted proposals per stage (index 0 = stage 1)
  std::int64_t evaluations = 0;                ///< log-density evaluations (start point included)
  std::int64_t nan_count = 0;                  ///< NaN log densities counted as -inf
  std::int64_t out_of_domain = 0;              ///< trials outside the domain, box or ball (not evaluated)
  std::int64_t adaptive_updates = 0;           ///< adaptive updates attempted
  std::int64_t adaptive_updates_deferred = 0;  ///< updates skipped for want of d + 1 unique states
  std::int64_t chol_failures = 0;              ///< updates that kept the previous proposal
  /// Burn-in: compact index (records before it are burn-in) by the likelihood rule
  /// (first state within log(n) of the best log density, n = chain_size), by the
  /// adaptation-measure rule, and the later of the two.
  std::int64_t burnin_likelihood = 0;
  std::int64_t burnin_adaptation = 0;
  std::int64_t burnin = 0;
  std::vector<double> proposal_cov;  ///< final stage-1 proposal covariance `[d, d]`
  std::vector<double> adapted_cov;   ///< running (weighted) covariance `[d, d]`; empty if never adapted
  double seconds = 0.0;              ///< wall time of the run
};

/// A DRAM sampler: options, a log density, and the kernel state of one chain.
///
/// Thread-safety: a sampler object is used by one thread. `run_chains` runs independent
/// chains on a thread pool when the log density is declared thread-safe, otherwise on the
/// calling thread; the results are identical either way.
class DramSampler {
 public:
  /// @throws herd::InputError when the options are inconsistent (message names the field).
  DramSampler(DramOptions options, PointLogDensity log_density);
  /// Batched log density. `run` and `step` call it with n = 1; `run_chains` advances all
  /// its chains in lockstep and evaluates their pending trials (stage-1 or DR) together,
  /// one call per round with n <= number of chains, on the calling thread.
  DramSampler(DramOptions options, BatchedLogDensity log_density);

  /// Runs chain `options.chain_id` from its start point (or from the state given to
  /// `set_state`) until `chain_size` records or `max_proposals`, streaming the compact
  /// chain to `sink` (which gets `begin`, the records, and `flush`).
  /// @throws herd::NumericalError when the log density is +inf; herd::Error wrapping the
  ///   message of an exception from the log density, or after `domain_check_stop` trials in
  ///   a row outside the domain or with a NaN log density. All after flushing what was sampled.
  DramResult run(ChainSink& sink);

  /// Runs `sinks.size()` chains with global ids `chain_id + i`, each from the start point.
  /// With a point log density: on up to `num_threads` threads (0: hardware concurrency)
  /// when it is declared thread-safe, else one chain after another. With a batched log
  /// density: in lockstep on the calling thread, one batched call per round. Every chain
  /// is identical to a single-chain `run` of its id in all cases. Results in chain order.
  /// @throws as `run` (the first error), after flushing every chain's sink.
  std::vector<DramResult> run_chains(const std::vector<ChainSink*>& sinks, int num_threads = 0);

  /// Makes one proposal (all its stages) from the current state: the kernel step.
  /// Records that become final are written to `sink`.
  void step(ChainSink& sink);

  /// True when the run's stopping rule holds: `chain_size` records (the current state
  /// counted) or `max_proposals` proposals made. For drivers that call `step` themselves.
  bool finished() const;

  /// Ends a run driven by `step` (checkpointed, fork-join): writes the current state to
  /// `sink`, flushes it, and returns the summary with `seconds` as its wall time.
  /// @throws herd::IoError from the sink.
  DramResult finish(ChainSink& sink, double seconds);

  /// Trial point of `stage` (1-based) of proposal number `k` from `point`, with the
  /// stage-1 factor `chol` (`[d, d]` row-major lower): what the fork-join model needs
  /// to propose on any rank. Writes `[d]` values to `out`. Pure; thread-safe.
  void propose(std::uint64_t k, int stage, const double* point, const double* chol, double* out) const;

  /// The acceptance uniform in (0, 1) of `stage` (1-based) of proposal number `k`: stage
  /// s of proposal k is accepted iff this is below its acceptance probability. With
  /// `propose`, all a fork-join scheduler needs to evaluate proposal k on any rank and
  /// decide it exactly as `step` would. Pure; thread-safe.
  double acceptance_uniform(std::uint64_t k, int stage) const;

  /// The kernel state (for checkpoints); `set_state` restores one.
  const DramState& state() const { return state_; }
  /// @throws herd::InputError when the state's dimension does not match.
  void set_state(DramState s);
  /// Re-initialises the state from the options (start point, initial proposal).
  void reset();

  /// The options (validated).
  const DramOptions& options() const { return options_; }
  /// Dimension d.
  int ndim() const { return d_; }
  /// The resolved scale factor (e.g. 2.38/sqrt(d) for "gelman").
  double scale_factor() const { return scale0_; }
  /// Cumulative scale of each stage relative to stage 1 (`[1 + delayed_rejection_count]`).
  const std::vector<double>& stage_scales() const { return stage_scale_; }

  /// Parses a scale-factor expression ("gelman", "0.5*gelman", "1.3") for dimension `d`.
  /// @throws herd::InputError
  static double parse_scale_factor(const std::string& s, int d);

 private:
  void validate();
  double evaluate(const double* y);
  double check_value(double v);
  bool trial_point(const double* w, double* y) const;
  bool inside_ball(const double* y) const;
  void count_out_of_domain_trial(bool nan);
  // The step as phases, so that many chains can share batched evaluations: begin a
  // proposal (stage-1 trial in y_), then feed the log density of each trial to
  // finish_stage, which returns true while a further (DR) trial awaits evaluation.
  void begin_proposal();
  bool finish_stage(double lp, ChainSink& sink);
  void end_proposal();
  bool done() const;
  std::vector<DramResult> run_chains_batched(const std::vector<ChainSink*>& sinks);
  void accept(const double* y, double lp, int stage, double alpha, ChainSink& sink);
  void write_current(ChainSink& sink);
  void adapt();
  void refresh_proposal_cov();
  void merge_pending(bool greedy);
  DramResult finish_result(double seconds) const;
  void draw_direction(RngCursor& c, double* z) const;

  DramOptions options_;
  PointLogDensity f_;
  int d_ = 0;
  double scale0_ = 1.0;
  std::int64_t period_ = 1;
  std::vector<double> stage_scale_;
  std::vector<double> lower_, upper_;
  bool has_box_ = false;
  bool has_ball_ = false;
  // Trials in a row outside the domain or with a NaN log density, and how many of them were
  // NaN (the domain checks; not in the checkpoint: a resumed run counts afresh).
  std::int64_t bad_trials_in_row_ = 0, nan_trials_in_row_ = 0;
  DramState state_;
  RngStream prop_rng_, acc_rng_, dr_rng_;
  BatchedLogDensity batch_;  // set when constructed with a batched log density
  RngCursor acc_cur_{0, 0, 0, 0, 0}, dr_cur_{0, 0, 0, 0, 0};
  int cur_stage_ = 0;  // stage of the trial in y_ (0: no proposal in progress)
  bool cur_inside_ = true;
  // Words of the next kAhead proposals (stage-1 normals' first attempts and the first
  // acceptance block), drawn together across indices with SIMD (`philox_blocks_by_index`);
  // the chain is bit-identical to drawing them one proposal at a time.
  static constexpr int kAhead = 16;
  bool use_ahead_ = false;
  bool ahead_valid_ = false;
  std::uint64_t ahead_k0_ = 0;
  int ahead_words_ = 0;  // words per proposal (2d rounded up to whole blocks)
  std::vector<std::uint32_t> ahead_prop_, ahead_acc_;
  double acc_u1_ = 0.5;  // stage-1 acceptance uniform of the current proposal (ahead path)
  // With exactly one delayed-rejection stage, its normals' first-attempt words are drawn ahead
  // too (ahead_dr_), and its acceptance uniform is words 2, 3 of the acceptance block.
  bool dr_ahead_ = false;
  std::vector<std::uint32_t> ahead_dr_;
  double acc_u2_ = 0.5;  // stage-2 acceptance uniform of the current proposal (dr_ahead_ path)
  // The stage-1 factor L in blocks of 4 rows, column by column (block b, column j: rows 4b..4b+3
  // of column j, zero above the diagonal and past row d), rebuilt with prop_cov_: trial points
  // y = x + L w by 4-row vectors with each row's sum in the order of apply_factor.
  std::vector<double> chol_blocks_;
  void refill_ahead(std::uint64_t k0);
  const ZigguratTables* zig_ = nullptr;
  bool nan_warned_ = false, chol_warned_ = false;
  // Scratch (kept to avoid allocation in the hot loop).
  std::vector<double> z_, y_, wpath_, lpath_, scratch_;
  std::vector<double> prop_cov_;                // current stage-1 proposal covariance L L^T, [d, d]
  std::vector<double> prior_cov_;               // start proposal covariance / scale_factor^2, [d, d]
  std::vector<double> start_cov_, start_chol_;  // start proposal C0 and its factor L0, [d, d]
};

/// Log of the delayed-rejection acceptance probability of the last point of a path
/// (Mira 2001), for proposals centred at the path's first point.
///
/// The path is x = p_0, p_1, ..., p_m (m >= 1 stages); `w` holds the points in whitened
/// coordinates (`[m + 1, d]` row-major; the stage-1 factor L maps them back: p = x + L w,
/// so w_0 = 0), `lp` their log densities (-inf allowed except lp[0]), `scale` the stage
/// scales c_1 = 1, c_2, ... (the stage-j proposal is centred at the path's start with
/// factor c_j L). Returns log alpha_m(p_0, ..., p_m) <= 0, -inf when the move is impossible.
/// Cost O(m^3 + m^2 d) with memoisation of the sub-paths. Thread-safe (pure). The exact
/// rule is `batched::DrRecursion` (batched_dram_kernel.hpp), the one `HERD_HOST_DEVICE`
/// implementation the batched kernel runs too.
double dr_log_acceptance(int m, int d, const double* w, const double* lp, const double* scale, ProposalKind kind,
                         DrRule rule = DrRule::kExact);

}  // namespace herd::mcmc
