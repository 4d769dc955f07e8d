#include "herd/mcmc/paradram_run.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>

#include <unistd.h>

#include <fmt/format.h>

#include "herd/core/config.hpp"
#include "herd/core/error.hpp"
#include "herd/core/timer.hpp"
#include "herd/io/hdf5.hpp"
#include "herd/mcmc/chain_sink.hpp"
#include "herd/mcmc/refinement.hpp"

namespace herd::mcmc {

namespace {

namespace fs = std::filesystem;

/// Formats reals with `precision` significant digits (scientific), padded to `width`.
struct TextFormat {
  std::string delim = ",";
  int precision = 17;
  int width = 0;
  std::string real(double v) const {
    std::string s = fmt::format("{:.{}e}", v, precision - 1);
    if (static_cast<int>(s.size()) < width) s.insert(0, static_cast<std::size_t>(width) - s.size(), ' ');
    return s;
  }
  template <class T>
  std::string integer(T v) const {
    std::string s = fmt::format("{}", v);
    if (static_cast<int>(s.size()) < width) s.insert(0, static_cast<std::size_t>(width) - s.size(), ' ');
    return s;
  }
};

/// A buffered text file that throws IoError on failure.
class TextFile {
 public:
  explicit TextFile(std::string path) : path_(std::move(path)) {
    f_ = std::fopen(path_.c_str(), "wb");
    if (!f_) throw IoError(fmt::format("cannot create \"{}\"", path_));
  }
  ~TextFile() {
    if (f_) std::fclose(f_);
  }
  TextFile(const TextFile&) = delete;
  TextFile& operator=(const TextFile&) = delete;
  void write(std::string_view s) {
    if (std::fwrite(s.data(), 1, s.size(), f_) != s.size()) throw IoError(fmt::format("cannot write \"{}\"", path_));
  }
  void flush() {
    if (std::fflush(f_) != 0) throw IoError(fmt::format("cannot write \"{}\"", path_));
  }
  void close() {
    if (f_ && std::fclose(f_) != 0) {
      f_ = nullptr;
      throw IoError(fmt::format("cannot close \"{}\"", path_));
    }
    f_ = nullptr;
  }

 private:
  std::string path_;
  std::FILE* f_ = nullptr;
};

/// Running likelihood burn-in of ParaDRAM's chain file: at row i (0-based) the first row j
/// with lp_j >= max_{k<=i} lp_k - log(i + 1). Such a j is always a prefix-maximum row, so a
/// binary search over the prefix maxima gives it in O(log n).
class RunningBurnin {
 public:
  /// Adds row `i` with log density `lp`; returns the burn-in row (0-based).
  std::int64_t add(std::int64_t i, double lp) {
    if (max_lp_.empty() || lp > max_lp_.back()) {
      max_idx_.push_back(i);
      max_lp_.push_back(lp);
    }
    const double threshold = max_lp_.back() - std::log(static_cast<double>(i + 1));
    const auto it = std::lower_bound(max_lp_.begin(), max_lp_.end(), threshold);
    return max_idx_[static_cast<std::size_t>(it - max_lp_.begin())];
  }

 private:
  std::vector<std::int64_t> max_idx_;
  std::vector<double> max_lp_;
};

/// Fans records out to the memory sink, the chain file, and the progress file.
class RunSink final : public ChainSink {
 public:
  RunSink(const SamplerSpecs& specs, const TextFormat& fmt, MemoryChainSink& memory, int process_id)
      : specs_(specs), fmt_(fmt), memory_(memory), process_id_(process_id) {}

