#pragma once
/// @file batched_dram.hpp
/// Batched DRAM: M chains in lock-step, struct-of-arrays state `[M, d]` row-major, each
/// chain with its own state and its own RNG streams keyed by its *global* chain id, a
/// Gaussian stage-1 proposal, delayed-rejection stages with the full Hastings rule, and
/// adaptive Metropolis (Haario, Saksman & Tamminen 2001) per chain or pooled across chains
/// during a warm-up, then frozen (docs/batched.md).
///
/// Validity: the warm-up is adaptive (pooled adaptation even couples the chains through
/// the shared proposal), and its draws are discarded. From the end of the warm-up on, every
/// chain's proposal factor L is fixed, so each chain is a time-homogeneous
/// Metropolis-Hastings chain (delayed rejection with the full Hastings rule is reversible
/// with respect to the target for any fixed proposals; Tierney & Mira 1999, Mira 2001),
/// started from wherever the warm-up left it: its draws are ordinary MCMC draws of the
/// target, and chains are independent given the frozen L (their random numbers come from
/// disjoint Philox streams).
///
/// The per-chain math lives in batched_dram_kernel.hpp (`HERD_HOST_DEVICE`), shared by the
/// host path (a loop over chains on the thread pool; the reference) and the CUDA path
/// (herd/mcmc/cuda/batched_dram.cuh, launched only when a device is present). With the
/// same proposal factor, a host-path chain is bit-identical to `DramSampler`'s chain of the
/// same global chain id (Gaussian proposal, exact DR rule).
///
/// Thinned draws (every `thin` proposals after the warm-up) are handed to a
/// `BatchedDrawSink` in blocks of `block_draws` draws per chain, `[M, n, d]`.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "herd/core/communicator.hpp"
#include "herd/mcmc/batched_dram_kernel.hpp"
#include "herd/mcmc/dram.hpp"

