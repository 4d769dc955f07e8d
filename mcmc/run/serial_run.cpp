// The serial kernel's run, `run_paradram` (paradram_run.hpp): a short sequence of phases
// over one context (serial_run.hpp), sampling by engine (serial DRAM, resumable, fork-join,
// multi-chain), then rank 0's post-processing and outputs.
#include "serial_run.hpp"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <future>
#include <limits>
#include <numeric>
#include <span>
#include <thread>

#include <fmt/format.h>
#include <hdf5.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "herd/core/error.hpp"
#include "herd/mcmc/diagnostics.hpp"
#include "herd/mcmc/parallel.hpp"
#include "herd/mcmc/posterior_report.hpp"

namespace herd::mcmc {

namespace detail {

namespace fs = std::filesystem;

SerialRun::SerialRun(const SamplerSpecs& s, const SampleTarget& t, const SampleRunOptions& o, Communicator& c)
    : specs(s),
      target(t),
      options(o),
      comm(c),
      d(t.ndim),
      rank(c.rank()),
      ranks(c.size()),
      root(rank == 0),
      quiet(o.quiet || s.silent_mode || !root),
      multi(s.parallelization_model == "multi_chain"),
      nchains(chain_count(s, ranks)),
      text_files(nchains <= kMaxTextChains),
      progress_path(s.output_prefix + "_progress.txt"),
      report_path(s.output_prefix + "_report.txt"),
      h5_path(s.output_prefix + ".h5"),
      scratch_dir(std::filesystem::path(s.output_prefix).parent_path().string()),
      paths(output_paths(s, ranks)),
      tf{s.output_delimiter, s.output_real_precision, s.output_column_width},
      checkpointing(s.checkpoint_period > 0 || s.checkpoint_period_seconds > 0),
      rdir(restart_folder(s)),
      progress(s, tf),
      phases(o.terminal, quiet) {}

double judged_acceptance(const SerialRun& r) {
  return r.proposals > 0 ? r.acceptance : std::numeric_limits<double>::quiet_NaN();
}

namespace {

/// Hands the free memory that malloc keeps in its arenas back to the system (glibc; elsewhere
/// nothing): called where a phase's large temporaries were freed, so that they do not stay
/// resident beside the next phase's.
void release_free_memory() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

/// Blocks of malloc from which on the post-processing maps each one of its own (glibc), so
/// that a freed one leaves the resident set at once.
constexpr std::size_t kMmapThreshold = std::size_t{2} << 20;

/// Makes glibc's malloc map every block of kMmapThreshold bytes or more (and unmap it when
/// freed) for the rest of the process, instead of its default: a threshold that rises to the
/// largest block freed so far (32 MiB at most), above which a thread's arena keeps up to twice
/// that at its top, resident, where malloc_trim does not reach (the arenas of other threads
/// than the main one). The post-processing frees and allocates blocks of 8 bytes per state
/// (a quantity's values, per diagnostics and HTML thread, the compact posterior's weights), so
/// those arenas held about 25 MB more than in use at 1e6 states, and made the run's peak.
/// The cost: the pages of such a block are faulted in each time it is allocated. Process-wide
/// (mallopt); elsewhere than glibc nothing.
void map_large_blocks() {
#if defined(__GLIBC__)
  (void)mallopt(M_MMAP_THRESHOLD, static_cast<int>(kMmapThreshold));
#endif
}

/// Set-up: the restart folder (rank 0, with checkpoints), the progress file and terminal
/// line, and rank 0's streamed text chain of a single chain.
void set_up(SerialRun& r) {
  // The diagnostics' rank budget is read from the environment once: read it here, so that a
  // malformed HERD_DIAGNOSTICS_RANK_BUDGET stops the run before it samples, not after.
  static_cast<void>(diagnostics_rank_budget());
  if (r.checkpointing && r.root) {
    std::error_code ec;
    fs::create_directories(r.rdir, ec);
    if (ec) throw IoError(fmt::format("cannot create the restart folder \"{}\": {}", r.rdir, ec.message()));
  }
  if (r.checkpointing && r.ranks > 1) r.comm.barrier();
  r.phases.phase("sampling");
  if (r.root) r.progress.open(r.progress_path);
  if (!r.quiet && r.options.terminal) r.progress.on_progress = terminal_progress(r.phases, r.specs);
  // A single chain's chain file (text or binary) is written while it samples (rank 0).
  if (r.root && !r.multi) {
    r.text = std::make_unique<ChainFileStream>(chain_file_path(r.specs, 1, 1), r.specs, r.tf);
    r.progress_text = progress_and_text(r.progress, *r.text);
  }
  r.tee = r.progress_text ? static_cast<ChainSink*>(r.progress_text.get())
          : r.root        ? static_cast<ChainSink*>(&r.progress)
                          : static_cast<ChainSink*>(&r.null_sink);
}

/// The restart record of a single chain (`run_resumable`, `run_fork_join`): its files, and
/// the streamed text chain and progress that follow its checkpoints and resumes.
ResumableOptions resumable_files(SerialRun& r) {
  ResumableOptions files;
  files.chain_path = r.rdir + "/chain_0.chain";
  files.checkpoint_path = r.rdir + "/chain_0.ckpt";
  files.period_steps = r.specs.checkpoint_period;
  files.period_seconds = r.specs.checkpoint_period_seconds;
  if (r.text && r.checkpointing) {
    r.text->set_durable();
    files.on_checkpoint = [&text = r.text](io::CheckpointWriter& w) { text->checkpoint(w); };
  }
  // The progress sink learns of a resume through ChainSink::resume_at (every engine).
  if (r.root && r.text)
    files.on_resume = [&text = r.text, chain = files.chain_path](const io::CheckpointReader& rd) {
      text->resume(rd, chain);
    };
  return files;
}

/// `multi_chain`: ranks x chains_per_rank chains, random starts per chain or superchain.
void sample_multi_chain(SerialRun& r) {
  const SamplerSpecs& specs = r.specs;
  std::vector<double> starts;
  if (specs.random_start_point)
    for (int c = 0; c < r.nchains; ++c) {
      const DramOptions oc =
          to_dram_options(specs, r.d, start_point_chain(specs, static_cast<std::uint32_t>(c), r.nchains));
      starts.insert(starts.end(), oc.start_point.begin(), oc.start_point.end());
    }
  MultiChainRun m = run_multi_chain(
      r.dopt, r.target.log_density, r.target.thread_safe, r.comm, static_cast<int>(specs.chains_per_rank), 0,
      r.checkpointing ? r.rdir + "/chain" : "", specs.checkpoint_period, specs.checkpoint_period_seconds, false,
      r.root ? r.tee : nullptr, starts, r.scratch_dir);
  r.chains = std::move(m.chains);
  r.results = std::move(m.results);
  r.resumed = m.proposals_before > 0;
  r.proposals_before = m.proposals_before;
  r.seconds_before = m.seconds_before;
  r.parallel_report += fmt::format("parallelization model             multi_chain\n");
  r.parallel_report +=
      fmt::format("ranks x chains per rank           {} x {} = {} chains\n", r.ranks, specs.chains_per_rank, r.nchains);
  r.parallel_report += fmt::format("sampling wall time                {:.3f} s\n", m.seconds);
  std::int64_t props = 0;
  for (const auto& x : r.results) props += x.proposals;
  r.parallel_report += fmt::format(
      "proposals per second (all chains, this invocation) {:.4g}\n",
      static_cast<double>(static_cast<std::uint64_t>(props) - m.proposals_before) / std::max(m.seconds, 1e-9));
}

/// The report's parallelism lines of a fork-join run over `ranks` ranks.
std::string fork_join_report(const ForkJoinRun& f, int ranks) {
  std::string rep = "parallelization model             single_chain (fork-join)\n";
  if (f.already_complete) return rep + "(the chain was complete in the restart record: nothing sampled)\n";
  const double tf_eval = f.mean_eval_seconds;
  const double measured =
      f.seconds > 0 ? static_cast<double>(f.result.proposals - static_cast<std::int64_t>(f.proposals_before)) *
                          tf_eval / f.seconds
                    : 0.0;
  rep += fmt::format("ranks                             {}\n", ranks);
  rep += fmt::format("rounds                            {}\n", f.rounds);
  rep += fmt::format("proposals decided per round       {:.4f}\n",
                     f.rounds > 0 ? static_cast<double>(std::accumulate(f.rank_proposals.begin(),
                                                                        f.rank_proposals.end(), std::int64_t{0})) /
                                        static_cast<double>(f.rounds)
                                  : 0.0);
  rep += fmt::format("mean log-density time             {:.4g} s\n", tf_eval);
  rep += fmt::format("communication time per round      {:.4g} s\n", f.comm_seconds_per_round);
  rep += fmt::format(
      "measured speedup                  {:.3f} (this invocation's proposals x mean log-density time / wall time "
      "{:.3f} s)\n",
      measured, f.seconds);
  rep += fmt::format("predicted speedup                 {:.3f} (cyclic-geometric model, Shahmoradi & Bagheri 2020)\n",
                     f.predicted_speedup);
  rep += "per-rank contributions (this run or, after a resume, its last part):\n";
  rep += fmt::format("{:>6} {:>20} {:>20}\n", "rank", "proposals decided", "stage-1 acceptances");
  for (int k = 0; k < ranks; ++k)
    rep += fmt::format("{:>6} {:>20} {:>20}\n", k, f.rank_proposals[static_cast<std::size_t>(k)],
                       f.rank_accepted[static_cast<std::size_t>(k)]);
  return rep;
}

/// `single_chain` over several ranks: fork-join.
void sample_fork_join(SerialRun& r, ResumableOptions& files) {
  MemoryChainSink memory(r.scratch_dir);
  FanSink fan(memory, *r.tee);
  ChainSink& sink = r.root && !r.checkpointing ? static_cast<ChainSink&>(fan) : *r.tee;
  ForkJoinRun f = run_fork_join(r.dopt, r.target.log_density, r.comm, sink, r.checkpointing ? &files : nullptr);
  r.text_done = !f.already_complete;
  r.already_complete = f.already_complete;
  r.resumed = f.resumed;
  r.proposals_before = f.proposals_before;
  r.seconds_before = f.seconds_before;
  r.checkpoints = f.checkpoints;
  r.checkpoint_seconds = f.checkpoint_seconds;
  // A chain sampled by this run needs no second check of what it wrote (or checked at the
  // resume); a complete record from an earlier process is checked.
  if (r.root && r.checkpointing)
    memory = f.already_complete ? read_resumable_chain(files.chain_path, r.d, files.checkpoint_path, r.scratch_dir)
                                : read_sampled_chain(files.chain_path, r.d, r.scratch_dir);
  r.chains.push_back(std::move(memory));
  r.results.push_back(f.result);
  r.parallel_report += fork_join_report(f, r.ranks);
}

/// One chain on one rank with checkpoints. The chain is kept as it is sampled (as
/// sample_serial keeps it), so that a fresh run does not read its chain file back; a resumed
/// or complete record's chain holds earlier invocations' states, and is read from the file.
void sample_resumable(SerialRun& r, ResumableOptions& files) {
  MemoryChainSink memory(r.scratch_dir);
  FanSink fan(memory, *r.tee);
  files.tee = &fan;
  const ResumableRun x = run_resumable(r.dopt, r.target.log_density, files);
  r.text_done = !x.already_complete;
  r.already_complete = x.already_complete;
  r.resumed = x.resumed;
  r.proposals_before = x.proposals_before;
  r.seconds_before = x.seconds_before;
  r.checkpoints = x.checkpoints;
  r.checkpoint_seconds = x.checkpoint_seconds;
  if (x.already_complete)
    r.chains.push_back(read_resumable_chain(files.chain_path, r.d, files.checkpoint_path, r.scratch_dir));
  else if (x.resumed) r.chains.push_back(read_sampled_chain(files.chain_path, r.d, r.scratch_dir));
  else r.chains.push_back(std::move(memory));
  r.results.push_back(x.result);
}

/// One chain on one rank, in memory.
void sample_serial(SerialRun& r) {
  MemoryChainSink memory(r.scratch_dir);
  FanSink fan(memory, *r.tee);
  DramSampler sampler(r.dopt, r.target.log_density);
  r.results.push_back(sampler.run(fan));
  r.chains.push_back(std::move(memory));
  r.text_done = true;
}

/// Sampling by engine; then the progress file and the streamed text chain are closed.
void sample(SerialRun& r) {
  const Timer sampling;
  ResumableOptions files = resumable_files(r);
  r.dopt = to_dram_options(r.specs, r.d, 0);
  try {
    if (r.multi) sample_multi_chain(r);
    else if (r.ranks > 1) sample_fork_join(r, files);
    else if (r.checkpointing) sample_resumable(r, files);
    else sample_serial(r);
  } catch (...) {
    try {
      r.progress.close();
      if (r.text) r.text->close();
    } catch (...) {
    }
    throw;
  }
  r.sampling_seconds = sampling.seconds();
  // A chain finished by an earlier invocation has no progress of this one to report (its
  // counts would read as 0 accepted of every step, and warn of a stuck chain).
  if (!r.results.empty() && !r.already_complete) r.progress.finish(static_cast<std::uint64_t>(r.results[0].proposals));
  r.progress.close();
  if (r.text) {
    r.text->close();  // the writer's writeback time is final once it is closed
    r.checkpoint_seconds += r.text->writeback_seconds;
  }
  r.text_done = r.text_done && r.text != nullptr;
}

/// Rank 0: each chain's outputs (burn-in, posterior draws, refined sample), the counts of
/// the summary and the posterior's common length.
void summarize_chains(SerialRun& r) {
  r.m = r.chains.size();
  map_large_blocks();
  r.phases.phase("post-processing: burn-in, posterior draws, refined sample");
  for (std::size_t c = 0; c < r.m; ++c) {
    if (r.m > 1) r.phases.detail(fmt::format("chain {} of {}", c + 1, r.m));
    r.co.push_back(chain_outputs(r.specs, r.target, r.chains[c], r.results[c]));
  }
  r.phases.phase("post-processing: diagnostics (R-hat, ESS, MCSE, KS)");
  r.out.kernel = r.results[0];
  r.out.chains = r.results;
  for (std::size_t c = 0; c < r.m; ++c) {
    r.out.compact_size += static_cast<std::int64_t>(r.chains[c].size());
    r.out.verbose_size += r.chains[c].total_weight();
    r.out.sample_size += static_cast<std::int64_t>(r.co[c].sample_rows.size());
  }
  r.out.burnin = r.co[0].burnin;
  // The posterior: the post-burn-in verbose chains cut to a common length.
  r.ndraw = r.co[0].post_draws;
  for (const auto& x : r.co) r.ndraw = std::min(r.ndraw, x.post_draws);
  r.out.posterior_draws = static_cast<std::int64_t>(r.ndraw * r.m);
  r.ncol = r.co[0].columns.size();
  // The refinement's temporaries (about 100 bytes per state) are freed: out of the resident
  // set before the diagnostics' scratch comes in.
  release_free_memory();
}

/// The chain and sample text files (up to kMaxTextChains chains).
void write_text_files(const SerialRun& r) {
  if (!r.text_files) return;
  const auto m = static_cast<int>(r.m);
  for (std::size_t c = 0; c < r.m; ++c) {
    const int k = static_cast<int>(r.chains[c].chain_id) + 1;
    if (!(c == 0 && r.text_done))  // else streamed while sampling
      write_chain_file(chain_file_path(r.specs, m, k), r.specs, r.tf, r.chains[c], m == 1 ? 1 : k);
    write_sample_file(sample_file_path(r.specs, m, k), r.specs, r.tf, r.chains[c], r.d, r.co[c].sample_rows);
  }
}

/// ParaDRAM's pairwise KS table, of the chains' refined samples: the test assumes
/// independent draws, which the refined (thinned) samples nearly are; the verbose chains'
/// autocorrelated draws give far too small p-values.
void ks_table(SerialRun& r) {
  const bool ks_samples_ok =
      std::all_of(r.co.begin(), r.co.end(), [](const ChainOutputs& x) { return !x.sample_rows.empty(); });
  if (r.m >= 2 && r.m <= static_cast<std::size_t>(kMaxKsChains) && ks_samples_ok) {
    std::vector<std::vector<double>> samples(r.m);
    for (int j = 0; j < r.d; ++j) {
      for (std::size_t c = 0; c < r.m; ++c) {
        samples[c].clear();
        ChainReader rd(r.chains[c], kPointColumns, j);  // the rows are in increasing order
        r.co[c].sample_rows.for_each(
            r.chains[c], [&](std::size_t row) { samples[c].push_back(rd.x(row, static_cast<std::size_t>(j))); });
      }
      r.ks.push_back(ks_pairwise(std::span<const std::vector<double>>(samples)));
    }
  }
  // Which draws the table tested, for the report and the .h5.
  r.ks_tested = r.specs.sample_size > 0
                    ? fmt::format(
                          "the chains' samples of sample_size = {} evenly spaced draws (thinned only as far as that "
                          "spacing goes)",
                          r.specs.sample_size)
                : r.specs.sample_refinement_count == 0
                    ? std::string(
                          "the chains' unrefined samples (sample_refinement_count = 0: every post-burn-in draw, "
                          "autocorrelated, so the p-values are too small)")
                    : std::string(
                          "the chains' refined samples (thinned by their integrated autocorrelation time: nearly "
                          "independent draws, as the test assumes)");
}

/// The summary rows, nested R-hat over the superchains (contiguous global chain ids;
/// check_superchains made sure they divide the chains) and the KS table.
void compute_diagnostics(SerialRun& r) {
  r.nsuper = static_cast<std::size_t>(r.specs.superchains);
  const bool with_nested = r.nsuper >= 2 && r.m % r.nsuper == 0 && r.ndraw >= 1;
  // Quantities on the cores, beside the writer thread; the same numbers as one thread gives.
  // Each thread holds one quantity's compact values (8 bytes per state, lent to summarize for
  // its z-scores once it has read them) and the diagnostics' scratch (sort records and draws
  // per state: 13 bytes per state, plus the ESS's buffers), and the threads share one z
  // table (1.25 bytes per verbose draw). The views are weighted (the compact
  // posterior): the diagnostics rank the compact states instead of every verbose draw, with
  // the verbose column's results.
  // The compact posterior's states per chain are kept for the HTML report (found once). The threads' values
  // buffers (r.value_buffers, summarize_all's caller-kept form) are handed from quantity to
  // quantity as left: compact_values resizes each to the same size and overwrites every
  // entry, so none is zero-filled first (summarize_all's own buffers come back emptied, and
  // each quantity's resize value-initialised 8 bytes per state); the nested R-hat's views
  // reuse one of them.
  // Past the diagnostics' budget (diagnostics_out_of_core) the quantities are streamed: their
  // values and weights read from the chain block by block (compact_values_reader,
  // compact_weights_reader), no values buffer per thread and no weights held (4 bytes per
  // state); the nested R-hat too reads them so.
  r.posterior = compact_posterior(r, false);
  const bool streamed = diagnostics_out_of_core(r.m, r.posterior.states);
  if (!streamed) fill_compact_weights(r, r.posterior);
  const CompactPosterior& cp = r.posterior;
  const auto view = [&](std::size_t k, std::vector<double>& values) {
    compact_values(r, cp, k, values);
    return DrawsView(values, cp.weights, r.m, cp.states);
  };
  // Past diagnostics_rank_budget() (long chains), a quantity's sort records are spilled to
  // scratch files beside the chain's (the outputs' folder) for the time of its rank part.
  const std::string saved_dir = diagnostics_scratch_dir();
  set_diagnostics_scratch_dir(r.scratch_dir.empty() ? std::string(".") : r.scratch_dir);
  struct RestoreDir {
    const std::string& dir;
    ~RestoreDir() { set_diagnostics_scratch_dir(dir); }
  } restore{saved_dir};
  // The HTML report's plotted quantities: their range and the quantiles their panels use,
  // from the values held here (before summarize takes the buffer over), so that the report
  // reads each one's states once, block by block, instead of holding them.
  // Streamed, the HTML report finds its order statistics from the chain itself.
  r.report_stats.assign(streamed ? 0 : std::min(r.ncol, kPlotQuantities), {});
  const auto view_and_stats = [&](std::size_t k, std::vector<double>& values) {
    if (streamed) return DrawsView(compact_values_reader(r, cp, k), compact_weights_reader(r, cp), r.m, cp.states);
    compact_values(r, cp, k, values);
    if (k < r.report_stats.size()) r.report_stats[k] = report_order_stats(values, cp.weights, r.m);
    return DrawsView(values, cp.weights, r.m, cp.states);
  };
  const auto stats = summarize_all(r.ncol, view_and_stats, r.options.diagnostics_threads, r.value_buffers);
  if (with_nested && r.value_buffers.empty()) r.value_buffers.resize(1);
  for (std::size_t k = 0; k < r.ncol; ++k) {
    r.out.summary.push_back({r.co[0].columns[k].name, stats[k]});
    if (!with_nested) continue;
    if (streamed)
      r.nested.push_back(nested_rhat(
          DrawsView(compact_values_reader(r, cp, k), compact_weights_reader(r, cp), r.m, cp.states), r.nsuper));
    else r.nested.push_back(nested_rhat(view(k, r.value_buffers[0]), r.nsuper));
  }
  ks_table(r);
  // The HTML report reads each chain's posterior states and their weights from the chain
  // block by block (cp.chains, cp.states): the weights, 4 bytes per state, are freed here.
  // (A fresh vector: `= {}` would keep the capacity, 4 bytes per state, through the run.)
  r.posterior.weights = std::vector<std::uint32_t>();
  // The diagnostics' scratch (sort records, split and z-scaled draws, FFT buffers) and the
  // values buffers are not needed by the writing phases, nor what malloc keeps in its arenas
  // once freed, which the HTML report's buffers would otherwise come on top of.
  r.value_buffers = {};
  release_diagnostics_workspace();
  release_free_memory();
}

/// Totals over the chains, the mean acceptance rate and the convergence warnings.
void run_totals(SerialRun& r) {
  for (const auto& x : r.results) {
    r.proposals += x.proposals;
    r.evaluations += x.evaluations;
    r.nan_count += x.nan_count;
    r.ood += x.out_of_domain;
  }
  for (const auto& x : r.results) r.acceptance += x.acceptance_rate * static_cast<double>(x.proposals);
  r.acceptance /= std::max<double>(1.0, static_cast<double>(r.proposals));
  r.warnings = convergence_warnings(r.out.summary, r.m, judged_acceptance(r), "raise chain_size", r.nested, r.nsuper);
}

/// The chain and sample text files and the .h5 but its diagnostics group do not depend on
/// the diagnostics: a second thread writes them while this one computes the diagnostics
/// (HDF5, not thread-safe, is called by one thread at a time: the writer until it is done,
/// then this one), and then fsyncs the .h5's data so far, so that the commit's fsync has
/// little left to write. Then this thread builds the HTML report (it needs no HDF5) while
/// the writer finishes; the phases show the time left to wait for the writer. Then the
/// `.h5`'s diagnostics, the file is committed, and the HTML report is stored (after the
/// .h5, as before: a run whose .h5 fails leaves no new report).
/// The `.h5`'s size from which its draws are fsynced by the writer thread (H5File::sync_data,
/// not a durability point) before the commit's fsync: below it, the commit's one fsync
/// writes them at no more cost, where a second fsync costs one more journal commit (about
/// 5-8 ms of wall time on ext4 here, most of a small run's `.h5` phase).
constexpr std::uint64_t kSyncDataBytes = std::uint64_t{4} << 20;

void write_files_and_diagnostics(SerialRun& r) {
  std::optional<io::H5File> h5;
  std::promise<void> text_written, draws_written;
  std::future<void> text_ready = text_written.get_future(), draws_ready = draws_written.get_future();
  std::jthread writer([&] {
    try {
      write_text_files(r);
      text_written.set_value();
    } catch (...) {
      text_written.set_exception(std::current_exception());
      draws_written.set_value();  // not written: the text files' error is reported first
      return;
    }
    try {
      write_h5_draws(r, h5);
      release_free_memory();  // the writer's column buffers, while the diagnostics go on
      // The draws to disk now, off the main thread's path (a small file: at the commit).
      hsize_t bytes = 0;
      if (H5Fget_filesize(h5->id(), &bytes) < 0 || bytes >= kSyncDataBytes) h5->sync_data();
      draws_written.set_value();
    } catch (...) {
      draws_written.set_exception(std::current_exception());
    }
  });
  compute_diagnostics(r);
  if (r.text_files) r.phases.phase("writing the chain and sample text files");
  text_ready.get();
  run_totals(r);
  // The text report's covariance (about 0.05 s of additions at 1.6e6 draws of 10 variables)
  // beside the HTML report's plots.
  std::future<std::vector<double>> covariance =
      std::async(std::launch::async, [&r] { return posterior_covariance(r); });
  const std::optional<std::string> html = html_report(r);
  r.covariance = covariance.get();
  // <prefix>.h5, written atomically: the draws by the writer thread, then the diagnostics.
  r.phases.phase("writing " + r.h5_path);
  draws_ready.get();
  writer.join();
  write_h5_diagnostics(*h5, {.summary = r.out.summary,
                             .nested_rhat = r.nested,
                             .superchains = r.nsuper,
                             .ks = r.ks,
                             .chains = r.m,
                             .ks_tested = r.ks_tested});
  h5->commit();
  if (html) write_html_file(r, *html);
}

}  // namespace

PosteriorStates posterior_states(const SerialRun& r, std::size_t c) {
  ChainReader weight(r.chains[c], kWeightColumn);
  const std::size_t n = r.chains[c].size();
  PosteriorStates ps;
  ps.first = ps.end = static_cast<std::size_t>(r.co[c].burnin);
  auto left = static_cast<std::int64_t>(r.ndraw);
  while (left > 0 && ps.end < n) {
    ps.last_weight = std::min(weight.weight(ps.end++), left);
    left -= ps.last_weight;
  }
  return ps;
}

void check_posterior_draws(std::size_t chains, std::size_t draws) {
  constexpr std::uint64_t kMax = std::numeric_limits<std::uint32_t>::max();
  HERD_REQUIRE(draws <= kMax && chains <= kMax && std::uint64_t{chains} * draws <= kMax,
               "the posterior has {} chains x {} draws, but the diagnostics support at most 2^32 - 1 = {} draws in "
               "all (a lower chain_size, or fewer chains)",
               chains, draws, kMax);
}

CompactPosterior compact_posterior(const SerialRun& r, bool weights) {
  check_posterior_draws(r.m, r.ndraw);
  CompactPosterior cp;
  std::vector<PosteriorStates>& ps = cp.chains;
  ps.resize(r.m);
  for (std::size_t c = 0; c < r.m; ++c) {
    ps[c] = posterior_states(r, c);
    cp.states = std::max(cp.states, ps[c].end - ps[c].first);
  }
  if (weights) fill_compact_weights(r, cp);
  return cp;
}

void fill_compact_weights(const SerialRun& r, CompactPosterior& cp) {
  const std::vector<PosteriorStates>& ps = cp.chains;
  // Each chain's weights, then its padding: every entry written once (no zero fill first).
  cp.weights.reserve(r.m * cp.states);
  for (std::size_t c = 0; c < r.m; ++c) {
    ChainReader rd(r.chains[c], kWeightColumn);
    for (std::size_t i = ps[c].first; i < ps[c].end; ++i)
      cp.weights.push_back(static_cast<std::uint32_t>(ps[c].weight(i, rd.weight(i))));
    cp.weights.resize((c + 1) * cp.states, 0);
  }
}

void compact_values(const SerialRun& r, const CompactPosterior& cp, std::size_t k, std::vector<double>& out) {
  out.resize(r.m * cp.states);  // every entry written below (no fill first)
  for (std::size_t c = 0; c < r.m; ++c) {
    const PosteriorStates& ps = cp.chains[c];
    double* to = out.data() + c * cp.states;
    const auto d = static_cast<std::size_t>(r.chains[c].ndim);
    if (k >= d) {  // a derived quantity: no coordinate read
      DerivedReader dq(r.co[c].derived);
      for (std::size_t i = ps.first; i < ps.end; ++i) *to++ = dq.value(k - d, i);
    } else {
      ChainReader rd(r.chains[c], kPointColumns, static_cast<int>(k));
      for (std::size_t i = ps.first; i < ps.end; ++i) *to++ = rd.x(i, k);
    }
    std::fill(to, out.data() + (c + 1) * cp.states, 0.0);  // the padding
  }
}

namespace {

/// Walks entries [first, first + out.size()) of the compact posterior's `[chain, states]`
/// layout (each chain padded to cp.states) one chain's run at a time: `fill(c, state, real,
/// to)` writes the `real` entries of chain c's own states from `state` on to `to`; the run's
/// padding after them gets 0. The readers below share it.
template <class T, class Fill>
void read_compact_layout(const CompactPosterior& cp, std::size_t first, std::span<T> out, Fill&& fill) {
  T* to = out.data();
  const T* end = to + out.size();
  std::size_t at = first;
  while (to < end) {
    const std::size_t c = at / cp.states, i0 = at % cp.states;
    const std::size_t take = std::min(static_cast<std::size_t>(end - to), cp.states - i0);
    const PosteriorStates& ps = cp.chains[c];
    const std::size_t have = ps.end - ps.first;  // the chain's own states; the rest pads
    const std::size_t real = i0 < have ? std::min(take, have - i0) : 0;
    if (real > 0) fill(c, ps.first + i0, real, to);
    std::fill(to + real, to + take, T{0});  // the padding
    to += take;
    at += take;
  }
}

}  // namespace

DrawsReader compact_values_reader(const SerialRun& r, const CompactPosterior& cp, std::size_t k) {
  return [&r, &cp, k](std::size_t first, std::span<double> out) {
    read_compact_layout(cp, first, out, [&](std::size_t c, std::size_t state, std::size_t real, double* to) {
      const auto d = static_cast<std::size_t>(r.chains[c].ndim);
      if (k >= d) {  // a derived quantity: no coordinate read
        DerivedReader dq(r.co[c].derived);
        for (std::size_t i = 0; i < real; ++i) to[i] = dq.value(k - d, state + i);
        return;
      }
      // Block by block of the chain: each block's run of the column copied at once.
      ChainReader rd(r.chains[c], kPointColumns, static_cast<int>(k));
      for (std::size_t i = 0; i < real;) {
        const std::size_t at_state = state + i;
        const ChainBlock& b = rd.at(at_state);
        const std::size_t run = std::min(real - i, b.first + b.count - at_state);
        const double* from = b.points + (at_state - b.first) * b.state_stride + (k - b.coord_first) * b.coord_stride;
        if (b.state_stride == 1) std::copy_n(from, run, to + i);
        else
          for (std::size_t u = 0; u < run; ++u) to[i + u] = from[u * b.state_stride];
        i += run;
      }
    });
  };
}

WeightsReader compact_weights_reader(const SerialRun& r, const CompactPosterior& cp) {
  return [&r, &cp](std::size_t first, std::span<std::uint32_t> out) {
    read_compact_layout(cp, first, out, [&](std::size_t c, std::size_t state, std::size_t real, std::uint32_t* to) {
      // Block by block of the chain's weight column; the posterior's last state takes its
      // cut weight (PosteriorStates::weight), as compact_posterior writes it.
      const PosteriorStates& ps = cp.chains[c];
      ChainReader rd(r.chains[c], kWeightColumn);
      for (std::size_t i = 0; i < real;) {
        const std::size_t at_state = state + i;
        const ChainBlock& b = rd.at(at_state);
        const std::size_t run = std::min(real - i, b.first + b.count - at_state);
        const std::int64_t* from = b.weight + (at_state - b.first);
        for (std::size_t u = 0; u < run; ++u) to[i + u] = static_cast<std::uint32_t>(ps.weight(at_state + u, from[u]));
        i += run;
      }
    });
  };
}

}  // namespace detail

SampleRunSummary run_paradram(const SamplerSpecs& specs, const SampleTarget& target, const SampleRunOptions& options) {
  SelfCommunicator self;
  return run_paradram(specs, target, options, self);
}

SampleRunSummary run_paradram(const SamplerSpecs& specs, const SampleTarget& target, const SampleRunOptions& options,
                              Communicator& comm) {
  HERD_REQUIRE(target.ndim >= 1 && target.log_density, "sampler: the target has ndim {} and {} log density",
               target.ndim, target.log_density ? "a" : "no");
  detail::SerialRun r(specs, target, options, comm);
  detail::set_up(r);
  detail::sample(r);
  if (!r.root) return {};
  detail::summarize_chains(r);
  detail::write_files_and_diagnostics(r);
  // _report.txt last, so that it gives the time of every phase before it.
  detail::write_text_report(r);
  r.phases.finish();
  r.out.paths = r.paths;
  detail::print_terminal_summary(r);
  return std::move(r.out);
}

}  // namespace herd::mcmc
