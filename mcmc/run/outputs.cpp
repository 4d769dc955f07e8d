// The outputs every engine shares (outputs.hpp, paradram_run.hpp): file names, output
// checks, the summary table, the warnings, the `.h5` root attributes and diagnostics group,
// the HTML report's common part, ArviZ variables, and each chain's contribution to the outputs.
#include "outputs.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <utility>

#include <unistd.h>

#include <fmt/format.h>

#include "herd/core/config.hpp"
#include "herd/core/error.hpp"
#include "herd/io/atomic_file.hpp"
#include "herd/io/output_files.hpp"
#include "herd/mcmc/diagnostics.hpp"
#include "herd/mcmc/posterior_report.hpp"
#include "text_chain.hpp"

namespace herd::mcmc {

namespace fs = std::filesystem;
using detail::kLowAcceptance;

namespace detail {

int chain_count(const SamplerSpecs& s, int ranks) {
  return s.parallelization_model == "multi_chain" ? ranks * static_cast<int>(s.chains_per_rank) : 1;
}

std::string chain_file_path(const SamplerSpecs& s, int chains, int k) {
  const char* ext = s.chain_file_format == "binary" ? "_chain.bin" : "_chain.txt";
  return chains == 1 ? s.output_prefix + ext : fmt::format("{}_process_{}{}", s.output_prefix, k, ext);
}

std::string sample_file_path(const SamplerSpecs& s, int chains, int k) {
  return chains == 1 ? s.output_prefix + "_sample.txt" : fmt::format("{}_process_{}_sample.txt", s.output_prefix, k);
}

std::string restart_folder(const SamplerSpecs& s) { return s.output_prefix + "_restart"; }

void write_h5_root_attributes(io::H5File& h5, const std::string& sampler, const SamplerSpecs& specs,
                              const SampleTarget& target, const SampleRunOptions& options) {
  const bool batched = specs.device != "cpu";
  io::H5Group rootg = h5.root();
  rootg.set_attribute("herd_version", HERD_VERSION_STRING);
  rootg.set_attribute("sampler", sampler);
  if (batched) rootg.set_attribute("device", specs.device);
  rootg.set_attribute("target", target.description);
  rootg.set_attribute("input_source", options.input_source);
  rootg.set_attribute("random_seed", static_cast<std::uint64_t>(specs.random_seed));
  rootg.set_attribute("description", specs.description);
  if (!batched) rootg.set_attribute("parallelization_model", specs.parallelization_model);
  io::H5Group input = rootg.create_group("input");
  for (const auto& [k, v] : options.input_attributes) input.set_attribute(k, v);
}

void write_arviz_group_attributes(io::H5Group& g) {
  g.set_attribute("inference_library", "herd");
  g.set_attribute("inference_library_version", HERD_VERSION_STRING);
}

void describe_sample_stats(io::H5Group& stats) {
  static constexpr std::pair<const char*, const char*> kLongNames[] = {
      {"lp", "log density of the draw's state (up to an additive constant)"},
      {"accepted",
       "1 where the draw's state was accepted (at the proposals the draw stands for), 0 where the draw "
       "repeats the state before it"},
      {"dr_stage",
       "delayed-rejection stage that accepted the draw's state (1 the first proposal, 2.. the delayed "
       "ones) where accepted is 1, else 0"},
      {"acceptance_probability",
       "probability with which the draw's state was accepted, where accepted is 1, else 0; not ArviZ's "
       "acceptance_rate (the mean acceptance probability of every proposal): the acceptance rate is the mean of "
       "accepted"},
  };
  for (const auto& [name, text] : kLongNames)
    if (stats.is_dataset(name)) stats.open_dataset(name).set_attribute("long_name", text);
}

void write_h5_diagnostics(io::H5File& h5, const H5DiagnosticsData& data) {
  io::H5Group dg = h5.root().create_group("diagnostics");
  std::vector<std::string> names;
  for (const auto& q : data.summary) names.push_back(q.name);
  dg.write_strings("variable", names).make_scale("variable");
  // The summary's fields, one dataset [variable] each, in this order.
  using S = DiagnosticSummary;
  const std::pair<const char*, double S::*> fields[] = {{"mean", &S::mean},
                                                        {"sd", &S::sd},
                                                        {"q5", &S::q5},
                                                        {"q50", &S::q50},
                                                        {"q95", &S::q95},
                                                        {"mcse_mean", &S::mcse_mean},
                                                        {"mcse_sd", &S::mcse_sd},
                                                        {"ess_bulk", &S::ess_bulk},
                                                        {"ess_tail", &S::ess_tail},
                                                        {"rhat", &S::rhat}};
  for (const auto& [name, field] : fields) {
    std::vector<double> v;
    for (const auto& q : data.summary) v.push_back(q.stats.*field);
    io::H5Dataset ds = dg.write<double>(name, v);
    dg.attach_dimensions(ds, {"variable"});
  }
  if (!data.nested_rhat.empty()) {
    io::H5Dataset ds = dg.write<double>("nested_rhat", data.nested_rhat);
    dg.attach_dimensions(ds, {"variable"});
    ds.set_attribute("superchains", static_cast<std::int64_t>(data.superchains));
  }
  if (data.ks.empty()) return;
  // ParaDRAM's pairwise KS table per variable: [variable, chain, chain].
  const std::size_t nvar = data.ks.size(), m = data.chains;
  std::vector<double> stat, pval;
  for (const auto& t : data.ks)
    for (const auto& x : t) {
      stat.push_back(x.statistic);
      pval.push_back(x.p_value);
    }
  dg.create_dimension("ks_variable", nvar);
  dg.create_dimension("chain_a", m);
  dg.create_dimension("chain_b", m);
  for (const auto& [name, v] :
       {std::pair<const char*, const std::vector<double>*>{"ks_statistic", &stat}, {"ks_p_value", &pval}}) {
    io::H5Dataset ds = dg.write<double>(name, *v, {nvar, m, m});
    dg.attach_dimensions(ds, {"ks_variable", "chain_a", "chain_b"});
    ds.set_attribute("tested", data.ks_tested);
  }
}

PosteriorReportData html_report_data(const SamplerSpecs& specs, const SampleTarget& target,
                                     const SampleRunOptions& options, std::string_view sampler,
                                     const std::vector<QuantitySummary>& summary, std::size_t chains, std::size_t draws,
                                     double acceptance_rate, std::vector<double> start_covariance) {
  PosteriorReportData h;
  h.title = "herd-sample report" + (specs.description.empty() ? std::string() : ": " + specs.description);
  h.subtitle = fmt::format("herd {}, {}; target: {}; input: {}", HERD_VERSION_STRING, sampler, target.description,
                           options.input_source);
  for (const auto& q : summary) {
    h.names.push_back(q.name);
    h.summary.push_back(q.stats);
  }
  h.chains = chains;
  h.draws = draws;
  h.sampled = static_cast<std::size_t>(target.ndim);
  h.acceptance_rate = acceptance_rate;
  h.start_covariance = std::move(start_covariance);
  h.resolved_input = options.resolved_input;
  return h;
}

void write_report_file(const std::string& path, const std::string& text) {
  TextFile f(path);
  f.write(text);
  f.close();
}

namespace {

/// The variables' columns, then the derived quantities' (those not named as a variable),
/// and the derived quantities' values (DerivedColumns).
std::vector<Column> chain_columns(const SamplerSpecs& specs, const SampleTarget& target, const MemoryChainSink& memory,
                                  DerivedColumns& derived) {
  std::vector<Column> columns;
  const int d = target.ndim;
  columns.reserve(static_cast<std::size_t>(d) + target.quantity_names.size());
  for (int j = 0; j < d; ++j) columns.push_back({specs.variable_names[static_cast<std::size_t>(j)]});
  if (target.quantities && !target.quantity_names.empty()) {
    std::vector<std::size_t> keep;
    for (std::size_t k = 0; k < target.quantity_names.size(); ++k) {
      const std::string& name = target.quantity_names[k];
      const bool dup =
          std::any_of(columns.begin(), columns.begin() + d, [&](const Column& v) { return v.name == name; });
      if (!dup) keep.push_back(k);
    }
    for (std::size_t k : keep) columns.push_back({target.quantity_names[k]});
    derived = DerivedColumns(target, keep, memory);
  }
  return columns;
}

/// Whether the refinement of `m` post-burn-in states of `memory` takes the bounded path
/// (refine_sample_out_of_core): a file-backed chain whose in-memory refinement would hold more
/// than diagnostics_rank_budget() at kRefinementBytesPerState bytes per state.
bool refine_out_of_core(const MemoryChainSink& memory, std::size_t m) {
  return memory.file_backed() && m > diagnostics_rank_budget() / kRefinementBytesPerState;
}

/// The refined sample's compact rows (ParaDRAM's batch-means refinement of the
/// post-burn-in compact chain, or `sample_size` evenly spaced draws, or every draw). Needs
/// o.burnin and o.post_draws. The weights are read from the chain as they are needed: only
/// the refinement holds them (8 bytes per state, thinned in place).
void refined_sample(const SamplerSpecs& specs, int d, const MemoryChainSink& memory, ChainOutputs& o) {
  const auto first = static_cast<std::size_t>(o.burnin);
  const std::size_t m = memory.size() - first;
  ChainReader weight(memory, kWeightColumn);
  if (specs.sample_size > 0) {
    // n evenly spaced draws of the post-burn-in verbose chain: draw `pos` is in the last state
    // whose cumulative weight before it is <= pos (upper_bound of the cumulative weights, less
    // one); pos grows with k, so one walk over the weights finds them all.
    const auto total_w = static_cast<double>(o.post_draws);
    std::vector<std::size_t> rows;
    rows.reserve(static_cast<std::size_t>(specs.sample_size));
    std::size_t i = 0;
    std::int64_t before = 0;  // the weight of states [0, i)
    for (std::int64_t k = 0; k < specs.sample_size; ++k) {
      const auto pos = static_cast<std::int64_t>(
          std::floor((static_cast<double>(k) + 0.5) * total_w / static_cast<double>(specs.sample_size)));
      while (i < m && before + weight.weight(first + i) <= pos) before += weight.weight(first + i++);
      rows.push_back(first + i);
    }
    o.sample_rows = SampleRows(std::move(rows));
  } else if (specs.sample_refinement_count == 0) {
    // Every post-burn-in draw: read back from the chain by its readers, not held.
    o.sample_rows = SampleRows::every_draw(first, memory.size(), o.post_draws);
  } else if (refine_out_of_core(memory, m)) {
    // The bounded path: the weights read from the chain as each pass needs them, the states in
    // play after a thinning and the refined sample in scratch files beside the chain.
    const RefinementOptions ro = to_refinement_options(specs);
    const auto nv = static_cast<std::size_t>(d) + 1;
    ChainReader rd(memory, kWeightColumn | kLogDensityColumn | kPointColumns);
    std::vector<double> row(nv);
    RefinedStates rs = refine_sample_out_of_core(
        m, nv,
        [&](std::size_t i, std::int64_t& w) {
          const std::size_t j = first + i;
          const ChainBlock& b = rd.at(j);
          const std::size_t s = j - b.first;
          w = b.weight[s];
          row[0] = b.log_density[s];
          const double* p = b.points + s * b.state_stride;
          for (std::size_t k = 0; k + 1 < nv; ++k) row[k + 1] = p[k * b.coord_stride];
          return static_cast<const double*>(row.data());
        },
        [&](std::size_t i) { return weight.weight(first + i); }, memory.scratch_dir(), ro);
    o.refined.rounds = std::move(rs.rounds);
    o.sample_rows = SampleRows::of_records(first, std::move(rs.states));
  } else {
    std::vector<std::int64_t> w(m);
    for (std::size_t i = 0; i < m; ++i) w[i] = weight.weight(first + i);
    const RefinementOptions ro = to_refinement_options(specs);
    // The refinement's states (log density, then the point) are read from the chain block
    // by block, not gathered: no copy of the chain is resident, and the weights are handed
    // over (thinned in place).
    const auto nv = static_cast<std::size_t>(d) + 1;
    ChainReader rd(memory, kLogDensityColumn | kPointColumns);
    std::vector<double> row(nv);
    o.refined = refine_sample(
        m, nv,
        [&](std::size_t i) {
          const std::size_t j = first + i;
          const ChainBlock& b = rd.at(j);
          const std::size_t s = j - b.first;
          row[0] = b.log_density[s];
          const double* p = b.points + s * b.state_stride;
          for (std::size_t k = 0; k + 1 < nv; ++k) row[k + 1] = p[k * b.coord_stride];
          return static_cast<const double*>(row.data());
        },
        std::move(w), ro);
    std::size_t rows = 0;
    for (std::int64_t x : o.refined.weight) rows += static_cast<std::size_t>(x);
    std::vector<std::size_t> sample;
    sample.reserve(rows);
    for (std::size_t k = 0; k < o.refined.index.size(); ++k)
      sample.insert(sample.end(), static_cast<std::size_t>(o.refined.weight[k]), first + o.refined.index[k]);
    o.sample_rows = SampleRows(std::move(sample));
    // sample_rows says the same: only the rounds are read after this (the report's table).
    // Fresh vectors, freed (`= {}` would keep their capacity through the run).
    o.refined.index = std::vector<std::size_t>();
    o.refined.weight = std::vector<std::int64_t>();
  }
}

}  // namespace

DerivedColumns::DerivedColumns(const SampleTarget& target, const std::vector<std::size_t>& keep,
                               const MemoryChainSink& memory)
    : nq_(keep.size()), n_(memory.size()) {
  if (nq_ == 0) return;
  const std::size_t nq_all = target.quantity_names.size();
  std::vector<double> q(nq_all);
  ChainReader rd(memory, kPointColumns);
  if (!memory.file_backed()) {
    values_.resize(nq_ * n_);
    for (std::size_t i = 0; i < n_; ++i) {
      target.quantities(rd.point(i), q.data());
      for (std::size_t e = 0; e < nq_; ++e) values_[e * n_ + i] = q[keep[e]];
    }
    return;
  }
  fd_ = io::create_unlinked_scratch(memory.scratch_dir(), ".herd-derived-", path_);
  if (fd_ < 0) fail("creating");
  // Chunks of about 1 MiB of values (at least 64 states), each quantity's part written at
  // its place in that quantity's column.
  const std::size_t per = std::max<std::size_t>(64, (std::size_t{1} << 17) / nq_);
  std::vector<double> chunk(nq_ * per);
  for (std::size_t i0 = 0; i0 < n_; i0 += per) {
    const std::size_t len = std::min(per, n_ - i0);
    for (std::size_t i = 0; i < len; ++i) {
      target.quantities(rd.point(i0 + i), q.data());
      for (std::size_t e = 0; e < nq_; ++e) chunk[e * per + i] = q[keep[e]];
    }
    for (std::size_t e = 0; e < nq_; ++e)
      if (!io::pwrite_all(fd_, chunk.data() + e * per, len * sizeof(double), (e * n_ + i0) * sizeof(double)))
        fail("writing");
  }
}

DerivedColumns::~DerivedColumns() {
  if (fd_ >= 0) ::close(fd_);
}

DerivedColumns::DerivedColumns(DerivedColumns&& o) noexcept
    : nq_(std::exchange(o.nq_, 0)),
      n_(std::exchange(o.n_, 0)),
      fd_(std::exchange(o.fd_, -1)),
      path_(std::move(o.path_)),
      values_(std::move(o.values_)) {}

DerivedColumns& DerivedColumns::operator=(DerivedColumns&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    nq_ = std::exchange(o.nq_, 0);
    n_ = std::exchange(o.n_, 0);
    fd_ = std::exchange(o.fd_, -1);
    path_ = std::move(o.path_);
    values_ = std::move(o.values_);
  }
  return *this;
}

void DerivedColumns::fail(const char* what) const {
  const int e = errno;
  throw IoError(fmt::format("{} the derived quantities' scratch file \"{}\" (unlinked once created) failed: {}", what,
                            path_, e != 0 ? std::strerror(e) : "unexpected end of file"));
}

DerivedReader::DerivedReader(const DerivedColumns& columns) : cols_(&columns) {
  if (columns.fd_ < 0) return;
  // 8192 states (64 KiB) for one quantity, fewer for many: about 64 KiB, 512 states at least.
  per_ = std::clamp<std::size_t>(std::size_t{8192} / std::max<std::size_t>(1, columns.nq_), 512, 8192);
  block_.assign(columns.nq_, std::numeric_limits<std::size_t>::max());
  buf_.resize(columns.nq_);
}

void DerivedReader::load(std::size_t q, std::size_t b) {
  const DerivedColumns& c = *cols_;
  std::vector<double>& buf = buf_[q];
  if (buf.empty()) buf.resize(per_);
  const std::size_t first = b * per_;
  const std::size_t len = std::min(per_, c.n_ - first);
  if (!io::pread_all(c.fd_, buf.data(), len * sizeof(double), (q * c.n_ + first) * sizeof(double))) c.fail("reading");
  block_[q] = b;
}

ChainOutputs chain_outputs(const SamplerSpecs& specs, const SampleTarget& target, const MemoryChainSink& memory,
                           const DramResult& kr) {
  ChainOutputs o;
  const std::size_t n = memory.size();
  o.burnin = std::clamp<std::int64_t>(kr.burnin, 0, static_cast<std::int64_t>(n) - 1);
  o.columns = chain_columns(specs, target, memory, o.derived);
  {
    ChainReader rd(memory, kWeightColumn);
    for (auto i = static_cast<std::size_t>(o.burnin); i < n; ++i)
      o.post_draws += static_cast<std::size_t>(rd.weight(i));
  }
  refined_sample(specs, target.ndim, memory, o);
  return o;
}

std::string outputs_list(const std::vector<std::string>& paths) {
  std::string out = "outputs:\n";
  for (const auto& p : paths) out += "  " + p + "\n";
  return out;
}

}  // namespace detail