namespace herd::mcmc {

class BatchedCheckpointer;

/// How the proposal covariance adapts during the warm-up (frozen afterwards in every mode).
enum class BatchedAdaptation {
  kNone,      ///< the initial proposal throughout
  kPerChain,  ///< each chain adapts its own factor from its own history
  kPooled,    ///< one factor for all chains, from all chains' histories
};

/// Where the chains run.
enum class BatchedDevice {
  kHost,  ///< the host path (thread pool); always available
  kCuda,  ///< one CUDA device; needs a CUDA build, a device, and a device-callable target
};

/// Options of a batched run. Defaults follow the serial kernel where it has one.
struct BatchedDramOptions {
  /// Dimension d (>= 1).
  int ndim = 0;
  /// Number of chains M on this process (>= 1).
  std::int64_t num_chains = 1;
  /// Global id of this process's first chain; chain i has id first_chain_id + i (its RNG
  /// stream id), so a chain is the same whatever the process or device that runs it.
  std::uint32_t first_chain_id = 0;
  /// The run's 64-bit seed (Philox key).
  std::uint64_t seed = 1;
  /// Start points: `[d]` (all chains) or `[M, d]` row-major. Required.
  std::vector<double> start_points;
  /// Initial proposal covariance `[d, d]` row-major (used as is, no scale factor: herd-sample
  /// passes its proposal_std/proposal_cov times scale_factor^2); empty: diagonal with
  /// `proposal_start_std`^2 (empty: all ones).
  std::vector<double> proposal_start_cov;
  std::vector<double> proposal_start_std;
  /// Scale factor of the adapted covariance ("gelman" = 2.38/sqrt(d), a number, or a product).
  std::string scale_factor = "gelman";
  /// Proposals per chain in the warm-up (adapting, not recorded).
  std::int64_t warmup = 1000;
  /// Proposals per chain after the warm-up (recorded every `thin`-th).
  std::int64_t steps = 1000;
  /// Thinning (>= 1): a draw is recorded after every thin-th post-warm-up proposal.
  std::int64_t thin = 1;
  BatchedAdaptation adaptation = BatchedAdaptation::kPooled;
  /// Proposals between adaptive updates during the warm-up (0: 4*d).
  std::int64_t adaptive_update_period = 0;
  /// Delayed-rejection stages after the first (0 .. batched::kMaxStages - 1).
  int delayed_rejection_count = 1;
  /// Per-stage factors, each multiplying the previous stage's factor: size
  /// `delayed_rejection_count`, 1 (all stages) or empty (0.5^(1/d)).
  std::vector<double> delayed_rejection_scale_factors;
  /// Domain box `[d]` each; empty: unbounded. A trial outside is a rejected stage.
  std::vector<double> domain_lower;
  std::vector<double> domain_upper;
  BatchedDevice device = BatchedDevice::kHost;
  /// Host threads (0: hardware concurrency).
  int num_threads = 0;
  /// Draws per chain buffered before they are handed to the sink (>= 1).
  std::int64_t block_draws = 256;
  /// Pooled adaptation over the chains of every rank of this communicator (not owned; null:
  /// this process's chains only). The ranks' chain ids must form one contiguous range. The
  /// warm-up statistics are summed by a fixed pairwise tree over global chain ids
  /// (`detail::pooled_tree_plan`), so the factor, and every chain, is bit-identical for every
  /// layout of the same chains over ranks (1 x 256 == 2 x 128 == 4 x 64). With it, the
  /// engine's constructor and every adaptive update are collective (all ranks, same
  /// warm-up schedule); the shared reference point is rank 0's first start point.
  Communicator* communicator = nullptr;
  /// Checkpoints and resume (not owned; null: none); see `BatchedCheckpointer`.
  BatchedCheckpointer* checkpointer = nullptr;
  /// Progress (may be empty): called on the calling thread after every warm-up segment and
  /// every block of draws with the proposals per chain made so far (of warmup + steps) and
  /// the draws per chain recorded so far, and after the proposals that follow the last draw
  /// when steps is not a multiple of thin (the last call reports warmup + steps); a resumed
  /// run starts at its checkpoint. Does not
  /// change what is computed.
  std::function<void(std::uint64_t proposals, std::int64_t draws)> progress;
};

/// This process's part of a batched run's state at a segment boundary: what a checkpoint
/// holds and a resumed run starts from. The random numbers need no state: proposal k of a
/// chain draws from counters (seed, global chain id, purpose, k), so `next_proposal` is the
/// RNG position. Taken only where the warm-up statistics are empty (after an adaptive
/// update, or after the warm-up), so they are not part of it.
struct BatchedSnapshot {
  std::uint64_t next_proposal = 0;  ///< proposals done by every chain
  std::int64_t draws_done = 0;      ///< thinned draws per chain already handed to the sink
  double seconds = 0.0;             ///< wall time of the run so far (every session)
  std::int64_t adaptive_updates = 0, chol_failures = 0;
  std::vector<double> x;                      ///< states `[M, d]`
  std::vector<double> lp;                     ///< their log densities `[M]`
  std::vector<std::int64_t> accepted;         ///< accepted per stage `[M, stages]`
  std::vector<std::int64_t> accepted_warmup;  ///< `accepted` at the end of the warm-up (empty before it)
  std::vector<std::int64_t> out_of_domain;    ///< `[M]`
  std::vector<std::int64_t> nan_count;        ///< `[M]`
  /// Proposal factor(s): `[d, d]` (pooled, none) or `[M, d, d]` (per chain).
  std::vector<double> chol;
  /// Running adaptation estimates and the statistics' reference point: pooled `[1]`, `[d]`,
  /// `[d, d]`, `[d]`; per chain `[M]`, `[M, d]`, `[M, d, d]`, `[M, d]`; empty without adaptation.
  std::vector<double> run_n, run_mean, run_m2, ad_ref;
  /// The current states' records (`batched::ChainArrays`): proposals before each state
  /// became current `[M]`, the stage and acceptance probability that accepted it `[M]`, and
  /// its adaptation measure (`[M]`; empty without adaptation).
  std::vector<std::int64_t> state_step;
  std::vector<std::uint8_t> state_stage;
  std::vector<double> state_alpha, adapt_measure;
};

/// Checkpoints of a batched run (herd-sample's restart record). The engine calls
/// `resume_state` once when it is built, then `due` at every segment boundary where a
/// checkpoint may be taken (after each adaptive update, after each block of draws has been
/// handed to the sink), and `save` when `due` said yes. With several ranks `due` and `save`
/// are collective (every rank reaches the same boundaries in the same order) and `due` must
/// give the same answer on every rank. Called on the thread that runs the sampler.
class BatchedCheckpointer {
 public:
  virtual ~BatchedCheckpointer() = default;
  /// The state to resume from (this process's chains; sizes as for this run), or null.
  virtual const BatchedSnapshot* resume_state() = 0;
  /// Whether to checkpoint now, after `proposals` proposals per chain.
  virtual bool due(std::uint64_t proposals) = 0;
  /// Saves the state; every draw before `s.draws_done` was handed to the sink before.
  virtual void save(const BatchedSnapshot& s) = 0;
};

/// The per-draw statistics of a block of recorded draws, `[M, n]` each (chain i's draw t at
/// i n + t), with the serial run's meaning (paradram_run.hpp, `sample_stats` and
/// `chain_compact`), a recorded draw standing for the `thin` proposals since the previous one
/// (since the end of the warm-up for the first):
struct BatchedDrawStats {
  /// 1 when the recorded state was accepted at one of those proposals (with thin = 1: the
  /// proposal was accepted), else 0.
  const std::uint8_t* accepted = nullptr;
  /// The stage that accepted the recorded state: 1 first stage, 2.. delayed-rejection
  /// stages, 0 the start point (the chain has accepted nothing yet).
  const std::uint8_t* dr_stage = nullptr;
  /// The acceptance probability with which the recorded state was accepted (1: start point).
  const double* acceptance_probability = nullptr;
  /// The largest Hellinger distance between the proposals before and after an adaptive
  /// update made while the recorded state was current (0 for states accepted after the
  /// warm-up, and without adaptation): with pooled adaptation the shared proposal's change,
  /// per chain the chain's own.
  const double* adaptation_measure = nullptr;
};

/// Receives the thinned draws of a batched run. Called from the thread that runs the
/// sampler (one at a time).
class BatchedDrawSink {
 public:
  virtual ~BatchedDrawSink() = default;
  /// Before any draws: M chains with global ids first_chain_id.., dimension d, and the
  /// number of draws per chain that will follow.
  virtual void begin(std::int64_t num_chains, std::uint32_t first_chain_id, int ndim, std::int64_t draws_per_chain) = 0;
  /// Draws `first_draw .. first_draw + n` of every chain: `x` `[M, n, d]`, `lp` `[M, n]`.
  virtual void write_block(std::int64_t first_draw, std::int64_t n, const double* x, const double* lp) = 0;
  /// The statistics of the same draws, right after their `write_block`. Default: ignored.
  virtual void write_stats(std::int64_t first_draw, std::int64_t n, const BatchedDrawStats& stats) {
    (void)first_draw;
    (void)n;
    (void)stats;
  }
  /// After the last block.
  virtual void finish() = 0;
};

/// Keeps all draws in memory (tests, small runs, reports).
class MemoryBatchedSink final : public BatchedDrawSink {
 public:
  void begin(std::int64_t num_chains, std::uint32_t first_chain_id, int ndim, std::int64_t draws_per_chain) override;
  void write_block(std::int64_t first_draw, std::int64_t n, const double* x, const double* lp) override;
  void write_stats(std::int64_t first_draw, std::int64_t n, const BatchedDrawStats& stats) override;
  void finish() override {}

