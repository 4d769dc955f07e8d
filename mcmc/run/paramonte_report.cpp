// The ParaMonte-layout part of the report (paramonte_report.hpp).
#include "paramonte_report.hpp"

#include <sys/utsname.h>

#include <algorithm>

#include <fmt/format.h>

#include "herd/core/config.hpp"

namespace herd::mcmc::detail {

namespace {

const std::string kRule(132, '*');

/// A title framed by ParaMonte's banner of "****" lines.
std::string framed(const std::string& title) {
  const std::size_t inner = 124;
  const std::string t = title.substr(0, inner);
  const std::size_t left = (inner - t.size()) / 2;
  const std::string blank = "****" + std::string(inner, ' ') + "****\n";
  return kRule + "\n" + blank + "****" + std::string(left, ' ') + t + std::string(inner - left - t.size(), ' ') +
         "****\n" + blank + kRule + "\n";
}

/// `text` with every non-empty line indented by 8 blanks.
std::string indented(const std::string& text) {
  std::string out;
  std::size_t start = 0;
  while (start < text.size()) {
    const std::size_t nl = text.find('\n', start);
    const std::string line = text.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
    out += line.empty() ? "\n" : "        " + line + "\n";
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  return out;
}

/// The banner and the sections before the statistics.
std::string paramonte_sections(const std::string& target, const SampleRunOptions& options, const ParamonteStats& ps,
                               const std::vector<std::string>& paths) {
  std::string r = "\n" + kRule + "\n" + kRule + "\n";
  r += framed(fmt::format("herd {}: the report in the layout of ParaMonte's ParaDRAM report", HERD_VERSION_STRING));
  r += kRule + "\n\n";
  r += framed("ParaMonte library interface specifications") + "\n";
  r += indented(fmt::format("herd {} DRAM sampler, ParaDRAM-compatible (C, C++, Fortran and herd-sample)\n",
                            HERD_VERSION_STRING)) +
       "\n";
  struct utsname u {};
  std::string platform = "unknown";
  if (uname(&u) == 0) platform = fmt::format("{} {} {} ({})", u.sysname, u.release, u.machine, u.nodename);
  r += framed("Runtime platform specifications") + "\n" + indented(platform + "\n") + "\n";
  std::string env = fmt::format("input: {}\ntarget: {}\noutputs:\n", options.input_source, target);
  for (const auto& p : paths) env += "    " + p + "\n";
  r += framed("Setting up the ParaDRAM simulation environment") + "\n" + indented(env) + "\n";
  r += framed("ParaDRAM simulation specifications") + "\n";
  r += indented(fmt::format("ndim = {}\n", ps.ndim) + options.resolved_input) + "\n";
  return r;
}

/// The `stats.*` records.
std::string paramonte_stats(const ParamonteStats& ps) {
  std::string r = framed("The statistical properties of the simulation") + "\n";
  auto stat = [&](const std::string& name, const std::string& value, const std::string& desc) {
    r += "stats." + name + "\n\n        " + value + "\n\n        ParaDRAM - NOTE: " + desc + "\n\n";
  };
  stat("numFuncCall.accepted", std::to_string(ps.accepted),
       "This is the total number of accepted function calls (unique samples, the compact chain length).");
  stat("numFuncCall.acceptedRejected", std::to_string(ps.proposals),
       "This is the total number of accepted or rejected proposals (the verbose Markov chain length).");
  stat("numFuncCall.acceptedRejectedDelayed", std::to_string(ps.evaluations),
       "This is the total number of log-density evaluations, delayed-rejection stages included.");
  stat("chain.verbose.efficiency.meanAcceptanceRate", fmt::format("{:.17g}", ps.acceptance),
       "This is the mean acceptance rate of the Markov chain.");
  stat("chain.verbose.efficiency.acceptedOverAcceptedRejected",
       fmt::format("{:.17g}",
                   static_cast<double>(ps.accepted) / std::max<double>(1.0, static_cast<double>(ps.proposals))),
       "This is the number of accepted proposals divided by the number of accepted and rejected proposals.");
  stat("time.total", fmt::format("{:.17g}", ps.seconds), "This is the total runtime in seconds.");
  if (ps.single_chain) {
    stat("chain.compact.burnin.location.likelihoodBased", std::to_string(ps.burnin_likelihood),
         "This is the burnin location in the compact chain, by the likelihood rule.");
    stat("chain.compact.burnin.location.adaptationBased", std::to_string(ps.burnin_adaptation),
         "This is the burnin location in the compact chain, by the adaptation measure rule.");
  }
  stat("chain.verbose.length.burninExcluded", std::to_string(ps.posterior_draws),
       "This is the length of the verbose Markov chain after the burnin.");
  stat("chain.refined.ess", std::to_string(ps.sample_size),
       "This is the size of the final refined sample (its effective sample size estimate).");
  return r;
}

}  // namespace

std::string paramonte_report_part(const std::string& target, const SampleRunOptions& options, const ParamonteStats& ps,
                                  const std::vector<std::string>& paths) {
  return paramonte_sections(target, options, ps, paths) + paramonte_stats(ps);
}

}  // namespace herd::mcmc::detail
