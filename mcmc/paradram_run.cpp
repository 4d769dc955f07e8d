#include "herd/mcmc/paradram_run.hpp"

#include <sys/utsname.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <functional>
#include <future>
#include <limits>
#include <memory>
#include <numeric>
#include <optional>
#include <thread>

#include <cctype>
#include <cerrno>
#include <csignal>

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cstring>
#include <fstream>
#include <string>

#include <fmt/format.h>
#include <Eigen/Dense>

#include "herd/core/config.hpp"
#include "herd/core/error.hpp"
#include "herd/core/faults.hpp"
#include "herd/core/memory.hpp"
#include "herd/core/timer.hpp"
#include "herd/io/checkpoint.hpp"
#include "herd/io/hdf5.hpp"
#include "herd/io/output_files.hpp"
#include "herd/mcmc/chain_sink.hpp"
#include "herd/mcmc/ks_test.hpp"
#include "herd/mcmc/parallel.hpp"
#include "herd/mcmc/posterior_report.hpp"
#include "herd/mcmc/refinement.hpp"
#include "herd/mcmc/run_progress.hpp"

namespace herd::mcmc {

namespace {

namespace fs = std::filesystem;

/// Formats reals with `precision` significant digits (scientific), padded to `width`.
struct TextFormat {
  std::string delim = ",";
  int precision = 17;
  int width = 0;
  std::string real(double v) const {
    std::string s;
    append_real(s, v);
    return s;
  }
  /// Appends `real(v)` to `out`. Finite values go through std::to_chars (scientific, the
  /// same digits and layout as printf's and fmt's "%.{p-1}e", about twice as fast, with no
  /// string per value: the chain file is written while the chain samples).
  void append_real(std::string& out, double v) const {
    char buf[64];
    const std::to_chars_result r =
        std::isfinite(v) && precision >= 1 && precision <= 40
            ? std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific, precision - 1)
            : std::to_chars_result{nullptr, std::errc::value_too_large};
    if (r.ec != std::errc()) {
      std::string s = fmt::format("{:.{}e}", v, precision - 1);
      if (static_cast<int>(s.size()) < width) out.append(static_cast<std::size_t>(width) - s.size(), ' ');
      out += s;
      return;
    }
    const auto n = static_cast<int>(r.ptr - buf);
    if (n < width) out.append(static_cast<std::size_t>(width - n), ' ');
    out.append(buf, r.ptr);
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
  /// Creates `path`, or with `append` opens it for appending.
  explicit TextFile(std::string path, bool append = false) : path_(std::move(path)) {
    f_ = io::open_output_file(path_, append);  // never through a symbolic link
  }
  /// Flushes and fsyncs; returns the file's length. @throws IoError
  std::uint64_t sync() {
    flush();
    if (::fsync(fileno(f_)) != 0) throw IoError(fmt::format("cannot fsync \"{}\"", path_));
    const long n = std::ftell(f_);
    if (n < 0) throw IoError(fmt::format("cannot tell the length of \"{}\"", path_));
    return static_cast<std::uint64_t>(n);
  }
  /// Flushes and starts the disk writes of what was written since the last call, without
  /// waiting (Linux sync_file_range; a hint: errors are left for `sync`).
  void start_writeback() {
    flush();
    const long n = std::ftell(f_);
#if defined(__linux__)
    if (n > static_cast<long>(written_back_))
      (void)::sync_file_range(fileno(f_), static_cast<off_t>(written_back_),
                              static_cast<off_t>(n) - static_cast<off_t>(written_back_), SYNC_FILE_RANGE_WRITE);
#endif
    if (n > 0) written_back_ = static_cast<std::uint64_t>(n);
  }
  ~TextFile() {
    if (f_) std::fclose(f_);
  }
  TextFile(const TextFile&) = delete;
  TextFile& operator=(const TextFile&) = delete;
  /// Throws IoError "<what> "<path>": <the system's reason>" (no space left on device, ...).
  [[noreturn]] void fail(const char* what) const {
    const int e = errno;
    if (e == 0) throw IoError(fmt::format("{} \"{}\"", what, path_));
    std::string why = std::strerror(e);
    if (!why.empty()) why[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(why[0])));
    throw IoError(fmt::format("{} \"{}\": {}", what, path_, why));
  }
  void write(std::string_view s) {
    errno = 0;
    if (std::fwrite(s.data(), 1, s.size(), f_) != s.size()) fail("cannot write");
  }
  void flush() {
    errno = 0;
    if (std::fflush(f_) != 0) fail("cannot write");
  }
  void close() {
    errno = 0;
    if (f_ && std::fclose(f_) != 0) {
      f_ = nullptr;
      fail("cannot close");
    }
    f_ = nullptr;
  }

 private:
  std::string path_;
  std::FILE* f_ = nullptr;
  std::uint64_t written_back_ = 0;
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
  /// The prefix maxima (rows, log densities), for checkpoints.
  const std::vector<std::int64_t>& rows() const { return max_idx_; }
  const std::vector<double>& values() const { return max_lp_; }
  /// Restores the prefix maxima of a checkpoint.
  void restore(std::vector<std::int64_t> rows, std::vector<double> values) {
    max_idx_ = std::move(rows);
    max_lp_ = std::move(values);
  }

 private:
  std::vector<std::int64_t> max_idx_;
  std::vector<double> max_lp_;
};

/// ParaDRAM's chain-file header line.
std::string chain_header(const SamplerSpecs& specs, const TextFormat& tf) {
  std::string h = "ProcessID" + tf.delim + "DelayedRejectionStage" + tf.delim + "MeanAcceptanceRate" + tf.delim +
                  "AdaptationMeasure" + tf.delim + "BurninLocation" + tf.delim + "SampleWeight" + tf.delim +
                  "SampleLogFunc";
  for (const auto& n : specs.variable_names) h += tf.delim + n;
  return h + "\n";
}

/// Row(s) of ParaDRAM's chain file for record number `i` (0-based) of a chain (verbose:
/// the row repeated `weight` times with weight 1).
std::string chain_rows(const SamplerSpecs& specs, const TextFormat& tf, RunningBurnin& burnin, std::int64_t i,
                       const ChainRecord& r, int process_id) {
  const std::int64_t b = burnin.add(i, r.log_density) + 1;  // 1-based, as ParaDRAM
  // Mean acceptance rate when this state became current: i acceptances in r.step proposals.
  const double rate = r.step == 0 ? 1.0 : static_cast<double>(i) / static_cast<double>(r.step);
  const bool verbose = specs.chain_file_format == "verbose";
  const std::int64_t reps = verbose ? r.weight : 1;
  const std::int64_t weight = verbose ? 1 : r.weight;
  std::string row = tf.integer(process_id) + tf.delim + tf.integer(r.dr_stage) + tf.delim;
  row.reserve(static_cast<std::size_t>(r.ndim + 7) *
              (static_cast<std::size_t>(std::max(tf.precision + 7, tf.width)) + tf.delim.size()));
  tf.append_real(row, rate);
  row += tf.delim;
  tf.append_real(row, r.adapt_measure);
  row += tf.delim + tf.integer(b) + tf.delim + tf.integer(weight) + tf.delim;
  tf.append_real(row, r.log_density);
  for (int k = 0; k < r.ndim; ++k) {
    row += tf.delim;
    tf.append_real(row, r.point[k]);
  }
  row += '\n';
  if (reps == 1) return row;
  std::string out;
  for (std::int64_t k = 0; k < reps; ++k) out += row;
  return out;
}

/// The text chain file of a single-chain run, written while it samples (users watch it
/// grow). With checkpoints its length, row count and burn-in state go into each
/// checkpoint (after an fsync), and a resumed run truncates it back to that length.
class TextChainStream final : public ChainSink {
 public:
  TextChainStream(std::string path, const SamplerSpecs& specs, const TextFormat& tf)
      : path_(std::move(path)), specs_(specs), tf_(tf) {}

  /// Opens the file afresh (header) unless `resume` opened it.
  void begin(std::uint32_t, int) override {
    if (file_) return;
    file_ = std::make_unique<TextFile>(path_);
    file_->write(chain_header(specs_, tf_));
  }
  void write(const ChainRecord& r) override {
    const std::string rows = chain_rows(specs_, tf_, burnin_, rows_++, r, 1);
    file_->write(rows);
    pending_ += rows.size();
    if (durable_ && pending_ >= (std::size_t{1} << 20)) {
      // Start the disk writes now, so that the checkpoint's fsync waits less (as for the
      // binary record); the time counts as checkpoint time.
      Timer t;
      file_->start_writeback();
      pending_ = 0;
      writeback_seconds += t.seconds();
    }
  }
  /// Checkpoints will fsync the file: start its writeback every 1 MiB.
  void set_durable() { durable_ = true; }
  /// Seconds spent starting writebacks.
  double writeback_seconds = 0.0;
  void flush() override {
    if (file_) file_->flush();
  }
  /// Adds the file's state to a checkpoint (fsyncs the file first).
  void checkpoint(io::CheckpointWriter& w) {
    w.add_value("text.bytes", file_->sync());
    w.add_value("text.rows", rows_);
    w.add("text.burnin_rows", burnin_.rows());
    w.add("text.burnin_values", burnin_.values());
  }
  /// Truncates the file to the checkpoint's length and continues it.
  /// @throws IoError when the file is shorter than the checkpoint says.
  void resume(const io::CheckpointReader& r) {
    const auto bytes = r.value<std::uint64_t>("text.bytes");
    std::error_code ec;
    const auto size = fs::file_size(path_, ec);
    if (ec || size < bytes)
      throw IoError(
          fmt::format("the chain file \"{}\" is shorter than its checkpoint records ({} bytes); set "
                      "overwrite = true to start afresh",
                      path_, bytes));
    fs::resize_file(path_, bytes);
    rows_ = r.value<std::int64_t>("text.rows");
    burnin_.restore(r.get<std::int64_t>("text.burnin_rows"), r.get<double>("text.burnin_values"));
    file_ = std::make_unique<TextFile>(path_, true);
  }
  void close() {
    if (file_) file_->close();
    file_.reset();
  }

 private:
  std::string path_;
  const SamplerSpecs& specs_;
  TextFormat tf_;
  std::unique_ptr<TextFile> file_;
  RunningBurnin burnin_;
  std::int64_t rows_ = 0;
  std::size_t pending_ = 0;
  bool durable_ = false;
};

/// Progress of the sampling: rows of <prefix>_progress.txt and the terminal line. Gets the
/// records of one chain (rank 0's first chain) as they are made.
class ProgressSink final : public ChainSink {
 public:
  ProgressSink(const SamplerSpecs& specs, const TextFormat& fmt)
      : specs_(specs), fmt_(fmt), eta_(static_cast<double>(specs.chain_size)) {}

  void open(const std::string& progress_path) {
    progress_ = std::make_unique<TextFile>(progress_path);
    progress_->write("NumFuncCallTotal" + fmt_.delim + "NumFuncCallAccepted" + fmt_.delim +
                     "MeanAcceptanceRateSinceStart" + fmt_.delim + "MeanAcceptanceRateSinceLastReport" + fmt_.delim +
                     "TimeElapsedSinceLastReportInSeconds" + fmt_.delim + "TimeElapsedSinceStartInSeconds" +
                     fmt_.delim + "TimeRemainedToFinishInSeconds\n");
  }

  void write(const ChainRecord& r) override {
    const std::int64_t i = rows_++;
    if (progress_) progress(r.step + static_cast<std::uint64_t>(r.weight), i + 1);
  }