using detail::chain_count;
using detail::chain_file_path;
using detail::kMaxTextChains;
using detail::restart_folder;
using detail::sample_file_path;

namespace {

std::string cell(double v) { return fmt::format("{:.6g}", v); }

}  // namespace

std::string low_acceptance_warning(double rate) {
  if (rate >= kLowAcceptance) return {};
  return fmt::format(
      "WARNING: the mean acceptance rate is {:.3g}, below {:g}: the chain barely moved, so its draws and "
      "statistics are not a usable sample. Give proposal_std (or proposal_cov) of the order of the posterior's "
      "standard deviations, or a smaller scale_factor (e.g. \"0.1*gelman\"); check start_point and that the log "
      "density is finite (not -inf or NaN) around it.",
      rate, kLowAcceptance);
}

std::string convergence_warnings(const std::vector<QuantitySummary>& rows, std::size_t chains, double acceptance_rate,
                                 const std::string& run_longer, std::span<const double> nested_rhat,
                                 std::size_t superchains) {
  std::vector<std::string> names;
  std::vector<DiagnosticSummary> summary;
  for (const auto& r : rows) {
    names.push_back(r.name);
    summary.push_back(r.stats);
  }
  // Below kLowAcceptance the low-acceptance warning replaces the verdict's acceptance line.
  const bool stuck = std::isfinite(acceptance_rate) && acceptance_rate < kLowAcceptance;
  std::string out;
  for (const ReportVerdict& v :
       convergence_verdicts(names, summary, chains, stuck ? std::numeric_limits<double>::quiet_NaN() : acceptance_rate,
                            run_longer, nested_rhat, superchains))
    if (v.level >= 2) out += "WARNING: " + v.text + "\n";
  if (stuck) out += low_acceptance_warning(acceptance_rate) + "\n";
  return out;
}

