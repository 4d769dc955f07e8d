// Terminal progress of a run's phases (run_progress.hpp).
#include "herd/mcmc/run_progress.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>

#include <sys/resource.h>
#include <unistd.h>

#include <fmt/format.h>

namespace herd::mcmc {

namespace {
/// User + system CPU seconds of the process (all threads) and its peak resident set size.
void process_usage(double& cpu_seconds, std::uint64_t& peak_rss_bytes) {
  rusage u{};
  if (getrusage(RUSAGE_SELF, &u) != 0) {
    cpu_seconds = 0.0;
    peak_rss_bytes = 0;
    return;
  }
  auto secs = [](const timeval& t) { return static_cast<double>(t.tv_sec) + 1e-6 * static_cast<double>(t.tv_usec); };
  cpu_seconds = secs(u.ru_utime) + secs(u.ru_stime);
  peak_rss_bytes = static_cast<std::uint64_t>(u.ru_maxrss) * 1024u;  // Linux: kilobytes
}
}  // namespace

double EtaEstimator::update(double seconds, double done) {
  if (done >= total_) return 0.0;
  if (!started_) {
    started_ = true;
    t0_ = seconds;
    done0_ = done;
    return std::numeric_limits<double>::quiet_NaN();
  }
  const double work = done - done0_, time = seconds - t0_;
  if (!(work > 0) || !(time > 0)) return std::numeric_limits<double>::quiet_NaN();
  return (total_ - done) * time / work;
}

RunProgress::RunProgress(std::FILE* out, bool quiet, double tty_period, double log_period)
    : out_(quiet ? nullptr : out) {
  tty_ = out_ != nullptr && isatty(fileno(out_)) != 0;
  period_ = tty_ ? tty_period : log_period;
  step_gap_ = std::min(kLogStepGap, period_);
  if (out_ != nullptr) ticker_ = std::thread([this] { tick_loop(); });
}

RunProgress::~RunProgress() {
  try {
    // An unfinished run ends here by an exception (an error, SIGINT or SIGTERM): no last
    // progress line then. Under mpiexec a SIGTERM can leave stdout closed, and a write to
    // it would end the process (SIGPIPE) before it says why it stopped.
    finish_run(false);
  } catch (...) {
  }
}

void RunProgress::phase(std::string name) {
  std::lock_guard<std::mutex> lock(mu_);
  const double now = clock_.seconds();
  double cpu = 0.0;
  std::uint64_t rss = 0;
  process_usage(cpu, rss);
  if (!name_.empty()) {
    done_.emplace_back(name_, now - phase_start_);
    costs_.push_back({name_, now - phase_start_, cpu - phase_cpu_start_, rss});
  }
  show_last_detail();
  name_ = std::move(name);
  detail_.clear();
  detail_shown_ = true;
  shown_fraction_ = 0.0;
  phase_start_ = now;
  phase_cpu_start_ = cpu;
  if (tty_ && out_ != nullptr) show();  // the new phase's name at once on a terminal
  printed_in_phase_ = false;            // and its first progress at once too, however short the phase
}

void RunProgress::detail(std::string text, double fraction) {
  std::lock_guard<std::mutex> lock(mu_);
  detail_ = std::move(text);
  detail_shown_ = false;
  detail_at_ = clock_.seconds();
  if (out_ == nullptr || finished_) return;
  const double since = clock_.seconds() - last_print_;
  // In a log also at every further tenth of the phase, once a step gap passed since the last
  // line (a run shorter than the period shows more than its first line).
  const bool next_step =
      !tty_ && std::isfinite(fraction) && fraction >= shown_fraction_ + kLogStep && since >= step_gap_;
  if (!printed_in_phase_ || since >= period_ || next_step) {
    show();
    if (std::isfinite(fraction)) shown_fraction_ = fraction;
  }
}

void RunProgress::show_last_detail() {
  // In a log, the phase's last progress (its final line) when the period held it back.
  if (out_ != nullptr && !tty_ && !name_.empty() && !detail_.empty() && !detail_shown_) show();
}

void RunProgress::print_line(const std::string& line) {
  std::lock_guard<std::mutex> lock(mu_);
  if (out_ == nullptr) return;
  std::fprintf(out_, "%s%s\n", line_open_ ? "\n" : "", line.c_str());
  line_open_ = false;
  std::fflush(out_);
}

void RunProgress::show(const std::string& suffix) {
  const double now = clock_.seconds();
  std::string line = name_;
  if (!detail_.empty()) line += ": " + detail_;
  else line += fmt::format(" ({:.0f} s)", now - phase_start_);
  line += suffix;
  if (tty_) {
    std::fprintf(out_, "\r%-100s", line.c_str());
    line_open_ = true;
  } else {
    std::fprintf(out_, "%s\n", line.c_str());
  }
  std::fflush(out_);
  last_print_ = now;
  printed_in_phase_ = true;
  detail_shown_ = true;
}

void RunProgress::tick_loop() {
  std::unique_lock<std::mutex> lock(mu_);
  const auto step = std::chrono::duration<double>(std::min(period_, 0.25));
  while (!stop_) {
    cv_.wait_for(lock, step);
    if (stop_) break;
    // A phase without progress of its own (or whose progress stopped coming) still shows
    // that it runs, once it lasted a period.
    // In a log, a progress already printed is marked as old rather than repeated as if new
    // (a block of draws that takes longer than the period printed the same line twice).
    const double now = clock_.seconds();
    if (!name_.empty() && now - last_print_ >= period_ && now - phase_start_ >= period_)
      show(!tty_ && !detail_.empty() && detail_shown_
               ? fmt::format(" (as of {:.0f} s ago; still running)", now - detail_at_)
               : std::string());
  }
}

void RunProgress::finish() { finish_run(true); }

void RunProgress::finish_run(bool show_last) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (finished_) return;
    finished_ = true;
    stop_ = true;
    if (show_last) show_last_detail();
    if (!name_.empty()) {
      const double now = clock_.seconds();
      double cpu = 0.0;
      std::uint64_t rss = 0;
      process_usage(cpu, rss);
      done_.emplace_back(name_, now - phase_start_);
      costs_.push_back({name_, now - phase_start_, cpu - phase_cpu_start_, rss});
    }
    name_.clear();
  }
  cv_.notify_all();
  if (ticker_.joinable()) ticker_.join();
  std::lock_guard<std::mutex> lock(mu_);
  if (out_ != nullptr && line_open_) {
    std::fprintf(out_, "\r%-100s\r", "");
    std::fflush(out_);
    line_open_ = false;
  }
}