  std::int64_t num_chains = 0;       ///< M
  std::uint32_t first_chain_id = 0;  ///< global id of chain 0
  int ndim = 0;                      ///< d
  std::int64_t draws = 0;            ///< draws per chain (all written by the end)
  std::vector<double> x;             ///< `[M, draws, d]` row-major
  std::vector<double> lp;            ///< `[M, draws]`
  /// The per-draw statistics (`BatchedDrawStats`), `[M, draws]` each.
  std::vector<std::uint8_t> accepted, dr_stage;
  std::vector<double> acceptance_probability, adaptation_measure;
  /// Draws of coordinate j as `[M, draws]` row-major (for diagnostics).
  std::vector<double> coordinate(int j) const;
};

/// Streams the draws to an HDF5 file: datasets `x` `[chain, draw, d]` and `lp`
/// `[chain, draw]` in group `group`, chunked (one block of draws of up to 64 chains per
/// chunk) and extendible along the draw dimension, with netCDF dimension scales `chain`
/// (global ids), `draw` and `dim`. Each `write_block` extends and writes one hyperslab.
/// One run per sink (a second `begin` throws herd::InputError). Not thread-safe (HDF5 is the
/// serial build). @throws herd::IoError on HDF5 failures.
class Hdf5BatchedSink final : public BatchedDrawSink {
 public:
  /// Creates (overwrites) `path`. @throws herd::IoError
  explicit Hdf5BatchedSink(const std::string& path, const std::string& group = "posterior");
  ~Hdf5BatchedSink() override;
  void begin(std::int64_t num_chains, std::uint32_t first_chain_id, int ndim, std::int64_t draws_per_chain) override;
  void write_block(std::int64_t first_draw, std::int64_t n, const double* x, const double* lp) override;
  /// Writes the `draw` scale and closes the file.
  void finish() override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Summary of a batched run.
struct BatchedDramResult {
  std::int64_t num_chains = 0;               ///< M
  std::int64_t proposals_per_chain = 0;      ///< warmup + steps
  std::int64_t draws_per_chain = 0;          ///< steps / thin
  double acceptance_rate = 0.0;              ///< accepted / proposals after the warm-up, over all chains
  std::vector<std::int64_t> stage_accepted;  ///< accepted per stage after the warm-up, all chains
  std::int64_t nan_count = 0;                ///< NaN log densities counted as -inf (all chains)
  std::int64_t out_of_domain = 0;            ///< trials outside the box (all chains)
  std::int64_t adaptive_updates = 0;         ///< factor replacements (per chain: summed over chains)
  std::int64_t chol_failures = 0;            ///< updates that kept the previous factor
  /// Frozen stage-1 proposal covariance L L^T `[d, d]` (pooled / none: the shared one;
  /// per chain: chain 0's).
  std::vector<double> proposal_cov;
  double seconds = 0.0;                 ///< wall time of the run
  double chain_steps_per_second = 0.0;  ///< M * (warmup + steps) / seconds
};

namespace detail {

/// A node of the fixed summation tree of pooled adaptation: node (`level` L, `index` j)
/// covers the global chain ids [j 2^L, (j+1) 2^L); its value is the sum of its two
/// children (left + right), or the one child inside the run's range of chain ids.
struct PooledNode {
  int level = 0;
  std::uint64_t index = 0;
  std::vector<double> stats;  ///< `[1 + d + d*d]`: n, s1 `[d]`, s2 `[d, d]` (lower triangle)
};

/// How one process reduces its chains [first, first + m) in place to the maximal tree nodes
/// that lie inside its range: level L >= 1 computes the nodes j in `parents[L-1]` =
/// [lo, hi), each from its children at the local rows (j 2^L - first) and
/// (j 2^L + 2^(L-1) - first), into the first of them (`batched::pooled_pair_add`); the nodes
/// in `emitted` (level, index) are left at row (index 2^level - first). Pure.
struct PooledTreePlan {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> parents;
  std::vector<std::pair<int, std::uint64_t>> emitted;
};
/// The plan for chain ids [first, first + m) (m >= 1). Pure; O(log m).
PooledTreePlan pooled_tree_plan(std::uint64_t first, std::uint64_t m);

/// Combines nodes that partition the chain ids [lo, hi) into the tree's root value (the
/// pooled statistics): level by level, a node with its sibling, or alone when its sibling
/// lies outside [lo, hi). The result depends on the leaves and [lo, hi) only, not on how the
/// nodes were split between processes. @throws herd::Error when the nodes do not partition
/// [lo, hi).
std::vector<double> pooled_combine(std::vector<PooledNode> nodes, std::uint64_t lo, std::uint64_t hi);

/// The host engine: owns the chains' arrays, runs segments of proposals, adapts and
/// records. Used by `run_batched_dram`; not a public API.
class BatchedEngine {
 public:
  /// Collective with `options.communicator` (pooled). Resumes from
  /// `options.checkpointer->resume_state()` when it gives a state.
  /// @throws herd::InputError naming the option when the options are inconsistent, or when
  /// the resume state does not fit them.
  explicit BatchedEngine(const BatchedDramOptions& options);
  ~BatchedEngine();