std::vector<std::string> output_paths(const SamplerSpecs& s, int ranks) {
  const std::string& p = s.output_prefix;
  if (s.device != "cpu") return {p + "_report.txt", p + "_report.html", p + ".h5"};  // batched runs (herd-sample)
  const int m = chain_count(s, ranks);
  std::vector<std::string> out;
  if (m <= kMaxTextChains) {
    for (int k = 1; k <= m; ++k) out.push_back(chain_file_path(s, m, k));
    for (int k = 1; k <= m; ++k) out.push_back(sample_file_path(s, m, k));
  }
  out.push_back(p + "_progress.txt");
  out.push_back(p + "_report.txt");
  out.push_back(p + "_report.html");
  out.push_back(p + ".h5");
  return out;
}

void prepare_outputs(const SamplerSpecs& s, int ranks, bool resuming) {
  // No output is written through a symbolic link, with or without overwrite (a link could
  // point at any file of the user's); the restart folder is never a link either.
  for (const auto& path : output_paths(s, ranks)) io::refuse_symlink(path);
  io::refuse_symlink(restart_folder(s));
  // A folder (or any other non-file) where an output file goes would fail only the final
  // rename, after the whole run: refused now, with or without overwrite (which removes files).
  for (const auto& path : output_paths(s, ranks)) {
    std::error_code ec;
    const auto st = fs::symlink_status(path, ec);
    if (!ec && fs::exists(st) && !fs::is_regular_file(st))
      throw InputError(fmt::format("{}output file \"{}\" is {}, not a file: remove it or choose another {}",
                                   s.output_prefix_origin.empty() ? "" : s.output_prefix_origin + ": ", path,
                                   fs::is_directory(st) ? "a folder" : "something else", s.output_prefix_name));
  }
  if (!resuming) {
    for (const auto& path : output_paths(s, ranks)) {
      if (!s.overwrite && fs::exists(path)) {
        throw InputError(fmt::format("{}output file \"{}\" exists; set {} = true or choose another {}",
                                     s.output_prefix_origin.empty() ? "" : s.output_prefix_origin + ": ", path,
                                     s.overwrite_name, s.output_prefix_name));
      }
    }
  }
  const fs::path parent = fs::path(s.output_prefix).parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    fs::create_directories(parent, ec);
    if (ec) throw IoError(fmt::format("cannot create the output folder \"{}\": {}", parent.string(), ec.message()));
  }
  // Temporaries of an earlier run of this prefix that was killed while writing a file.
  std::vector<std::string> names;
  for (const auto& path : output_paths(s, ranks)) names.push_back(fs::path(path).filename().string());
  io::remove_stale_temporaries(parent.empty() ? std::string(".") : parent.string(), names);
  io::remove_stale_temporaries(restart_folder(s), {});
  // Heartbeat files of an earlier run's stall watchdog (StallWatchdog): meaningful only
  // while that run lived; this run holds the prefix lock, so it is gone.
  std::error_code hec;
  if (!fs::is_symlink(restart_folder(s), hec) && fs::is_directory(restart_folder(s), hec))
    for (const auto& e : fs::directory_iterator(restart_folder(s), hec))
      if (e.path().filename().string().rfind("heartbeat.", 0) == 0 && e.is_regular_file(hec)) fs::remove(e.path(), hec);
}

