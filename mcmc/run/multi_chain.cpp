// ParaDRAM's multi-chain model (parallel.hpp, `run_multi_chain`) and the diagnostics across
// its chains (`multi_chain_diagnostics`).
#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "herd/core/error.hpp"
#include "herd/core/thread_pool.hpp"
#include "herd/core/timer.hpp"
#include "herd/mcmc/parallel.hpp"
#include "herd/mcmc/refinement.hpp"

namespace herd::mcmc {

namespace {

// --- multi-chain packing: everything as doubles (integers < 2^53 are exact) ---
constexpr int kResultScalars = 13;

/// Appends a vector as its length, then its values.
template <typename T>
void pack_vector(std::vector<double>& out, const std::vector<T>& v) {
  out.push_back(static_cast<double>(v.size()));
  for (const T x : v) out.push_back(static_cast<double>(x));
}

/// Reads what `pack_vector` wrote; returns the position after it.
template <typename T>
const double* unpack_vector(const double* p, std::vector<T>& v) {
  const auto n = static_cast<std::size_t>(p[0]);
  ++p;
  v.resize(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<T>(p[i]);
  return p + n;
}

/// One chain and its whole `DramResult` (the counters, the per-stage acceptances and the
/// final proposal and adapted covariances: the report draws every chain's covariance and
/// a chain of another rank must read as it would in a one-process run).
void pack_chain(std::vector<double>& out, const MemoryChainSink& c, const DramResult& r) {
  out.push_back(static_cast<double>(c.chain_id));
  out.push_back(static_cast<double>(c.size()));
  const double res[kResultScalars] = {static_cast<double>(r.proposals),
                                      static_cast<double>(r.chain_size),
                                      r.acceptance_rate,
                                      static_cast<double>(r.evaluations),
                                      static_cast<double>(r.nan_count),
                                      static_cast<double>(r.out_of_domain),
                                      static_cast<double>(r.adaptive_updates),
                                      static_cast<double>(r.adaptive_updates_deferred),
                                      static_cast<double>(r.burnin_likelihood),
                                      static_cast<double>(r.burnin_adaptation),
                                      static_cast<double>(r.burnin),
                                      r.seconds,
                                      static_cast<double>(r.chol_failures)};
  out.insert(out.end(), res, res + kResultScalars);
  pack_vector(out, r.stage_accepted);
  pack_vector(out, r.proposal_cov);
  pack_vector(out, r.adapted_cov);
  ChainReader rd(c, kAllColumns);
  for (std::size_t i = 0; i < c.size(); ++i) {
    out.push_back(static_cast<double>(rd.step(i)));
    out.push_back(static_cast<double>(rd.weight(i)));
    out.push_back(rd.log_density(i));
    out.push_back(static_cast<double>(rd.dr_stage(i)));
    out.push_back(rd.accept_prob(i));
    out.push_back(rd.adapt_measure(i));
    const double* x = rd.point(i);
    out.insert(out.end(), x, x + c.ndim);
  }
}

const double* unpack_chain(const double* p, int d, MemoryChainSink& c, DramResult& r) {
  c.begin(static_cast<std::uint32_t>(p[0]), d);
  const auto n = static_cast<std::size_t>(p[1]);
  p += 2;
  r.chain_id = c.chain_id;
  r.proposals = static_cast<std::int64_t>(p[0]);
  r.chain_size = static_cast<std::int64_t>(p[1]);
  r.acceptance_rate = p[2];
  r.evaluations = static_cast<std::int64_t>(p[3]);
  r.nan_count = static_cast<std::int64_t>(p[4]);
  r.out_of_domain = static_cast<std::int64_t>(p[5]);
  r.adaptive_updates = static_cast<std::int64_t>(p[6]);
  r.adaptive_updates_deferred = static_cast<std::int64_t>(p[7]);
  r.burnin_likelihood = static_cast<std::int64_t>(p[8]);
  r.burnin_adaptation = static_cast<std::int64_t>(p[9]);
  r.burnin = static_cast<std::int64_t>(p[10]);
  r.seconds = p[11];
  r.chol_failures = static_cast<std::int64_t>(p[12]);
  p += kResultScalars;
  p = unpack_vector(p, r.stage_accepted);
  p = unpack_vector(p, r.proposal_cov);
  p = unpack_vector(p, r.adapted_cov);
  for (std::size_t i = 0; i < n; ++i) {
    ChainRecord rec;
    rec.chain_id = c.chain_id;
    rec.step = static_cast<std::uint64_t>(p[0]);
    rec.weight = static_cast<std::int64_t>(p[1]);
    rec.log_density = p[2];
    rec.dr_stage = static_cast<std::int32_t>(p[3]);
    rec.accept_prob = p[4];
    rec.adapt_measure = p[5];
    rec.point = p + 6;
    rec.ndim = d;
    c.write(rec);
    p += 6 + d;
  }
  return p;
}

// --- one rank's chains ---

/// What every chain of this rank shares: the arguments of `run_multi_chain`.
struct MultiChainJob {
  const DramOptions& options;
  const PointLogDensity& log_density;
  int rank = 0;
  std::size_t m = 1;  // chains per rank
  int d = 0;
  const std::string& checkpoint_prefix;  // empty: no checkpoints
  std::int64_t checkpoint_period_steps = 0;
  double checkpoint_period_seconds = 0.0;
  bool overwrite = false;
  ChainSink* first_chain_tee = nullptr;
  std::span<const double> start_points;
  const std::optional<std::string>& scratch_dir;  // the chains' scratch folder (none: in memory)
};

/// An empty chain, file-backed when `scratch_dir` is given.
MemoryChainSink new_chain(const std::optional<std::string>& scratch_dir) {
  return scratch_dir ? MemoryChainSink(*scratch_dir) : MemoryChainSink();
}

/// This rank's chains and what their earlier invocations did (resumed runs).
struct LocalChains {
  LocalChains(std::size_t m, const std::optional<std::string>& scratch_dir)
      : results(m), proposals_before(m, 0), seconds_before(m, 0.0) {
    for (std::size_t i = 0; i < m; ++i) chains.push_back(new_chain(scratch_dir));
  }
  std::vector<MemoryChainSink> chains;
  std::vector<DramResult> results;
  std::vector<std::uint64_t> proposals_before;
  std::vector<double> seconds_before;
};

/// The options of this rank's chain `i`: its global id and, when given, its start point.
DramOptions chain_options(const MultiChainJob& job, std::size_t i) {
  DramOptions o = job.options;
  const std::size_t global = static_cast<std::size_t>(job.rank) * job.m + i;
  o.chain_id = job.options.chain_id + static_cast<std::uint32_t>(global);
  if (!job.start_points.empty())
    o.start_point.assign(
        job.start_points.begin() + static_cast<std::ptrdiff_t>(global * static_cast<std::size_t>(job.d)),
        job.start_points.begin() + static_cast<std::ptrdiff_t>((global + 1) * static_cast<std::size_t>(job.d)));
  return o;
}

/// Runs this rank's chain `i` in memory (no checkpoints), teeing chain 0 when asked.
void run_chain_in_memory(const MultiChainJob& job, std::size_t i, DramOptions o, LocalChains& local) {
  ChainSink* tee = i == 0 ? job.first_chain_tee : nullptr;
  DramSampler s(std::move(o), job.log_density);
  if (tee) {
    FanSink fan(local.chains[i], *tee);
    local.results[i] = s.run(fan);
  } else {
    local.results[i] = s.run(local.chains[i]);
  }
}

/// Runs this rank's chain `i` through `run_resumable` (files `<prefix>_<id>.chain`/`.ckpt`)
/// and reads its chain file back.
void run_chain_resumable(const MultiChainJob& job, std::size_t i, const DramOptions& o, LocalChains& local) {
  ResumableOptions f;
  f.chain_path = fmt::format("{}_{}.chain", job.checkpoint_prefix, o.chain_id);
  f.checkpoint_path = fmt::format("{}_{}.ckpt", job.checkpoint_prefix, o.chain_id);
  f.period_steps = job.checkpoint_period_steps;
  f.period_seconds = job.checkpoint_period_seconds;
  f.overwrite = job.overwrite;
  f.tee = i == 0 ? job.first_chain_tee : nullptr;
  ResumableRun rr = run_resumable(o, job.log_density, f);
  local.proposals_before[i] = rr.proposals_before;
  local.seconds_before[i] = rr.seconds_before;
  local.results[i] = std::move(rr.result);
  // A chain sampled here needs no second check of what this process wrote (or checked).
  local.chains[i] = rr.already_complete ? read_resumable_chain(f.chain_path, job.d, f.checkpoint_path, job.scratch_dir)
                                        : read_sampled_chain(f.chain_path, job.d, job.scratch_dir);
}

/// Runs this rank's chains, on up to `threads` threads (0: one per chain) when `thread_safe`.
void run_local_chains(const MultiChainJob& job, bool thread_safe, int threads, LocalChains& local) {
  auto run_one = [&job, &local](std::size_t i) {
    DramOptions o = chain_options(job, i);
    if (job.checkpoint_prefix.empty()) {
      run_chain_in_memory(job, i, std::move(o), local);
    } else {
      run_chain_resumable(job, i, o, local);
    }
  };
  const std::size_t m = job.m;
  std::size_t nthreads = threads > 0 ? static_cast<std::size_t>(threads) : m;
  nthreads = std::min(nthreads, m);
  if (!thread_safe || nthreads <= 1) {
    for (std::size_t i = 0; i < m; ++i) run_one(i);
  } else {
    ThreadPool pool(nthreads - 1);
    pool.parallel_for_each(0, m, run_one, 1);
  }
}

/// Sets `out`'s proposals and seconds of the earlier invocations, over all ranks.
void reduce_before(const LocalChains& local, Communicator& comm, MultiChainRun& out) {
  double props_before = 0.0, secs_before = 0.0;  // exact as a double below 2^53 proposals
  for (std::size_t i = 0; i < local.chains.size(); ++i) {
    props_before += static_cast<double>(local.proposals_before[i]);
    secs_before = std::max(secs_before, local.seconds_before[i]);
  }
  if (comm.size() > 1) {
    props_before = comm.allreduce_value(props_before, ReduceOp::kSum);
    secs_before = comm.allreduce_value(secs_before, ReduceOp::kMax);
  }
  out.proposals_before = static_cast<std::uint64_t>(props_before);
  out.seconds_before = secs_before;
}

/// Gathers every rank's chains to rank 0 (packed as doubles, padded to the longest pack);
/// other ranks keep their own. Collective.
void gather_chains(Communicator& comm, int d, LocalChains& local, MultiChainRun& out,
                   const std::optional<std::string>& scratch_dir) {
  const int rank = comm.rank(), size = comm.size();
  const std::size_t m = local.chains.size();
  std::vector<double> pack;
  for (std::size_t i = 0; i < m; ++i) pack_chain(pack, local.chains[i], local.results[i]);
  const auto len = static_cast<std::int64_t>(pack.size());
  const std::vector<std::int64_t> lens = comm.allgather(std::span<const std::int64_t>(&len, 1));
  const auto maxlen = static_cast<std::size_t>(*std::max_element(lens.begin(), lens.end()));
  pack.resize(maxlen, 0.0);
  std::vector<double> all(rank == 0 ? maxlen * static_cast<std::size_t>(size) : 0);
  comm.gather(pack.data(), all.data(), maxlen, DataType::kFloat64, 0);
  if (rank != 0) {
    out.chains = std::move(local.chains);
    out.results = std::move(local.results);
    return;
  }
  out.chains.resize(m * static_cast<std::size_t>(size));
  out.results.resize(out.chains.size());
  for (int r = 0; r < size; ++r) {
    const double* p = all.data() + static_cast<std::size_t>(r) * maxlen;
    for (std::size_t i = 0; i < m; ++i) {
      const std::size_t k = static_cast<std::size_t>(r) * m + i;
      if (r == 0) {
        out.chains[k] = std::move(local.chains[i]);
        out.results[k] = std::move(local.results[i]);
      } else {
        out.chains[k] = new_chain(scratch_dir);
        p = unpack_chain(p, d, out.chains[k], out.results[k]);
      }
    }
  }
}

/// The first compact index after chain `c`'s burn-in, clamped to the chain.
std::size_t burnin_cut(const MemoryChainSink& c, std::int64_t burnin) {
  return static_cast<std::size_t>(std::clamp<std::int64_t>(burnin, 0, static_cast<std::int64_t>(c.size())));
}

}  // namespace

// --- multi-chain --------------------------------------------------------------------------

MultiChainRun run_multi_chain(const DramOptions& options, const PointLogDensity& log_density, bool thread_safe,
                              Communicator& comm, int chains_per_rank, int threads,
                              const std::string& checkpoint_prefix, std::int64_t checkpoint_period_steps,
                              double checkpoint_period_seconds, bool overwrite, ChainSink* first_chain_tee,
                              std::span<const double> start_points, const std::optional<std::string>& scratch_dir) {
  HERD_REQUIRE(chains_per_rank >= 1, "chains_per_rank is {}, but must be >= 1", chains_per_rank);
  HERD_REQUIRE(start_points.empty() || start_points.size() == static_cast<std::size_t>(comm.size()) *
                                                                  static_cast<std::size_t>(chains_per_rank) *
                                                                  options.start_point.size(),
               "run_multi_chain: start_points has {} values, but must have chains x d = {} x {}", start_points.size(),
               comm.size() * chains_per_rank, options.start_point.size());
  Timer timer;
  const MultiChainJob job{.options = options,
                          .log_density = log_density,
                          .rank = comm.rank(),
                          .m = static_cast<std::size_t>(chains_per_rank),
                          .d = static_cast<int>(options.start_point.size()),
                          .checkpoint_prefix = checkpoint_prefix,
                          .checkpoint_period_steps = checkpoint_period_steps,
                          .checkpoint_period_seconds = checkpoint_period_seconds,
                          .overwrite = overwrite,
                          .first_chain_tee = first_chain_tee,
                          .start_points = start_points,
                          .scratch_dir = scratch_dir};
  LocalChains local(job.m, scratch_dir);
  run_local_chains(job, thread_safe, threads, local);
  MultiChainRun out;
  out.ranks = comm.size();
  out.chains_per_rank = chains_per_rank;
  reduce_before(local, comm, out);
  if (comm.size() == 1) {
    out.chains = std::move(local.chains);
    out.results = std::move(local.results);
  } else {
    gather_chains(comm, job.d, local, out, scratch_dir);
  }
  out.seconds = timer.seconds();
  return out;
}

MultiChainDiagnostics multi_chain_diagnostics(const std::vector<MemoryChainSink>& chains,
                                              const std::vector<std::int64_t>& burnin,
                                              const RefinementOptions& refinement) {
  HERD_REQUIRE(!chains.empty(), "multi_chain_diagnostics: no chains");
  HERD_REQUIRE(burnin.size() == chains.size(), "multi_chain_diagnostics: {} burn-in values for {} chains",
               burnin.size(), chains.size());
  const int d = chains[0].ndim;
  const std::size_t m = chains.size();
  // Verbose length after burn-in per chain; the cut is the shortest.
  std::size_t len = std::numeric_limits<std::size_t>::max();
  for (std::size_t c = 0; c < m; ++c) {
    HERD_REQUIRE(chains[c].ndim == d, "multi_chain_diagnostics: chain {} has dimension {}, chain 0 has {}", c,
                 chains[c].ndim, d);
    const std::size_t b = burnin_cut(chains[c], burnin[c]);
    std::size_t n = 0;
    ChainReader rd(chains[c], kWeightColumn);
    for (std::size_t i = b; i < chains[c].size(); ++i) n += static_cast<std::size_t>(rd.weight(i));
    HERD_REQUIRE(n > 0, "multi_chain_diagnostics: chain {} has no draw after its burn-in", c);
    len = std::min(len, n);
  }
  MultiChainDiagnostics out;
  out.draws = len;
  std::vector<double> values(m * len);
  for (int j = 0; j < d; ++j) {
    for (std::size_t c = 0; c < m; ++c) {
      const std::size_t b = burnin_cut(chains[c], burnin[c]);
      std::size_t t = 0;
      ChainReader rd(chains[c], kWeightColumn | kPointColumns, j);
      for (std::size_t i = b; i < chains[c].size() && t < len; ++i) {
        const std::int64_t wi = rd.weight(i);
        const double x = rd.x(i, static_cast<std::size_t>(j));
        for (std::int64_t w = 0; w < wi && t < len; ++w) values[c * len + t++] = x;
      }
    }
    const DrawsView view(values, m, len);
    out.summary.push_back(summarize(view));
  }
  // ParaDRAM's pairwise KS table of the refined samples (nearly independent draws, as the
  // test assumes; the autocorrelated chains give far too small p-values).
  if (m >= 2 && m <= 16) {
    std::vector<std::vector<std::vector<double>>> samples(static_cast<std::size_t>(d),
                                                          std::vector<std::vector<double>>(m));
    for (std::size_t c = 0; c < m; ++c) {
      const MemoryChainSink& ch = chains[c];
      const std::size_t b = burnin_cut(ch, burnin[c]);
      const std::size_t n = ch.size() - b;
      const auto du = static_cast<std::size_t>(d);
      std::vector<double> states(n * (du + 1));
      std::vector<std::int64_t> w(n);
      ChainReader rd(ch, kWeightColumn | kLogDensityColumn | kPointColumns);
      for (std::size_t i = 0; i < n; ++i) {
        w[i] = rd.weight(b + i);
        states[i * (du + 1)] = rd.log_density(b + i);
        const double* x = rd.point(b + i);
        std::copy(x, x + d, states.begin() + static_cast<std::ptrdiff_t>(i * (du + 1) + 1));
      }
      const RefinedSample rs = refine_sample(states, w, du + 1, refinement);
      for (std::size_t k = 0; k < rs.index.size(); ++k) {
        const double* x = rd.point(b + rs.index[k]);
        for (std::size_t j = 0; j < du; ++j)
          samples[j][c].insert(samples[j][c].end(), static_cast<std::size_t>(rs.weight[k]), x[j]);
      }
    }
    for (const auto& per_var : samples) out.ks.push_back(ks_pairwise(std::span<const std::vector<double>>(per_var)));
  }
  return out;
}

}  // namespace herd::mcmc