  void flush() override {
    if (progress_) progress_->flush();
  }

  /// A chain that accepts nothing writes no records: progress every period all the same
  /// (the current state counts as accepted, as in the records' rows).
  void tick(std::uint64_t proposals, std::int64_t) override {
    if (progress_) progress(proposals, rows_ + 1);
  }

  void close() {
    if (progress_) progress_->close();
    progress_.reset();
  }

  /// The last row, at the end of the chain (`steps` proposals), as ParaDRAM writes it (its
  /// readers expect at least the periodic rows plus this one); nothing when the last periodic
  /// row was at `steps` already.
  void finish(std::uint64_t steps) {
    if (progress_ && steps > last_report_) progress(steps, rows_, true);
  }

  /// A resumed run: `rows` records and `steps` proposals were made before this process
  /// (rates and the time remaining count from here).
  void resume(std::int64_t rows, std::uint64_t steps) {
    rows_ = rows0_ = last_accepted_ = rows;
    last_report_ = steps0_ = steps;
  }

  /// Terminal progress is printed through this callback (may be empty): totals, the
  /// seconds since this process started sampling, the steps made by this process (they
  /// differ after a resume), and the seconds left (NaN: not known yet; measured only from
  /// the acceptances of this process since its first progress, `EtaEstimator`).
  std::function<void(std::uint64_t steps, std::int64_t accepted, double seconds, std::uint64_t new_steps, double eta)>
      on_progress;

 private:
  void progress(std::uint64_t steps, std::int64_t accepted, bool last = false) {
    const auto period = static_cast<std::uint64_t>(specs_.progress_report_period);
    if (!last && steps / period == last_report_ / period) return;
    const double now = clock_.seconds();
    const double rate = static_cast<double>(accepted) / static_cast<double>(std::max<std::uint64_t>(steps, 1));
    const double rate_last = static_cast<double>(accepted - last_accepted_) /
                             static_cast<double>(std::max<std::uint64_t>(steps - last_report_, 1));
    // The time left from this process's own rate (not from its start-up, nor from the
    // states of earlier invocations): NaN until known.
    const double remaining = eta_.update(now, static_cast<double>(accepted));
    progress_->write(fmt_.integer(steps) + fmt_.delim + fmt_.integer(accepted) + fmt_.delim + fmt_.real(rate) +
                     fmt_.delim + fmt_.real(rate_last) + fmt_.delim + fmt_.real(now - last_time_) + fmt_.delim +
                     fmt_.real(now) + fmt_.delim + fmt_.real(remaining) + "\n");
    if (on_progress) on_progress(steps, accepted, now, steps - steps0_, remaining);
    last_report_ = steps;
    last_accepted_ = accepted;
    last_time_ = now;
  }