  /// Sets the chains' start log densities with `eval_rows(x, n, out)` over `[n, d]` (not
  /// called when the engine resumed: the checkpoint holds them).
  /// @throws herd::InputError when a start has log density -inf or NaN.
  void init_log_density(const std::function<void(const double*, std::size_t, double*)>& eval_rows);
  /// Runs the whole schedule. `advance(b, e, k0, k1)` must advance chains [b, e) through
  /// proposals k0 .. k1 - 1 (each chain independently, e.g. `fused_proposal`); it is called
  /// on the thread pool. Thinned draws go to `sink`.
  BatchedDramResult run(const std::function<void(std::size_t, std::size_t, std::uint64_t, std::uint64_t)>& advance,
                        BatchedDrawSink& sink, bool parallel);
  /// Runs the whole schedule in lock-step rounds with a batched log density: each stage
  /// round evaluates the pending trials of all chains in one call (on the calling thread).
  BatchedDramResult run_staged(const BatchedLogDensity& f, BatchedDrawSink& sink);

  /// What a device backend supplies to run the same schedule on a device: `segment`
  /// advances every chain through proposals k0 .. k0 + nd*per - 1 (accumulating warm-up
  /// statistics when `adapting`) and writes the state after each `per` proposals to the
  /// host buffers bx `[M, nd, d]`, blp `[M, nd]` when they are non-null, and its statistics
  /// (`batched::record_stats`) to the host buffers `bs` `[M, nd]` when `bs.accepted` is
  /// non-null; `adapt_update`
  /// performs an adaptive update (pooled: reduce on the device, then `pooled_merge`);
  /// `sync` copies the counters (accepted, NaN, +inf, out of domain) and the factor(s) back
  /// into the host arrays.
  struct DeviceHooks {
    std::function<void(std::uint64_t k0, std::uint64_t per, std::int64_t nd, double* bx, double* blp,
                       const batched::DrawStats& bs, bool adapting)>
        segment;
    std::function<void()> adapt_update;
    std::function<void()> sync;
    /// Copies the chains' states and log densities into the host arrays (`arrays().x`,
    /// `.lp`) and, per chain, the adaptation estimates into `adaptation_arrays()`: called
    /// before a checkpoint (needed only with `options.checkpointer`).
    std::function<void()> download_state;
  };
  /// Runs the schedule through a device backend (see `DeviceHooks`).
  BatchedDramResult run_device(const DeviceHooks& hooks, BatchedDrawSink& sink);
  /// The pooled update from statistics summed over chains (n, s1 `[d]`, s2 `[d, d]` lower,
  /// about `pooled_reference()`): merges, refactors the host factor, moves the reference to
  /// the running mean, counts the update. Returns 1 (replaced), 0 (deferred), -1 (failed).
  int pooled_merge(double n, const double* s1, const double* s2);
  /// The pooled update from this process's maximal tree nodes (`pooled_plan().emitted`,
  /// their statistics): gathers every rank's nodes (collective when
  /// `options.communicator` is set), combines them (`pooled_combine`) and calls
  /// `pooled_merge`. Returns as `pooled_merge`.
  int pooled_update(const std::vector<PooledNode>& local_nodes);
  /// The summation plan of this process's chains (pooled mode).
  const PooledTreePlan& pooled_plan() const;
  /// The shared reference point `[d]` of the warm-up statistics (pooled mode).
  const double* pooled_reference() const;
  /// The adaptation measure of the last pooled update (`batched::merge_and_factor`; 0 when
  /// it was deferred or failed): a device backend raises every chain's
  /// `ChainArrays::adapt_measure` to it after `pooled_update`, as the host engine does.
  double last_adaptation_measure() const;
  /// Records the outcome of per-chain updates done on a device (factor replacements, failures).
  void count_updates(std::int64_t replaced, std::int64_t failed);
  /// The running adaptation estimates and the statistics' reference point on the host
  /// (pooled: one estimate; per chain: M; none: all null): `run_n [count]`, `run_mean
  /// [count, d]`, `run_m2 [count, d, d]`, `ad_ref [count, d]`. A device backend uploads them
  /// when it starts (a resumed run's) and downloads them in `download_state`.
  struct AdaptationArrays {
    double* run_n = nullptr;
    double* run_mean = nullptr;
    double* run_m2 = nullptr;
    double* ad_ref = nullptr;
    std::size_t count = 0;
  };
  AdaptationArrays adaptation_arrays();
  /// True when the engine resumed from `options.checkpointer`'s state (the log densities
  /// are then restored, and `init_log_density` does not evaluate the target).
  bool resumed() const;
  /// The scale factor of the adapted covariance.
  double scale() const;
  /// Proposals between adaptive updates.
  std::int64_t period() const;

