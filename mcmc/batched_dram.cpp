// Batched DRAM: the host engine, sinks, diagnostics and report (batched_dram.hpp).
#include "herd/mcmc/batched_dram.hpp"

#include <algorithm>
#include <cmath>
#include <exception>
#include <limits>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <hdf5.h>

#include "herd/core/error.hpp"
#include "herd/core/memory.hpp"
#include "herd/core/thread_pool.hpp"
#include "herd/core/timer.hpp"
#include "herd/io/hdf5.hpp"
#include "herd/mcmc/diagnostics.hpp"
#include "herd/mcmc/proposal_setup.hpp"

namespace herd::mcmc {

namespace {
constexpr double kNegInf = -std::numeric_limits<double>::infinity();
}

// ---------------------------------------------------------------------------------------
// Engine

struct detail::BatchedEngine::Impl {
  BatchedDramOptions o;
  batched::KernelParams p;
  batched::ChainArrays a;
  std::size_t m = 0;
  int d = 0;
  double scale = 1.0;
  std::int64_t period = 1;
  std::unique_ptr<ThreadPool> pool;
  int threads = 1;
  // Storage behind the arrays.
  std::vector<double> x, lp, y, w, lpath, chol, ad_n, ad_s1, ad_s2, ad_ref, lower, upper;
  std::vector<std::int32_t> stage;
  std::vector<std::uint8_t> inside;
  std::vector<RngCursor> dr_cursor;
  std::vector<std::int64_t> accepted, out_of_domain, nan_count, posinf_count;
  // The current states' records (step, stage, acceptance probability, adaptation measure).
  std::vector<std::uint64_t> state_step;
  std::vector<std::uint8_t> state_stage;
  std::vector<double> state_alpha, adapt_measure;
  double last_measure = 0.0;  // of the last pooled update
  // Running adaptation estimates: pooled (one) or per chain (M).
  std::vector<double> run_n, run_mean, run_m2;
  std::int64_t updates = 0, failures = 0;
  // Resume point (from options.checkpointer) and the warm-up's end counters.
  bool resumed = false;
  std::uint64_t k_start = 0;
  std::int64_t drawn_start = 0;
  double seconds_before = 0.0;
  std::vector<std::int64_t> acc0;
  bool have_acc0 = false;
  std::function<void()> download_state;  // device backends: state to the host arrays
  // Pooled adaptation: this process's summation plan.
  detail::PooledTreePlan plan;
  // Staged evaluation scratch.
  std::vector<double> ex, elp;
  std::vector<std::int64_t> row_of;

  void parallel(const std::function<void(std::size_t, std::size_t)>& body) {
    if (pool && m > 1) pool->parallel_for(0, m, body);
    else body(0, m);
  }