  void open_files(const std::string& chain_path, const std::string& progress_path,
                  const std::vector<std::string>& names) {
    if (specs_.chain_file_format == "binary") {
      binary_ = std::make_unique<BinaryChainSink>(chain_path);
    } else {
      text_ = std::make_unique<TextFile>(chain_path);
      std::string h = "ProcessID" + fmt_.delim + "DelayedRejectionStage" + fmt_.delim + "MeanAcceptanceRate" +
                      fmt_.delim + "AdaptationMeasure" + fmt_.delim + "BurninLocation" + fmt_.delim +
                      "SampleWeight" + fmt_.delim + "SampleLogFunc";
      for (const auto& n : names) h += fmt_.delim + n;
      text_->write(h + "\n");
    }
    progress_ = std::make_unique<TextFile>(progress_path);
    progress_->write("NumFuncCallTotal" + fmt_.delim + "NumFuncCallAccepted" + fmt_.delim +
                     "MeanAcceptanceRateSinceStart" + fmt_.delim + "MeanAcceptanceRateSinceLastReport" +
                     fmt_.delim + "TimeElapsedSinceLastReport" + fmt_.delim + "TimeElapsedSinceStart" + fmt_.delim +
                     "TimeRemainedToFinish\n");
  }

  void begin(std::uint32_t chain_id, int ndim) override {
    memory_.begin(chain_id, ndim);
    if (binary_) binary_->begin(chain_id, ndim);
  }

  void write(const ChainRecord& r) override {
    memory_.write(r);
    const std::int64_t i = rows_++;
    const std::int64_t burnin = burnin_.add(i, r.log_density) + 1;  // 1-based, as ParaDRAM
    // Mean acceptance rate when this state became current: i acceptances in r.step proposals.
    const double rate = r.step == 0 ? 1.0 : static_cast<double>(i) / static_cast<double>(r.step);
    if (binary_) {
      binary_->write(r);
    } else {
      std::string row;
      const std::int64_t reps = specs_.chain_file_format == "verbose" ? r.weight : 1;
      const std::int64_t weight = specs_.chain_file_format == "verbose" ? 1 : r.weight;
      row += fmt_.integer(process_id_) + fmt_.delim + fmt_.integer(r.dr_stage) + fmt_.delim + fmt_.real(rate) +
             fmt_.delim + fmt_.real(r.adapt_measure) + fmt_.delim + fmt_.integer(burnin) + fmt_.delim +
             fmt_.integer(weight) + fmt_.delim + fmt_.real(r.log_density);
      for (int k = 0; k < r.ndim; ++k) row += fmt_.delim + fmt_.real(r.point[k]);
      row += '\n';
      for (std::int64_t k = 0; k < reps; ++k) text_->write(row);
    }
    progress(r.step + static_cast<std::uint64_t>(r.weight), i + 1);
  }

  void flush() override {
    if (binary_) binary_->flush();
    if (text_) text_->flush();
    if (progress_) progress_->flush();
  }

  void close() {
    flush();
    if (text_) text_->close();
    if (progress_) progress_->close();
    binary_.reset();
  }

  /// Terminal progress is printed through this callback (may be empty).
  std::function<void(std::uint64_t steps, std::int64_t accepted, double seconds)> on_progress;

 private:
  void progress(std::uint64_t steps, std::int64_t accepted) {
    const auto period = static_cast<std::uint64_t>(specs_.progress_report_period);
    if (steps / period == last_report_ / period) return;
    const double now = clock_.seconds();
    const double rate = static_cast<double>(accepted) / static_cast<double>(std::max<std::uint64_t>(steps, 1));
    const double rate_last = static_cast<double>(accepted - last_accepted_) /
                             static_cast<double>(std::max<std::uint64_t>(steps - last_report_, 1));
    const double remaining =
        specs_.chain_size > accepted ? now / static_cast<double>(accepted) * static_cast<double>(specs_.chain_size - accepted) : 0.0;
    progress_->write(fmt_.integer(steps) + fmt_.delim + fmt_.integer(accepted) + fmt_.delim + fmt_.real(rate) +
                     fmt_.delim + fmt_.real(rate_last) + fmt_.delim + fmt_.real(now - last_time_) + fmt_.delim +
                     fmt_.real(now) + fmt_.delim + fmt_.real(remaining) + "\n");
    if (on_progress) on_progress(steps, accepted, now);
    last_report_ = steps;
    last_accepted_ = accepted;
    last_time_ = now;
  }

