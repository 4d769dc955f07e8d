#pragma once
// The sampling progress of a serial, multi-chain or fork-join run (private to herd::mcmc):
// `<prefix>_progress.txt` and the terminal's progress line.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "herd/core/timer.hpp"
#include "herd/mcmc/chain_sink.hpp"
#include "herd/mcmc/run_progress.hpp"
#include "herd/mcmc/sampler_specs.hpp"
#include "text_chain.hpp"

namespace herd::mcmc::detail {

/// Progress of the sampling: rows of <prefix>_progress.txt and the terminal line. Gets the
/// records of one chain (rank 0's first chain) as they are made. Not thread-safe (the
/// sampler's thread only).
class ProgressSink final : public ChainSink {
 public:
  /// Progress of a run of `specs` (kept by reference), its rows in the format `fmt`.
  ProgressSink(const SamplerSpecs& specs, const TextFormat& fmt);

  /// Creates the progress file (header row). @throws IoError
  void open(const std::string& progress_path);
  /// The chain starts (or, after `resume_at`, continues) sampling now: the terminal's
  /// steps per second and the progress rows' times (TimeElapsedSinceStartInSeconds, and the
  /// first row's TimeElapsedSinceLastReportInSeconds) count this process's time from here,
  /// not its start-up (reading and checking a restart record can take longer than the steps
  /// before the first line).
  void begin(std::uint32_t chain_id, int ndim) override;
  /// Counts the record; a progress row when a period is complete. @throws IoError
  void write(const ChainRecord& r) override;
  /// Flushes the progress file. @throws IoError
  void flush() override;
  /// A chain that accepts nothing writes no records: progress every period all the same
  /// (the current state counts as accepted, as in the records' rows).
  void tick(std::uint64_t proposals, std::int64_t) override;
  /// Closes the progress file (idempotent). @throws IoError
  void close();
  /// The last row, at the end of the chain (`steps` proposals), as ParaDRAM writes it (its
  /// readers expect at least the periodic rows plus this one); nothing when the last periodic
  /// row was at `steps` already, or when the chain never began sampling in this process
  /// (a multi_chain resume whose first chain was complete in the restart record).
  void finish(std::uint64_t steps);
  /// A resumed run: `proposals` proposals were made and `records` records written before
  /// this process (rates and the time remaining count from here).
  void resume_at(std::uint64_t proposals, std::int64_t records) override;

  /// Terminal progress is printed through this callback (may be empty): totals, the
  /// seconds since this process started sampling (`begin`), the steps made by this process
  /// (they differ after a resume), and the seconds left (NaN: not known yet; measured only
  /// from the acceptances of this process since its first progress, `EtaEstimator`).
  std::function<void(std::uint64_t steps, std::int64_t accepted, double seconds, std::uint64_t new_steps, double eta)>
      on_progress;

 private:
  void progress(std::uint64_t steps, std::int64_t accepted, bool last = false);

  const SamplerSpecs& specs_;
  TextFormat fmt_;
  std::unique_ptr<TextFile> progress_;
  std::int64_t rows_ = 0;
  std::uint64_t steps0_ = 0;
  EtaEstimator eta_;
  Timer clock_;
  double begin_ = 0.0;  // clock_'s seconds when the chain began sampling in this process
  bool begun_ = false;  // `begin` was called
  std::uint64_t last_report_ = 0;
  std::int64_t last_accepted_ = 0;
  double last_time_ = 0.0;
};

/// The sink of rank 0's progress and its streamed chain file (`text`, a ChainFileStream):
/// `text` first, so that its `begin`, which creates the text chain file (truncating an
/// earlier run's file of the prefix: 24 ms for 25 MB), is start-up and not counted as
/// sampling time by `progress`, whose clock starts at its own `begin`. Both must outlive it.
std::unique_ptr<FanSink> progress_and_text(ProgressSink& progress, ChainSink& text);

/// The terminal side of `ProgressSink::on_progress` for a run of `specs` (both kept by
/// reference): the sampling phase's detail line on `phases` (steps, acceptances, rate,
/// steps/s, time left) at most every 0.25 s, and once per run, after 20000 proposals with a
/// mean acceptance rate below 1e-3, `low_acceptance_warning` on its own line.
std::function<void(std::uint64_t, std::int64_t, double, std::uint64_t, double)> terminal_progress(
    RunProgress& phases, const SamplerSpecs& specs);

}  // namespace herd::mcmc::detail
