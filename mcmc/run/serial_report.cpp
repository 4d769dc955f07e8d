// The reports of a serial, multi-chain or fork-join run (serial_run.hpp): `_report.html`,
// `_report.txt` (herd's sections, then ParaMonte's layout) and the terminal summary.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <span>

#include <fmt/format.h>

#include "../posterior_report_detail.hpp"
#include "herd/core/config.hpp"
#include "herd/io/atomic_file.hpp"
#include "herd/mcmc/posterior_report.hpp"
#include "herd/mcmc/proposal_setup.hpp"
#include "paramonte_report.hpp"
#include "serial_run.hpp"

namespace herd::mcmc::detail {

namespace {

/// The "Run" facts of the HTML report.
std::vector<std::pair<std::string, std::string>> html_facts(const SerialRun& r) {
  const SamplerSpecs& specs = r.specs;
  const std::size_t m = r.m;
  std::vector<std::pair<std::string, std::string>> facts = {
      {"dimension", std::to_string(r.d)},
      {"chains", fmt::format("{} ({}{})", m, specs.parallelization_model,
                             r.ranks > 1 ? fmt::format(", {} processes", r.ranks) : std::string())},
      {"random seed", std::to_string(specs.random_seed)},
      {"proposals (steps)", std::to_string(r.proposals)},
      {"accepted states (chain_size)", std::to_string(r.out.compact_size)},
      {"mean acceptance rate", fmt::format("{:.4f}", r.acceptance)},
      {"burn-in (compact index, chain 1)", std::to_string(r.out.burnin)},
      {"posterior draws (verbose, after burn-in)",
       m > 1 ? fmt::format("{} ({} chains x {}, cut to the shortest)", r.out.posterior_draws, m, r.ndraw)
             : std::to_string(r.out.posterior_draws)},
      {"refined sample size", std::to_string(r.out.sample_size)},
      {"sampling time (this invocation)", fmt::format("{:.3f} s", r.sampling_seconds)},
      {"outputs", specs.output_prefix + ".h5, _report.txt, _chain/_sample/_progress.txt"}};
  if (r.resumed) facts.emplace_back("resumed at proposal", std::to_string(r.proposals_before));
  return facts;
}

/// The chains' final proposal covariances (up to 4).
void html_covariances(const SerialRun& r, PosteriorReportData& h) {
  const auto du = static_cast<std::size_t>(r.d);
  for (std::size_t c = 0; c < r.m && c < 4; ++c)
    if (r.results[c].proposal_cov.size() == du * du)
      h.final_covariances.emplace_back(fmt::format("final proposal, chain {}", r.chains[c].chain_id + 1),
                                       r.results[c].proposal_cov);
  h.covariance_note =
      "herd-sample keeps the start and the final proposal covariance of each chain, not their "
      "history over the run: the figure shows those two.";
}

/// `_report.txt`'s header and "run" section up to the refined sample size.
std::string report_run(const SerialRun& r) {
  const SamplerSpecs& specs = r.specs;
  const std::size_t m = r.m;
  const DramResult& kr = r.results[0];
  std::string s = fmt::format("herd {} — DRAM sampler report (ParaDRAM-compatible)\n\n", HERD_VERSION_STRING);
  s += fmt::format("description: {}\ntarget: {}\ninput: {}\n\n", specs.description, r.target.description,
                   r.options.input_source);
  s += "== resolved specifications ==\n" + r.options.resolved_input + "\n";
  s += "== run ==\n";
  s += fmt::format("dimension                         {}\n", r.d);
  s += fmt::format("random seed                       {}\n", specs.random_seed);
  s += fmt::format("chains                            {}\n", m);
  s += fmt::format("proposals (steps)                 {}\n", r.proposals);
  s += fmt::format("log-density evaluations           {}\n", r.evaluations);
  s += fmt::format("accepted states (chain_size)      {}\n", r.out.compact_size);
  s += fmt::format("mean acceptance rate              {:.6f}\n", r.acceptance);
  if (m == 1) {
    for (std::size_t k = 0; k < kr.stage_accepted.size(); ++k)
      s += fmt::format("  accepted at stage {}             {}\n", k + 1, kr.stage_accepted[k]);
    s += fmt::format("adaptive updates                  {} ({} deferred, {} Cholesky failures)\n", kr.adaptive_updates,
                     kr.adaptive_updates_deferred, kr.chol_failures);
  }
  s += fmt::format("NaN log densities (as -inf)       {}\n", r.nan_count);
  s += fmt::format("proposals outside the domain      {}\n", r.ood);
  if (m == 1) {
    s += fmt::format("burn-in (likelihood rule)         {}\n", kr.burnin_likelihood);
    s += fmt::format("burn-in (adaptation measure rule) {}\n", kr.burnin_adaptation);
    s += fmt::format("burn-in used (compact index)      {}\n", r.out.burnin);
  }
  s += fmt::format("posterior draws (verbose)         {}{}\n", r.out.posterior_draws,
                   m > 1 ? fmt::format(" ({} chains x {}: cut to the shortest)", m, r.ndraw) : std::string());
  s += fmt::format("refined sample size               {}\n", r.out.sample_size);
  return s;
}

/// Times: this invocation's, and after a resume also the whole chain's (the earlier
/// invocations' sampling time as of the checkpoint resumed from, plus this one's); the
/// checkpoints.
std::string report_times(const SerialRun& r) {
  const std::size_t m = r.m;
  const double sampling_seconds = r.sampling_seconds;
  const auto props_now = static_cast<std::int64_t>(static_cast<std::uint64_t>(r.proposals) - r.proposals_before);
  std::string s = fmt::format("sampling time (this invocation)   {:.3f} s\n", sampling_seconds);
  s += fmt::format("total time (this invocation)      {:.3f} s\n", r.out.seconds);
  if (r.resumed) {
    s += fmt::format("resumed from the restart record at proposal {}{} (earlier invocations: {:.3f} s of sampling)\n",
                     r.proposals_before, m > 1 ? " (all chains)" : "", r.seconds_before);
    s += fmt::format("proposals (this invocation)       {}\n", props_now);
  }
  s += fmt::format("steps per second (this invocation) {:.4g}\n",
                   static_cast<double>(props_now) / std::max(sampling_seconds, 1e-9));
  if (r.resumed) {
    const double whole = r.seconds_before + sampling_seconds;
    s += fmt::format("sampling time (whole chain)       {:.3f} s\n", whole);
    s += fmt::format("steps per second (whole chain)    {:.4g}\n",
                     static_cast<double>(r.proposals) / std::max(whole, 1e-9));
  }
  if (r.checkpointing && r.multi)
    s += fmt::format("restart record                    {} (each rank checkpoints its own chains)\n", r.rdir);
  else if (r.checkpointing)
    s += fmt::format("checkpoints (this process)        {} in {:.3f} s ({:.2f}% of the sampling time); record in {}\n",
                     r.checkpoints, r.checkpoint_seconds,
                     100.0 * r.checkpoint_seconds / std::max(sampling_seconds, 1e-9), r.rdir);
  return s;
}

/// The per-chain table (several chains) and the final proposal covariance (chain 1).
std::string report_chains(const SerialRun& r) {
  const std::size_t m = r.m;
  const int d = r.d;
  std::string s;
  if (m > 1) {
    s += "== chains ==\n";
    s += fmt::format("{:>6} {:>12} {:>12} {:>10} {:>10} {:>12}\n", "chain", "proposals", "chain_size", "acceptance",
                     "burn-in", "post draws");
    for (std::size_t c = 0; c < m; ++c)
      s +=
          fmt::format("{:>6} {:>12} {:>12} {:>10.4f} {:>10} {:>12}\n", r.chains[c].chain_id + 1, r.results[c].proposals,
                      r.chains[c].size(), r.results[c].acceptance_rate, r.co[c].burnin, r.co[c].post_draws);
    s += "\n";
  }
  s += "== final proposal covariance" + std::string(m > 1 ? " (chain 1)" : "") + " ==\n";
  const DramResult& kr = r.results[0];
  const auto du = static_cast<std::size_t>(d);
  if (kr.proposal_cov.size() == du * du) {
    for (std::size_t i = 0; i < du; ++i) {
      for (std::size_t j = 0; j < du; ++j) s += fmt::format("{:>14.6e}", kr.proposal_cov[i * du + j]);
      s += "\n";
    }
  }
  return s;
}

/// The posterior's table, warnings, nested R-hat and the pairwise KS p-values.
std::string report_posterior(const SerialRun& r) {
  const SamplerSpecs& specs = r.specs;
  const std::size_t m = r.m;
  std::string s = m > 1 ? "\n== posterior (verbose chains after burn-in, cut to a common length): statistics and "
                          "diagnostics across chains ==\n"
                        : "\n== posterior (verbose chain after burn-in): statistics and diagnostics ==\n";
  s += format_summary_table(r.out.summary);
  if (!r.warnings.empty()) s += "\n== convergence warnings ==\n" + r.warnings;
  if (!r.nested.empty()) {
    s += fmt::format("\n== nested R-hat (Margossian et al. 2024): {} superchains of {} contiguous chains, {} ==\n",
                     r.nsuper, m / r.nsuper,
                     specs.random_start_point && specs.random_start_point_scope == "superchain"
                         ? "each superchain from its own random start"
                     : specs.random_start_point ? "every chain from its own random start"
                                                : "every chain from the same start");
    for (std::size_t k = 0; k < r.ncol; ++k) s += fmt::format("{:<20} {:.4f}\n", r.out.summary[k].name, r.nested[k]);
  }
  if (!r.ks.empty()) {
    s += "\n== pairwise two-sample Kolmogorov-Smirnov tests between chains (ParaDRAM): p-values ==\n";
    s += "tested: " + r.ks_tested + "\n";
    for (int j = 0; j < r.d; ++j) {
      s += specs.variable_names[static_cast<std::size_t>(j)] + ":\n";
      for (std::size_t a = 0; a < m; ++a) {
        for (std::size_t b = 0; b < m; ++b)
          s += fmt::format("{:>10.4f}", r.ks[static_cast<std::size_t>(j)][a * m + b].p_value);
        s += "\n";
      }
    }
  }
  return s;
}

/// The variables' posterior covariance `[d, d]`, over the verbose draws in order, from the
/// compact states: a state of weight w adds its products w times (RepeatedCovariance: the
/// sums of the expanded draws, bit for bit).
std::vector<double> covariance_of_posterior(const SerialRun& r) {
  const auto du = static_cast<std::size_t>(r.d);
  std::vector<double> mean(du, 0.0);
  for (std::size_t j = 0; j < du; ++j) mean[j] = r.out.summary[j].stats.mean;
  RepeatedCovariance sums(mean);
  for (std::size_t c = 0; c < r.m; ++c) {
    std::size_t left = r.ndraw;
    ChainReader rd(r.chains[c], kWeightColumn | kPointColumns);
    const std::size_t n = r.chains[c].size();  // (not inlined: out of the loop)
    for (std::size_t row = static_cast<std::size_t>(r.co[c].burnin); row < n && left > 0; ++row) {
      const auto take = std::min(static_cast<std::size_t>(rd.weight(row)), left);
      left -= take;
      sums.add(rd.point(row), static_cast<std::int64_t>(take));
    }
  }
  return sums.matrix(std::max<double>(1.0, static_cast<double>(r.m * r.ndraw) - 1.0));
}

/// The sample refinement's rounds of a single-chain run (none: several chains, or no round),
/// for `_report.txt` (`html` false: the title "sample refinement (<method>)") and the HTML
/// report (title "Sample refinement", the method in the caption); the method is named when
/// it is not the default (ParaMonte's "-max", "-compact", ...). One row per IAC evaluation.
std::optional<ReportTable> refinement_table(const SerialRun& r, bool html) {
  if (r.m != 1 || r.co[0].refined.rounds.empty()) return std::nullopt;
  ReportTable t;
  const std::string& method = r.specs.sample_refinement_method;
  const std::string label = method == "batch_means" ? std::string("batch-means integrated autocorrelation")
                            : method.rfind("batch_means", 0) == 0
                                ? fmt::format("batch-means integrated autocorrelation, {}", method)
                                : fmt::format("integrated autocorrelation, {}", method);
  t.title = html ? std::string("Sample refinement") : fmt::format("sample refinement ({})", label);
  t.header = {"round", "stage", "compact size", "verbose size", "IAC summary"};
  for (std::size_t k = 0; k < r.co[0].refined.rounds.size(); ++k) {
    const auto& rd = r.co[0].refined.rounds[k];
    t.rows.push_back({std::to_string(k + 1), rd.verbose_stage ? "verbose" : "compact", std::to_string(rd.compact_size),
                      std::to_string(rd.verbose_size), fmt::format("{:.4f}", rd.iac_summary)});
  }
  if (html) t.caption = fmt::format("Estimator: {}. ", label);
  t.caption +=
      "The refined sample (_sample.txt) is the post-burn-in chain thinned by its integrated autocorrelation time "
      "(IAC), summarized over the variables and the log density, as ParaDRAM refines it: the compact chain "
      "(accepted states), then the verbose one (every draw), unless the method names one of them. Each row is one IAC "
      "evaluation of a stage: a row whose "
      "IAC summary is at least 2 thinned that stage's chain with it as the step; the stage's last row, below 2 or at "
      "the round limit (sample_refinement_count), ended the stage.";
  return t;
}

/// Covariance and correlation of the variables, the refinement's rounds (single chain) and
/// the outputs.
std::string report_covariance(const SerialRun& r) {
  const int d = r.d;
  std::string s = "\n== posterior covariance ==\n";
  const std::vector<double>& cov = r.covariance;
  for (int i = 0; i < d; ++i) {
    for (int j = 0; j < d; ++j) s += fmt::format("{:>14.6e}", cov[i * d + j]);
    s += "\n";
  }
  s += "\n== posterior correlation ==\n";
  for (int i = 0; i < d; ++i) {
    for (int j = 0; j < d; ++j)
      s += fmt::format("{:>10.4f}", cov[i * d + j] / std::sqrt(cov[i * d + i] * cov[j * d + j]));
    s += "\n";
  }
  if (const auto t = refinement_table(r, false)) {
    s += fmt::format("\n== {} ==\n", t->title);
    s += fmt::format("{:>6} {:>8} {:>14} {:>14} {:>12}\n", t->header[0], t->header[1], t->header[2], t->header[3],
                     t->header[4]);
    for (const auto& row : t->rows)
      s += fmt::format("{:>6} {:>8} {:>14} {:>14} {:>12}\n", row[0], row[1], row[2], row[3], row[4]);
  }
  s += "\n== outputs ==\n";
  for (const auto& p : r.paths) s += p + "\n";
  return s;
}

/// The same facts in the layout of ParaMonte's report, so that ParaMonte's readers
/// (Python `readReport`, MATLAB) parse this file.
std::string report_paramonte(const SerialRun& r) {
  const DramResult& kr = r.results[0];
  ParamonteStats ps;
  ps.accepted = r.out.compact_size;
  ps.proposals = r.proposals;
  ps.evaluations = r.evaluations;
  ps.acceptance = r.acceptance;
  ps.seconds = r.out.seconds;
  ps.single_chain = r.m == 1;
  ps.burnin_likelihood = kr.burnin_likelihood;
  ps.burnin_adaptation = kr.burnin_adaptation;
  ps.posterior_draws = r.out.posterior_draws;
  ps.sample_size = r.out.sample_size;
  ps.ndim = r.d;
  return paramonte_report_part(r.target.description, r.options, ps, r.paths);
}

/// Quantity k's posterior states of chain c (posterior_states: from the burn-in on, the last
/// one's weight cut; then weight 0 up to the compact posterior's states), read in order from
/// the compact chain (its coordinate k, and the weights when asked for) or from the derived
/// quantities' columns: what compact_values and compact_posterior give, block by block.
class ChainStateSource final : public PosteriorStateSource {
 public:
  ChainStateSource(const SerialRun& r, const PosteriorStates& ps, std::size_t c, std::size_t k, bool weights)
      : ps_(ps), k_(k), d_(static_cast<std::size_t>(r.chains[c].ndim)), i_(ps.first) {
    if (k < d_) {
      chain_.emplace(r.chains[c], kPointColumns | (weights ? kWeightColumn : 0U), static_cast<int>(k));
    } else {
      derived_.emplace(r.co[c].derived);
      if (weights) chain_.emplace(r.chains[c], kWeightColumn);
    }
  }
  void read(std::span<double> values, std::span<std::uint32_t> weights) override {
    const std::size_t n = values.size();
    std::size_t j = 0;
    for (; j < n && i_ < ps_.end; ++j, ++i_) {
      values[j] = k_ < d_ ? chain_->x(i_, k_) : derived_->value(k_ - d_, i_);
      // (check_posterior_draws: a weight fits 32 bits)
      if (!weights.empty()) weights[j] = static_cast<std::uint32_t>(ps_.weight(i_, chain_->weight(i_)));
    }
    for (; j < n; ++j) {  // the padding
      values[j] = 0.0;
      if (!weights.empty()) weights[j] = 0;
    }
  }