  const SamplerSpecs& specs_;
  TextFormat fmt_;
  MemoryChainSink& memory_;
  int process_id_;
  std::unique_ptr<TextFile> text_, progress_;
  std::unique_ptr<BinaryChainSink> binary_;
  RunningBurnin burnin_;
  std::int64_t rows_ = 0;
  Timer clock_;
  std::uint64_t last_report_ = 0;
  std::int64_t last_accepted_ = 0;
  double last_time_ = 0.0;
};

/// Values of one reported quantity on the compact states (`[compact]`).
struct Column {
  std::string name;
  std::vector<double> compact;
};

std::vector<double> expand(const std::vector<double>& compact, const std::vector<std::int64_t>& weight,
                           std::size_t first) {
  std::vector<double> out;
  for (std::size_t i = first; i < compact.size(); ++i) out.insert(out.end(), static_cast<std::size_t>(weight[i]), compact[i]);
  return out;
}

std::string cell(double v) { return fmt::format("{:.6g}", v); }

}  // namespace

std::vector<std::string> output_paths(const SamplerSpecs& s) {
  const std::string& p = s.output_prefix;
  return {p + (s.chain_file_format == "binary" ? "_chain.bin" : "_chain.txt"), p + "_sample.txt", p + "_progress.txt",
          p + "_report.txt", p + ".h5"};
}

void prepare_outputs(const SamplerSpecs& s) {
  for (const auto& path : output_paths(s)) {
    if (!s.overwrite && fs::exists(path)) {
      throw InputError(fmt::format("output file \"{}\" exists; set overwrite = true or choose another output_prefix", path));
    }
  }
  const fs::path parent = fs::path(s.output_prefix).parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    fs::create_directories(parent, ec);
    if (ec) throw IoError(fmt::format("cannot create the output folder \"{}\": {}", parent.string(), ec.message()));
  }
}

std::string format_summary_table(const std::vector<QuantitySummary>& rows) {
  std::size_t w = 8;
  for (const auto& r : rows) w = std::max(w, r.name.size());
  std::string out = fmt::format("{:<{}} {:>12} {:>12} {:>12} {:>12} {:>12} {:>10} {:>10} {:>9} {:>9} {:>7}\n", "name", w,
                                "mean", "sd", "q5", "q50", "q95", "mcse_mean", "mcse_sd", "ess_bulk", "ess_tail", "rhat");
  for (const auto& r : rows) {
    const auto& s = r.stats;
    out += fmt::format("{:<{}} {:>12} {:>12} {:>12} {:>12} {:>12} {:>10} {:>10} {:>9.0f} {:>9.0f} {:>7.4f}\n", r.name, w,
                       cell(s.mean), cell(s.sd), cell(s.q5), cell(s.q50), cell(s.q95), cell(s.mcse_mean),
                       cell(s.mcse_sd), s.ess_bulk, s.ess_tail, s.rhat);
  }
  return out;
}