  const batched::KernelParams& params() const;
  /// The host arrays (the state a device backend uploads and the counters it syncs into).
  const batched::ChainArrays& arrays() const;
  int threads() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Draws per chain one block's draw buffer holds: min(block_draws, steps / thin), so a run
/// that keeps few draws does not reserve block_draws of them per chain; 0 when the run
/// keeps no draws. The host and device paths size their buffers `[M, n, d]` and `[M, n]`
/// by it. Options as validated by the engine (positive block_draws, thin).
std::int64_t block_buffer_draws(const BatchedDramOptions& o);

/// Bytes of device memory the CUDA path allocates for these options: the chain arrays
/// (states, trial points, delayed-rejection paths, counters, the states' records), the
/// proposal factor(s), the warm-up statistics, measures and per-chain estimates when
/// adapting, and the draw buffer of `block_buffer_draws` draws per chain (x, lp and the
/// per-draw statistics: (d + 3) doubles + 2 bytes a draw), for `o.num_chains` chains. The draw buffer is
/// returned in `draw_buffer_bytes` when not null.
std::size_t device_memory_bytes(const BatchedDramOptions& o, std::size_t* draw_buffer_bytes = nullptr);

/// Throws herd::InputError when `device_memory_bytes(o)` exceeds `free_bytes` (the free
/// device memory), with one line naming the sizes, the draw buffer and what to lower.
void check_device_memory(const BatchedDramOptions& o, std::size_t free_bytes);

/// Rethrows the exception in flight, a point log density's, as herd::Error naming the chain
/// (`chain`: its global id) and the proposal (`proposal`; -1: at the start point), as the
/// serial sampler's message does. Call only inside a catch block.
[[noreturn]] void rethrow_log_density_error(std::uint64_t chain, std::int64_t proposal);

/// Throws herd::InputError: the CUDA path of a functor target needs the functor compiled
/// by nvcc (include herd/mcmc/cuda/batched_dram.cuh from a .cu file), or no device.
[[noreturn]] void throw_no_cuda_path(const char* what);

}  // namespace detail

/// Runs the batched sampler on a point log density functor `f` with
/// `HERD_HOST_DEVICE double operator()(const double* x, int d) const` (thread-safe, since the
/// host path calls it from several threads). Host path here; for `device = kCuda` include
/// herd/mcmc/cuda/batched_dram.cuh in a .cu file and call `cuda::run_batched_dram` there.
/// Header-only template entry point; it takes only callables of that point signature, so a
/// lambda of the batched signature `(const double* x, int n, int d, double* out)` goes to the
/// `BatchedLogDensity` overload below. @throws herd::InputError on bad options;
/// herd::NumericalError when the log density is +inf (after the run's draws were written);
/// herd::Error wrapping an exception of `f`, naming the chain and the proposal.
template <class F>
requires std::is_invocable_r_v<double, const F&, const double*, int> BatchedDramResult
run_batched_dram(const BatchedDramOptions& options, const F& f, BatchedDrawSink& sink) {
  if (options.device == BatchedDevice::kCuda) detail::throw_no_cuda_path("run_batched_dram(functor)");
  detail::BatchedEngine engine(options);
  const int d = options.ndim;
  const std::uint64_t first = options.first_chain_id;
  engine.init_log_density([&](const double* x, std::size_t n, double* out) {
    std::size_t i = 0;
    try {
      for (; i < n; ++i) out[i] = f(x + i * static_cast<std::size_t>(d), d);
    } catch (...) {
      detail::rethrow_log_density_error(first + i, -1);
    }
  });
  const batched::KernelParams* p = &engine.params();
  const batched::ChainArrays* a = &engine.arrays();
  return engine.run(
      [&f, p, a, first](std::size_t b, std::size_t e, std::uint64_t k0, std::uint64_t k1) {
        batched::KernelParams pp = *p;  // the adapting flag is read per segment
        std::size_t i = b;
        std::uint64_t k = k0;
        try {
          for (; i < e; ++i)
            for (k = k0; k < k1; ++k) batched::fused_proposal(pp, *a, i, k, f);
        } catch (...) {
          detail::rethrow_log_density_error(first + i, static_cast<std::int64_t>(k));
        }
      },
      sink, true);
}

/// Runs the batched sampler with a batched log density (host memory), evaluated for all
/// pending trials of a stage in one call (e.g. a neural surrogate). Host path only.
/// @throws as the functor overload; herd::Error wrapping an exception of `f`.
BatchedDramResult run_batched_dram(const BatchedDramOptions& options, const BatchedLogDensity& f,
                                   BatchedDrawSink& sink);

/// Split R-hat (rank-normalised, Vehtari et al. 2021), bulk ESS and nested R-hat
/// (Margossian et al. 2024) of one coordinate of a batched run.
struct BatchedDiagnostics {
  double rhat = 0.0;         ///< rank-normalised split R-hat over all chains
  double ess_bulk = 0.0;     ///< bulk ESS over all chains
  double nested_rhat = 0.0;  ///< nested R-hat with `superchains` superchains (NaN if not applicable)
  double mean = 0.0;         ///< mean over all draws
  double sd = 0.0;           ///< standard deviation over all draws
};

/// Diagnostics of every coordinate of `draws` (`[d]` entries). Superchains are contiguous
/// groups of chains (M / superchains each; nested R-hat is NaN when superchains < 2 or does
/// not divide M). Thread-safety: as the diagnostics (one call at a time per thread).
std::vector<BatchedDiagnostics> batched_diagnostics(const MemoryBatchedSink& draws, std::size_t superchains);

/// A plain-text report of a batched run (settings, acceptance, per-coordinate R-hat, ESS
/// and nested R-hat, chain-steps/s).
std::string batched_report(const BatchedDramOptions& options, const BatchedDramResult& result,
                           const std::vector<BatchedDiagnostics>& diagnostics);

}  // namespace herd::mcmc
