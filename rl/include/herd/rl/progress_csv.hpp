#pragma once
/// @file progress_csv.hpp
/// `ProgressCsv`: `<prefix>_progress.csv`, the learning curve of a `herd-rl train` run as
/// it goes, one row per iteration, flushed to the kernel every row (so `tail -f`, pandas
/// or a report can read it while training runs, and it stays valid after a kill).

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "herd/io/log_file.hpp"

namespace herd::rl {

/// Columns of `<prefix>_progress.csv`, in order (docs/rl.md gives each column's meaning
/// and its Stable-Baselines3 / CleanRL counterpart).
inline constexpr std::array<const char*, 19> kProgressColumns = {
    "iteration",        "env_steps",   "wall_time_s",   "episodes",           "return_mean",   "return_min",
    "return_max",       "length_mean", "length_min",    "length_max",         "policy_loss",   "value_loss",
    "entropy",          "approx_kl",   "clip_fraction", "explained_variance", "learning_rate", "sample_steps_per_s",
    "train_steps_per_s"};

/// One row, values in the order of `kProgressColumns`; NaN is written "nan".
using ProgressRow = std::array<double, kProgressColumns.size()>;

/// The header line of the CSV, with its newline.
std::string progress_csv_header();

/// Writer of `<prefix>_progress.csv`. The header is written once, when the file is made;
/// each row is formatted whole and written with one `write()` (`io::LogFile`), so after a
/// SIGKILL at any moment the file holds the header and whole rows only (a row cut by a
/// full disk is removed by the next resume). Integers (iteration, env_steps, episodes)
/// are written as integers, other values in the shortest form that reads back to the same
/// double. Rank 0 of a run writes it; not thread-safe.
class ProgressCsv {
 public:
  /// `blank`: columns the algorithm has no such quantity for (A2C: approx_kl and
  /// clip_fraction), always written empty. @throws herd::InputError for an unknown name.
  ProgressCsv(std::string path, const std::vector<std::string>& blank = {});
  /// A CSV of other columns (DQN's learning curve): `columns` in order, those named in
  /// `integer_columns` written as integers; the first column must count the rows from 1
  /// (the iteration, as the resume rule reads it). Rows are given with `append_values` /
  /// `resume_values`; `blank` as above. @throws herd::InputError for no columns or an
  /// unknown integer or blank column.
  ProgressCsv(std::string path, std::vector<std::string> columns, const std::vector<std::string>& integer_columns,
              const std::vector<std::string>& blank = {});

  /// Starts a fresh run: replaces the file atomically by one holding the header only (a
  /// kill leaves the old file or the new one). @throws herd::IoError
  void start();
  /// Continues a run resumed from a checkpoint after `rows.size()` iterations, `rows` the
  /// checkpoint's curve (row i of iteration i + 1). Keeps the header and the leading whole
  /// rows of iterations 1, 2, ... up to `rows.size()` already in the file (their bytes
  /// unchanged), cuts what follows them (rows written after that checkpoint by the run
  /// that was killed or stopped, a partial line), and appends the checkpoint's rows the
  /// file lacks; a missing file, or one without this header, is replaced atomically by
  /// the header and `rows`.
  /// Afterwards the file has exactly one row per iteration done. @throws herd::IoError
  void resume(const std::vector<ProgressRow>& rows);
  /// Appends one row (one `write()`). @throws herd::IoError
  void append(const ProgressRow& row);
  /// The row as one CSV line with its newline.
  std::string format(const ProgressRow& row) const;
  /// `resume` for rows of this CSV's columns. @throws herd::IoError; herd::InputError when a
  /// row has another number of values than columns.
  void resume_values(const std::vector<std::vector<double>>& rows);
  /// `append` for a row of this CSV's columns. @throws as `resume_values`.
  void append_values(std::span<const double> row);
  /// `format` for a row of this CSV's columns. @throws herd::InputError on a length mismatch.
  std::string format_values(std::span<const double> row) const;
  /// The file's path.
  const std::string& path() const noexcept { return path_; }

 private:
  void start_with(const std::vector<std::vector<double>>& rows);
  std::string path_;
  std::vector<std::string> columns_;
  std::vector<bool> blank_, integer_;
  std::string header_;
  io::LogFile file_;
};

}  // namespace herd::rl
