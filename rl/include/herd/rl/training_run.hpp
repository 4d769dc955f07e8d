#pragma once
/// @file training_run.hpp
/// `TrainingRun`: what `herd-rl train` drives, whatever the algorithm: PPO/A2C (`Trainer`)
/// or DQN (`DqnTrainer`); `make_training_run` picks one by `TrainConfig::algorithm`.

#include <csignal>
#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include "herd/core/communicator.hpp"
#include "herd/core/device.hpp"
#include "herd/rl/train_config.hpp"

namespace herd::rl {

/// Why `TrainingRun::run` returned.
enum class RunEnd {
  kDone,         ///< all iterations done; checkpoint and `<prefix>.h5` written
  kStopped,      ///< `stop_after` iterations done; checkpoint written
  kInterrupted,  ///< an interrupt was requested; the current iteration finished, checkpoint written
};

/// A training run with checkpoints, outputs and resume (see `Trainer` and `DqnTrainer` for
/// each algorithm's meaning of an iteration, its checkpoint contents and collectives).
/// Not thread-safe.
class TrainingRun {
 public:
  virtual ~TrainingRun() = default;
  /// Iterates until done, `stop_after` more iterations (< 0: no limit) or `*interrupt`
  /// non-zero; writes checkpoints, the progress CSV and, when done, `<prefix>.h5`.
  virtual RunEnd run(std::ostream* progress, std::int64_t stop_after = -1,
                     const volatile std::sig_atomic_t* interrupt = nullptr) = 0;
  /// After `run` returned kInterrupted: the interrupt value (e.g. the signal number).
  virtual int interrupted_by() const = 0;
  /// True when every iteration is done.
  virtual bool done() const = 0;
  /// Iterations done.
  virtual std::int64_t iteration() const = 0;
  /// The configuration.
  virtual const TrainConfig& config() const = 0;
  /// Where the networks run.
  virtual Device device() const = 0;
  /// Writes the checkpoint atomically. @throws herd::IoError
  virtual void save_checkpoint(const std::string& path) const = 0;
  /// Restores a checkpoint of this configuration. @throws herd::IoError, herd::InputError
  virtual void load_checkpoint(const std::string& path) = 0;
  /// Settings that differ from the checkpoint's and cannot change on resume, each
  /// "key = new (the checkpoint has old)". @throws herd::IoError for a bad file.
  virtual std::vector<std::string> resume_conflicts(const std::string& path) const = 0;
  /// Settings changed on resume that change the trajectory (after `load_checkpoint`).
  virtual const std::vector<std::string>& changed_on_resume() const = 0;
  /// Writes `<prefix>.h5`-style output to `path` atomically. @throws herd::IoError
  virtual void write_output(const std::string& path) const = 0;
  /// `<prefix>.ckpt`.
  std::string checkpoint_path() const { return config().output_prefix + ".ckpt"; }
  /// `<prefix>_best.ckpt`: the checkpoint of the best evaluation during training
  /// (`eval.every_steps`, `eval.save_best`).
  std::string best_checkpoint_path() const { return config().output_prefix + "_best.ckpt"; }
  /// `<prefix>.h5`.
  std::string output_path() const { return config().output_prefix + ".h5"; }
  /// `<prefix>_progress.csv`.
  std::string progress_path() const { return config().output_prefix + "_progress.csv"; }
  /// `<prefix>_tb`, the folder of the TensorBoard event files (logging.tensorboard).
  std::string tensorboard_folder() const { return config().output_prefix + "_tb"; }
};

/// A `Trainer` (algorithm "ppo" or "a2c") or a `DqnTrainer` ("dqn") for `config`; `comm`
/// as for `Trainer` (data-parallel over its ranks). @throws as the constructors.
std::unique_ptr<TrainingRun> make_training_run(const TrainConfig& config, std::string config_text,
                                               Communicator* comm = nullptr);

}  // namespace herd::rl
