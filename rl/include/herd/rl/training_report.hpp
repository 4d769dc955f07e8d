#pragma once
#include "herd/core/cxx20.hpp"  // C++20 or one clear error
/// @file training_report.hpp
/// The HTML report of a herd-rl training run (`<prefix>_report.html`, written at the end of
/// `herd-rl train` and by `herd-rl report PREFIX` at any time): learning curves (return and
/// episode length over env steps), evaluation returns when recorded, losses and training
/// diagnostics (policy/value loss, entropy, approx KL, clip fraction, explained variance,
/// learning rate) and throughput, as Stable-Baselines3/CleanRL users read them. Written
/// through herd::io::HtmlReport (one self-contained file, Vega plots).
///
/// Sources, by column name: `<prefix>_progress.csv` (one row per iteration, flushed while
/// training, so a running or interrupted run has one) and the `/curve` group of
/// `<prefix>.h5` (written at the end). The CSV is preferred when present; the `.h5` adds
/// the run's configuration, environment and algorithm.
///
/// Thread-safety: reentrant.

#include <map>
#include <string>
#include <vector>

namespace herd::rl {

/// A learning curve: named columns of equal length (one value per iteration; NaN where a
/// quantity is undefined, e.g. the return before the first finished episode).
struct TrainingCurve {
  std::vector<std::string> names;                      ///< column names in file order
  std::map<std::string, std::vector<double>> columns;  ///< by name
  std::string source;                                  ///< the file read
  /// Rows (0 when empty).
  std::size_t rows() const { return columns.empty() ? 0 : columns.begin()->second.size(); }
  /// The column `name`, or nullptr when absent.
  const std::vector<double>* column(const std::string& name) const;
};

/// Reads a progress CSV by its header names: comma-separated, one header row, then one row
/// per iteration; empty fields and "nan" are NaN. A last line without its newline that is
/// short of fields (a write cut off by a kill) is ignored.
/// @throws herd::IoError when the file cannot be read; herd::InputError on an empty file, a
///         duplicate or empty column name, a row with another number of fields, or a field
///         that is not a number (the message names file, line and column).
TrainingCurve read_progress_csv(const std::string& path);

/// Reads the `/curve` group of a herd-rl output file, naming its columns as the progress
/// CSV does where they mean the same (wall_seconds -> wall_time_s, episode_length ->
/// length_mean; steps_per_second is kept).
/// @throws herd::IoError when the file or group cannot be read; herd::InputError when the
///         datasets have different lengths.
TrainingCurve read_curve_h5(const std::string& path);

/// Writes the report of the run with output prefix `prefix` to `out` (empty:
/// `<prefix>_report.html`), atomically. Returns the path written.
/// @throws herd::InputError when neither `<prefix>_progress.csv` nor `<prefix>.h5` exists
///         or has no rows, when the report's folder does not exist or is not writable
///         (checked before the files are read), or as the readers; herd::IoError when the
///         report cannot be written.
std::string write_training_report(const std::string& prefix, const std::string& out = {});

}  // namespace herd::rl
