#pragma once
/// @file run_progress.hpp
/// Progress of a sampler run on the terminal, phase by phase, for every engine (serial,
/// multi-chain, fork-join, batched): sampling, then the post-processing phases (refinement,
/// diagnostics, writing the files). On a terminal one line is rewritten in place at most
/// every 0.25 s; in a log (not a terminal) a line is printed at the first progress of a
/// phase, then at every further tenth of the phase's work done once 1 s passed since the
/// last line (progress that states its fraction done), and at the latest every 10 s, and
/// the phase's last progress when the phase ends (so a run of a few seconds shows its
/// progress and its final counts, not only its first line). Phases
/// that report no progress of their own (writing an HDF5 file) get a line from a ticker
/// thread with their elapsed time once they last longer than the period. The time of each
/// phase goes into the report (`phase_table`), with the process's CPU time in it (user +
/// system, all threads) and its peak resident memory at the phase's end.
///
/// The time left (`EtaEstimator`) is measured only from the work done in this process, from
/// its first progress on: after a resume the work of earlier invocations and the start-up
/// (reading and checking the restart record) do not distort it.

#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "herd/core/timer.hpp"

namespace herd::mcmc {

/// Time left to finish from the rate of the work done since the first observation in this
/// process: after observations (t0, done0) ... (t, done), the rate is (done - done0) / (t -
/// t0) and the time left (total - done) / rate. Unknown (NaN) until some work was done after
/// the first observation. Not thread-safe (one owner).
class EtaEstimator {
 public:
  /// `total`: the amount of work of the whole run (e.g. chain_size accepted states).
  explicit EtaEstimator(double total) : total_(total) {}
  /// Records that `done` units are done at `seconds` (any clock, non-decreasing); returns the
  /// seconds left (NaN: unknown yet; 0 when done >= total).
  double update(double seconds, double done);

 private:
  double total_;
  bool started_ = false;
  double t0_ = 0.0, done0_ = 0.0;
};

/// The terminal progress of a run's phases (see the file comment). Thread-safe: `detail`
/// and `print_line` may be called from any thread; `phase` and `finish` from one.
class RunProgress {
 public:
  /// Prints to `out` unless it is null or `quiet` (then it only times the phases). Whether
  /// `out` is a terminal decides the style; `tty_period` and `log_period` are the seconds
  /// between lines on a terminal and in a log.
  RunProgress(std::FILE* out, bool quiet, double tty_period = 0.25, double log_period = 10.0);
  ~RunProgress();
  RunProgress(const RunProgress&) = delete;
  RunProgress& operator=(const RunProgress&) = delete;

  /// Ends the current phase (its time is recorded) and starts `name`, e.g. "sampling" or
  /// "writing out/run.h5".
  void phase(std::string name);
  /// The current phase's progress, e.g. "steps 1000  accepted 300/1000 ... ETA 3.1 s", and
  /// the fraction of the phase's work done (in [0, 1]; NaN: not known): shown at once when
  /// it is the phase's first, else at the next period; in a log also when `fraction` passed
  /// another tenth since the last line shown and 1 s (at most the period) passed since the
  /// last line; in a log the last one is shown when the phase ends, if not shown yet.
  void detail(std::string text, double fraction = std::numeric_limits<double>::quiet_NaN());
  /// Prints `line` on its own line now (a warning during the run), keeping the progress line.
  void print_line(const std::string& line);
  /// Ends the last phase (in a log, with its last progress if not shown yet), stops the
  /// ticker and clears the progress line (idempotent). The destructor finishes an unfinished
  /// run without that last progress line (it is reached by an exception: an error or a
  /// signal, whose own message follows).
  void finish();

  /// The phases so far (the current one with its time so far): name, seconds.
  std::vector<std::pair<std::string, double>> phases() const;
  /// One phase's cost: wall and process CPU seconds (user + system, all threads) spent in
  /// it, and the process's peak resident set size (bytes, `getrusage`'s ru_maxrss) at its end
  /// (for the current phase: so far).
  struct PhaseCost {
    std::string name;
    double seconds = 0.0;
    double cpu_seconds = 0.0;
    std::uint64_t peak_rss_bytes = 0;
  };
  /// The phases so far with their CPU time and peak memory (the current one: so far).
  std::vector<PhaseCost> phase_costs() const;
  /// The phases as report lines: name, wall seconds and share of the total, CPU seconds,
  /// peak resident memory (MB) at the phase's end; then the total.
  std::string phase_table() const;
  /// True when printing to a terminal.
  bool tty() const { return tty_; }

 private:
  void tick_loop();
  void finish_run(bool show_last);            // finish; the destructor's shows no last progress
  void show(const std::string& suffix = {});  // the caller holds mu_
  void show_last_detail();                    // the caller holds mu_

  static constexpr double kLogStep = 0.1;     // a log's line at every tenth of a phase's work
  static constexpr double kLogStepGap = 1.0;  // seconds at least between those lines

  std::FILE* out_;
  bool tty_ = false;
  double period_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::thread ticker_;
  bool stop_ = false, finished_ = false, printed_in_phase_ = false, line_open_ = false;
  bool detail_shown_ = true;     // the current detail_ was printed (or there is none)
  double shown_fraction_ = 0.0;  // the fraction done of the last line shown (this phase)
  double step_gap_ = 1.0;        // min(kLogStepGap, the period)
  std::string name_, detail_;
  Timer clock_;
  double phase_start_ = 0.0, last_print_ = -1e300;
  double detail_at_ = 0.0;  // when detail_ was given
  double phase_cpu_start_ = 0.0;
  std::vector<std::pair<std::string, double>> done_;
  std::vector<PhaseCost> costs_;  // of the phases in done_
};

}  // namespace herd::mcmc