std::vector<std::pair<std::string, double>> RunProgress::phases() const {
  std::lock_guard<std::mutex> lock(mu_);
  auto out = done_;
  if (!name_.empty()) out.emplace_back(name_, clock_.seconds() - phase_start_);
  return out;
}

std::vector<RunProgress::PhaseCost> RunProgress::phase_costs() const {
  std::lock_guard<std::mutex> lock(mu_);
  auto out = costs_;
  if (!name_.empty()) {
    double cpu = 0.0;
    std::uint64_t rss = 0;
    process_usage(cpu, rss);
    out.push_back({name_, clock_.seconds() - phase_start_, cpu - phase_cpu_start_, rss});
  }
  return out;
}

std::string RunProgress::phase_table() const {
  const auto ph = phase_costs();
  double total = 0.0, cpu = 0.0;
  std::uint64_t peak = 0;
  for (const auto& p : ph) {
    total += p.seconds;
    cpu += p.cpu_seconds;
    peak = std::max(peak, p.peak_rss_bytes);
  }
  std::string out = fmt::format("{:<64} {:>12} {:>7} {:>12} {:>14}\n", "phase", "wall", "share", "CPU", "peak memory");
  for (const auto& p : ph)
    out += fmt::format("{:<64} {:>10.3f} s {:>6.1f}% {:>10.3f} s {:>11.1f} MB\n", p.name, p.seconds,
                       total > 0 ? 100.0 * p.seconds / total : 0.0, p.cpu_seconds,
                       static_cast<double>(p.peak_rss_bytes) / 1e6);
  out += fmt::format("{:<64} {:>10.3f} s {:>7} {:>10.3f} s {:>11.1f} MB\n", "total", total, "", cpu,
                     static_cast<double>(peak) / 1e6);
  return out;
}

}  // namespace herd::mcmc