 private:
  const PosteriorStates& ps_;
  std::size_t k_, d_, i_;
  std::optional<ChainReader> chain_;
  std::optional<DerivedReader> derived_;
};

}  // namespace

std::optional<std::string> html_report(SerialRun& r) {
  // _report.html: the same run with plots (posterior_report.hpp).
  const SamplerSpecs& specs = r.specs;
  r.phases.phase("writing " + specs.output_prefix + "_report.html");
  if (r.ndraw < 1) return std::nullopt;
  // The start proposal covariance as the kernel used it (DramOptions' rule).
  PosteriorReportData h = html_report_data(specs, r.target, r.options, "DRAM sampler (ParaDRAM-compatible)",
                                           r.out.summary, r.m, r.ndraw, judged_acceptance(r),
                                           start_covariance(r.dopt.proposal_start_cov, r.dopt.proposal_start_std, r.d));
  // The plots use every draw of the plotted quantities, as the compact posterior's weighted
  // states read block by block from the compact chain (open_states: the report's memory does
  // not grow with the chain; its weights are not held), two quantities at a time per thread:
  // the same report as the expanded draws give, from a few passes over the states instead
  // of the draws. The compact posterior's states per chain are those the diagnostics found.
  const CompactPosterior& cp = r.posterior;
  h.states = cp.states;
  h.open_states = [&r, &cp](std::size_t k, std::size_t c, bool weights) -> std::unique_ptr<PosteriorStateSource> {
    return std::make_unique<ChainStateSource>(r, cp.chains[c], c, k, weights);
  };
  // The ranges and quantiles the panels need, found by the diagnostics: one pass per pair.
  h.order_stats = r.report_stats;
  // On the diagnostics' threads (a source per thread and quantity): two quantities per thread.
  h.threads = diagnostics_threads_used(r.options.diagnostics_threads, r.ncol);
  h.facts = html_facts(r);
  for (std::size_t c = 0; c < r.m; ++c) h.chain_ids.push_back(r.chains[c].chain_id);
  for (std::size_t c = 0; c < r.m; ++c) h.history.push_back(chain_history(r.chains[c]));
  html_covariances(r, h);
  h.nested_rhat = r.nested;  // the verdicts judge superchains on nested R-hat
  h.superchains = r.nsuper;
  h.superchains_share_start = !specs.random_start_point;
  if (r.m > 1)
    h.notes.push_back("Several chains: R-hat and ESS are computed across the chains, cut to a common length.");
  if (auto t = refinement_table(r, true)) h.tables.push_back(std::move(*t));
  if (!r.text_files) h.notes.push_back("More than 64 chains: no per-chain text files; see the .h5 file.");
  return posterior_report_html(h);
}

void write_html_file(const SerialRun& r, const std::string& html) {
  io::write_file_atomic(r.specs.output_prefix + "_report.html",
                        std::as_bytes(std::span<const char>(html.data(), html.size())));
}

std::vector<double> posterior_covariance(const SerialRun& r) { return covariance_of_posterior(r); }

void write_text_report(SerialRun& r) {
  r.phases.phase("writing " + r.report_path);
  r.out.seconds = r.total.seconds();
  std::string s = report_run(r);
  s += report_times(r);
  s += "\n== time per phase (this invocation; the last one, writing this report, so far) ==\n" +
       r.phases.phase_table() + "\n";
  if (!r.parallel_report.empty()) s += "== parallelism ==\n" + r.parallel_report + "\n";
  s += report_chains(r);
  s += report_posterior(r);
  s += report_covariance(r);
  s += report_paramonte(r);
  write_report_file(r.report_path, s);
}

void print_terminal_summary(const SerialRun& r) {
  std::FILE* out = r.options.terminal;
  if (r.quiet || !out) return;
  std::fprintf(out, "%s", format_summary_table(r.out.summary).c_str());
  std::fprintf(out,
               "\n%lld chain%s, %lld steps, acceptance rate %.3f, burn-in %lld, %lld posterior draws, %lld in the "
               "refined sample, %.2f s\n",
               static_cast<long long>(r.m), r.m == 1 ? "" : "s", static_cast<long long>(r.proposals), r.acceptance,
               static_cast<long long>(r.out.burnin), static_cast<long long>(r.out.posterior_draws),
               static_cast<long long>(r.out.sample_size), r.out.seconds);
  std::fprintf(out, "%s", r.warnings.c_str());
  std::fprintf(out, "%s", outputs_list(r.paths).c_str());
}

}  // namespace herd::mcmc::detail
