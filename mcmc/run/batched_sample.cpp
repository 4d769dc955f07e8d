// A whole batched run: options, device checks, engine dispatch (herd/mcmc/run/batched_sample.hpp).
#include "herd/mcmc/run/batched_sample.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "herd/core/config.hpp"
#include "herd/core/device.hpp"
#include "herd/core/error.hpp"
#include "herd/core/mpi_communicator.hpp"
#include "herd/core/timer.hpp"
#include "herd/io/hdf5.hpp"
#include "herd/mcmc/run/batched_outputs.hpp"
#include "herd/mcmc/run/batched_record.hpp"
#include "herd/mcmc/run_progress.hpp"
#if HERD_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

namespace herd::mcmc {

namespace {

/// A point log density as a host functor for the fused (thread-pool) path.
struct HostPoint {
  const PointLogDensity* f;
  double operator()(const double* x, int d) const { return (*f)(x, d); }
};

/// One GPU per rank of a node: the node-local rank (MPI_Comm_split_type shared) picks it.
void select_cuda_device([[maybe_unused]] const BatchedDramOptions& o, [[maybe_unused]] Communicator& comm) {
#if HERD_HAVE_CUDA
  if (o.device != BatchedDevice::kCuda) return;
  const int n = cuda_device_count();
  const int local = node_local_rank(comm);
  if (n > 0 && cudaSetDevice(local % n) != cudaSuccess)
    throw Error(fmt::format("rank {}: cannot select CUDA device {}", comm.rank(), local % n));
#endif
}

/// Rank 0's progress line while sampling: warm-up or draws, proposals per chain, draws,
/// chain-steps/s over all processes, ETA (measured from this session's first line).
std::function<void(std::uint64_t, std::int64_t)> sampling_progress(RunProgress& phases, const SamplerSpecs& specs,
                                                                   int processes) {
  const auto total = static_cast<std::uint64_t>(specs.warmup + specs.chain_size);
  const std::int64_t ndraws = specs.chain_size / specs.thin;
  const double chains = static_cast<double>(processes) * static_cast<double>(specs.chains_per_rank);
  return [&phases, total, ndraws, chains, warm = static_cast<std::uint64_t>(specs.warmup),
          eta = EtaEstimator(static_cast<double>(total)), clock = Timer(), first = -1.0,
          k0 = std::uint64_t{0}](std::uint64_t k, std::int64_t drawn) mutable {
    const double now = clock.seconds();
    if (first < 0) {
      first = now;
      k0 = k;
    }
    const double left = eta.update(now, static_cast<double>(k));
    const double rate = now > first ? chains * static_cast<double>(k - k0) / (now - first) : 0.0;
    phases.detail(fmt::format("{} {}/{} proposals per chain, {}/{} draws  {:.3g} chain-steps/s  ETA {}",
                              k < warm ? "warm-up" : "draws", k, total, drawn, ndraws, rate,
                              std::isfinite(left) ? fmt::format("{:.1f} s", left) : std::string("unknown")),
                  static_cast<double>(k) / static_cast<double>(std::max<std::uint64_t>(total, 1)));
  };
}

/// The engine for the target: the device-callable built-in (`run_batched`, host or CUDA by
/// `o.device`), else the point log density on the thread pool (thread-safe) or in stage
/// rounds on this thread.
BatchedDramResult run_engine(const BatchedDramOptions& o, const SampleTarget& target, const BatchedTarget* batched,
                             BatchedDrawSink& sink) {
  if (batched != nullptr) return run_batched(o, *batched, sink);
  if (target.thread_safe) return run_batched_dram(o, HostPoint{&target.log_density}, sink);
  const PointLogDensity& f = target.log_density;
  return run_batched_dram(o, BatchedLogDensity([&f](const double* x, int n, int dd, double* out) {
                            for (int i = 0; i < n; ++i) out[i] = f(x + static_cast<std::ptrdiff_t>(i) * dd, dd);
                          }),
                          sink);
}

/// Rank 0, after sampling: diagnostics, derived quantities, the `.h5`, the reports, then the
/// bulk of the restart record is removed and the terminal summary printed.
void write_outputs(BatchedRunFacts& facts, io::H5File& h5, BatchedDrawStore& draws, RunProgress& phases,
                   const Timer& session, BatchedRestartRecord* record) {
  const SamplerSpecs& specs = *facts.specs;
  // The quantities' diagnostics on the cores (SampleRunOptions::diagnostics_threads, as the
  // serial run's); the same numbers as one thread gives. Every step reads the draws from the
  // store one quantity (or one group of chains) at a time.
  const std::size_t threads = facts.options->diagnostics_threads;
  BatchedPosterior post = summarize_batched_draws(draws, specs.variable_names, facts.superchains, threads);
  add_batched_quantities(h5, *facts.target, specs.variable_names, draws, post, facts.superchains, threads,
                         specs.h5_posterior != "compact");
  write_batched_serial_groups(h5, facts, draws, post);
  const std::string table = format_summary_table(post.rows);
  phases.phase("writing " + specs.output_prefix + ".h5");
  write_batched_h5_attributes(h5, facts);
  h5.commit();
  // R-hat, ESS and the acceptance rate checked as every engine checks them; in the report
  // and on the terminal, with what to try (a short warm-up leaves a batched run with a
  // poorly adapted proposal: hence "raise warmup").
  // With superchains, convergence is judged on nested R-hat (many short chains).
  std::string warnings =
      convergence_warnings(post.rows, static_cast<std::size_t>(facts.totals.num_chains), facts.totals.acceptance_rate,
                           kBatchedRunLonger, post.nested_rhat, facts.superchains);
  // NaN log densities count as -inf (rejected); the serial kernel warns at the first, the
  // batched kernels count them in lock-step: said once, at the end, with the count.
  if (facts.totals.nan_count > 0)
    warnings += fmt::format(
        "WARNING: the log density was NaN at {} trial(s), each counted as -inf (rejected): check the log density "
        "where the chains went (a NaN also comes from an error in the log density itself).\n",
        facts.totals.nan_count);
  facts.session_seconds = session.seconds();
  std::string rep = batched_text_report(facts, post, table, warnings);
  phases.phase("writing " + specs.output_prefix + "_report.html");
  write_batched_html_report(facts, post, draws);
  // _report.txt last, so that it gives the time of every phase before it.
  phases.phase("writing " + specs.output_prefix + "_report.txt");
  rep += "\n== time per phase (this session; the last one, writing this report, so far) ==\n" + phases.phase_table();
  write_text_output(specs.output_prefix + "_report.txt", rep);
  phases.finish();
  if (record != nullptr) record->discard();
  print_batched_summary(facts, table, warnings);
}

}  // namespace

BatchedDramOptions batched_options(const SamplerSpecs& s, int ndim, int rank, int ranks) {
  BatchedDramOptions o;
  const auto d = static_cast<std::size_t>(ndim);
  const std::int64_t first = static_cast<std::int64_t>(rank) * s.chains_per_rank;
  if (first + s.chains_per_rank > std::numeric_limits<std::uint32_t>::max())
    throw InputError(
        fmt::format("{} is {}, but processes x chains_per_rank ({} x {}) must stay below 2^32 (global "
                    "chain ids)",
                    key_reference(s, "chains_per_rank"), s.chains_per_rank, ranks, s.chains_per_rank));
  o.ndim = ndim;
  o.num_chains = s.chains_per_rank;
  o.first_chain_id = static_cast<std::uint32_t>(first);
  o.seed = s.random_seed;
  o.start_points.resize(static_cast<std::size_t>(s.chains_per_rank) * d);
  DramOptions k;
  for (std::int64_t i = 0; i < s.chains_per_rank; ++i) {
    // Only a random start point depends on the chain id.
    if (i == 0 || s.random_start_point)
      k = to_dram_options(s, ndim,
                          start_point_chain(s, static_cast<std::uint32_t>(first + i),
                                            static_cast<std::int64_t>(std::max(ranks, 1)) * s.chains_per_rank));
    std::copy(k.start_point.begin(), k.start_point.end(),
              o.start_points.begin() + static_cast<std::ptrdiff_t>(i) * ndim);
  }
  o.proposal_start_cov = k.proposal_start_cov;
  o.proposal_start_std = k.proposal_start_std;
  o.scale_factor = s.scale_factor;
  o.warmup = s.warmup;
  o.steps = s.chain_size;
  o.thin = s.thin;
  o.adaptation = s.batched_adaptation == "per_chain" ? BatchedAdaptation::kPerChain
                 : s.batched_adaptation == "none"    ? BatchedAdaptation::kNone
                                                     : BatchedAdaptation::kPooled;
  o.adaptive_update_period = s.adaptive_update_period;
  o.delayed_rejection_count = static_cast<int>(s.delayed_rejection_count);
  o.delayed_rejection_scale_factors = s.delayed_rejection_scale_factors;
  o.domain_lower = k.domain_lower;
  o.domain_upper = k.domain_upper;
  o.device = s.device == "cuda" ? BatchedDevice::kCuda : BatchedDevice::kHost;
  return o;
}

void check_batched_device(const SamplerSpecs& s, const BatchedTarget* batched, int ndim, int ranks) {
  if (s.device == "cpu") return;
  BatchedDramOptions probe = batched_options(s, ndim, ranks - 1, ranks);
  probe.num_chains = 1;
  probe.start_points.resize(static_cast<std::size_t>(ndim));
  probe.device = BatchedDevice::kHost;
  try {
    detail::BatchedEngine engine(probe);
  } catch (const Error& e) {
    throw InputError(fmt::format("device = \"{}\": {}", s.device, e.what()));
  }
  if (s.device != "cuda") return;
  if (batched == nullptr)
    throw InputError(
        "key \"device\" is \"cuda\", but device = \"cuda\" needs a built-in target (normal, banana, rosenbrock, "
        "funnel); "
        "use device = \"cpu_batched\" for this target");
  if (!HERD_HAVE_CUDA)
    throw InputError(
        "key \"device\" is \"cuda\", but this build of herd has no CUDA support; use device = \"cpu_batched\"");
  if (cuda_device_count() == 0)
    throw InputError(
        fmt::format("key \"device\" is \"cuda\", but no CUDA device is usable here ({}); use device = "
                    "\"cpu_batched\"",
                    describe_devices()));
}

void run_batched_sample(const SamplerSpecs& specs, const SampleTarget& target,
                        const std::shared_ptr<const BatchedTarget>& batched, const SampleRunOptions& options,
                        Communicator& comm, bool resuming) {
  const Timer session;
  const int rank = comm.rank(), size = comm.size();
  const bool root = rank == 0;
  BatchedDramOptions o = batched_options(specs, target.ndim, rank, size);
  o.communicator = &comm;  // pooled adaptation pools every rank's chains (layout-independent)
  select_cuda_device(o, comm);
  // Checkpoints (the serial run's settings): the restart record in <prefix>_restart/.
  std::unique_ptr<BatchedRestartRecord> record;
  if (specs.checkpoint_period > 0 || specs.checkpoint_period_seconds > 0) {
    record =
        std::make_unique<BatchedRestartRecord>(comm, specs, o, options.input_hash, resuming, options.legacy_input_hash);
    o.checkpointer = record.get();
  }
  // Progress on rank 0's terminal, phase by phase (RunProgress: an updating line on a
  // terminal, a line every 10 s in a log); the phases' times go into the report.
  const bool quiet = options.quiet || specs.silent_mode;
  RunProgress phases(options.terminal != nullptr ? options.terminal : stdout, quiet || !root);
  phases.phase("sampling");
  if (root && !quiet) o.progress = sampling_progress(phases, specs, size);
  io::H5File h5;
  if (root) h5 = io::H5File::create_atomic(specs.output_prefix + ".h5");
  // Rank 0 keeps the draws for the post-processing in a scratch file beside the outputs.
  const std::string scratch = std::filesystem::path(specs.output_prefix).parent_path().string();
  BatchedGatherSink sink(comm, root ? &h5 : nullptr, specs.variable_names, record ? record->draws() : nullptr,
                         record ? record->draws_done() : 0, o.block_draws, specs.h5_posterior != "compact", scratch);
  const BatchedDramResult r = run_engine(o, target, batched.get(), sink);
  phases.phase("post-processing: totals and diagnostics (R-hat, ESS, nested R-hat)");
  BatchedRunFacts facts;
  facts.totals = reduce_batched_result(r, o, comm);
  if (!root) return;
  facts.specs = &specs;
  facts.target = &target;
  facts.options = &options;
  facts.all_options = o;
  facts.all_options.num_chains = facts.totals.num_chains;
  facts.all_options.first_chain_id = 0;
  facts.processes = size;
  // Superchains of nested R-hat: the given ones (check_superchains: they divide the chains),
  // or the automatic choice.
  facts.superchains = specs.superchains >= 2 ? static_cast<std::size_t>(specs.superchains)
                                             : default_superchains(facts.totals.num_chains);
  facts.draws = sink.draws().draws();
  facts.record = record.get();
  write_outputs(facts, h5, sink.draws(), phases, session, record.get());
}

void use_batched_run(SamplerProgramInput& in, std::shared_ptr<const BatchedTarget> batched, const Communicator& comm) {
  if (in.specs.device == "cpu") return;
  check_batched_device(in.specs, batched.get(), in.target.ndim, comm.size());
  in.run_restartable = true;
  in.run = [batched = std::move(batched)](SamplerProgramInput& p, Communicator& c) {
    run_batched_sample(p.specs, p.target, batched, p.options, c, p.resuming);
  };
}

}  // namespace herd::mcmc
