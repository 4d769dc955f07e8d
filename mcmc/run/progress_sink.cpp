// The sampling progress of a serial, multi-chain or fork-join run (progress_sink.hpp).
#include "progress_sink.hpp"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "outputs.hpp"

namespace herd::mcmc::detail {

ProgressSink::ProgressSink(const SamplerSpecs& specs, const TextFormat& fmt)
    : specs_(specs), fmt_(fmt), eta_(static_cast<double>(specs.chain_size)) {}

void ProgressSink::open(const std::string& progress_path) {
  progress_ = std::make_unique<TextFile>(progress_path);
  progress_->write("NumFuncCallTotal" + fmt_.delim + "NumFuncCallAccepted" + fmt_.delim +
                   "MeanAcceptanceRateSinceStart" + fmt_.delim + "MeanAcceptanceRateSinceLastReport" + fmt_.delim +
                   "TimeElapsedSinceLastReportInSeconds" + fmt_.delim + "TimeElapsedSinceStartInSeconds" + fmt_.delim +
                   "TimeRemainedToFinishInSeconds\n");
}

void ProgressSink::begin(std::uint32_t, int) {
  begin_ = last_time_ = clock_.seconds();
  begun_ = true;
}

void ProgressSink::write(const ChainRecord& r) {
  const std::int64_t i = rows_++;
  if (progress_) progress(r.step + static_cast<std::uint64_t>(r.weight), i + 1);
}

void ProgressSink::flush() {
  if (progress_) progress_->flush();
}

void ProgressSink::tick(std::uint64_t proposals, std::int64_t) {
  if (progress_) progress(proposals, rows_ + 1);
}

void ProgressSink::close() {
  if (progress_) progress_->close();
  progress_.reset();
}

void ProgressSink::finish(std::uint64_t steps) {
  // Not when this process never sampled the chain (complete in the restart record): its
  // counts would read as 0 accepted of every step.
  if (progress_ && begun_ && steps > last_report_) progress(steps, rows_, true);
}

void ProgressSink::resume_at(std::uint64_t proposals, std::int64_t records) {
  rows_ = last_accepted_ = records;
  last_report_ = steps0_ = proposals;
}

void ProgressSink::progress(std::uint64_t steps, std::int64_t accepted, bool last) {
  const auto period = static_cast<std::uint64_t>(specs_.progress_report_period);
  if (!last && steps / period == last_report_ / period) return;
  const double now = clock_.seconds();
  const double rate = static_cast<double>(accepted) / static_cast<double>(std::max<std::uint64_t>(steps, 1));
  const double rate_last = static_cast<double>(accepted - last_accepted_) /
                           static_cast<double>(std::max<std::uint64_t>(steps - last_report_, 1));
  // The time left from this process's own rate (not from its start-up, nor from the
  // states of earlier invocations): NaN until known.
  const double remaining = eta_.update(now, static_cast<double>(accepted));
  // The times count from when this process began sampling (`begin`), as ParaDRAM's from its
  // sampling start: not from start-up (reading the input, checking a restart record).
  progress_->write(fmt_.integer(steps) + fmt_.delim + fmt_.integer(accepted) + fmt_.delim + fmt_.real(rate) +
                   fmt_.delim + fmt_.real(rate_last) + fmt_.delim + fmt_.real(now - last_time_) + fmt_.delim +
                   fmt_.real(now - begin_) + fmt_.delim + fmt_.real(remaining) + "\n");
  // This process's steps over this process's sampling time (from `begin`).
  if (on_progress) on_progress(steps, accepted, now - begin_, steps - steps0_, remaining);
  last_report_ = steps;
  last_accepted_ = accepted;
  last_time_ = now;
}

std::unique_ptr<FanSink> progress_and_text(ProgressSink& progress, ChainSink& text) {
  return std::make_unique<FanSink>(text, progress);
}

std::function<void(std::uint64_t, std::int64_t, double, std::uint64_t, double)> terminal_progress(
    RunProgress& phases, const SamplerSpecs& specs) {
  return [&phases, &specs, last = -1e9, hinted = false](std::uint64_t steps, std::int64_t accepted, double secs,
                                                        std::uint64_t new_steps, double eta) mutable {
    if (!hinted && steps >= kHintSteps && static_cast<double>(accepted) < kLowAcceptance * static_cast<double>(steps)) {
      hinted = true;  // once per run, on its own line
      phases.print_line(low_acceptance_warning(static_cast<double>(accepted) / static_cast<double>(steps)));
    }
    // RunProgress shows at most this often anyway; the chain's last progress (all its states
    // accepted) always goes through, so that a log ends the phase with it.
    const bool final = accepted >= specs.chain_size;
    if (secs - last < 0.25 && !final) return;
    last = secs;
    // No time left is guessed before this process's own rate is known.
    const std::string left = std::isfinite(eta) ? fmt::format("{:.1f} s", eta) : std::string("unknown");
    phases.detail(fmt::format("steps {}  accepted {}/{}  acceptance {:.3f}  {:.3g} steps/s  ETA {}", steps, accepted,
                              specs.chain_size, static_cast<double>(accepted) / static_cast<double>(steps),
                              static_cast<double>(new_steps) / std::max(secs, 1e-9), left),
                  static_cast<double>(accepted) / static_cast<double>(std::max<std::int64_t>(specs.chain_size, 1)));
  };
}

}  // namespace herd::mcmc::detail