SampleRunSummary run_paradram(const SamplerSpecs& specs, const SampleTarget& target, const SampleRunOptions& options) {
  HERD_REQUIRE(target.ndim >= 1 && target.log_density, "sampler: the target has ndim {} and {} log density",
               target.ndim, target.log_density ? "a" : "no");
  const Timer total;
  const int d = target.ndim;
  const bool quiet = options.quiet || specs.silent_mode;
  const auto paths = output_paths(specs);
  TextFormat tf{specs.output_delimiter, specs.output_real_precision, specs.output_column_width};

  // --- Sampling -----------------------------------------------------------------------
  MemoryChainSink memory;
  RunSink sink(specs, tf, memory, 1);
  bool clear_line = false;
  sink.open_files(paths[0], paths[2], specs.variable_names);
  if (!quiet && options.terminal) {
    // On a terminal: one line rewritten in place, at most 4 times a second. Otherwise (a
    // log file, CI): a plain line every 10 seconds.
    const bool tty = isatty(fileno(options.terminal)) != 0;
    sink.on_progress = [&options, &specs, tty, last = -1e9](std::uint64_t steps, std::int64_t accepted,
                                                            double secs) mutable {
      if (secs - last < (tty ? 0.25 : 10.0)) return;
      last = secs;
      const double eta =
          accepted > 0 ? secs / static_cast<double>(accepted) * static_cast<double>(specs.chain_size - accepted) : 0.0;
      const std::string line = fmt::format(
          "steps {}  accepted {}/{}  acceptance {:.3f}  {:.3g} steps/s  ETA {:.1f} s", steps, accepted,
          specs.chain_size, static_cast<double>(accepted) / static_cast<double>(steps),
          static_cast<double>(steps) / std::max(secs, 1e-9), eta);
      std::fprintf(options.terminal, tty ? "\r%-100s" : "%s\n", line.c_str());
      std::fflush(options.terminal);
    };
    if (tty) clear_line = true;
  }
  DramOptions dopt = to_dram_options(specs, d, 0);
  DramSampler sampler(std::move(dopt), target.log_density);
  DramResult kr;
  try {
    kr = sampler.run(sink);
  } catch (...) {
    try {
      sink.close();
    } catch (...) {
    }
    throw;
  }
  sink.close();
  if (clear_line) std::fprintf(options.terminal, "\r%-100s\r", "");

  // --- Post-processing ------------------------------------------------------------------
  SampleRunSummary out;
  out.kernel = kr;
  out.compact_size = static_cast<std::int64_t>(memory.size());
  out.verbose_size = memory.total_weight();
  out.burnin = std::clamp<std::int64_t>(kr.burnin, 0, out.compact_size - 1);
  const auto first = static_cast<std::size_t>(out.burnin);
  const std::size_t n = memory.size();

  std::vector<Column> columns;
  for (int j = 0; j < d; ++j) {
    Column c{specs.variable_names[static_cast<std::size_t>(j)], std::vector<double>(n)};
    for (std::size_t i = 0; i < n; ++i) c.compact[i] = memory.point(i)[j];
    columns.push_back(std::move(c));
  }
  if (target.quantities && !target.quantity_names.empty()) {
    const std::size_t nq = target.quantity_names.size();
    std::vector<double> q(nq);
    std::vector<Column> qc;
    for (const auto& name : target.quantity_names) qc.push_back({name, std::vector<double>(n)});
    for (std::size_t i = 0; i < n; ++i) {
      target.quantities(memory.point(i), q.data());
      for (std::size_t k = 0; k < nq; ++k) qc[k].compact[i] = q[k];
    }
    for (auto& c : qc) {
      const bool dup = std::any_of(columns.begin(), columns.begin() + d, [&](const Column& v) { return v.name == c.name; });
      if (!dup) columns.push_back(std::move(c));
    }
  }

  // Posterior: the verbose chain after burn-in.
  std::vector<std::vector<double>> posterior;
  for (const auto& c : columns) posterior.push_back(expand(c.compact, memory.weight, first));
  const std::vector<double> lp_post = expand(memory.log_density, memory.weight, first);
  const std::size_t ndraw = lp_post.size();
  out.posterior_draws = static_cast<std::int64_t>(ndraw);
  for (std::size_t k = 0; k < columns.size(); ++k) {
    QuantitySummary qs{columns[k].name, {}};
    qs.stats = summarize(DrawsView(posterior[k], 1, ndraw));
    out.summary.push_back(std::move(qs));
  }

  // Refined sample (ParaDRAM's batch-means refinement of the post-burn-in compact chain).
  std::vector<std::size_t> sample_rows;  // compact rows, repeated by refined weight
  RefinedSample refined;
  {
    const std::size_t m = n - first;
    std::vector<double> states(m * static_cast<std::size_t>(d + 1));
    std::vector<std::int64_t> w(m);
    for (std::size_t i = 0; i < m; ++i) {
      states[i * (d + 1)] = memory.log_density[first + i];
      std::copy(memory.point(first + i), memory.point(first + i) + d, states.begin() + static_cast<std::ptrdiff_t>(i * (d + 1) + 1));
      w[i] = memory.weight[first + i];
    }
    if (specs.sample_size > 0) {
      // n evenly spaced draws of the post-burn-in verbose chain.
      std::vector<std::int64_t> cum(m + 1, 0);
      for (std::size_t i = 0; i < m; ++i) cum[i + 1] = cum[i] + w[i];
      const auto total_w = static_cast<double>(cum[m]);
      for (std::int64_t k = 0; k < specs.sample_size; ++k) {
        const auto pos = static_cast<std::int64_t>(std::floor((static_cast<double>(k) + 0.5) * total_w / static_cast<double>(specs.sample_size)));
        const auto it = std::upper_bound(cum.begin(), cum.end(), pos);
        sample_rows.push_back(first + static_cast<std::size_t>(it - cum.begin() - 1));
      }
    } else if (specs.sample_refinement_count == 0) {
      for (std::size_t i = 0; i < m; ++i) sample_rows.insert(sample_rows.end(), static_cast<std::size_t>(w[i]), first + i);
    } else {
      RefinementOptions ro;
      ro.max_rounds = static_cast<std::size_t>(specs.sample_refinement_count);
      refined = refine_sample(states, w, static_cast<std::size_t>(d + 1), ro);
      for (std::size_t k = 0; k < refined.index.size(); ++k)
        sample_rows.insert(sample_rows.end(), static_cast<std::size_t>(refined.weight[k]), first + refined.index[k]);
    }
  }
  out.sample_size = static_cast<std::int64_t>(sample_rows.size());

  // _sample.txt
  {
    TextFile f(paths[1]);
    std::string h = "SampleLogFunc";
    for (const auto& name : specs.variable_names) h += tf.delim + name;
    f.write(h + "\n");
    for (std::size_t r : sample_rows) {
      std::string row = tf.real(memory.log_density[r]);
      for (int j = 0; j < d; ++j) row += tf.delim + tf.real(memory.point(r)[j]);
      f.write(row + "\n");
    }
    f.close();
  }

  // <prefix>.h5, written atomically.
  {
    io::H5File h5 = io::H5File::create_atomic(paths[4]);
    io::H5Group root = h5.root();
    root.set_attribute("herd_version", HERD_VERSION_STRING);
    root.set_attribute("sampler", "DRAM (herd, ParaDRAM-compatible)");
    root.set_attribute("target", target.description);
    root.set_attribute("input_source", options.input_source);
    root.set_attribute("random_seed", static_cast<std::uint64_t>(specs.random_seed));
    root.set_attribute("description", specs.description);
    {
      io::H5Group input = root.create_group("input");
      for (const auto& [k, v] : options.input_attributes) input.set_attribute(k, v);
    }
    // posterior: (chain, draw)
    io::H5Group post = root.create_group("posterior");
    post.create_coordinate<std::int64_t>("chain", std::vector<std::int64_t>{0});
    std::vector<std::int64_t> draw_idx(ndraw);
    for (std::size_t i = 0; i < ndraw; ++i) draw_idx[i] = static_cast<std::int64_t>(i);
    post.create_coordinate<std::int64_t>("draw", draw_idx);
    for (std::size_t k = 0; k < columns.size(); ++k) {
      io::H5Dataset ds = post.write<double>(columns[k].name, posterior[k], {1, ndraw});
      post.attach_dimensions(ds, {"chain", "draw"});
    }
    // sample_stats: lp, accepted, delayed-rejection stage, acceptance probability.
    io::H5Group stats = root.create_group("sample_stats");
    stats.create_coordinate<std::int64_t>("chain", std::vector<std::int64_t>{0});
    stats.create_coordinate<std::int64_t>("draw", draw_idx);
    std::vector<std::uint8_t> accepted;
    std::vector<std::int32_t> stage;
    std::vector<double> aprob;
    for (std::size_t i = first; i < n; ++i) {
      for (std::int64_t k = 0; k < memory.weight[i]; ++k) {
        accepted.push_back(k == 0 && memory.step[i] > 0 ? 1 : 0);
        stage.push_back(k == 0 ? memory.dr_stage[i] : 0);
        aprob.push_back(k == 0 ? memory.accept_prob[i] : 0.0);
      }
    }
    auto put_stat = [&](const char* name, auto values) {
      using T = typename decltype(values)::value_type;
      io::H5Dataset ds = stats.write<T>(name, values, {1, ndraw});
      stats.attach_dimensions(ds, {"chain", "draw"});
    };
    put_stat("lp", lp_post);
    put_stat("accepted", accepted);
    put_stat("dr_stage", stage);
    put_stat("acceptance_probability", aprob);
    // chain_compact: the compact chain, every state (burn-in included).
    io::H5Group cc = root.create_group("chain_compact");
    cc.write<std::uint64_t>("step", memory.step);
    cc.write<std::int64_t>("weight", memory.weight);
    cc.write<double>("log_density", memory.log_density);
    cc.write<std::int32_t>("dr_stage", memory.dr_stage);
    cc.write<double>("acceptance_probability", memory.accept_prob);
    cc.write<double>("adaptation_measure", memory.adapt_measure);
    cc.write<double>("state", memory.points, {n, static_cast<hsize_t>(d)});
    cc.write_strings("variable", specs.variable_names);
    cc.set_attribute("burnin", out.burnin);
    // sample: the refined sample, with its own dimension.
    io::H5Group sg = root.create_group("sample");
    std::vector<std::int64_t> sidx(sample_rows.size());
    for (std::size_t i = 0; i < sidx.size(); ++i) sidx[i] = static_cast<std::int64_t>(i);
    sg.create_coordinate<std::int64_t>("sample", sidx);
    {
      std::vector<double> v(sample_rows.size());
      for (std::size_t i = 0; i < v.size(); ++i) v[i] = memory.log_density[sample_rows[i]];
      io::H5Dataset ds = sg.write<double>("lp", v);
      sg.attach_dimensions(ds, {"sample"});
      for (std::size_t k = 0; k < columns.size(); ++k) {
        for (std::size_t i = 0; i < v.size(); ++i) v[i] = columns[k].compact[sample_rows[i]];
        io::H5Dataset dk = sg.write<double>(columns[k].name, v);
        sg.attach_dimensions(dk, {"sample"});
      }
    }
    // diagnostics: per quantity.
    io::H5Group dg = root.create_group("diagnostics");
    std::vector<std::string> names;
    for (const auto& q : out.summary) names.push_back(q.name);
    dg.write_strings("variable", names);
    auto put_diag = [&](const char* name, double DiagnosticSummary::*field) {
      std::vector<double> v;
      for (const auto& q : out.summary) v.push_back(q.stats.*field);
      dg.write<double>(name, v);
    };
    put_diag("mean", &DiagnosticSummary::mean);
    put_diag("sd", &DiagnosticSummary::sd);
    put_diag("q5", &DiagnosticSummary::q5);
    put_diag("q50", &DiagnosticSummary::q50);
    put_diag("q95", &DiagnosticSummary::q95);
    put_diag("mcse_mean", &DiagnosticSummary::mcse_mean);
    put_diag("mcse_sd", &DiagnosticSummary::mcse_sd);
    put_diag("ess_bulk", &DiagnosticSummary::ess_bulk);
    put_diag("ess_tail", &DiagnosticSummary::ess_tail);
    put_diag("rhat", &DiagnosticSummary::rhat);
    h5.commit();
  }

  // _report.txt (times vary: excluded from reproducibility).
  out.seconds = total.seconds();
  {
    TextFile f(paths[3]);
    std::string r;
    r += fmt::format("herd {} — DRAM sampler report (ParaDRAM-compatible)\n\n", HERD_VERSION_STRING);
    r += fmt::format("description: {}\ntarget: {}\ninput: {}\n\n", specs.description, target.description, options.input_source);
    r += "== resolved specifications ==\n" + options.resolved_input + "\n";
    r += "== run ==\n";
    r += fmt::format("dimension                         {}\n", d);
    r += fmt::format("random seed                       {}\n", specs.random_seed);
    r += fmt::format("proposals (steps)                 {}\n", kr.proposals);
    r += fmt::format("log-density evaluations           {}\n", kr.evaluations);
    r += fmt::format("accepted states (chain_size)      {}\n", out.compact_size);
    r += fmt::format("mean acceptance rate              {:.6f}\n", kr.acceptance_rate);
    for (std::size_t k = 0; k < kr.stage_accepted.size(); ++k)
      r += fmt::format("  accepted at stage {}             {}\n", k + 1, kr.stage_accepted[k]);
    r += fmt::format("adaptive updates                  {} ({} deferred, {} Cholesky failures)\n", kr.adaptive_updates,
                     kr.adaptive_updates_deferred, kr.chol_failures);
    r += fmt::format("NaN log densities (as -inf)       {}\n", kr.nan_count);
    r += fmt::format("proposals outside the domain      {}\n", kr.out_of_domain);
    r += fmt::format("burn-in (likelihood rule)         {}\n", kr.burnin_likelihood);
    r += fmt::format("burn-in (adaptation measure rule) {}\n", kr.burnin_adaptation);
    r += fmt::format("burn-in used (compact index)      {}\n", out.burnin);
    r += fmt::format("posterior draws (verbose)         {}\n", out.posterior_draws);
    r += fmt::format("refined sample size               {}\n", out.sample_size);
    r += fmt::format("sampling time                     {:.3f} s\n", kr.seconds);
    r += fmt::format("total time                        {:.3f} s\n", out.seconds);
    r += fmt::format("steps per second                  {:.4g}\n\n", static_cast<double>(kr.proposals) / std::max(kr.seconds, 1e-9));
    r += "== final proposal covariance ==\n";
    for (int i = 0; i < d; ++i) {
      for (int j = 0; j < d; ++j) r += fmt::format("{:>14.6e}", kr.proposal_cov[static_cast<std::size_t>(i * d + j)]);
      r += "\n";
    }
    r += "\n== posterior (verbose chain after burn-in): statistics and diagnostics ==\n";
    r += format_summary_table(out.summary);
    // Covariance and correlation of the variables.
    r += "\n== posterior covariance ==\n";
    std::vector<double> mean(d, 0.0);
    for (int j = 0; j < d; ++j) mean[j] = out.summary[static_cast<std::size_t>(j)].stats.mean;
    std::vector<double> cov(static_cast<std::size_t>(d * d), 0.0);
    for (std::size_t t = 0; t < ndraw; ++t)
      for (int i = 0; i < d; ++i)
        for (int j = 0; j < d; ++j) cov[i * d + j] += (posterior[i][t] - mean[i]) * (posterior[j][t] - mean[j]);
    for (auto& c : cov) c /= std::max<double>(1.0, static_cast<double>(ndraw) - 1.0);
    for (int i = 0; i < d; ++i) {
      for (int j = 0; j < d; ++j) r += fmt::format("{:>14.6e}", cov[i * d + j]);
      r += "\n";
    }
    r += "\n== posterior correlation ==\n";
    for (int i = 0; i < d; ++i) {
      for (int j = 0; j < d; ++j) r += fmt::format("{:>10.4f}", cov[i * d + j] / std::sqrt(cov[i * d + i] * cov[j * d + j]));
      r += "\n";
    }
    if (!refined.rounds.empty()) {
      r += "\n== sample refinement (batch-means integrated autocorrelation) ==\n";
      r += fmt::format("{:>6} {:>8} {:>14} {:>14} {:>12}\n", "round", "stage", "compact size", "verbose size", "IAC summary");
      for (std::size_t k = 0; k < refined.rounds.size(); ++k) {
        const auto& rd = refined.rounds[k];
        r += fmt::format("{:>6} {:>8} {:>14} {:>14} {:>12.4f}\n", k + 1, rd.verbose_stage ? "verbose" : "compact",
                         rd.compact_size, rd.verbose_size, rd.iac_summary);
      }
    }
    r += "\n== outputs ==\n";
    for (const auto& p : paths) r += p + "\n";
    f.write(r);
    f.close();
  }
  out.paths = paths;

  if (!quiet && options.terminal) {
    std::fprintf(options.terminal, "%s", format_summary_table(out.summary).c_str());
    std::fprintf(options.terminal, "\n%lld steps, acceptance rate %.3f, burn-in %lld, %lld posterior draws, %lld in the refined sample, %.2f s\n",
                 static_cast<long long>(kr.proposals), kr.acceptance_rate, static_cast<long long>(out.burnin),
                 static_cast<long long>(out.posterior_draws), static_cast<long long>(out.sample_size), out.seconds);
    std::fprintf(options.terminal, "outputs:\n");
    for (const auto& p : paths) std::fprintf(options.terminal, "  %s\n", p.c_str());
  }
  return out;
}

}  // namespace herd::mcmc