  const SamplerSpecs& specs_;
  TextFormat fmt_;
  std::unique_ptr<TextFile> progress_;
  std::int64_t rows_ = 0, rows0_ = 0;
  std::uint64_t steps0_ = 0;
  EtaEstimator eta_;
  Timer clock_;
  std::uint64_t last_report_ = 0;
  std::int64_t last_accepted_ = 0;
  double last_time_ = 0.0;
};

/// Run figures for the ParaMonte-layout part of the report.
struct ParamonteStats {
  std::int64_t accepted = 0, proposals = 0, evaluations = 0, burnin_likelihood = 0, burnin_adaptation = 0;
  std::int64_t posterior_draws = 0, sample_size = 0;
  double acceptance = 0.0, seconds = 0.0;
  bool single_chain = true;
  int ndim = 0;
};

/// The part of `<prefix>_report.txt` in ParaMonte's report layout (ParaMonte 1.x/2.x): a
/// banner of lines holding "****"; sections whose framed title names the topic ("ParaMonte
/// library interface specifications", "Runtime platform specifications", "simulation
/// environment", "simulation specifications"), each followed by its text; then records
/// `stats.<a>.<b>` with the value indented by 8 blanks and a description of lines
/// "        ParaDRAM - NOTE: ...". Descriptions hold no quote or backslash (ParaMonte's Python
/// reader evaluates them inside raw string literals).
std::string paramonte_report_part(const std::string& target, const SampleRunOptions& options, const ParamonteStats& ps,
                                  const std::vector<std::string>& paths) {
  const std::string rule(132, '*');
  auto framed = [&](const std::string& title) {
    const std::size_t inner = 124;
    const std::string t = title.substr(0, inner);
    const std::size_t left = (inner - t.size()) / 2;
    const std::string blank = "****" + std::string(inner, ' ') + "****\n";
    return rule + "\n" + blank + "****" + std::string(left, ' ') + t + std::string(inner - left - t.size(), ' ') +
           "****\n" + blank + rule + "\n";
  };
  auto indented = [](const std::string& text) {
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
  };
  std::string r = "\n" + rule + "\n" + rule + "\n";
  r += framed(fmt::format("herd {}: the report in the layout of ParaMonte's ParaDRAM report", HERD_VERSION_STRING));
  r += rule + "\n\n";
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
  r += framed("The statistical properties of the simulation") + "\n";
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

/// Writes ParaDRAM's chain file of one chain (compact, verbose or binary) from its compact
/// records: the same bytes as writing them while sampling.
void write_chain_file(const std::string& path, const SamplerSpecs& specs, const TextFormat& tf,
                      const MemoryChainSink& c, int process_id) {
  const int d = c.ndim;
  std::vector<double> pt(static_cast<std::size_t>(d));
  auto record = [&](std::size_t i) {
    ChainRecord r;
    r.chain_id = c.chain_id;
    r.step = c.step[i];
    r.weight = c.weight[i];
    r.log_density = c.log_density[i];
    r.dr_stage = c.dr_stage[i];
    r.accept_prob = c.accept_prob[i];
    r.adapt_measure = c.adapt_measure[i];
    r.point = c.point(i);
    r.ndim = d;
    return r;
  };
  if (specs.chain_file_format == "binary") {
    BinaryChainSink b(path);
    b.begin(c.chain_id, d);
    for (std::size_t i = 0; i < c.size(); ++i) b.write(record(i));
    b.flush();
    return;
  }
  TextFile f(path);
  f.write(chain_header(specs, tf));
  RunningBurnin burnin;
  for (std::size_t idx = 0; idx < c.size(); ++idx)
    f.write(chain_rows(specs, tf, burnin, static_cast<std::int64_t>(idx), record(idx), process_id));
  f.close();
}

/// Values of one reported quantity on the compact states (`[compact]`).
struct Column {
  std::string name;
  std::vector<double> compact;
};

std::vector<double> expand(const std::vector<double>& compact, const std::vector<std::int64_t>& weight,
                           std::size_t first) {
  std::vector<double> out;
  for (std::size_t i = first; i < compact.size(); ++i)
    out.insert(out.end(), static_cast<std::size_t>(weight[i]), compact[i]);
  return out;
}

/// Appends the first `limit` verbose draws of a compact column from compact index `first` on.
void append_verbose(std::vector<double>& out, const std::vector<double>& compact,
                    const std::vector<std::int64_t>& weight, std::size_t first, std::size_t limit) {
  for (std::size_t i = first; i < compact.size() && limit > 0; ++i) {
    const std::size_t take = std::min(static_cast<std::size_t>(weight[i]), limit);
    out.insert(out.end(), take, compact[i]);
    limit -= take;
  }
}

std::string cell(double v) { return fmt::format("{:.6g}", v); }

}  // namespace

namespace {

constexpr int kMaxTextChains = 64;  // per-chain text files up to this many chains (DESIGN.md §4)

// Below this mean acceptance rate the chain barely moved: the report and the terminal say so
// (the terminal also during the run, once kHintSteps proposals are made).
constexpr double kLowAcceptance = 1e-3;
constexpr std::uint64_t kHintSteps = 20000;

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
                                 const std::string& run_longer) {
  std::vector<std::string> names;
  std::vector<DiagnosticSummary> summary;
  for (const auto& r : rows) {
    names.push_back(r.name);
    summary.push_back(r.stats);
  }
  // Below kLowAcceptance the low-acceptance warning replaces the verdict's acceptance line.
  const bool stuck = std::isfinite(acceptance_rate) && acceptance_rate < kLowAcceptance;
  std::string out;
  for (const ReportVerdict& v : convergence_verdicts(
           names, summary, chains, stuck ? std::numeric_limits<double>::quiet_NaN() : acceptance_rate, run_longer))
    if (v.level >= 2) out += "WARNING: " + v.text + "\n";
  if (stuck) out += low_acceptance_warning(acceptance_rate) + "\n";
  return out;
}

namespace {

/// What to do about a mean acceptance rate below kLowAcceptance (one paragraph).
std::string low_acceptance_hint(double rate) { return low_acceptance_warning(rate); }
constexpr int kMaxKsChains = 16;  // pairwise KS table up to this many chains

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

}  // namespace

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
  if (!resuming) {
    for (const auto& path : output_paths(s, ranks)) {
      if (!s.overwrite && fs::exists(path)) {
        throw InputError(
            fmt::format("output file \"{}\" exists; set overwrite = true or choose another output_prefix", path));
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
  std::size_t w = 8;
  for (const auto& r : rows) w = std::max(w, r.name.size());
  std::string out =
      fmt::format("{:<{}} {:>12} {:>12} {:>12} {:>12} {:>12} {:>10} {:>10} {:>9} {:>9} {:>7}\n", "name", w, "mean",
                  "sd", "q5", "q50", "q95", "mcse_mean", "mcse_sd", "ess_bulk", "ess_tail", "rhat");
  for (const auto& r : rows) {
    const auto& s = r.stats;
    out += fmt::format("{:<{}} {:>12} {:>12} {:>12} {:>12} {:>12} {:>10} {:>10} {:>9.0f} {:>9.0f} {:>7.4f}\n", r.name,
                       w, cell(s.mean), cell(s.sd), cell(s.q5), cell(s.q50), cell(s.q95), cell(s.mcse_mean),
                       cell(s.mcse_sd), s.ess_bulk, s.ess_tail, s.rhat);
  }
  return out;
}

namespace {

/// Everything a chain contributes to the outputs, computed on rank 0.
struct ChainOutputs {
  std::vector<Column> columns;  // variables, then derived quantities (compact)
  std::vector<double> lp_post;  // log density of the verbose chain after burn-in
  std::int64_t burnin = 0;
  std::vector<std::size_t> sample_rows;  // compact rows of the refined sample
  RefinedSample refined;
};

ChainOutputs chain_outputs(const SamplerSpecs& specs, const SampleTarget& target, const MemoryChainSink& memory,
                           const DramResult& kr) {
  ChainOutputs o;
  const int d = target.ndim;
  const std::size_t n = memory.size();
  o.burnin = std::clamp<std::int64_t>(kr.burnin, 0, static_cast<std::int64_t>(n) - 1);
  const auto first = static_cast<std::size_t>(o.burnin);
  for (int j = 0; j < d; ++j) {
    Column c{specs.variable_names[static_cast<std::size_t>(j)], std::vector<double>(n)};
    for (std::size_t i = 0; i < n; ++i) c.compact[i] = memory.point(i)[j];
    o.columns.push_back(std::move(c));
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
      const bool dup =
          std::any_of(o.columns.begin(), o.columns.begin() + d, [&](const Column& v) { return v.name == c.name; });
      if (!dup) o.columns.push_back(std::move(c));
    }
  }
  o.lp_post = expand(memory.log_density, memory.weight, first);
  // Refined sample (ParaDRAM's batch-means refinement of the post-burn-in compact chain).
  const std::size_t m = n - first;
  std::vector<double> states(m * static_cast<std::size_t>(d + 1));
  std::vector<std::int64_t> w(m);
  for (std::size_t i = 0; i < m; ++i) {
    states[i * (d + 1)] = memory.log_density[first + i];
    std::copy(memory.point(first + i), memory.point(first + i) + d,
              states.begin() + static_cast<std::ptrdiff_t>(i * (d + 1) + 1));
    w[i] = memory.weight[first + i];
  }
  if (specs.sample_size > 0) {
    // n evenly spaced draws of the post-burn-in verbose chain.
    std::vector<std::int64_t> cum(m + 1, 0);
    for (std::size_t i = 0; i < m; ++i) cum[i + 1] = cum[i] + w[i];
    const auto total_w = static_cast<double>(cum[m]);
    for (std::int64_t k = 0; k < specs.sample_size; ++k) {
      const auto pos = static_cast<std::int64_t>(
          std::floor((static_cast<double>(k) + 0.5) * total_w / static_cast<double>(specs.sample_size)));
      const auto it = std::upper_bound(cum.begin(), cum.end(), pos);
      o.sample_rows.push_back(first + static_cast<std::size_t>(it - cum.begin() - 1));
    }
  } else if (specs.sample_refinement_count == 0) {
    for (std::size_t i = 0; i < m; ++i)
      o.sample_rows.insert(o.sample_rows.end(), static_cast<std::size_t>(w[i]), first + i);
  } else {
    RefinementOptions ro;
    ro.max_rounds = static_cast<std::size_t>(specs.sample_refinement_count);
    o.refined = refine_sample(states, w, static_cast<std::size_t>(d + 1), ro);
    for (std::size_t k = 0; k < o.refined.index.size(); ++k)
      o.sample_rows.insert(o.sample_rows.end(), static_cast<std::size_t>(o.refined.weight[k]),
                           first + o.refined.index[k]);
  }
  return o;
}

}  // namespace

SampleRunSummary run_paradram(const SamplerSpecs& specs, const SampleTarget& target, const SampleRunOptions& options) {
  SelfCommunicator self;
  return run_paradram(specs, target, options, self);
}

SampleRunSummary run_paradram(const SamplerSpecs& specs, const SampleTarget& target, const SampleRunOptions& options,
                              Communicator& comm) {
  HERD_REQUIRE(target.ndim >= 1 && target.log_density, "sampler: the target has ndim {} and {} log density",
               target.ndim, target.log_density ? "a" : "no");
  const Timer total;
  const int d = target.ndim;
  const int rank = comm.rank(), ranks = comm.size();
  const bool root = rank == 0;
  const bool quiet = options.quiet || specs.silent_mode || !root;
  const bool multi = specs.parallelization_model == "multi_chain";
  const int nchains = chain_count(specs, ranks);
  const bool text_files = nchains <= kMaxTextChains;
  const std::string progress_path = specs.output_prefix + "_progress.txt";
  const std::string report_path = specs.output_prefix + "_report.txt";
  const std::string h5_path = specs.output_prefix + ".h5";
  const std::vector<std::string> paths = output_paths(specs, ranks);
  TextFormat tf{specs.output_delimiter, specs.output_real_precision, specs.output_column_width};
  const bool checkpointing = specs.checkpoint_period > 0 || specs.checkpoint_period_seconds > 0;
  const std::string rdir = restart_folder(specs);
  if (checkpointing && root) {
    std::error_code ec;
    fs::create_directories(rdir, ec);
    if (ec) throw IoError(fmt::format("cannot create the restart folder \"{}\": {}", rdir, ec.message()));
  }
  if (checkpointing && ranks > 1) comm.barrier();

  // --- Sampling -----------------------------------------------------------------------
  ProgressSink progress(specs, tf);
  NullChainSink null_sink;
  // The terminal: one updating line on a terminal, a line every 10 s in a log (RunProgress),
  // phase by phase; the phases' times go into the report.
  RunProgress phases(options.terminal, quiet);
  phases.phase("sampling");
  if (root) progress.open(progress_path);
  if (!quiet && options.terminal) {
    progress.on_progress = [&phases, &specs, last = -1e9, hinted = false](std::uint64_t steps, std::int64_t accepted,
                                                                          double secs, std::uint64_t new_steps,
                                                                          double eta) mutable {
      if (!hinted && steps >= kHintSteps &&
          static_cast<double>(accepted) < kLowAcceptance * static_cast<double>(steps)) {
        hinted = true;  // once per run, on its own line
        phases.print_line(low_acceptance_hint(static_cast<double>(accepted) / static_cast<double>(steps)));
      }
      if (secs - last < 0.25) return;  // RunProgress shows at most this often anyway
      last = secs;
      // No time left is guessed before this process's own rate is known.
      const std::string left = std::isfinite(eta) ? fmt::format("{:.1f} s", eta) : std::string("unknown");
      phases.detail(fmt::format("steps {}  accepted {}/{}  acceptance {:.3f}  {:.3g} steps/s  ETA {}", steps, accepted,
                                specs.chain_size, static_cast<double>(accepted) / static_cast<double>(steps),
                                static_cast<double>(new_steps) / std::max(secs, 1e-9), left));
    };
  }
  // A single chain's text chain file is written while it samples (rank 0).
  std::unique_ptr<TextChainStream> text;
  std::unique_ptr<FanSink> progress_text;
  if (root && !multi && specs.chain_file_format != "binary") {
    text = std::make_unique<TextChainStream>(chain_file_path(specs, 1, 1), specs, tf);
    progress_text = std::make_unique<FanSink>(progress, *text);
  }
  bool text_done = false;  // the streamed text chain is complete
  ChainSink& tee = progress_text ? static_cast<ChainSink&>(*progress_text)
                   : root        ? static_cast<ChainSink&>(progress)
                                 : static_cast<ChainSink&>(null_sink);
  std::vector<MemoryChainSink> chains;
  std::vector<DramResult> results;
  std::string parallel_report;
  double checkpoint_seconds = 0.0;
  std::int64_t checkpoints = 0;
  // A resumed single chain: what the earlier invocations did (as of the checkpoint).
  bool resumed = false;
  std::uint64_t proposals_before = 0;
  double seconds_before = 0.0;
  const Timer sampling;
  ResumableOptions files;
  files.chain_path = rdir + "/chain_0.chain";
  files.checkpoint_path = rdir + "/chain_0.ckpt";
  files.period_steps = specs.checkpoint_period;
  files.period_seconds = specs.checkpoint_period_seconds;
  if (text && checkpointing) {
    text->set_durable();
    files.on_checkpoint = [&text](io::CheckpointWriter& w) { text->checkpoint(w); };
  }
  if (root)
    files.on_resume = [&text, &progress](const io::CheckpointReader& r) {
      if (text) text->resume(r);
      progress.resume(r.value<std::int64_t>("dram.records_written"), r.value<std::uint64_t>("dram.proposal_number"));
    };
  const DramOptions dopt = to_dram_options(specs, d, 0);
  try {
    if (multi) {
      // Random starts: each chain its own, or one per superchain (random_start_point_scope).
      std::vector<double> starts;
      if (specs.random_start_point)
        for (int c = 0; c < nchains; ++c) {
          const DramOptions oc =
              to_dram_options(specs, d, start_point_chain(specs, static_cast<std::uint32_t>(c), nchains));
          starts.insert(starts.end(), oc.start_point.begin(), oc.start_point.end());
        }
      MultiChainRun m =
          run_multi_chain(dopt, target.log_density, target.thread_safe, comm, static_cast<int>(specs.chains_per_rank),
                          0, checkpointing ? rdir + "/chain" : "", specs.checkpoint_period,
                          specs.checkpoint_period_seconds, false, root ? &tee : nullptr, starts);
      chains = std::move(m.chains);
      results = std::move(m.results);
      resumed = m.proposals_before > 0;
      proposals_before = m.proposals_before;
      seconds_before = m.seconds_before;
      parallel_report += fmt::format("parallelization model             multi_chain\n");
      parallel_report +=
          fmt::format("ranks x chains per rank           {} x {} = {} chains\n", ranks, specs.chains_per_rank, nchains);
      parallel_report += fmt::format("sampling wall time                {:.3f} s\n", m.seconds);
      std::int64_t props = 0;
      for (const auto& r : results) props += r.proposals;
      parallel_report += fmt::format(
          "proposals per second (all chains, this invocation) {:.4g}\n",
          static_cast<double>(static_cast<std::uint64_t>(props) - m.proposals_before) / std::max(m.seconds, 1e-9));
    } else if (ranks > 1) {
      MemoryChainSink memory;
      FanSink fan(memory, tee);
      ChainSink& sink = root && !checkpointing ? static_cast<ChainSink&>(fan) : tee;
      ForkJoinRun f = run_fork_join(dopt, target.log_density, comm, sink, checkpointing ? &files : nullptr);
      text_done = !f.already_complete;
      resumed = f.resumed;
      proposals_before = f.proposals_before;
      seconds_before = f.seconds_before;
      checkpoints = f.checkpoints;
      checkpoint_seconds = f.checkpoint_seconds;
      if (root && checkpointing) memory = read_resumable_chain(files.chain_path, d, files.checkpoint_path);
      chains.push_back(std::move(memory));
      results.push_back(f.result);
      parallel_report += "parallelization model             single_chain (fork-join)\n";
      if (f.already_complete) {
        parallel_report += "(the chain was complete in the restart record: nothing sampled)\n";
      } else {
        const double tf_eval = f.mean_eval_seconds;
        const double measured =
            f.seconds > 0 ? static_cast<double>(f.result.proposals - static_cast<std::int64_t>(f.proposals_before)) *
                                tf_eval / f.seconds
                          : 0.0;
        parallel_report += fmt::format("ranks                             {}\n", ranks);
        parallel_report += fmt::format("rounds                            {}\n", f.rounds);
        parallel_report +=
            fmt::format("proposals decided per round       {:.4f}\n",
                        f.rounds > 0 ? static_cast<double>(std::accumulate(f.rank_proposals.begin(),
                                                                           f.rank_proposals.end(), std::int64_t{0})) /
                                           static_cast<double>(f.rounds)
                                     : 0.0);
        parallel_report += fmt::format("mean log-density time             {:.4g} s\n", tf_eval);
        parallel_report += fmt::format("communication time per round      {:.4g} s\n", f.comm_seconds_per_round);
        parallel_report += fmt::format(
            "measured speedup                  {:.3f} (this invocation's proposals x mean log-density time / wall time "
            "{:.3f} s)\n",
            measured, f.seconds);
        parallel_report += fmt::format(
            "predicted speedup                 {:.3f} (cyclic-geometric model, Shahmoradi & Bagheri 2020)\n",
            f.predicted_speedup);
        parallel_report += "per-rank contributions (this run or, after a resume, its last part):\n";
        parallel_report += fmt::format("{:>6} {:>20} {:>20}\n", "rank", "proposals decided", "stage-1 acceptances");
        for (int r = 0; r < ranks; ++r)
          parallel_report += fmt::format("{:>6} {:>20} {:>20}\n", r, f.rank_proposals[static_cast<std::size_t>(r)],
                                         f.rank_accepted[static_cast<std::size_t>(r)]);
      }
    } else if (checkpointing) {
      files.tee = &tee;
      const ResumableRun r = run_resumable(dopt, target.log_density, files);
      text_done = !r.already_complete;
      resumed = r.resumed;
      proposals_before = r.proposals_before;
      seconds_before = r.seconds_before;
      checkpoints = r.checkpoints;
      checkpoint_seconds = r.checkpoint_seconds;
      chains.push_back(read_resumable_chain(files.chain_path, d, files.checkpoint_path));
      results.push_back(r.result);
    } else {
      MemoryChainSink memory;
      FanSink fan(memory, tee);
      DramSampler sampler(dopt, target.log_density);
      results.push_back(sampler.run(fan));
      chains.push_back(std::move(memory));
      text_done = true;
    }
  } catch (...) {
    try {
      progress.close();
      if (text) text->close();
    } catch (...) {
    }
    throw;
  }
  const double sampling_seconds = sampling.seconds();
  if (!results.empty()) progress.finish(static_cast<std::uint64_t>(results[0].proposals));
  progress.close();
  if (text) {
    checkpoint_seconds += text->writeback_seconds;
    text->close();
  }
  text_done = text_done && text != nullptr;
  SampleRunSummary out;
  if (!root) return out;

  // --- Post-processing (rank 0) -----------------------------------------------------------
  const auto m = chains.size();
  std::vector<ChainOutputs> co;
  phases.phase("post-processing: burn-in, posterior draws, refined sample");
  for (std::size_t c = 0; c < m; ++c) {
    if (m > 1) phases.detail(fmt::format("chain {} of {}", c + 1, m));
    co.push_back(chain_outputs(specs, target, chains[c], results[c]));
  }
  phases.phase("post-processing: diagnostics (R-hat, ESS, MCSE, KS)");
  const DramResult& kr = results[0];
  out.kernel = kr;
  out.chains = results;
  for (std::size_t c = 0; c < m; ++c) {
    out.compact_size += static_cast<std::int64_t>(chains[c].size());
    out.verbose_size += chains[c].total_weight();
    out.sample_size += static_cast<std::int64_t>(co[c].sample_rows.size());
  }
  out.burnin = co[0].burnin;
  // The posterior: the post-burn-in verbose chains cut to a common length.
  std::size_t ndraw = co[0].lp_post.size();
  for (const auto& x : co) ndraw = std::min(ndraw, x.lp_post.size());
  out.posterior_draws = static_cast<std::int64_t>(ndraw * m);
  const std::size_t ncol = co[0].columns.size();
  // One quantity's posterior draws, [chain, draw]: the verbose chains after burn-in cut to a
  // common length, expanded from the compact chains when needed, so that the whole verbose
  // posterior is never held at once (except for the HTML report's plots).
  auto verbose_column = [&](std::size_t k) {
    std::vector<double> v;
    v.reserve(m * ndraw);
    for (std::size_t c = 0; c < m; ++c)
      append_verbose(v, co[c].columns[k].compact, chains[c].weight, static_cast<std::size_t>(co[c].burnin), ndraw);
    return v;
  };
  // The chain and sample text files and the .h5 but its diagnostics group do not depend on
  // the diagnostics: a second thread writes them while this one computes the diagnostics
  // (HDF5, not thread-safe, is called by one thread at a time: the writer until it is done,
  // then this one). Their phases below show the time left to wait for them.
  std::optional<io::H5File> h5;
  auto write_text_files = [&] {
    if (text_files) {
      for (std::size_t c = 0; c < m; ++c) {
        const int k = static_cast<int>(chains[c].chain_id) + 1;
        if (!(c == 0 && text_done))  // else streamed while sampling
          write_chain_file(chain_file_path(specs, static_cast<int>(m), k), specs, tf, chains[c], m == 1 ? 1 : k);
        TextFile f(sample_file_path(specs, static_cast<int>(m), k));
        std::string h = "SampleLogFunc";
        for (const auto& name : specs.variable_names) h += tf.delim + name;
        f.write(h + "\n");
        const MemoryChainSink& memory = chains[c];
        for (std::size_t r : co[c].sample_rows) {
          std::string row;
          tf.append_real(row, memory.log_density[r]);
          for (int j = 0; j < d; ++j) {
            row += tf.delim;
            tf.append_real(row, memory.point(r)[j]);
          }
          f.write(row + "\n");
        }
        f.close();
      }
    }
  };
  auto write_h5_draws = [&] {
    h5.emplace(io::H5File::create_atomic(h5_path));
    io::H5Group rootg = h5->root();
    rootg.set_attribute("herd_version", HERD_VERSION_STRING);
    rootg.set_attribute("sampler", "DRAM (herd, ParaDRAM-compatible)");
    rootg.set_attribute("target", target.description);
    rootg.set_attribute("input_source", options.input_source);
    rootg.set_attribute("random_seed", static_cast<std::uint64_t>(specs.random_seed));
    rootg.set_attribute("description", specs.description);
    rootg.set_attribute("parallelization_model", specs.parallelization_model);
    {
      io::H5Group input = rootg.create_group("input");
      for (const auto& [k, v] : options.input_attributes) input.set_attribute(k, v);
    }
    std::vector<std::int64_t> chain_idx(m);
    for (std::size_t c = 0; c < m; ++c) chain_idx[c] = static_cast<std::int64_t>(chains[c].chain_id);
    std::vector<std::int64_t> draw_idx(ndraw);
    for (std::size_t i = 0; i < ndraw; ++i) draw_idx[i] = static_cast<std::int64_t>(i);
    // posterior: (chain, draw)
    io::H5Group post = rootg.create_group("posterior");
    post.create_coordinate<std::int64_t>("chain", chain_idx);
    post.create_coordinate<std::int64_t>("draw", draw_idx);
    std::vector<std::string> column_names;
    for (std::size_t k = 0; k < ncol; ++k) column_names.push_back(co[0].columns[k].name);
    const std::vector<ArvizVariable> variables = arviz_variables(column_names);
    // A vector's coordinate dimension, once per group that uses it.
    auto vector_dim = [](io::H5Group& g, const ArvizVariable& v) {
      std::vector<std::int64_t> idx(v.columns.size());
      for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<std::int64_t>(i);
      g.create_coordinate<std::int64_t>(v.name + "_dim_0", idx);
      return v.name + "_dim_0";
    };
    for (const auto& v : variables) {
      if (!v.is_vector) {
        io::H5Dataset ds = post.write<double>(v.name, verbose_column(v.columns[0]), {m, ndraw});
        post.attach_dimensions(ds, {"chain", "draw"});
        continue;
      }
      const std::size_t k = v.columns.size();
      std::vector<double> data(m * ndraw * k);
      for (std::size_t e = 0; e < k; ++e) {
        const std::vector<double> column = verbose_column(v.columns[e]);
        for (std::size_t t = 0; t < m * ndraw; ++t) data[t * k + e] = column[t];
      }
      const std::string dim = vector_dim(post, v);
      post.write_variable<double>(v.name, data, {"chain", "draw", dim});
    }
    // sample_stats: lp, accepted, delayed-rejection stage, acceptance probability.
    io::H5Group stats = rootg.create_group("sample_stats");
    stats.create_coordinate<std::int64_t>("chain", chain_idx);
    stats.create_coordinate<std::int64_t>("draw", draw_idx);
    auto put_stat = [&](const char* name, const auto& values) {
      using T = typename std::decay_t<decltype(values)>::value_type;
      io::H5Dataset ds = stats.write<T>(name, values, {m, ndraw});
      stats.attach_dimensions(ds, {"chain", "draw"});
    };
    // One dataset at a time: `of(i, k)` gives the value of the k-th of the weight[i] draws of
    // compact state i (the first is the one where the state was accepted).
    auto per_draw = [&](const char* name, auto of) {
      std::vector<decltype(of(chains[0], std::size_t{0}, std::int64_t{0}))> v;
      v.reserve(m * ndraw);
      for (std::size_t c = 0; c < m; ++c) {
        const MemoryChainSink& memory = chains[c];
        const std::size_t before = v.size();
        for (std::size_t i = static_cast<std::size_t>(co[c].burnin); i < memory.size() && v.size() - before < ndraw;
             ++i)
          for (std::int64_t k = 0; k < memory.weight[i] && v.size() - before < ndraw; ++k)
            v.push_back(of(memory, i, k));
      }
      put_stat(name, v);
    };
    if (m == 1 && co[0].lp_post.size() == ndraw) {
      put_stat("lp", co[0].lp_post);
    } else {
      std::vector<double> lp;
      for (std::size_t c = 0; c < m; ++c)
        lp.insert(lp.end(), co[c].lp_post.begin(), co[c].lp_post.begin() + static_cast<std::ptrdiff_t>(ndraw));
      put_stat("lp", lp);
    }
    per_draw("accepted", [](const MemoryChainSink& mem, std::size_t i, std::int64_t k) -> std::uint8_t {
      return k == 0 && mem.step[i] > 0 ? 1 : 0;
    });
    per_draw("dr_stage", [](const MemoryChainSink& mem, std::size_t i, std::int64_t k) -> std::int32_t {
      return k == 0 ? mem.dr_stage[i] : 0;
    });
    per_draw("acceptance_probability", [](const MemoryChainSink& mem, std::size_t i, std::int64_t k) -> double {
      return k == 0 ? mem.accept_prob[i] : 0.0;
    });
    // chain_compact: the compact chains, every state (burn-in included), concatenated in
    // chain order; with several chains `chain` gives each row's chain and `burnin` [chains].
    io::H5Group cc = rootg.create_group("chain_compact");
    {
      std::vector<std::int64_t> chain_of, burnins;
      std::size_t rows = 0;
      for (std::size_t c = 0; c < m; ++c) {
        const MemoryChainSink& memory = chains[c];
        rows += memory.size();
        if (m > 1) chain_of.insert(chain_of.end(), memory.size(), static_cast<std::int64_t>(memory.chain_id));
        burnins.push_back(co[c].burnin);
      }
      // Every dataset has named dimensions, so that xarray opens the group without
      // phony_dims: rows are "compact_draw", state columns "variable" (the names).
      cc.create_dimension("compact_draw", rows);
      {
        io::H5Dataset names = cc.write_strings("variable", specs.variable_names);
        names.make_scale("variable");
      }
      auto put = [&](const char* name, const auto& values) {
        using T = typename std::decay_t<decltype(values)>::value_type;
        io::H5Dataset ds = cc.write<T>(name, values);
        cc.attach_dimensions(ds, {"compact_draw"});
      };
      // One column at a time: a single chain's straight from memory, several chains'
      // concatenated into a buffer freed before the next column.
      auto column = [&](auto member, auto&& write_it) {
        if (m == 1) {
          write_it(chains[0].*member);
          return;
        }
        std::decay_t<decltype(chains[0].*member)> all;
        for (std::size_t c = 0; c < m; ++c)
          all.insert(all.end(), (chains[c].*member).begin(), (chains[c].*member).end());
        write_it(all);
      };
      auto put_column = [&](const char* name, auto member) {
        column(member, [&](const auto& values) { put(name, values); });
      };
      put_column("step", &MemoryChainSink::step);
      put_column("weight", &MemoryChainSink::weight);
      put_column("log_density", &MemoryChainSink::log_density);
      put_column("dr_stage", &MemoryChainSink::dr_stage);
      put_column("acceptance_probability", &MemoryChainSink::accept_prob);
      put_column("adaptation_measure", &MemoryChainSink::adapt_measure);
      column(&MemoryChainSink::points, [&](const std::vector<double>& pts) {
        io::H5Dataset ds = cc.write<double>("state", pts, {rows, static_cast<hsize_t>(d)});
        cc.attach_dimensions(ds, {"compact_draw", "variable"});
      });
      cc.set_attribute("burnin", out.burnin);
      if (m > 1) {
        put("chain", chain_of);
        cc.create_dimension("chains", m);
        io::H5Dataset ds = cc.write<std::int64_t>("burnin", burnins);
        cc.attach_dimensions(ds, {"chains"});
      }
    }
    // sample: the refined samples (of every chain, in chain order), with their own dimension.
    io::H5Group sg = rootg.create_group("sample");
    std::vector<std::int64_t> sidx(static_cast<std::size_t>(out.sample_size));
    for (std::size_t i = 0; i < sidx.size(); ++i) sidx[i] = static_cast<std::int64_t>(i);
    sg.create_coordinate<std::int64_t>("sample", sidx);
    {
      std::vector<double> v;
      for (std::size_t c = 0; c < m; ++c)
        for (std::size_t r : co[c].sample_rows) v.push_back(chains[c].log_density[r]);
      io::H5Dataset ds = sg.write<double>("lp", v);
      sg.attach_dimensions(ds, {"sample"});
      for (const auto& var : variables) {
        v.clear();
        for (std::size_t c = 0; c < m; ++c)
          for (std::size_t r : co[c].sample_rows)
            for (std::size_t k : var.columns) v.push_back(co[c].columns[k].compact[r]);
        if (!var.is_vector) {
          io::H5Dataset dk = sg.write<double>(var.name, v);
          sg.attach_dimensions(dk, {"sample"});
        } else {
          const std::string dim = vector_dim(sg, var);
          sg.write_variable<double>(var.name, v, {"sample", dim});
        }
      }
      if (m > 1) {
        std::vector<std::int64_t> ch;
        for (std::size_t c = 0; c < m; ++c)
          ch.insert(ch.end(), co[c].sample_rows.size(), static_cast<std::int64_t>(chains[c].chain_id));
        io::H5Dataset dc = sg.write<std::int64_t>("chain_id", ch);
        sg.attach_dimensions(dc, {"sample"});
      }
    }
  };
  std::promise<void> text_written, draws_written;
  std::future<void> text_ready = text_written.get_future(), draws_ready = draws_written.get_future();
  std::jthread writer([&] {
    try {
      write_text_files();
      text_written.set_value();
    } catch (...) {
      text_written.set_exception(std::current_exception());
      draws_written.set_value();  // not written: the text files' error is reported first
      return;
    }
    try {
      write_h5_draws();
      draws_written.set_value();
    } catch (...) {
      draws_written.set_exception(std::current_exception());
    }
  });

  // Nested R-hat over the given superchains (contiguous global chain ids; check_superchains
  // made sure they divide the chains).
  std::vector<double> nested;
  const auto nsuper = static_cast<std::size_t>(specs.superchains);
  const bool with_nested = nsuper >= 2 && m % nsuper == 0 && ndraw >= 1;
  for (std::size_t k = 0; k < ncol; ++k) {
    const std::vector<double> column = verbose_column(k);
    QuantitySummary qs{co[0].columns[k].name, {}};
    qs.stats = summarize(DrawsView(column, m, ndraw));
    out.summary.push_back(std::move(qs));
    if (with_nested) nested.push_back(nested_rhat(DrawsView(column, m, ndraw), nsuper));
  }
  // ParaDRAM's pairwise KS table, of the chains' refined samples: the test assumes
  // independent draws, which the refined (thinned) samples nearly are; the verbose chains'
  // autocorrelated draws give far too small p-values.
  std::vector<std::vector<KsResult>> ks;
  const bool ks_samples_ok =
      std::all_of(co.begin(), co.end(), [](const ChainOutputs& x) { return !x.sample_rows.empty(); });
  if (m >= 2 && m <= static_cast<std::size_t>(kMaxKsChains) && ks_samples_ok) {
    std::vector<std::vector<double>> samples(m);
    for (int j = 0; j < d; ++j) {
      for (std::size_t c = 0; c < m; ++c) {
        samples[c].clear();
        for (std::size_t r : co[c].sample_rows)
          samples[c].push_back(co[c].columns[static_cast<std::size_t>(j)].compact[r]);
      }
      ks.push_back(ks_pairwise(std::span<const std::vector<double>>(samples)));
    }
  }
  // Which draws the table tested, for the report and the .h5.
  const std::string ks_tested =
      specs.sample_size > 0
          ? fmt::format(
                "the chains' samples of sample_size = {} evenly spaced draws (thinned only as far as that "
                "spacing goes)",
                specs.sample_size)
      : specs.sample_refinement_count == 0
          ? std::string(
                "the chains' unrefined samples (sample_refinement_count = 0: every post-burn-in draw, "
                "autocorrelated, so the p-values are too small)")
          : std::string(
                "the chains' refined samples (thinned by their integrated autocorrelation time: nearly "
                "independent draws, as the test assumes)");
  // The diagnostics' scratch (sort records, split and z-scaled draws, FFT buffers: about 110
  // bytes per draw) is not needed by the writing phases.
  release_diagnostics_workspace();

  // Chain and sample text files (written by the writer thread).
  if (text_files) phases.phase("writing the chain and sample text files");
  text_ready.get();

  // <prefix>.h5, written atomically: the draws by the writer thread, then the diagnostics.
  phases.phase("writing " + h5_path);
  draws_ready.get();
  writer.join();
  {
    // diagnostics: per quantity (across chains).
    io::H5Group dg = h5->root().create_group("diagnostics");
    std::vector<std::string> names;
    for (const auto& q : out.summary) names.push_back(q.name);
    dg.write_strings("variable", names).make_scale("variable");
    auto put_diag = [&](const char* name, double DiagnosticSummary::*field) {
      std::vector<double> v;
      for (const auto& q : out.summary) v.push_back(q.stats.*field);
      io::H5Dataset ds = dg.write<double>(name, v);
      dg.attach_dimensions(ds, {"variable"});
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
    if (!nested.empty()) {
      io::H5Dataset ds = dg.write<double>("nested_rhat", nested);
      dg.attach_dimensions(ds, {"variable"});
      ds.set_attribute("superchains", static_cast<std::int64_t>(nsuper));
    }
    if (!ks.empty()) {
      // ParaDRAM's pairwise KS table per variable: [variable, chain, chain].
      std::vector<double> stat, pval;
      for (const auto& t : ks)
        for (const auto& x : t) {
          stat.push_back(x.statistic);
          pval.push_back(x.p_value);
        }
      dg.create_dimension("ks_variable", static_cast<hsize_t>(d));
      dg.create_dimension("chain_a", m);
      dg.create_dimension("chain_b", m);
      io::H5Dataset ks_stat = dg.write<double>("ks_statistic", stat, {static_cast<hsize_t>(d), m, m});
      dg.attach_dimensions(ks_stat, {"ks_variable", "chain_a", "chain_b"});
      io::H5Dataset ks_p = dg.write<double>("ks_p_value", pval, {static_cast<hsize_t>(d), m, m});
      dg.attach_dimensions(ks_p, {"ks_variable", "chain_a", "chain_b"});
      ks_p.set_attribute("tested", ks_tested);
      ks_stat.set_attribute("tested", ks_tested);
    }
    h5->commit();
  }

  // _report.txt (times vary: excluded from reproducibility).
  out.seconds = total.seconds();
  std::int64_t proposals = 0, evaluations = 0, nan_count = 0, ood = 0;
  for (const auto& r : results) {
    proposals += r.proposals;
    evaluations += r.evaluations;
    nan_count += r.nan_count;
    ood += r.out_of_domain;
  }
  double acceptance = 0.0;
  for (const auto& r : results) acceptance += r.acceptance_rate * static_cast<double>(r.proposals);
  acceptance /= std::max<double>(1.0, static_cast<double>(proposals));
  const std::string warnings = convergence_warnings(out.summary, m, acceptance);
  // _report.html: the same run with plots (posterior_report.hpp).
  phases.phase("writing " + specs.output_prefix + "_report.html");
  if (ndraw >= 1) {
    PosteriorReportData h;
    h.title = "herd-sample report" + (specs.description.empty() ? std::string() : ": " + specs.description);
    h.subtitle = fmt::format("herd {}, DRAM sampler (ParaDRAM-compatible); target: {}; input: {}", HERD_VERSION_STRING,
                             target.description, options.input_source);
    h.facts = {{"dimension", std::to_string(d)},
               {"chains", fmt::format("{} ({}{})", m, specs.parallelization_model,
                                      ranks > 1 ? fmt::format(", {} processes", ranks) : std::string())},
               {"random seed", std::to_string(specs.random_seed)},
               {"proposals (steps)", std::to_string(proposals)},
               {"accepted states (chain_size)", std::to_string(out.compact_size)},
               {"mean acceptance rate", fmt::format("{:.4f}", acceptance)},
               {"burn-in (compact index, chain 1)", std::to_string(out.burnin)},
               {"posterior draws (verbose, after burn-in)",
                m > 1 ? fmt::format("{} ({} chains x {}, cut to the shortest)", out.posterior_draws, m, ndraw)
                      : std::to_string(out.posterior_draws)},
               {"refined sample size", std::to_string(out.sample_size)},
               {"sampling time (this invocation)", fmt::format("{:.3f} s", sampling_seconds)},
               {"outputs", specs.output_prefix + ".h5, _report.txt, _chain/_sample/_progress.txt"}};
    if (resumed) h.facts.emplace_back("resumed at proposal", std::to_string(proposals_before));
    for (std::size_t k = 0; k < ncol; ++k) h.names.push_back(co[0].columns[k].name);
    h.chains = m;
    h.draws = ndraw;
    for (std::size_t c = 0; c < m; ++c) h.chain_ids.push_back(chains[c].chain_id);
    // The plots (densities, rank plots) use every draw of every quantity: the one place where
    // the whole verbose posterior is held, after the diagnostics' scratch was freed.
    std::vector<std::vector<double>> plotted(ncol);
    for (std::size_t k = 0; k < ncol; ++k) {
      plotted[k] = verbose_column(k);
      h.values.emplace_back(plotted[k]);
    }
    for (const auto& q : out.summary) h.summary.push_back(q.stats);
    h.sampled = static_cast<std::size_t>(d);
    h.acceptance_rate = acceptance;
    for (std::size_t c = 0; c < m; ++c) h.history.push_back(chain_history(chains[c]));
    // The start proposal covariance as the kernel used it (DramOptions' rule).
    const auto du = static_cast<std::size_t>(d);
    if (!dopt.proposal_start_cov.empty()) {
      h.start_covariance = dopt.proposal_start_cov;
    } else {
      h.start_covariance.assign(du * du, 0.0);
      for (std::size_t i = 0; i < du; ++i)
        h.start_covariance[i * du + i] =
            dopt.proposal_start_std.empty() ? 1.0 : dopt.proposal_start_std[i] * dopt.proposal_start_std[i];
    }
    for (std::size_t c = 0; c < m && c < 4; ++c)
      if (results[c].proposal_cov.size() == du * du)
        h.final_covariances.emplace_back(fmt::format("final proposal, chain {}", chains[c].chain_id + 1),
                                         results[c].proposal_cov);
    h.covariance_note =
        "herd-sample keeps the start and the final proposal covariance of each chain, not their "
        "history over the run: the figure shows those two.";
    if (m > 1)
      h.notes.push_back("Several chains: R-hat and ESS are computed across the chains, cut to a common length.");
    if (text_files == false) h.notes.push_back("More than 64 chains: no per-chain text files; see the .h5 file.");
    h.resolved_input = options.resolved_input;
    write_posterior_report(specs.output_prefix + "_report.html", h);
  }
  // _report.txt last, so that it gives the time of every phase before it.
  phases.phase("writing " + report_path);
  out.seconds = total.seconds();
  {
    TextFile f(report_path);
    std::string r;
    r += fmt::format("herd {} — DRAM sampler report (ParaDRAM-compatible)\n\n", HERD_VERSION_STRING);
    r += fmt::format("description: {}\ntarget: {}\ninput: {}\n\n", specs.description, target.description,
                     options.input_source);
    r += "== resolved specifications ==\n" + options.resolved_input + "\n";
    r += "== run ==\n";
    r += fmt::format("dimension                         {}\n", d);
    r += fmt::format("random seed                       {}\n", specs.random_seed);
    r += fmt::format("chains                            {}\n", m);
    r += fmt::format("proposals (steps)                 {}\n", proposals);
    r += fmt::format("log-density evaluations           {}\n", evaluations);
    r += fmt::format("accepted states (chain_size)      {}\n", out.compact_size);
    r += fmt::format("mean acceptance rate              {:.6f}\n", acceptance);
    if (m == 1) {
      for (std::size_t k = 0; k < kr.stage_accepted.size(); ++k)
        r += fmt::format("  accepted at stage {}             {}\n", k + 1, kr.stage_accepted[k]);
      r += fmt::format("adaptive updates                  {} ({} deferred, {} Cholesky failures)\n",
                       kr.adaptive_updates, kr.adaptive_updates_deferred, kr.chol_failures);
    }
    r += fmt::format("NaN log densities (as -inf)       {}\n", nan_count);
    r += fmt::format("proposals outside the domain      {}\n", ood);
    if (m == 1) {
      r += fmt::format("burn-in (likelihood rule)         {}\n", kr.burnin_likelihood);
      r += fmt::format("burn-in (adaptation measure rule) {}\n", kr.burnin_adaptation);
      r += fmt::format("burn-in used (compact index)      {}\n", out.burnin);
    }
    r += fmt::format("posterior draws (verbose)         {}{}\n", out.posterior_draws,
                     m > 1 ? fmt::format(" ({} chains x {}: cut to the shortest)", m, ndraw) : std::string());
    r += fmt::format("refined sample size               {}\n", out.sample_size);
    // Times: this invocation's, and after a resume also the whole chain's (the earlier
    // invocations' sampling time as of the checkpoint resumed from, plus this one's).
    const auto props_now = static_cast<std::int64_t>(static_cast<std::uint64_t>(proposals) - proposals_before);
    r += fmt::format("sampling time (this invocation)   {:.3f} s\n", sampling_seconds);
    r += fmt::format("total time (this invocation)      {:.3f} s\n", out.seconds);
    if (resumed) {
      r += fmt::format("resumed from the restart record at proposal {}{} (earlier invocations: {:.3f} s of sampling)\n",
                       proposals_before, m > 1 ? " (all chains)" : "", seconds_before);
      r += fmt::format("proposals (this invocation)       {}\n", props_now);
    }
    r += fmt::format("steps per second (this invocation) {:.4g}\n",
                     static_cast<double>(props_now) / std::max(sampling_seconds, 1e-9));
    if (resumed) {
      const double whole = seconds_before + sampling_seconds;
      r += fmt::format("sampling time (whole chain)       {:.3f} s\n", whole);
      r += fmt::format("steps per second (whole chain)    {:.4g}\n",
                       static_cast<double>(proposals) / std::max(whole, 1e-9));
    }
    if (checkpointing && multi)
      r += fmt::format("restart record                    {} (each rank checkpoints its own chains)\n", rdir);
    else if (checkpointing)
      r += fmt::format(
          "checkpoints (this process)        {} in {:.3f} s ({:.2f}% of the sampling time); record in {}\n",
          checkpoints, checkpoint_seconds, 100.0 * checkpoint_seconds / std::max(sampling_seconds, 1e-9), rdir);
    r += "\n== time per phase (this invocation; the last one, writing this report, so far) ==\n" +
         phases.phase_table() + "\n";
    if (!parallel_report.empty()) r += "== parallelism ==\n" + parallel_report + "\n";
    if (m > 1) {
      r += "== chains ==\n";
      r += fmt::format("{:>6} {:>12} {:>12} {:>10} {:>10} {:>12}\n", "chain", "proposals", "chain_size", "acceptance",
                       "burn-in", "post draws");
      for (std::size_t c = 0; c < m; ++c)
        r += fmt::format("{:>6} {:>12} {:>12} {:>10.4f} {:>10} {:>12}\n", chains[c].chain_id + 1, results[c].proposals,
                         chains[c].size(), results[c].acceptance_rate, co[c].burnin, co[c].lp_post.size());
      r += "\n";
    }
    r += "== final proposal covariance" + std::string(m > 1 ? " (chain 1)" : "") + " ==\n";
    if (kr.proposal_cov.size() == static_cast<std::size_t>(d * d)) {
      for (int i = 0; i < d; ++i) {
        for (int j = 0; j < d; ++j) r += fmt::format("{:>14.6e}", kr.proposal_cov[static_cast<std::size_t>(i * d + j)]);
        r += "\n";
      }
    }
    r += m > 1 ? "\n== posterior (verbose chains after burn-in, cut to a common length): statistics and diagnostics "
                 "across chains ==\n"
               : "\n== posterior (verbose chain after burn-in): statistics and diagnostics ==\n";
    r += format_summary_table(out.summary);
    if (!warnings.empty()) r += "\n== convergence warnings ==\n" + warnings;
    if (!nested.empty()) {
      r += fmt::format("\n== nested R-hat (Margossian et al. 2024): {} superchains of {} contiguous chains, {} ==\n",
                       nsuper, m / nsuper,
                       specs.random_start_point && specs.random_start_point_scope == "superchain"
                           ? "each superchain from its own random start"
                       : specs.random_start_point ? "every chain from its own random start"
                                                  : "every chain from the same start");
      for (std::size_t k = 0; k < ncol; ++k) r += fmt::format("{:<20} {:.4f}\n", out.summary[k].name, nested[k]);
    }
    if (!ks.empty()) {
      r += "\n== pairwise two-sample Kolmogorov-Smirnov tests between chains (ParaDRAM): p-values ==\n";
      r += "tested: " + ks_tested + "\n";
      for (int j = 0; j < d; ++j) {
        r += specs.variable_names[static_cast<std::size_t>(j)] + ":\n";
        for (std::size_t a = 0; a < m; ++a) {
          for (std::size_t b = 0; b < m; ++b)
            r += fmt::format("{:>10.4f}", ks[static_cast<std::size_t>(j)][a * m + b].p_value);
          r += "\n";
        }
      }
    }
    // Covariance and correlation of the variables.
    r += "\n== posterior covariance ==\n";
    std::vector<double> mean(d, 0.0);
    for (int j = 0; j < d; ++j) mean[j] = out.summary[static_cast<std::size_t>(j)].stats.mean;
    std::vector<double> cov(static_cast<std::size_t>(d * d), 0.0);
    const std::size_t nall = m * ndraw;
    // Over the verbose draws in order, from the compact states: a state of weight w adds its
    // products w times (the sums of the expanded draws, bit for bit).
    std::vector<double> prod(static_cast<std::size_t>(d * d));
    for (std::size_t c = 0; c < m; ++c) {
      std::size_t left = ndraw;
      for (std::size_t row = static_cast<std::size_t>(co[c].burnin); row < chains[c].size() && left > 0; ++row) {
        const auto take = std::min(static_cast<std::size_t>(chains[c].weight[row]), left);
        left -= take;
        for (int i = 0; i < d; ++i)
          for (int j = 0; j < d; ++j)
            prod[static_cast<std::size_t>(i * d + j)] =
                (co[c].columns[static_cast<std::size_t>(i)].compact[row] - mean[i]) *
                (co[c].columns[static_cast<std::size_t>(j)].compact[row] - mean[j]);
        for (std::size_t rep = 0; rep < take; ++rep)
          for (std::size_t e = 0; e < prod.size(); ++e) cov[e] += prod[e];
      }
    }
    for (auto& c : cov) c /= std::max<double>(1.0, static_cast<double>(nall) - 1.0);
    for (int i = 0; i < d; ++i) {
      for (int j = 0; j < d; ++j) r += fmt::format("{:>14.6e}", cov[i * d + j]);
      r += "\n";
    }
    r += "\n== posterior correlation ==\n";
    for (int i = 0; i < d; ++i) {
      for (int j = 0; j < d; ++j)
        r += fmt::format("{:>10.4f}", cov[i * d + j] / std::sqrt(cov[i * d + i] * cov[j * d + j]));
      r += "\n";
    }
    if (m == 1 && !co[0].refined.rounds.empty()) {
      r += "\n== sample refinement (batch-means integrated autocorrelation) ==\n";
      r += fmt::format("{:>6} {:>8} {:>14} {:>14} {:>12}\n", "round", "stage", "compact size", "verbose size",
                       "IAC summary");
      for (std::size_t k = 0; k < co[0].refined.rounds.size(); ++k) {
        const auto& rd = co[0].refined.rounds[k];
        r += fmt::format("{:>6} {:>8} {:>14} {:>14} {:>12.4f}\n", k + 1, rd.verbose_stage ? "verbose" : "compact",
                         rd.compact_size, rd.verbose_size, rd.iac_summary);
      }
    }
    r += "\n== outputs ==\n";
    for (const auto& p : paths) r += p + "\n";
    // The same facts in the layout of ParaMonte's report, so that ParaMonte's readers
    // (Python `readReport`, MATLAB) parse this file.
    ParamonteStats ps;
    ps.accepted = out.compact_size;
    ps.proposals = proposals;
    ps.evaluations = evaluations;
    ps.acceptance = acceptance;
    ps.seconds = out.seconds;
    ps.single_chain = m == 1;
    ps.burnin_likelihood = kr.burnin_likelihood;
    ps.burnin_adaptation = kr.burnin_adaptation;
    ps.posterior_draws = out.posterior_draws;
    ps.sample_size = out.sample_size;
    ps.ndim = d;
    r += paramonte_report_part(target.description, options, ps, paths);
    f.write(r);
    f.close();
  }
  phases.finish();
  out.paths = paths;

  if (!quiet && options.terminal) {
    std::fprintf(options.terminal, "%s", format_summary_table(out.summary).c_str());
    std::fprintf(options.terminal,
                 "\n%lld chain%s, %lld steps, acceptance rate %.3f, burn-in %lld, %lld posterior draws, %lld in the "
                 "refined sample, %.2f s\n",
                 static_cast<long long>(m), m == 1 ? "" : "s", static_cast<long long>(proposals), acceptance,
                 static_cast<long long>(out.burnin), static_cast<long long>(out.posterior_draws),
                 static_cast<long long>(out.sample_size), out.seconds);
    std::fprintf(options.terminal, "%s", warnings.c_str());
    std::fprintf(options.terminal, "outputs:\n");
    for (const auto& p : paths) std::fprintf(options.terminal, "  %s\n", p.c_str());
  }
  return out;
}

// --- the program around a run (herd-sample, the C API) -------------------------------------

namespace {

constexpr const char* kRunRecordKind = "herd-sample-run";

std::string run_record_path(const SamplerSpecs& s) { return restart_folder(s) + "/run.ckpt"; }

// Settings that do not change what a run computes: left out of the input hash.
const char* const kIgnoredInHash[] = {"overwrite",
                                      "silent_mode",
                                      "progress_report_period",
                                      "checkpoint_period",
                                      "checkpoint_period_seconds",
                                      "mpi_finalize_requested",
                                      "output_status",
                                      "restart_file_format",
                                      "input_file_has_priority",
                                      "system_info_file_path",
                                      "parallelism_num_thread",
                                      "output_splash_mode",
                                      "stall_timeout_seconds",
                                      "max_memory"};

bool ignored_in_hash(const std::string& key) {
  return std::find_if(std::begin(kIgnoredInHash), std::end(kIgnoredInHash), [&](const char* x) { return key == x; }) !=
         std::end(kIgnoredInHash);
}

/// The record's layout name: the batched device, or the serial kernel's parallelization_model.
std::string run_layout(const SamplerSpecs& s) { return s.device != "cpu" ? s.device : s.parallelization_model; }

/// The resolved input as "key\tvalue\n" lines (the settings the input hash covers).
std::string recorded_input(const std::vector<std::pair<std::string, std::string>>& attrs) {
  std::string out;
  for (const auto& [k, v] : attrs)
    if (!ignored_in_hash(k)) out += k + '\t' + v + '\n';
  return out;
}

/// Which recorded settings differ from this run's (`recorded_input` form each), e.g.
/// "chain_size (40000 in the record, 40001 now)"; empty when none differs.
std::string input_differences(const std::string& before, const std::string& now) {
  auto parse = [](const std::string& text) {
    std::vector<std::pair<std::string, std::string>> kv;
    std::size_t p = 0;
    while (p < text.size()) {
      std::size_t e = text.find('\n', p);
      if (e == std::string::npos) e = text.size();
      const std::string line = text.substr(p, e - p);
      const std::size_t t = line.find('\t');
      if (t != std::string::npos) kv.emplace_back(line.substr(0, t), line.substr(t + 1));
      p = e + 1;
    }
    return kv;
  };
  const auto a = parse(before), b = parse(now);
  auto find = [](const auto& v, const std::string& k) -> const std::string* {
    for (const auto& [kk, vv] : v)
      if (kk == k) return &vv;
    return nullptr;
  };
  std::string out;
  auto add = [&](const std::string& k, const std::string* x, const std::string* y) {
    out +=
        fmt::format("{}{} ({} in the record, {} now)", out.empty() ? "" : ", ", k, x ? *x : "unset", y ? *y : "unset");
  };
  for (const auto& [k, v] : a) {
    const std::string* y = find(b, k);
    if (y == nullptr || *y != v) add(k, &v, y);
  }
  for (const auto& [k, v] : b)
    if (find(a, k) == nullptr) add(k, nullptr, &v);
  return out;
}

void write_run_record(const SamplerSpecs& s, std::uint64_t hash, std::int64_t chains, bool complete,
                      const std::vector<std::pair<std::string, std::string>>& attrs) {
  io::CheckpointWriter w(kRunRecordKind, 1);
  w.add_value("input_hash", hash);
  w.add_value("random_seed", s.random_seed);
  w.add_value("chains", chains);
  w.add_string("parallelization_model", run_layout(s));
  w.add_string("input", recorded_input(attrs));
  w.add_value("complete", static_cast<std::uint8_t>(complete ? 1 : 0));
  w.commit(run_record_path(s));
}

/// Deletes the restart folder of an earlier run of this prefix before a fresh start, but
/// only what herd made: a folder holding its run record (`run.ckpt`), or an empty one (a
/// run killed between making the folder and writing the record). Anything else of that
/// name (a user's folder or file, a link) is refused, with or without overwrite.
/// @throws herd::InputError naming the folder.
void remove_restart_folder(const SamplerSpecs& s) {
  const std::string dir = restart_folder(s);
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(dir, ec);
  if (ec || !fs::exists(st)) return;
  const bool ours = fs::is_directory(st) && (fs::is_empty(dir, ec) || fs::exists(run_record_path(s), ec));
  if (!ours)
    throw InputError(
        fmt::format("\"{}\" exists but is not a restart folder of herd (it has no run record run.ckpt), "
                    "so it is not deleted: move it away or choose another output_prefix",
                    dir));
  // The run record goes last: a run killed while deleting leaves a folder that is still
  // recognised as herd's (and is deleted by the next fresh start).
  const std::string record = run_record_path(s);
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().string() != record) fs::remove_all(e.path(), ec);
  if (!ec) fs::remove(record, ec);
  if (!ec) fs::remove(dir, ec);
  if (ec) throw IoError(fmt::format("cannot remove the old restart folder \"{}\": {}", dir, ec.message()));
}

}  // namespace

void trim_restart_folder(const std::string& output_prefix) {
  const std::string dir = output_prefix + "_restart";
  const std::string record = dir + "/run.ckpt";
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(dir, ec);
  if (ec || !fs::is_directory(st) || !fs::exists(record, ec)) return;  // not herd's record: untouched
  std::vector<fs::path> gone;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().string() != record) gone.push_back(e.path());
  for (const auto& p : gone) {
    fs::remove_all(p, ec);
    if (ec)
      throw IoError(
          fmt::format("cannot remove \"{}\" of the complete run's restart record: {}", p.string(), ec.message()));
  }
}

namespace {

enum class RestartStatus { kFresh = 0, kResume = 1, kComplete = 2 };

/// What the restart record of this output prefix says; the seed of the recorded run.
/// @throws herd::InputError when the record belongs to another input.
RestartStatus check_restart(const SamplerSpecs& s, std::uint64_t hash, std::int64_t chains, std::uint64_t& seed,
                            const std::vector<std::pair<std::string, std::string>>& attrs) {
  const std::string path = run_record_path(s);
  if (s.overwrite || !fs::exists(path)) return RestartStatus::kFresh;
  io::CheckpointReader r(path);
  r.expect_kind(kRunRecordKind, 1);
  const bool complete = r.value<std::uint8_t>("complete") != 0;
  // A finished run of another input: its outputs are what the overwrite check protects.
  if (r.value<std::uint64_t>("input_hash") != hash && complete) return RestartStatus::kFresh;
  if (r.value<std::uint64_t>("input_hash") != hash) {
    std::string what = "the record does not store its input, so the changed settings are not known";
    if (r.has("input")) {
      const std::string diff = input_differences(r.string("input"), recorded_input(attrs));
      what = diff.empty() ? std::string("the settings are the same, so the target (its file, data or library) differs")
                          : "changed: " + diff;
    }
    throw InputError(
        fmt::format("the restart record \"{}\" belongs to a run with another input ({}); set overwrite = "
                    "true to start afresh (this deletes \"{}\"), restore the original input, or choose "
                    "another output_prefix",
                    path, what, restart_folder(s)));
  }
  const auto rc = r.value<std::int64_t>("chains");
  const std::string model = r.string("parallelization_model");
  if (rc != chains || model != run_layout(s))
    throw InputError(
        fmt::format("the restart record \"{}\" is of a {} run with {} chain(s), but this run is {} with {} "
                    "chain(s) (ranks x chains_per_rank); resume with the same number of processes, or "
                    "set overwrite = true to start afresh",
                    path, model, rc, run_layout(s), chains));
  seed = r.value<std::uint64_t>("random_seed");
  return complete ? RestartStatus::kComplete : RestartStatus::kResume;
}

}  // namespace

std::uint64_t sampler_input_hash(const SampleRunOptions& options, const SampleTarget& target) {
  // FNV-1a over the resolved (key, value) pairs that change what a run computes.
  std::uint64_t h = 1469598103934665603ULL;
  auto add = [&h](std::string_view s) {
    for (const char c : s) {
      h ^= static_cast<unsigned char>(c);
      h *= 1099511628211ULL;
    }
    h ^= 0xff;
    h *= 1099511628211ULL;
  };
  for (const auto& [k, v] : options.input_attributes) {
    if (ignored_in_hash(k)) continue;
    add(k);
    add(v);
  }
  add(target.description);
  add(std::to_string(target.ndim));
  return h;
}

/// ParaMonte 2's outputStatus = "extend" on a complete run: the run continues in a new set of
/// outputs `<prefix>_run<k>` (k = 2, 3, ...: the first that is not complete; an interrupted
/// one resumes), starting from the last state of the latest complete run and with its
/// post-burn-in covariance as the start proposal covariance (times scale_factor^2, as ParaDRAM
/// initialises an extension from the earlier sample). A run is complete when its `.h5` exists
/// and its restart record, if any, says so. Every rank reads the same files.
/// @throws InputError for a complete multi-chain or batched run (not extended).
void extend_complete_run(SamplerProgramInput& in) {
  SamplerSpecs& s = in.specs;
  auto complete = [](const std::string& prefix) {
    if (!fs::exists(prefix + ".h5")) return false;
    const std::string rec = prefix + "_restart/run.ckpt";
    if (!fs::exists(rec)) return true;
    io::CheckpointReader r(rec);
    return r.value<std::uint8_t>("complete") != 0;
  };
  const std::string base = s.output_prefix;
  if (!complete(base)) return;  // fresh, or interrupted: resumed as always
  if (s.parallelization_model != "single_chain" || s.device != "cpu")
    throw InputError(
        fmt::format("outputStatus = 'extend': the run of \"{}\" is complete, but only single-chain runs of "
                    "the serial kernel are extended; use outputStatus = 'retry' to run it again",
                    base));
  std::string last = base;
  int k = 2;
  while (complete(fmt::format("{}_run{}", base, k))) last = fmt::format("{}_run{}", base, k++);
  const std::string next = fmt::format("{}_run{}", base, k);
  io::H5File f = io::H5File::open(last + ".h5");
  io::H5Group cc = f.open_group("chain_compact");
  const auto state = cc.read<double>("state");
  const auto weight = cc.read<std::int64_t>("weight");
  const std::size_t d = s.variable_names.size(), n = weight.size();
  if (d == 0 || state.size() != n * d || n == 0)
    throw InputError(
        fmt::format("outputStatus = 'extend': \"{}.h5\" holds a chain of {} values for {} variables, "
                    "which does not fit this run's dimension",
                    last, state.size(), d));
  auto burnin = static_cast<std::size_t>(std::max<std::int64_t>(0, cc.attribute<std::int64_t>("burnin")));
  std::int64_t total = 0;
  for (std::size_t i = burnin; i < n; ++i) total += weight[i];
  if (total < static_cast<std::int64_t>(d) + 2) burnin = 0;  // too few draws after the burn-in: the whole chain
  Eigen::VectorXd mean = Eigen::VectorXd::Zero(static_cast<Eigen::Index>(d));
  double wsum = 0;
  for (std::size_t i = burnin; i < n; ++i) {
    mean +=
        static_cast<double>(weight[i]) * Eigen::Map<const Eigen::VectorXd>(&state[i * d], static_cast<Eigen::Index>(d));
    wsum += static_cast<double>(weight[i]);
  }
  mean /= wsum;
  Eigen::MatrixXd cov = Eigen::MatrixXd::Zero(static_cast<Eigen::Index>(d), static_cast<Eigen::Index>(d));
  for (std::size_t i = burnin; i < n; ++i) {
    const Eigen::VectorXd z = Eigen::Map<const Eigen::VectorXd>(&state[i * d], static_cast<Eigen::Index>(d)) - mean;
    cov += static_cast<double>(weight[i]) * z * z.transpose();
  }
  cov /= std::max(1.0, wsum - 1.0);
  s.output_prefix = next;
  s.start_point.assign(state.end() - static_cast<std::ptrdiff_t>(d), state.end());
  s.random_start_point = false;
  std::string how = "its last state";
  if (Eigen::LLT<Eigen::MatrixXd>(cov).info() == Eigen::Success) {
    s.proposal_cov.assign(d * d, 0.0);
    for (std::size_t i = 0; i < d; ++i)
      for (std::size_t j = 0; j < d; ++j)
        s.proposal_cov[i * d + j] = cov(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(j));
    s.proposal_cor.clear();
    s.proposal_std.clear();
    how += " and its sample covariance as the start proposal covariance";
  }
  auto set_attr = [&](const std::string& key, const std::vector<double>& v) {
    std::string text = "[";
    for (std::size_t i = 0; i < v.size(); ++i) text += fmt::format("{}{:.17g}", i ? ", " : "", v[i]);
    text += "]";
    for (auto& [kk, vv] : in.options.input_attributes)
      if (kk == key) {
        vv = text;
        return;
      }
    in.options.input_attributes.emplace_back(key, text);
  };
  set_attr("start_point", s.start_point);
  if (!s.proposal_cov.empty()) set_attr("proposal_cov", s.proposal_cov);
  for (auto& [kk, vv] : in.options.input_attributes)
    if (kk == "output_prefix") vv = fmt::format("\"{}\"", next);
  s.notes.push_back(fmt::format(
      "outputStatus = 'extend': the run of \"{}\" is complete; it continues in \"{}\" from {}", last, next, how));
  in.options.resolved_input +=
      fmt::format("# outputStatus = 'extend': continues \"{}\" (output_prefix \"{}\")\n", last, next);
}

int run_sampler_program(Communicator& comm, const std::function<SamplerProgramInput()>& resolve,
                        const std::string& program) {
  const int rank = comm.rank(), size = comm.size();
  auto error = [&](const std::string& msg) {
    const std::string who = size > 1 ? fmt::format("rank {}: ", rank) : std::string();
    // Several problems of one input come as several lines: each is one error line.
    std::size_t start = 0;
    while (start <= msg.size()) {
      const std::size_t nl = msg.find('\n', start);
      const std::string line = msg.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
      if (!line.empty()) std::fprintf(stderr, "%s: error: %s%s\n", program.c_str(), who.c_str(), line.c_str());
      if (nl == std::string::npos) break;
      start = nl + 1;
    }
    std::fflush(stderr);
  };
  // 1. Every rank reads the input; an error on any rank ends every rank with exit code 2.
  SamplerProgramInput in;
  std::string err;
  try {
    check_launch(size);
    in = resolve();
    check_superchains(in.specs, size);
    if (in.specs.output_status == "extend") extend_complete_run(in);
  } catch (const std::exception& e) {
    err = error_text(e, "reading the input");
  }
  if (size > 1) {
    // One line, not one per rank: the lowest rank with an error prints it (usually rank 0,
    // and every rank reads the same input).
    const int first_bad = comm.allreduce_value<int>(err.empty() ? size : rank, ReduceOp::kMin);
    if (first_bad < size) {
      if (rank == first_bad) error(err);
      return 2;
    }
  } else if (!err.empty()) {
    error(err);
    return 2;
  }
  SamplerSpecs& specs = in.specs;
  SampleRunOptions& opts = in.options;
  opts.input_hash = sampler_input_hash(opts, in.target);
  // 2. The same input on every rank.
  try {
    check_same_input(comm, opts.input_hash, "resolved input");
  } catch (const std::exception& e) {
    if (rank == 0) error(e.what());
    return 2;
  }
  // 3. Rank 0: restart record, output files; broadcast the decision and the seed.
  // Batched devices: every rank's chains (the model's chain count is the serial kernel's).
  const std::int64_t chains =
      specs.device != "cpu" ? static_cast<std::int64_t>(size) * specs.chains_per_rank : chain_count(specs, size);
  const bool custom = static_cast<bool>(in.run);        // e.g. a batched run
  const bool recorded = !custom || in.run_restartable;  // a restart record is read and written
  const bool checkpointing = recorded && (specs.checkpoint_period > 0 || specs.checkpoint_period_seconds > 0);
  std::int64_t dec[3] = {0, 0, static_cast<std::int64_t>(specs.random_seed)};
  // Rank 0 holds an exclusive lock on <prefix>.lock for the whole run: a second run of the
  // same prefix (which would share the restart record) is refused.
  std::unique_ptr<OutputPrefixLock> prefix_lock;
  fs::path made_parent;  // rank 0: the output folder this run made (removed again on refusal)
  RestartStatus status = RestartStatus::kFresh;
  if (rank == 0) {
    const fs::path parent = fs::path(specs.output_prefix).parent_path();
    try {
      std::error_code ec;
      if (!parent.empty() && !fs::exists(parent, ec)) {
        fs::create_directories(parent, ec);
        if (ec) throw IoError(fmt::format("cannot create the output folder \"{}\": {}", parent.string(), ec.message()));
        made_parent = parent;
      }
      prefix_lock = std::make_unique<OutputPrefixLock>(specs.output_prefix, program);
      std::uint64_t seed = specs.random_seed;
      const RestartStatus st = !recorded ? RestartStatus::kFresh
                                         : check_restart(specs, opts.input_hash, chains, seed, opts.input_attributes);
      if (st != RestartStatus::kFresh && !in.seed_given) specs.random_seed = seed;
      dec[1] = static_cast<std::int64_t>(st);
      dec[2] = static_cast<std::int64_t>(specs.random_seed);
      prepare_outputs(specs, size, st != RestartStatus::kFresh);
    } catch (const std::exception& e) {
      err = error_text(e, "preparing the outputs");
      dec[0] = 1;
    }
  }
  // A refusal on rank 0 (or on any rank, below): nothing of this run is left behind.
  auto refuse = [&]() {
    prefix_lock.reset();
    std::error_code ec;
    if (!made_parent.empty()) fs::remove(made_parent, ec);  // only when still empty: nothing earlier is touched
    return 2;
  };
  comm.broadcast(dec, 3, DataType::kInt64, 0);
  if (dec[0] != 0) {
    if (rank == 0) error(err);
    return refuse();
  }
  specs.random_seed = static_cast<std::uint64_t>(dec[2]);
  status = static_cast<RestartStatus>(dec[1]);
  // 3b. Code the input names (a plugin library: its constructors run when it is loaded) is
  // loaded only now, under the lock and after the output checks, on every rank; an exit()
  // from it is reported instead of ending the run quietly.
  if (in.load_target && status != RestartStatus::kComplete) {
    const ExitGuard guard(comm, program, "the log density's library (target.library)");
    std::string load_err;
    try {
      in.load_target();
    } catch (const std::exception& e) {
      load_err = e.what();
    }
    const int first_bad = size > 1 ? comm.allreduce_value<int>(load_err.empty() ? size : rank, ReduceOp::kMin)
                                   : (load_err.empty() ? size : 0);
    if (first_bad < size) {
      if (rank == first_bad) error(load_err);
      return refuse();
    }
  }
  // 3c. Rank 0, on a fresh start: the restart folder of an earlier run goes (only what herd
  // made), and a new run record is written.
  std::int64_t fresh_failed = 0;
  if (rank == 0 && status == RestartStatus::kFresh && recorded) {
    try {
      remove_restart_folder(specs);
      if (checkpointing) {
        std::error_code ec;
        fs::create_directories(restart_folder(specs), ec);
        if (ec)
          throw IoError(
              fmt::format("cannot create the restart folder \"{}\": {}", restart_folder(specs), ec.message()));
        write_run_record(specs, opts.input_hash, chains, false, opts.input_attributes);
      }
    } catch (const std::exception& e) {
      err = e.what();
      fresh_failed = 1;
    }
  }
  if (size > 1) comm.broadcast(&fresh_failed, 1, DataType::kInt64, 0);
  if (fresh_failed != 0) {
    if (rank == 0) error(err);
    return refuse();
  }
  const bool quiet = opts.quiet || specs.silent_mode || rank != 0;
  if (status == RestartStatus::kComplete) {
    // A run killed between recording its completion and trimming its record.
    if (rank == 0) {
      try {
        trim_restart_folder(specs.output_prefix);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "%s: warning: %s\n", program.c_str(), e.what());
      }
    }
    if (!quiet)
      std::printf(
          "%s: the run recorded in %s is complete; its outputs are %s.* (set overwrite = true to run it again)\n",
          program.c_str(), restart_folder(specs).c_str(), specs.output_prefix.c_str());
    return 0;
  }
  if (!quiet) {
    for (const auto& n : specs.notes) std::printf("%s: note: %s\n", program.c_str(), n.c_str());
    if (!in.banner.empty()) std::printf("%s\n", in.banner.c_str());
    if (status == RestartStatus::kResume)
      std::printf("%s: resuming from the restart record in %s\n", program.c_str(), restart_folder(specs).c_str());
    std::fflush(stdout);
  }
  in.resuming = status == RestartStatus::kResume;
  // The optional watchdog: a log-density call that never returns, or a rank that stopped,
  // ends the job naming the rank (heartbeat files in the restart folder; see StallWatchdog).
  std::unique_ptr<StallWatchdog> watchdog;
  if (specs.stall_timeout_seconds > 0) {
    watchdog = std::make_unique<StallWatchdog>(comm, specs.stall_timeout_seconds, program, "the log density",
                                               checkpointing ? restart_folder(specs) + "/heartbeat." : std::string());
    StallWatchdog* w = watchdog.get();
    in.target.log_density = [f = in.target.log_density, w](const double* x, int n) {
      struct Leave {
        StallWatchdog* w;
        ~Leave() { w->leave(); }
      };
      w->enter();
      const Leave leave{w};
      return f(x, n);
    };
  }
  // 4. The run; an error on one rank ends every rank (the checkpoints stay intact).
  try {
    // A log density that calls exit() ends the job with a message and exit code 1.
    const ExitGuard guard(comm, program, "the log density");
    abort_all_on_error(comm, [&] {
      if (custom) in.run(in, comm);
      else run_paradram(specs, in.target, opts, comm);
      if (rank == 0 && checkpointing) write_run_record(specs, opts.input_hash, chains, true, opts.input_attributes);
    });
  } catch (const std::exception& e) {
    error(error_text(e, "sampling"));
    return 1;
  }
  // 5. The run is complete (its record says so): what only an interrupted run needs goes
  // (chain records, checkpoints, heartbeats); run.ckpt stays, so that a rerun reports the
  // run as complete and outputStatus = "extend" continues it (from the .h5).
  watchdog.reset();  // removes this rank's heartbeat file
  if (checkpointing) {
    if (size > 1) comm.barrier();  // every rank's chain files are closed, its watchdog stopped
    if (rank == 0) {
      try {
        trim_restart_folder(specs.output_prefix);
      } catch (const std::exception& e) {
        // The outputs are complete; the leftover record only takes disk space.
        std::fprintf(stderr, "%s: warning: %s\n", program.c_str(), e.what());
      }
    }
  }
  return 0;
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