std::string format_summary_table(const std::vector<QuantitySummary>& rows) {
  // herd-diagnose's table (apps/herd-diagnose.cpp): the same header and precisions, so that
  // both tools print a posterior alike (MCSE to 3 significant digits).
  std::size_t w = 9;
  for (const auto& r : rows) w = std::max(w, r.name.size());
  std::string out =
      fmt::format("{:<{}} {:>12} {:>12} {:>12} {:>12} {:>12} {:>10} {:>10} {:>9} {:>9} {:>7}\n", "parameter", w, "mean",
                  "sd", "q5", "q50", "q95", "mcse_mean", "mcse_sd", "ess_bulk", "ess_tail", "rhat");
  for (const auto& r : rows) {
    const auto& s = r.stats;
    out += fmt::format("{:<{}} {:>12} {:>12} {:>12} {:>12} {:>12} {:>10.3g} {:>10.3g} {:>9.0f} {:>9.0f} {:>7.4f}\n",
                       r.name, w, cell(s.mean), cell(s.sd), cell(s.q5), cell(s.q50), cell(s.q95), s.mcse_mean,
                       s.mcse_sd, s.ess_bulk, s.ess_tail, s.rhat);
  }
  return out;
}

std::vector<ArvizVariable> arviz_variables(const std::vector<std::string>& names) {
  std::vector<ArvizVariable> out;
  auto split = [](const std::string& n, std::string& base, long& index) {
    const std::size_t open = n.rfind('[');
    if (open == std::string::npos || open == 0 || n.back() != ']') return false;
    const std::string digits = n.substr(open + 1, n.size() - open - 2);
    if (digits.empty() || digits.size() > 9 ||
        !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return false;
    base = n.substr(0, open);
    index = std::stol(digits);
    return true;
  };
  for (std::size_t i = 0; i < names.size(); ++i) {
    std::string base;
    long index = 0;
    if (split(names[i], base, index) && index == 1) {
      ArvizVariable v{base, {i}, true};
      std::size_t j = i + 1;
      std::string b2;
      long k2 = 0;
      while (j < names.size() && split(names[j], b2, k2) && b2 == base && k2 == static_cast<long>(v.columns.size()) + 1)
        v.columns.push_back(j++);
      // Elements whose base name is also a column's name stay as written.
      const bool clash = std::any_of(names.begin(), names.end(), [&](const std::string& n) { return n == base; });
      if (!clash) {
        out.push_back(std::move(v));
        i = j - 1;
        continue;
      }
    }
    out.push_back({names[i], {i}, false});
  }
  return out;
}

}  // namespace herd::mcmc