  void adapt_update();
  void check_posinf(std::uint64_t k) const;
  template <class Seg, class Adapt, class Sync>
  BatchedDramResult schedule(Seg&& seg, Adapt&& adapt, Sync&& sync, BatchedDrawSink& sink);
  template <class Seg>
  BatchedDramResult schedule(Seg&& seg, BatchedDrawSink& sink) {
    return schedule(
        seg, [this] { adapt_update(); }, [] {}, sink);
  }
  int pooled_merge(double n, const double* s1, const double* s2);
  int pooled_update(const std::vector<detail::PooledNode>& local);
  void restore(const BatchedSnapshot& st);
  void maybe_checkpoint(std::uint64_t k, std::int64_t drawn, double seconds);
};

detail::BatchedEngine::BatchedEngine(const BatchedDramOptions& options) : impl_(std::make_unique<Impl>()) {
  Impl& s = *impl_;
  s.o = options;
  const BatchedDramOptions& o = s.o;
  const int d = o.ndim;
  HERD_REQUIRE(d >= 1, "batched_dram: ndim is {}, but must be >= 1", d);
  HERD_REQUIRE(o.num_chains >= 1, "batched_dram: num_chains is {}, but must be >= 1", o.num_chains);
  HERD_REQUIRE(static_cast<std::uint64_t>(o.first_chain_id) + static_cast<std::uint64_t>(o.num_chains) <=
                   (std::uint64_t{1} << 32),
               "batched_dram: first_chain_id {} + num_chains {} exceeds 2^32 global chain ids", o.first_chain_id,
               o.num_chains);
  const auto m = static_cast<std::size_t>(o.num_chains);
  const auto du = static_cast<std::size_t>(d);
  HERD_REQUIRE(o.start_points.size() == du || o.start_points.size() == m * du,
               "batched_dram: start_points has {} values, but must have d = {} or num_chains*d = {}",
               o.start_points.size(), d, m * du);
  for (std::size_t i = 0; i < o.start_points.size(); ++i)
    HERD_REQUIRE(std::isfinite(o.start_points[i]), "batched_dram: start_points[{}] is {}, but must be finite", i,
                 o.start_points[i]);
  HERD_REQUIRE(o.warmup >= 0, "batched_dram: warmup is {}, but must be >= 0", o.warmup);
  HERD_REQUIRE(o.steps >= 0, "batched_dram: steps is {}, but must be >= 0", o.steps);
  HERD_REQUIRE(o.thin >= 1, "batched_dram: thin is {}, but must be >= 1", o.thin);
  HERD_REQUIRE(o.steps <= std::numeric_limits<std::int64_t>::max() - o.warmup,
               "batched_dram: warmup + steps is {} + {}, but must stay below 2^63", o.warmup, o.steps);
  HERD_REQUIRE(o.block_draws >= 1, "batched_dram: block_draws is {}, but must be >= 1", o.block_draws);
  s.period = detail::adaptive_update_period(o.adaptive_update_period, d, "batched_dram");
  const std::vector<double> stage_scale = detail::stage_scales(
      o.delayed_rejection_count, o.delayed_rejection_scale_factors, d, batched::kMaxStages, "batched_dram");
  HERD_REQUIRE(o.num_threads >= 0, "batched_dram: num_threads is {}, but must be >= 0", o.num_threads);
  s.m = m;
  s.d = d;
  s.scale = DramSampler::parse_scale_factor(o.scale_factor, d);

  batched::KernelParams& p = s.p;
  p.d = d;
  p.stages = 1 + o.delayed_rejection_count;
  std::copy(stage_scale.begin(), stage_scale.end(), p.stage_scale);
  p.seed = o.seed;
  p.first_chain_id = o.first_chain_id;
  p.zig = &ziggurat_tables();
  p.chol_per_chain = o.adaptation == BatchedAdaptation::kPerChain;
  p.has_box = !o.domain_lower.empty() || !o.domain_upper.empty();
  detail::domain_box(o.domain_lower, o.domain_upper, d, "batched_dram", s.lower, s.upper);
  p.lower = s.lower.data();
  p.upper = s.upper.data();

  // Initial proposal factor (as the serial kernel: the start covariance used as is).
  const std::vector<double> l0 =
      detail::start_proposal(o.proposal_start_cov, o.proposal_start_std, d, "batched_dram").chol;

  const std::size_t np = static_cast<std::size_t>(p.stages) + 1;
  s.x.resize(m * du);
  for (std::size_t i = 0; i < m; ++i)
    for (std::size_t j = 0; j < du; ++j)
      s.x[i * du + j] = o.start_points.size() == du ? o.start_points[j] : o.start_points[i * du + j];
  for (std::size_t i = 0; i < m; ++i)
    for (int j = 0; j < d; ++j)
      HERD_REQUIRE(s.x[i * du + j] >= s.lower[j] && s.x[i * du + j] <= s.upper[j],
                   "batched_dram: the start point of chain {} has coordinate {} = {}, outside the domain [{}, {}]", i,
                   j, s.x[i * du + j], s.lower[j], s.upper[j]);
  s.lp.assign(m, 0.0);
  s.y.assign(m * du, 0.0);
  s.w.assign(m * np * du, 0.0);
  s.lpath.assign(m * np, 0.0);
  if (p.chol_per_chain) {
    s.chol.resize(m * du * du);
    for (std::size_t i = 0; i < m; ++i)
      std::copy(l0.begin(), l0.end(), s.chol.begin() + static_cast<std::ptrdiff_t>(i * du * du));
  } else {
    s.chol = l0;
  }
  s.stage.assign(m, 0);
  s.inside.assign(m, 1);
  s.dr_cursor.assign(m, RngCursor(0, 0, 0, 0, 0));
  s.accepted.assign(m * static_cast<std::size_t>(p.stages), 0);
  s.out_of_domain.assign(m, 0);
  s.nan_count.assign(m, 0);
  s.posinf_count.assign(m, 0);
  s.state_step.assign(m, 0);
  s.state_stage.assign(m, 0);
  s.state_alpha.assign(m, 1.0);
  const bool adapt = o.adaptation != BatchedAdaptation::kNone && o.warmup > 0;
  if (adapt) {
    s.adapt_measure.assign(m, 0.0);
    s.ad_n.assign(m, 0.0);
    s.ad_s1.assign(m * du, 0.0);
    s.ad_s2.assign(m * du * du, 0.0);
    if (p.chol_per_chain) {
      s.ad_ref = s.x;  // each chain's start
      s.run_n.assign(m, 0.0);
      s.run_mean.assign(m * du, 0.0);
      s.run_m2.assign(m * du * du, 0.0);
    } else {
      s.ad_ref.assign(s.x.begin(), s.x.begin() + static_cast<std::ptrdiff_t>(du));  // chain 0's start
      // Across ranks: rank 0's first start (the same reference whatever the layout).
      if (o.communicator != nullptr && o.communicator->size() > 1)
        o.communicator->broadcast(s.ad_ref.data(), du, DataType::kFloat64, 0);
      s.plan = detail::pooled_tree_plan(o.first_chain_id, m);
      s.run_n.assign(1, 0.0);
      s.run_mean.assign(du, 0.0);
      s.run_m2.assign(du * du, 0.0);
    }
  }
  batched::ChainArrays& a = s.a;
  a.x = s.x.data();
  a.lp = s.lp.data();
  a.y = s.y.data();
  a.w = s.w.data();
  a.lpath = s.lpath.data();
  a.chol = s.chol.data();
  a.stage = s.stage.data();
  a.inside = s.inside.data();
  a.dr_cursor = s.dr_cursor.data();
  a.accepted = s.accepted.data();
  a.out_of_domain = s.out_of_domain.data();
  a.nan_count = s.nan_count.data();
  a.posinf_count = s.posinf_count.data();
  a.state_step = s.state_step.data();
  a.state_stage = s.state_stage.data();
  a.state_alpha = s.state_alpha.data();
  a.adapt_measure = adapt ? s.adapt_measure.data() : nullptr;
  a.ad_n = adapt ? s.ad_n.data() : nullptr;
  a.ad_s1 = adapt ? s.ad_s1.data() : nullptr;
  a.ad_s2 = adapt ? s.ad_s2.data() : nullptr;
  a.ad_ref = adapt ? s.ad_ref.data() : nullptr;

  if (o.checkpointer != nullptr)
    if (const BatchedSnapshot* st = o.checkpointer->resume_state()) s.restore(*st);

  std::size_t threads =
      o.num_threads > 0 ? static_cast<std::size_t>(o.num_threads) : std::max(1u, std::thread::hardware_concurrency());
  threads = std::min(threads, m);
  s.threads = static_cast<int>(threads);
  if (threads > 1) s.pool = std::make_unique<ThreadPool>(threads - 1);
}

detail::BatchedEngine::~BatchedEngine() = default;

const batched::KernelParams& detail::BatchedEngine::params() const { return impl_->p; }
const batched::ChainArrays& detail::BatchedEngine::arrays() const { return impl_->a; }
int detail::BatchedEngine::threads() const { return impl_->threads; }

void detail::BatchedEngine::Impl::restore(const BatchedSnapshot& st) {
  const auto du = static_cast<std::size_t>(d);
  const auto stages = static_cast<std::size_t>(p.stages);
  auto need = [&](const char* what, std::size_t have, std::size_t want) {
    HERD_REQUIRE(have == want, "batched_dram: the resume state's {} has {} values, but this run needs {}", what, have,
                 want);
  };
  need("x", st.x.size(), m * du);
  need("lp", st.lp.size(), m);
  need("accepted", st.accepted.size(), m * stages);
  need("out_of_domain", st.out_of_domain.size(), m);
  need("nan_count", st.nan_count.size(), m);
  need("chol", st.chol.size(), chol.size());
  need("run_n", st.run_n.size(), run_n.size());
  need("run_mean", st.run_mean.size(), run_mean.size());
  need("run_m2", st.run_m2.size(), run_m2.size());
  need("ad_ref", st.ad_ref.size(), ad_ref.size());
  need("state_step", st.state_step.size(), m);
  need("state_stage", st.state_stage.size(), m);
  need("state_alpha", st.state_alpha.size(), m);
  need("adapt_measure", st.adapt_measure.size(), adapt_measure.size());
  const auto total = static_cast<std::uint64_t>(o.warmup + o.steps);
  HERD_REQUIRE(st.next_proposal <= total && st.draws_done >= 0 && st.draws_done <= o.steps / o.thin,
               "batched_dram: the resume state is at proposal {} with {} draws, beyond this run's {} proposals",
               st.next_proposal, st.draws_done, total);
  if (!st.accepted_warmup.empty()) need("accepted_warmup", st.accepted_warmup.size(), m * stages);
  // Copied into the existing storage (same sizes), so the pointers in `a` stay valid.
  auto put = [](const auto& src, auto& dst) { std::copy(src.begin(), src.end(), dst.begin()); };
  put(st.x, x);
  put(st.lp, lp);
  put(st.accepted, accepted);
  put(st.out_of_domain, out_of_domain);
  put(st.nan_count, nan_count);
  put(st.chol, chol);
  put(st.run_n, run_n);
  put(st.run_mean, run_mean);
  put(st.run_m2, run_m2);
  put(st.ad_ref, ad_ref);
  for (std::size_t i = 0; i < m; ++i) state_step[i] = static_cast<std::uint64_t>(st.state_step[i]);
  put(st.state_stage, state_stage);
  put(st.state_alpha, state_alpha);
  put(st.adapt_measure, adapt_measure);
  updates = st.adaptive_updates;
  failures = st.chol_failures;
  k_start = st.next_proposal;
  drawn_start = st.draws_done;
  seconds_before = st.seconds;
  have_acc0 = !st.accepted_warmup.empty();
  acc0 = st.accepted_warmup;
  resumed = true;
}

void detail::BatchedEngine::Impl::maybe_checkpoint(std::uint64_t k, std::int64_t drawn, double seconds) {
  if (o.checkpointer == nullptr || !o.checkpointer->due(k)) return;
  if (download_state) download_state();
  BatchedSnapshot st;
  st.next_proposal = k;
  st.draws_done = drawn;
  st.seconds = seconds;
  st.adaptive_updates = updates;
  st.chol_failures = failures;
  st.x = x;
  st.lp = lp;
  st.accepted = accepted;
  if (have_acc0) st.accepted_warmup = acc0;
  st.out_of_domain = out_of_domain;
  st.nan_count = nan_count;
  st.chol = chol;
  st.run_n = run_n;
  st.run_mean = run_mean;
  st.run_m2 = run_m2;
  st.ad_ref = ad_ref;
  st.state_step.assign(state_step.begin(), state_step.end());
  st.state_stage = state_stage;
  st.state_alpha = state_alpha;
  st.adapt_measure = adapt_measure;
  o.checkpointer->save(st);
}

void detail::BatchedEngine::init_log_density(
    const std::function<void(const double*, std::size_t, double*)>& eval_rows) {
  Impl& s = *impl_;
  if (s.resumed) return;  // the checkpoint's log densities
  eval_rows(s.x.data(), s.m, s.lp.data());
  for (std::size_t i = 0; i < s.m; ++i)
    HERD_REQUIRE(s.lp[i] > kNegInf && s.lp[i] < std::numeric_limits<double>::infinity(),
                 "batched_dram: the log density at the start point of chain {} (global id {}) is {}, but must be "
                 "finite (the start must be inside the support of the target)",
                 i, s.o.first_chain_id + i, s.lp[i]);
}

void detail::BatchedEngine::Impl::adapt_update() {
  const auto du = static_cast<std::size_t>(d);
  if (p.chol_per_chain) {
    std::vector<int> res(m, 0);
    parallel([&](std::size_t b, std::size_t e) {
      for (std::size_t i = b; i < e; ++i) {
        double* s2 = ad_s2.data() + i * du * du;
        double h = 0.0;
        res[i] = batched::merge_and_factor(d, ad_n[i], ad_s1.data() + i * du, s2, ad_ref.data() + i * du, run_n[i],
                                           run_mean.data() + i * du, run_m2.data() + i * du * du, scale,
                                           chol.data() + i * du * du, s2, &h);
        adapt_measure[i] = std::max(adapt_measure[i], h);
        ad_n[i] = 0.0;
        std::fill(ad_s1.begin() + static_cast<std::ptrdiff_t>(i * du),
                  ad_s1.begin() + static_cast<std::ptrdiff_t>((i + 1) * du), 0.0);
        std::fill(s2, s2 + du * du, 0.0);
        std::copy(run_mean.begin() + static_cast<std::ptrdiff_t>(i * du),
                  run_mean.begin() + static_cast<std::ptrdiff_t>((i + 1) * du),
                  ad_ref.begin() + static_cast<std::ptrdiff_t>(i * du));
      }
    });
    for (int r : res) {
      updates += r == 1;
      failures += r == -1;
    }
    return;
  }
  // Pooled: the fixed pairwise tree over global chain ids (in place), then every rank's
  // maximal nodes combined in the same tree: one merge, one factor, whatever the layout.
  const std::uint64_t f = o.first_chain_id;
  for (std::size_t lv = 0; lv < plan.parents.size(); ++lv) {
    const auto [lo, hi] = plan.parents[lv];
    const std::uint64_t half = std::uint64_t{1} << lv;
    auto body = [&, lo = lo, lv = lv](std::size_t b, std::size_t e) {
      for (std::size_t q = b; q < e; ++q) {
        const std::uint64_t left = ((lo + q) << (lv + 1)) - f;
        batched::pooled_pair_add(a, d, left, left + half);
      }
    };
    const std::size_t count = hi - lo;
    if (pool && count >= 256) pool->parallel_for(0, count, body);
    else body(0, count);
  }
  std::vector<detail::PooledNode> nodes;
  for (const auto& [lv, j] : plan.emitted) {
    const std::size_t row = (j << lv) - f;
    detail::PooledNode nd;
    nd.level = lv;
    nd.index = j;
    nd.stats.resize(1 + du + du * du);
    nd.stats[0] = ad_n[row];
    std::copy_n(ad_s1.begin() + static_cast<std::ptrdiff_t>(row * du), du, nd.stats.begin() + 1);
    std::copy_n(ad_s2.begin() + static_cast<std::ptrdiff_t>(row * du * du), du * du,
                nd.stats.begin() + 1 + static_cast<std::ptrdiff_t>(du));
    nodes.push_back(std::move(nd));
  }
  pooled_update(nodes);
  for (double& v : adapt_measure) v = std::max(v, last_measure);
  std::fill(ad_n.begin(), ad_n.end(), 0.0);
  std::fill(ad_s1.begin(), ad_s1.end(), 0.0);
  std::fill(ad_s2.begin(), ad_s2.end(), 0.0);
}

int detail::BatchedEngine::Impl::pooled_merge(double n, const double* s1, const double* s2) {
  const auto du = static_cast<std::size_t>(d);
  std::vector<double> work(du * du);
  const int r = batched::merge_and_factor(d, n, s1, s2, ad_ref.data(), run_n[0], run_mean.data(), run_m2.data(), scale,
                                          chol.data(), work.data(), &last_measure);
  updates += r == 1;
  failures += r == -1;
  std::copy(run_mean.begin(), run_mean.end(), ad_ref.begin());
  return r;
}

int detail::BatchedEngine::Impl::pooled_update(const std::vector<detail::PooledNode>& local) {
  const auto du = static_cast<std::size_t>(d);
  const std::size_t ns = 1 + du + du * du;
  std::vector<detail::PooledNode> all = local;
  std::uint64_t lo = o.first_chain_id, hi = o.first_chain_id + m;
  Communicator* comm = o.communicator;
  if (comm != nullptr && comm->size() > 1) {
    // Every rank's nodes, as rows [level, index, stats...] padded to the longest list.
    const std::int64_t mine[3] = {static_cast<std::int64_t>(local.size()), static_cast<std::int64_t>(lo),
                                  static_cast<std::int64_t>(hi)};
    const auto info = comm->allgather(std::span<const std::int64_t>(mine, 3));
    std::int64_t kmax = 0;
    std::uint64_t chains = 0;
    lo = std::numeric_limits<std::uint64_t>::max();
    hi = 0;
    for (int r = 0; r < comm->size(); ++r) {
      kmax = std::max(kmax, info[3 * r]);
      lo = std::min(lo, static_cast<std::uint64_t>(info[3 * r + 1]));
      hi = std::max(hi, static_cast<std::uint64_t>(info[3 * r + 2]));
      chains += static_cast<std::uint64_t>(info[3 * r + 2] - info[3 * r + 1]);
    }
    HERD_REQUIRE(chains == hi - lo,
                 "batched_dram: pooled adaptation over ranks needs one contiguous range of global "
                 "chain ids, but the ranks hold {} chains in [{}, {})",
                 chains, lo, hi);
    const std::size_t row = 2 + ns;
    std::vector<double> send(static_cast<std::size_t>(kmax) * row, -1.0);
    for (std::size_t q = 0; q < local.size(); ++q) {
      send[q * row] = local[q].level;
      send[q * row + 1] = static_cast<double>(local[q].index);
      std::copy(local[q].stats.begin(), local[q].stats.end(), send.begin() + static_cast<std::ptrdiff_t>(q * row + 2));
    }
    const auto recv = comm->allgather(std::span<const double>(send));
    all.clear();
    for (std::size_t q = 0; q * row < recv.size(); ++q) {
      if (recv[q * row] < 0) continue;
      detail::PooledNode nd;
      nd.level = static_cast<int>(recv[q * row]);
      nd.index = static_cast<std::uint64_t>(recv[q * row + 1]);
      nd.stats.assign(recv.begin() + static_cast<std::ptrdiff_t>(q * row + 2),
                      recv.begin() + static_cast<std::ptrdiff_t>((q + 1) * row));
      all.push_back(std::move(nd));
    }
  }
  const std::vector<double> sum = detail::pooled_combine(std::move(all), lo, hi);
  return pooled_merge(sum[0], sum.data() + 1, sum.data() + 1 + du);
}

detail::PooledTreePlan detail::pooled_tree_plan(std::uint64_t first, std::uint64_t m) {
  HERD_REQUIRE(m >= 1, "pooled_tree_plan: m is 0, but must be >= 1");
  PooledTreePlan plan;
  std::uint64_t lo = first, hi = first + m;  // nodes [lo, hi) of the current level
  for (int level = 0; lo < hi; ++level) {
    const std::uint64_t plo = (lo + 1) / 2, phi = hi / 2;  // parents with both children inside
    if (lo < 2 * plo) plan.emitted.emplace_back(level, lo);
    if (hi - 1 >= 2 * phi && !(hi - 1 == lo && lo < 2 * plo)) plan.emitted.emplace_back(level, hi - 1);
    if (plo >= phi) break;
    plan.parents.emplace_back(plo, phi);
    lo = plo;
    hi = phi;
  }
  return plan;
}

std::vector<double> detail::pooled_combine(std::vector<PooledNode> nodes, std::uint64_t lo, std::uint64_t hi) {
  HERD_REQUIRE(!nodes.empty() && lo < hi, "pooled_combine: no nodes for the chain ids [{}, {})", lo, hi);
  std::uint64_t covered = 0;
  for (const auto& nd : nodes) {
    HERD_REQUIRE(nd.level >= 0 && nd.level < 63, "pooled_combine: a node has level {}", nd.level);
    const std::uint64_t b = nd.index << nd.level, e = (nd.index + 1) << nd.level;
    HERD_REQUIRE(b >= lo && e <= hi, "pooled_combine: node ({}, {}) lies outside the chain ids [{}, {})", nd.level,
                 nd.index, lo, hi);
    covered += e - b;
  }
  HERD_REQUIRE(covered == hi - lo, "pooled_combine: the nodes cover {} chain ids, but [{}, {}) has {}", covered, lo, hi,
               hi - lo);
  auto key = [](const PooledNode& a, const PooledNode& b) {
    return a.level != b.level ? a.level < b.level : a.index < b.index;
  };
  while (nodes.size() > 1) {
    std::sort(nodes.begin(), nodes.end(), key);
    // Combine the lowest level: a node with its sibling, or alone when the sibling's
    // chain ids lie outside [lo, hi).
    const int lv = nodes.front().level;
    std::vector<PooledNode> next;
    std::size_t q = 0;
    for (; q < nodes.size() && nodes[q].level == lv; ++q) {
      PooledNode& a = nodes[q];
      const std::uint64_t span = std::uint64_t{1} << lv;
      PooledNode up;
      up.level = lv + 1;
      up.index = a.index / 2;
      if (a.index % 2 == 0) {
        if (q + 1 < nodes.size() && nodes[q + 1].level == lv && nodes[q + 1].index == a.index + 1) {
          up.stats = std::move(a.stats);
          const auto& b = nodes[q + 1].stats;
          for (std::size_t t = 0; t < up.stats.size(); ++t) up.stats[t] += b[t];
          ++q;
        } else {
          HERD_REQUIRE((a.index + 1) * span >= hi, "pooled_combine: node ({}, {}) lacks its right sibling", lv,
                       a.index);
          up.stats = std::move(a.stats);
        }
      } else {
        HERD_REQUIRE(a.index * span <= lo, "pooled_combine: node ({}, {}) lacks its left sibling", lv, a.index);
        up.stats = std::move(a.stats);
      }
      next.push_back(std::move(up));
    }
    for (; q < nodes.size(); ++q) next.push_back(std::move(nodes[q]));
    nodes = std::move(next);
  }
  return std::move(nodes.front().stats);
}

void detail::BatchedEngine::Impl::check_posinf(std::uint64_t k) const {
  for (std::size_t i = 0; i < m; ++i)
    if (posinf_count[i] != 0)
      throw NumericalError(
          fmt::format("batched_dram: chain {} (global id {}): the log density is +inf before "
                      "proposal {}, but must be finite or -inf",
                      i, o.first_chain_id + i, k));
}

// The schedule: warm-up segments between adaptive updates, then blocks of thinned draws.
// seg(k0, per, nd, bx, blp, bs) advances every chain through proposals k0 .. k0 + nd*per - 1,
// recording the state after each `per` proposals into bx[i, t], blp[i, t] when bx != null,
// and its statistics into bs (batched::record_stats) when bs.accepted != null.
template <class Seg, class Adapt, class Sync>
BatchedDramResult detail::BatchedEngine::Impl::schedule(Seg&& seg, Adapt&& adapt_fn, Sync&& sync,
                                                        BatchedDrawSink& sink) {
  Timer timer;
  const auto du = static_cast<std::size_t>(d);
  const std::int64_t ndraws = o.steps / o.thin;
  const auto total = static_cast<std::uint64_t>(o.warmup + o.steps);
  const bool adapt = o.adaptation != BatchedAdaptation::kNone && o.warmup > 0;
  sink.begin(o.num_chains, o.first_chain_id, d, ndraws);
  // A resumed run continues at a boundary of the same schedule (warm-up segments end at
  // multiples of the update period, blocks at multiples of block_draws), so it makes the
  // same proposals in the same segments as an uninterrupted run.
  std::uint64_t k = k_start;
  const auto warm = static_cast<std::uint64_t>(o.warmup);
  const auto per = static_cast<std::uint64_t>(period);
  const bool ckpt = o.checkpointer != nullptr;
  auto elapsed = [&] { return seconds_before + timer.seconds(); };
  while (k < warm) {
    // With checkpoints the warm-up ends a segment every period also without adaptation.
    const std::uint64_t k1 = adapt || ckpt ? std::min(warm, (k / per + 1) * per) : warm;
    p.adapting = adapt;
    seg(k, k1 - k, std::int64_t{1}, nullptr, nullptr, batched::DrawStats{});
    k = k1;
    sync();
    check_posinf(k);
    if (adapt && k % per == 0) adapt_fn();
    if (o.progress) o.progress(k, 0);
    // Only where the warm-up statistics are empty (they are not checkpointed).
    if (k < warm && (!adapt || k % per == 0)) maybe_checkpoint(k, 0, elapsed());
  }
  p.adapting = false;
  sync();
  if (!have_acc0) {
    acc0 = accepted;
    have_acc0 = true;
  }
  const auto bmax = static_cast<std::size_t>(detail::block_buffer_draws(o));
  std::vector<double> bx(m * bmax * du), blp(m * bmax), balpha(m * bmax), bmeasure(m * bmax);
  std::vector<std::uint8_t> baccepted(m * bmax), bstage(m * bmax);
  const batched::DrawStats bs{baccepted.data(), bstage.data(), balpha.data(), bmeasure.data()};
  std::int64_t drawn = drawn_start;
  try {
    while (drawn < ndraws) {
      const std::int64_t nd = std::min<std::int64_t>(o.block_draws, ndraws - drawn);
      seg(k, static_cast<std::uint64_t>(o.thin), nd, bx.data(), blp.data(), bs);
      k += static_cast<std::uint64_t>(nd * o.thin);
      sync();
      check_posinf(k);
      sink.write_block(drawn, nd, bx.data(), blp.data());
      sink.write_stats(drawn, nd, BatchedDrawStats{baccepted.data(), bstage.data(), balpha.data(), bmeasure.data()});
      drawn += nd;
      if (o.progress) o.progress(k, drawn);
      if (k < total) maybe_checkpoint(k, drawn, elapsed());
    }
    if (k < total) {
      // The proposals after the last recorded draw (chain_size not a multiple of thin): made
      // and reported, so that the progress ends at the run's total.
      seg(k, total - k, std::int64_t{1}, nullptr, nullptr, batched::DrawStats{});
      k = total;
      sync();
      check_posinf(k);
      if (o.progress) o.progress(k, drawn);
    }
  } catch (...) {
    try {
      sink.finish();
    } catch (...) {
    }
    throw;
  }
  sink.finish();
  BatchedDramResult r;
  r.num_chains = o.num_chains;
  r.proposals_per_chain = o.warmup + o.steps;
  r.draws_per_chain = ndraws;
  r.stage_accepted.assign(static_cast<std::size_t>(p.stages), 0);
  std::int64_t acc = 0;
  for (std::size_t i = 0; i < m; ++i)
    for (int st = 0; st < p.stages; ++st) {
      const std::size_t q = i * static_cast<std::size_t>(p.stages) + st;
      r.stage_accepted[st] += accepted[q] - acc0[q];
      acc += accepted[q] - acc0[q];
    }
  const double post = static_cast<double>(o.steps) * static_cast<double>(m);
  r.acceptance_rate = post > 0 ? static_cast<double>(acc) / post : 0.0;
  for (std::size_t i = 0; i < m; ++i) {
    r.nan_count += nan_count[i];
    r.out_of_domain += out_of_domain[i];
  }
  r.adaptive_updates = updates;
  r.chol_failures = failures;
  r.proposal_cov.assign(du * du, 0.0);
  for (std::size_t i = 0; i < du; ++i)
    for (std::size_t j = 0; j < du; ++j) {
      double v = 0.0;
      for (std::size_t q = 0; q <= std::min(i, j); ++q) v += chol[i * du + q] * chol[j * du + q];
      r.proposal_cov[i * du + j] = v;
    }
  r.seconds = elapsed();
  r.chain_steps_per_second = r.seconds > 0 ? static_cast<double>(m) * static_cast<double>(total) / r.seconds : 0.0;
  return r;
}

BatchedDramResult detail::BatchedEngine::run(
    const std::function<void(std::size_t, std::size_t, std::uint64_t, std::uint64_t)>& advance, BatchedDrawSink& sink,
    bool parallel) {
  Impl& s = *impl_;
  const auto du = static_cast<std::size_t>(s.d);
  auto seg = [&](std::uint64_t k0, std::uint64_t per, std::int64_t nd, double* bx, double* blp,
                 const batched::DrawStats& bs) {
    auto body = [&](std::size_t b, std::size_t e) {
      for (std::int64_t t = 0; t < nd; ++t) {
        const std::uint64_t ka = k0 + static_cast<std::uint64_t>(t) * per;
        advance(b, e, ka, ka + per);
        if (bx)
          for (std::size_t i = b; i < e; ++i) {
            const std::size_t slot = i * static_cast<std::size_t>(nd) + static_cast<std::size_t>(t);
            std::copy(s.x.begin() + static_cast<std::ptrdiff_t>(i * du),
                      s.x.begin() + static_cast<std::ptrdiff_t>((i + 1) * du), bx + slot * du);
            blp[slot] = s.lp[i];
            batched::record_stats(s.a, i, ka, bs, slot);
          }
      }
    };
    if (parallel) s.parallel(body);
    else body(0, s.m);
  };
  return s.schedule(seg, sink);
}

BatchedDramResult detail::BatchedEngine::run_staged(const BatchedLogDensity& f, BatchedDrawSink& sink) {
  Impl& s = *impl_;
  const int d = s.d;
  const auto du = static_cast<std::size_t>(d);
  s.row_of.assign(s.m, -1);
  auto one_proposal = [&](std::uint64_t k) {
    s.parallel([&](std::size_t b, std::size_t e) {
      for (std::size_t i = b; i < e; ++i) batched::begin_proposal(s.p, s.a, i, k);
    });
    for (;;) {
      // Gather the pending trials inside the box (in chain order).
      std::size_t n = 0, pending = 0;
      s.ex.resize(s.m * du);
      for (std::size_t i = 0; i < s.m; ++i) {
        s.row_of[i] = -1;
        if (s.stage[i] == 0) continue;
        ++pending;
        if (!s.inside[i]) continue;
        std::copy(s.y.begin() + static_cast<std::ptrdiff_t>(i * du),
                  s.y.begin() + static_cast<std::ptrdiff_t>((i + 1) * du),
                  s.ex.begin() + static_cast<std::ptrdiff_t>(n * du));
        s.row_of[i] = static_cast<std::int64_t>(n++);
      }
      if (pending == 0) break;
      s.elp.assign(n, 0.0);
      if (n > 0) {
        try {
          f(s.ex.data(), static_cast<int>(n), d, s.elp.data());
        } catch (const std::exception& e) {
          throw Error(fmt::format("batched_dram: the batched log density threw at proposal {} ({} points): {}", k, n,
                                  e.what()));
        }
      }
      s.parallel([&](std::size_t b, std::size_t e) {
        for (std::size_t i = b; i < e; ++i) {
          if (s.stage[i] == 0) continue;
          const double v = s.row_of[i] >= 0
                               ? batched::checked_log_density(s.a, i, s.elp[static_cast<std::size_t>(s.row_of[i])])
                               : kNegInf;
          batched::finish_stage(s.p, s.a, i, k, v);
        }
      });
    }
    if (s.p.adapting)
      s.parallel([&](std::size_t b, std::size_t e) {
        for (std::size_t i = b; i < e; ++i) batched::accumulate(s.p, s.a, i);
      });
  };
  auto seg = [&](std::uint64_t k0, std::uint64_t per, std::int64_t nd, double* bx, double* blp,
                 const batched::DrawStats& bs) {
    for (std::int64_t t = 0; t < nd; ++t) {
      const std::uint64_t ka = k0 + static_cast<std::uint64_t>(t) * per;
      for (std::uint64_t k = ka; k < ka + per; ++k) one_proposal(k);
      if (bx)
        for (std::size_t i = 0; i < s.m; ++i) {
          const std::size_t slot = i * static_cast<std::size_t>(nd) + static_cast<std::size_t>(t);
          std::copy(s.x.begin() + static_cast<std::ptrdiff_t>(i * du),
                    s.x.begin() + static_cast<std::ptrdiff_t>((i + 1) * du), bx + slot * du);
          blp[slot] = s.lp[i];
          batched::record_stats(s.a, i, ka, bs, slot);
        }
    }
  };
  return s.schedule(seg, sink);
}

BatchedDramResult detail::BatchedEngine::run_device(const DeviceHooks& h, BatchedDrawSink& sink) {
  Impl& s = *impl_;
  HERD_REQUIRE(h.segment && h.adapt_update && h.sync, "batched_dram: run_device: a device hook is empty");
  HERD_REQUIRE(s.o.checkpointer == nullptr || h.download_state,
               "batched_dram: run_device: checkpoints need the download_state hook");
  s.download_state = h.download_state;
  auto seg = [&](std::uint64_t k0, std::uint64_t per, std::int64_t nd, double* bx, double* blp,
                 const batched::DrawStats& bs) { h.segment(k0, per, nd, bx, blp, bs, s.p.adapting); };
  return s.schedule(seg, h.adapt_update, h.sync, sink);
}

int detail::BatchedEngine::pooled_merge(double n, const double* s1, const double* s2) {
  return impl_->pooled_merge(n, s1, s2);
}
int detail::BatchedEngine::pooled_update(const std::vector<PooledNode>& local_nodes) {
  return impl_->pooled_update(local_nodes);
}
const detail::PooledTreePlan& detail::BatchedEngine::pooled_plan() const { return impl_->plan; }
const double* detail::BatchedEngine::pooled_reference() const { return impl_->ad_ref.data(); }
double detail::BatchedEngine::last_adaptation_measure() const { return impl_->last_measure; }
void detail::BatchedEngine::count_updates(std::int64_t replaced, std::int64_t failed) {
  impl_->updates += replaced;
  impl_->failures += failed;
}
detail::BatchedEngine::AdaptationArrays detail::BatchedEngine::adaptation_arrays() {
  Impl& s = *impl_;
  AdaptationArrays r;
  if (s.run_n.empty()) return r;
  r.run_n = s.run_n.data();
  r.run_mean = s.run_mean.data();
  r.run_m2 = s.run_m2.data();
  r.ad_ref = s.ad_ref.data();
  r.count = s.run_n.size();
  return r;
}
bool detail::BatchedEngine::resumed() const { return impl_->resumed; }
double detail::BatchedEngine::scale() const { return impl_->scale; }
std::int64_t detail::BatchedEngine::period() const { return impl_->period; }

std::int64_t detail::block_buffer_draws(const BatchedDramOptions& o) {
  const std::int64_t ndraws = o.thin > 0 ? o.steps / o.thin : 0;
  return std::max<std::int64_t>(0, std::min<std::int64_t>(o.block_draws, ndraws));
}

std::size_t detail::device_memory_bytes(const BatchedDramOptions& o, std::size_t* draw_buffer_bytes) {
  const auto m = static_cast<std::size_t>(std::max<std::int64_t>(o.num_chains, 0));
  const auto d = static_cast<std::size_t>(std::max(o.ndim, 0));
  const auto stages = static_cast<std::size_t>(1 + std::max(o.delayed_rejection_count, 0));
  const std::size_t np = stages + 1, dd = d * d, f = sizeof(double);
  const bool per_chain = o.adaptation == BatchedAdaptation::kPerChain;
  const bool adapt = o.adaptation != BatchedAdaptation::kNone && o.warmup > 0;
  std::size_t b = sizeof(ZigguratTables) + 2 * d * f;  // tables, domain box
  // x, lp, y, path w, lpath; stage, inside, delayed-rejection cursor; counters.
  b += m * (d + 1 + d + np * d + np) * f + m * (sizeof(std::int32_t) + 1 + sizeof(RngCursor));
  b += m * (stages + 3) * sizeof(std::int64_t);
  b += m * (sizeof(std::uint64_t) + 1 + f);  // the states' records: step, stage, acceptance probability
  b += (per_chain ? m * dd : dd) * f;        // proposal factor(s)
  if (adapt) {
    b += m * (1 + d + dd) * f + (per_chain ? m * d : d) * f + m * f;            // statistics, references, measures
    if (per_chain) b += m * (1 + d + dd) * f + 2 * sizeof(unsigned long long);  // running estimates, counts
  }
  // x, lp and the per-draw statistics (accepted, stage: 1 byte each; acceptance
  // probability, adaptation measure: doubles).
  const std::size_t draws = m * static_cast<std::size_t>(block_buffer_draws(o)) * ((d + 3) * f + 2);
  if (draw_buffer_bytes) *draw_buffer_bytes = draws;
  return b + draws;
}

void detail::check_device_memory(const BatchedDramOptions& o, std::size_t free_bytes) {
  std::size_t draws = 0;
  const std::size_t need = device_memory_bytes(o, &draws);
  if (need <= free_bytes) return;
  constexpr double kGB = 1e9;
  throw InputError(fmt::format(
      "batched_dram: device = cuda: {} chains of dimension {} need {:.2f} GB of device memory ({:.2f} GB of it the "
      "draw buffer of {} draws per chain, block_draws {}), but the device has {:.2f} GB free; lower block_draws "
      "(or chains_per_rank / num_chains)",
      o.num_chains, o.ndim, need / kGB, draws / kGB, block_buffer_draws(o), o.block_draws, free_bytes / kGB));
}

void detail::rethrow_log_density_error(std::uint64_t chain, std::int64_t proposal) {
  const std::string at = proposal < 0 ? std::string("at its start point") : fmt::format("at proposal {}", proposal);
  try {
    throw;
  } catch (const std::exception& e) {
    throw Error(fmt::format("batched_dram: chain {}: the log density threw {}: {}", chain, at, e.what()));
  } catch (...) {
    throw Error(fmt::format("batched_dram: chain {}: the log density threw an unknown exception {}", chain, at));
  }
}

void detail::throw_no_cuda_path(const char* what) {
  throw InputError(
      fmt::format("batched_dram: {}: device = cuda needs a CUDA build with a device and the target "
                  "compiled by nvcc (include herd/mcmc/cuda/batched_dram.cuh in a .cu file and call "
                  "herd::mcmc::cuda::run_batched_dram); use device = host otherwise",
                  what));
}

BatchedDramResult run_batched_dram(const BatchedDramOptions& options, const BatchedLogDensity& f,
                                   BatchedDrawSink& sink) {
  HERD_REQUIRE(static_cast<bool>(f), "batched_dram: the batched log density is empty");
  if (options.device == BatchedDevice::kCuda) detail::throw_no_cuda_path("run_batched_dram(batched log density)");
  detail::BatchedEngine engine(options);
  const int d = options.ndim;
  engine.init_log_density([&](const double* x, std::size_t n, double* out) { f(x, static_cast<int>(n), d, out); });
  return engine.run_staged(f, sink);
}

// ---------------------------------------------------------------------------------------
// Sinks

void MemoryBatchedSink::begin(std::int64_t m, std::uint32_t first, int nd, std::int64_t draws_per_chain) {
  num_chains = m;
  first_chain_id = first;
  ndim = nd;
  draws = draws_per_chain;
  x.assign(checked_count({m, draws_per_chain, nd}, "MemoryBatchedSink: chains x draws x ndim"), 0.0);
  lp.assign(checked_count({m, draws_per_chain}, "MemoryBatchedSink: chains x draws"), 0.0);
  accepted.assign(lp.size(), 0);
  dr_stage.assign(lp.size(), 0);
  acceptance_probability.assign(lp.size(), 0.0);
  adaptation_measure.assign(lp.size(), 0.0);
}

void MemoryBatchedSink::write_stats(std::int64_t first, std::int64_t n, const BatchedDrawStats& s) {
  for (std::int64_t i = 0; i < num_chains; ++i)
    for (std::int64_t t = 0; t < n; ++t) {
      const auto src = static_cast<std::size_t>(i * n + t);
      const auto dst = static_cast<std::size_t>(i * draws + first + t);
      accepted[dst] = s.accepted[src];
      dr_stage[dst] = s.dr_stage[src];
      acceptance_probability[dst] = s.acceptance_probability[src];
      adaptation_measure[dst] = s.adaptation_measure[src];
    }
}

void MemoryBatchedSink::write_block(std::int64_t first, std::int64_t n, const double* bx, const double* blp) {
  const auto du = static_cast<std::size_t>(ndim);
  for (std::int64_t i = 0; i < num_chains; ++i)
    for (std::int64_t t = 0; t < n; ++t) {
      const auto src = static_cast<std::size_t>(i * n + t);
      const auto dst = static_cast<std::size_t>(i * draws + first + t);
      std::copy(bx + src * du, bx + (src + 1) * du, x.begin() + static_cast<std::ptrdiff_t>(dst * du));
      lp[dst] = blp[src];
    }
}

std::vector<double> MemoryBatchedSink::coordinate(int j) const {
  HERD_REQUIRE(j >= 0 && j < ndim, "MemoryBatchedSink::coordinate: j is {}, but must be in [0, {})", j, ndim);
  std::vector<double> v(static_cast<std::size_t>(num_chains * draws));
  for (std::size_t q = 0; q < v.size(); ++q) v[q] = x[q * static_cast<std::size_t>(ndim) + static_cast<std::size_t>(j)];
  return v;
}

struct Hdf5BatchedSink::Impl {
  std::string path, group;
  io::H5File file;
  io::H5Group g;
  hid_t x = -1, lp = -1;
  std::int64_t m = 0, draws = 0, written = 0;
  int d = 0;
  void close_sets() {
    if (x >= 0) H5Dclose(x);
    if (lp >= 0) H5Dclose(lp);
    x = lp = -1;
  }
  void check(herr_t e, const char* what) const {
    if (e < 0) throw IoError(fmt::format("batched_dram: {}: {} failed in group {}", path, what, group));
  }
  hid_t create(const char* name, int rank, const hsize_t* chunk) {
    hsize_t dims[3] = {static_cast<hsize_t>(m), 0, static_cast<hsize_t>(d)};
    hsize_t maxd[3] = {static_cast<hsize_t>(m), H5S_UNLIMITED, static_cast<hsize_t>(d)};
    const hid_t space = H5Screate_simple(rank, dims, maxd);
    const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    H5Pset_chunk(dcpl, rank, chunk);
    H5Pset_obj_track_times(dcpl, false);
    const hid_t id = H5Dcreate2(g.id(), name, H5T_NATIVE_DOUBLE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    H5Pclose(dcpl);
    H5Sclose(space);
    if (id < 0) throw IoError(fmt::format("batched_dram: {}: cannot create dataset {}/{}", path, group, name));
    return id;
  }
  void write(hid_t id, int rank, std::int64_t first, std::int64_t n, const double* data) {
    hsize_t dims[3] = {static_cast<hsize_t>(m), static_cast<hsize_t>(first + n), static_cast<hsize_t>(d)};
    check(H5Dset_extent(id, dims), "H5Dset_extent");
    const hid_t fs = H5Dget_space(id);
    hsize_t start[3] = {0, static_cast<hsize_t>(first), 0};
    hsize_t count[3] = {static_cast<hsize_t>(m), static_cast<hsize_t>(n), static_cast<hsize_t>(d)};
    H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, nullptr, count, nullptr);
    const hid_t ms = H5Screate_simple(rank, count, nullptr);
    const herr_t e = H5Dwrite(id, H5T_NATIVE_DOUBLE, ms, fs, H5P_DEFAULT, data);
    H5Sclose(ms);
    H5Sclose(fs);
    check(e, "H5Dwrite");
  }
};

Hdf5BatchedSink::Hdf5BatchedSink(const std::string& path, const std::string& group) : impl_(std::make_unique<Impl>()) {
  impl_->path = path;
  impl_->group = group;
  impl_->file = io::H5File::create(path, true);
  impl_->g = impl_->file.require_group(group);
}

Hdf5BatchedSink::~Hdf5BatchedSink() {
  if (impl_) impl_->close_sets();
}

void Hdf5BatchedSink::begin(std::int64_t m, std::uint32_t first, int nd, std::int64_t draws_per_chain) {
  Impl& s = *impl_;
  HERD_REQUIRE(s.g.valid() && s.x < 0, "Hdf5BatchedSink: {}: begin called twice; use one sink per run", s.path);
  s.m = m;
  s.d = nd;
  s.draws = draws_per_chain;
  s.written = 0;
  const hsize_t cm = static_cast<hsize_t>(std::min<std::int64_t>(m, 64));
  const hsize_t cd = static_cast<hsize_t>(std::clamp<std::int64_t>(draws_per_chain, 1, 256));
  const hsize_t cx[3] = {cm, cd, static_cast<hsize_t>(nd)};
  s.x = s.create("x", 3, cx);
  s.lp = s.create("lp", 2, cx);
  std::vector<std::int64_t> ids(static_cast<std::size_t>(m));
  for (std::int64_t i = 0; i < m; ++i) ids[static_cast<std::size_t>(i)] = first + i;
  s.g.write<std::int64_t>("chain", std::span<const std::int64_t>(ids)).make_scale("chain");
  std::vector<std::int64_t> dims(static_cast<std::size_t>(nd));
  for (int j = 0; j < nd; ++j) dims[static_cast<std::size_t>(j)] = j;
  s.g.write<std::int64_t>("dim", std::span<const std::int64_t>(dims)).make_scale("dim");
}

void Hdf5BatchedSink::write_block(std::int64_t first, std::int64_t n, const double* bx, const double* blp) {
  Impl& s = *impl_;
  HERD_REQUIRE(s.x >= 0, "Hdf5BatchedSink: write_block before begin");
  s.write(s.x, 3, first, n, bx);
  s.write(s.lp, 2, first, n, blp);
  s.written = std::max(s.written, first + n);
}

void Hdf5BatchedSink::finish() {
  Impl& s = *impl_;
  if (s.x < 0) return;
  s.close_sets();
  std::vector<std::int64_t> draws(static_cast<std::size_t>(s.written));
  for (std::int64_t t = 0; t < s.written; ++t) draws[static_cast<std::size_t>(t)] = t;
  io::H5Dataset dr = s.g.write<std::int64_t>("draw", std::span<const std::int64_t>(draws));
  dr.make_scale("draw");
  io::H5Dataset chain = s.g.open_dataset("chain"), dim = s.g.open_dataset("dim");
  io::H5Dataset x = s.g.open_dataset("x"), lp = s.g.open_dataset("lp");
  if (s.written > 0) {
    x.attach_scale(chain, 0);
    x.attach_scale(dr, 1);
    x.attach_scale(dim, 2);
    lp.attach_scale(chain, 0);
    lp.attach_scale(dr, 1);
  }
  s.g = io::H5Group();
  s.file = io::H5File();
}

// ---------------------------------------------------------------------------------------
// Diagnostics and report

std::vector<BatchedDiagnostics> batched_diagnostics(const MemoryBatchedSink& s, std::size_t superchains) {
  std::vector<BatchedDiagnostics> out;
  const auto m = static_cast<std::size_t>(s.num_chains);
  const auto n = static_cast<std::size_t>(s.draws);
  HERD_REQUIRE(m >= 1 && n >= 1,
               "batched_diagnostics: the sink holds {} chains of {} draws, but needs at least 1 of each", m, n);
  for (int j = 0; j < s.ndim; ++j) {
    const std::vector<double> v = s.coordinate(j);
    const DrawsView view(v, m, n);
    const DiagnosticSummary sum = summarize(view);
    BatchedDiagnostics b;
    b.rhat = sum.rhat;
    b.ess_bulk = sum.ess_bulk;
    b.mean = sum.mean;
    b.sd = sum.sd;
    b.nested_rhat = (superchains >= 2 && m % superchains == 0) ? nested_rhat(view, superchains)
                                                               : std::numeric_limits<double>::quiet_NaN();
    out.push_back(b);
  }
  return out;
}

std::string batched_report(const BatchedDramOptions& o, const BatchedDramResult& r,
                           const std::vector<BatchedDiagnostics>& diag) {
  std::ostringstream s;
  const char* mode = o.adaptation == BatchedAdaptation::kPooled     ? "pooled, then frozen"
                     : o.adaptation == BatchedAdaptation::kPerChain ? "per chain, then frozen"
                                                                    : "none";
  s << fmt::format(
      "batched DRAM: {} chains (global ids {}..{}), d = {}, {} warm-up + {} proposals per chain, thin {}\n",
      r.num_chains, o.first_chain_id, o.first_chain_id + r.num_chains - 1, o.ndim, o.warmup, o.steps, o.thin);
  s << fmt::format("adaptation: {} ({} updates, {} kept the previous factor); delayed-rejection stages: {}\n", mode,
                   r.adaptive_updates, r.chol_failures, o.delayed_rejection_count);
  s << fmt::format("acceptance after warm-up: {:.4f}; per stage:", r.acceptance_rate);
  for (auto a : r.stage_accepted) s << ' ' << a;
  s << fmt::format("\nNaN log densities: {}; trials outside the domain: {}\n", r.nan_count, r.out_of_domain);
  s << fmt::format("wall time {:.3f} s; {:.4g} chain-steps/s\n", r.seconds, r.chain_steps_per_second);
  s << fmt::format("{:>5} {:>12} {:>12} {:>10} {:>12} {:>12}\n", "dim", "mean", "sd", "R-hat", "ESS bulk",
                   "nested R-hat");
  for (std::size_t j = 0; j < diag.size(); ++j)
    s << fmt::format("{:>5} {:>12.5g} {:>12.5g} {:>10.4f} {:>12.1f} {:>12.4f}\n", j, diag[j].mean, diag[j].sd,
                     diag[j].rhat, diag[j].ess_bulk, diag[j].nested_rhat);
  return s.str();
}

}  // namespace herd::mcmc
