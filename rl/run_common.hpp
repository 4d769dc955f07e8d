#pragma once
/// @file run_common.hpp
/// Private to rl/: what every `TrainingRun` (PPO/A2C `Trainer`, `DqnTrainer`) does alike:
/// the iteration loop with its progress lines, checkpoint periods, interrupts and final
/// outputs; named tensors in checkpoints; the window of recent episodes; the learning curve
/// in checkpoints and in `<prefix>.h5`; TensorBoard tags. Not installed. Not thread-safe
/// unless said.

#include <csignal>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <span>
#include <string>
#include <vector>

#include "herd/core/communicator.hpp"
#include "herd/core/config.hpp"
#include "herd/io/checkpoint.hpp"
#include "herd/io/hdf5.hpp"
#include "herd/io/tensorboard.hpp"
#include "herd/nn/module.hpp"
#include "herd/rl/env.hpp"
#include "herd/rl/sampler.hpp"
#include "herd/rl/trainer.hpp"
#include "herd/rl/training_run.hpp"

namespace herd::rl::detail {

/// Episodes in the window of recent returns and lengths (the curve's return and length columns).
inline constexpr std::size_t kRecentWindow = 100;

/// Seconds of the steady clock. Thread-safe.
double now_seconds();

/// "12s", "3m05s", "2h07m"; "?" for a negative or non-finite time. Thread-safe.
std::string format_eta(double seconds);

/// Named tensors as checkpoint sections: "<prefix>names" (names, newline-separated) and
/// "<prefix><name>" (values as float64, copied to the host from a CUDA tensor).
void save_tensors(io::CheckpointWriter& w, const std::string& prefix, const std::vector<nn::NamedTensor>& tensors);

/// The tensors of `like` (names, shapes, dtypes) with the checkpoint's values (on the host).
/// @throws herd::InputError "<who>: \"<prefix><name>\" has n values in the checkpoint, but m
///         in this run"; herd::IoError for a missing section.
std::vector<nn::NamedTensor> load_tensors(const io::CheckpointReader& r, const std::string& prefix,
                                          std::vector<nn::NamedTensor> like, const std::string& who);

/// Appends `e` to `recent`, dropping the oldest beyond `kRecentWindow`.
void push_recent(std::deque<EpisodeInfo>& recent, const EpisodeInfo& e);

/// Return and length statistics of the recent episodes (NaN when there are none).
struct RecentStats {
  double mean_return, min_return, max_return, mean_length, min_length, max_length;
};
RecentStats recent_stats(const std::deque<EpisodeInfo>& recent);

/// The section "recent_episodes": (return, length) pairs, oldest first.
void save_recent(io::CheckpointWriter& w, const std::deque<EpisodeInfo>& recent);
/// Reads "recent_episodes" into `recent` (replacing it). @throws herd::IoError
void load_recent(const io::CheckpointReader& r, std::deque<EpisodeInfo>& recent);

/// The sections "curve" (rows concatenated) and "curve_columns" (names, newline-separated).
template <class Row>
void save_curve(io::CheckpointWriter& w, const std::vector<Row>& rows, std::span<const char* const> columns) {
  std::vector<double> flat;
  for (const auto& r : rows) flat.insert(flat.end(), r.begin(), r.end());
  w.add("curve", flat);
  std::string names;
  for (const char* c : columns) names += std::string(c) + "\n";
  w.add_string("curve_columns", names);
}

/// The root of a run's `<prefix>.h5`: attributes "herd_version", "config", "env" and "algorithm", and the
/// group "curve" with one float64 dataset per column of `rows`. The first column (iteration)
/// is the netCDF coordinate variable of the others (a dimension scale attached to each), so
/// that xarray opens the group with the dimension `iteration` instead of phony dimensions;
/// with no rows every column is a plain empty dataset. Not thread-safe (HDF5).
/// @throws herd::IoError
template <class Row>
void write_output_head(io::H5Group& root, const std::string& config_text, const std::string& env,
                       const std::string& algorithm, const std::vector<Row>& rows,
                       std::span<const char* const> columns) {
  root.set_attribute("herd_version", HERD_VERSION_STRING);
  root.set_attribute("config", config_text);
  root.set_attribute("env", env);
  root.set_attribute("algorithm", algorithm);
  io::H5Group curve = root.create_group("curve");
  for (std::size_t c = 0; c < columns.size(); ++c) {
    std::vector<double> col;
    col.reserve(rows.size());
    for (const auto& r : rows) col.push_back(r[c]);
    if (rows.empty()) {
      curve.write(columns[c], col);
    } else if (c == 0) {
      curve.create_coordinate<double>(columns[0], col);
    } else {
      io::H5Dataset ds = curve.write(columns[c], col);
      curve.attach_dimensions(ds, {columns[0]});
    }
  }
}

/// One float32 dataset per tensor (its shape), in a new group `name` of `root` (CUDA
/// tensors copied to the host).
void write_parameters(io::H5Group& root, const std::string& name, const std::vector<nn::NamedTensor>& tensors);

/// TensorBoard scalars of a progress-CSV row: `values[c]` tagged "<section>/<names[c]>" for
/// c >= 2 (iteration and env steps are the step), section "time" for c <= 3 and
/// c >= `time_from`, "rollout" for c <= 9, else "train"; names in `skip` are left out.
std::vector<io::TbScalar> tensorboard_scalars(std::span<const char* const> names, std::span<const double> values,
                                              std::size_t time_from, const std::vector<std::string>& skip = {});

/// A TensorBoard writer into `dir` that starts with a SessionLog START at `env_steps` + 1
/// (so that TensorBoard drops the events a resumed run repeats).
std::unique_ptr<io::TensorBoardWriter> open_tensorboard(const std::string& dir, std::int64_t env_steps);

/// Every rank's `mine` (finished episodes), concatenated in rank order, on every rank.
/// Collective over `comm` (two allgathers when it has more than one rank).
std::vector<EpisodeInfo> gather_episodes(Communicator& comm, const std::vector<EpisodeInfo>& mine);

/// Each rank's state in a checkpoint of a run over several ranks: `write` fills a nested
/// checkpoint of kind `kind` (version 1) on every rank; the serialized bytes are gathered on
/// rank 0 and added to `w` as sections "<prefix>rank<r>". Collective over `comm`. Returns
/// true on rank 0 (which then commits `w`), false on the others.
bool add_rank_sections(io::CheckpointWriter& w, Communicator& comm, const std::string& prefix, const char* kind,
                       const std::function<void(io::CheckpointWriter&)>& write);

/// This rank's nested checkpoint of `add_rank_sections` ("<prefix>rank<rank>" of `r`,
/// checked to be of `kind`), named "<path>:<section>" in errors. @throws herd::IoError
io::CheckpointReader rank_section(const io::CheckpointReader& r, const std::string& path, const std::string& prefix,
                                  int rank, const char* kind);

/// The "ranks" value of a checkpoint (1 when it has none: one process).
std::int64_t checkpoint_ranks(const io::CheckpointReader& r);

/// @throws herd::InputError "<who>: <path> was written by a run of k rank(s), but this run
///         has n; resume it with the same number of ranks (mpiexec -n k)" unless equal.
void require_same_ranks(const std::string& who, const std::string& path, std::int64_t saved, int now);

/// Evaluation episodes: `episodes` episodes of `env` (the first reset with `seed`, the later
/// ones continuing its reset stream) into `obs` (the env's obs_dim floats); `step()` acts
/// on the observation in `obs`, steps `env` (writing the next observation into `obs`) and
/// returns the step's result. An episode ends when terminated, truncated, or cut off at
/// `max_episode_steps` steps (> 0; 0: no cap; `EvalResult::add_step`). Returns each
/// episode's summed reward and length, how it ended, and the returns' mean and population
/// standard deviation.
EvalResult run_episodes(Env& env, float* obs, std::uint64_t seed, int episodes, std::int64_t max_episode_steps,
                        const std::function<StepResult()>& step);

/// The networks' device on this rank of a run over `comm`: `data_parallel_device` with this
/// rank's node-local rank (`node_local_rank`) and the CUDA devices usable here (counted only
/// when a GPU per rank is wanted). Not collective. @throws herd::InputError as
/// `data_parallel_device`.
Device rank_device(const Device& configured, const std::string& device_text, Communicator& comm,
                   const std::string& who);

/// The communicator over which networks on a CUDA device average their gradients under
/// several ranks (PPO/A2C's `Trainer` and `DqnTrainer`, through `nn::DataParallel`): an
/// `NcclCommunicator` on that GPU (unique id broadcast over the host communicator) with a
/// non-blocking stream of its own, so that the bucket all-reduces overlap the rest of
/// backward on the nn stream. The host collectives stay on the host communicator. NCCL
/// builds only (elsewhere it cannot be made: `make_device_comm` refuses). Not thread-safe.
class DeviceComm {
 public:
  /// Makes `device` current for this thread, creates the stream and the NCCL communicator.
  /// Collective over `bootstrap` (which must outlive this object). @throws herd::CudaError,
  /// herd::CommunicationError when NCCL cannot start.
  DeviceComm(Communicator& bootstrap, int device);
  /// Destroys the NCCL communicator, then the stream; never throws.
  ~DeviceComm();
  DeviceComm(const DeviceComm&) = delete;
  DeviceComm& operator=(const DeviceComm&) = delete;
  /// The NCCL communicator (device buffers of `device`).
  Communicator& comm();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// The gradients' device communicator of networks on `device` under `comm`'s ranks: a
/// `DeviceComm` on that GPU for a CUDA device and more than one rank, else null (the
/// gradients are then averaged over `comm` itself, or not at all). Collective over `comm`
/// when it makes one. @throws herd::InputError "<who>: device is \"<device_text>\" with N
/// ranks, but " + `multi_gpu_refusal` in a build without NCCL; as `DeviceComm`.
std::unique_ptr<DeviceComm> make_device_comm(Communicator& comm, const Device& device, const std::string& device_text,
                                             const std::string& who);

/// The curve as rows of `columns` from a checkpoint's "curve" and "curve_columns" sections,
/// matched by name: a column the checkpoint lacks (one of an older version, which has no
/// "curve_columns" and then the columns `legacy`) is NaN, a column this version lacks is
/// dropped. @throws herd::IoError for a missing or malformed section.
std::vector<std::vector<double>> load_curve(const io::CheckpointReader& r, std::span<const char* const> columns,
                                            std::span<const char* const> legacy);

/// Evaluation during training (`eval.every_steps` > 0), as Stable-Baselines3's EvalCallback:
/// after the iteration that passes each multiple of `eval.every_steps` env steps, rank 0
/// plays `eval.episodes` episodes with the current policy on an env of its own (global id
/// 1<<20, never a training env; reset stream and action draws from seed `seed` + 1 + k for
/// the k-th evaluation of the run, k = 1, 2, ..., so a resumed run evaluates the same
/// episodes) and the result is broadcast, so that every rank records the same. The
/// evaluation touches no training state (the caller evaluates a host copy of the
/// networks), so the training's trajectory is the same with and without it. Holds every
/// evaluation of the run (saved in checkpoints), the best mean return so far, and writes
/// them to `<prefix>.h5`'s group `eval`; with `eval.stop_return`, says when training ends.
/// Not thread-safe.
class PeriodicEvaluation {
 public:
  /// One evaluation: after iteration `iteration` at `env_steps` env steps.
  struct Record {
    std::int64_t iteration = 0, env_steps = 0;
    EvalResult result;
    bool stochastic = false;             ///< eval.stochastic of this evaluation
    std::int64_t max_episode_steps = 0;  ///< eval.max_episode_steps of this evaluation (0: no cap)
  };
  /// Reads `eval.every_steps`, `eval.episodes`, `eval.stochastic`, `eval.save_best`,
  /// `eval.max_episode_steps`, `seed` and `output_prefix` of `c`.
  explicit PeriodicEvaluation(const TrainConfig& c);
  /// True with `eval.every_steps` > 0.
  bool enabled() const { return every_ > 0; }
  /// True when an iteration that ended at `env_steps` after `steps_per_iteration` steps
  /// passed a multiple of `eval.every_steps` (always false when not enabled).
  bool due(std::int64_t env_steps, std::int64_t steps_per_iteration) const;
  /// Runs `evaluate(episodes, stochastic, seed, max_episode_steps)` on rank 0 of `comm`,
  /// broadcasts its result and records it. Returns true when its mean return beats every
  /// earlier evaluation's. Collective over `comm`. @throws as `evaluate`.
  bool evaluate(Communicator& comm, std::int64_t iteration, std::int64_t env_steps,
                const std::function<EvalResult(int, bool, std::uint64_t, std::int64_t)>& evaluate);
  /// After an iteration that ended at `env_steps`: when `due`, runs `evaluate` as above
  /// (collective), writes its `columns` into `row_tail` (the curve row's last
  /// `kEvalCurveColumns.size()` values) and its `line` to `progress` (null: none; give it on
  /// rank 0 only). Returns true for a new best mean; false when not due.
  bool after_iteration(Communicator& comm, std::int64_t iteration, std::int64_t env_steps,
                       std::int64_t steps_per_iteration, std::span<double> row_tail, std::ostream* progress,
                       const std::function<EvalResult(int, bool, std::uint64_t, std::int64_t)>& evaluate);
  /// The values of `kEvalCurveColumns` for the curve row of `iteration`: the evaluation
  /// after that iteration, NaN when there was none.
  std::array<double, kEvalCurveColumns.size()> columns(std::int64_t iteration) const;
  /// TensorBoard scalars "eval/return_mean", "eval/return_std", "eval/length_mean" of the
  /// evaluation after `iteration` (none when there was none).
  std::vector<io::TbScalar> tensorboard_scalars(std::int64_t iteration) const;
  /// The line the progress stream shows for the last evaluation, with its newline, e.g.
  /// "eval  steps 20480  return 187.40 +- 12.31 (min 160, max 200) over 5 episodes  length 187.4  new best\n",
  /// then a line saying that training stops when it reached `eval.stop_return`.
  std::string line(bool new_best) const;
  /// `<prefix>_best.ckpt`: written by the caller when `evaluate` returned true and
  /// `eval.save_best` is on (`save_best()`).
  const std::string& best_path() const { return best_path_; }
  /// `eval.save_best`.
  bool save_best() const { return save_best_; }
  /// True when `eval.stop_return` is set and the evaluation after iteration `iteration`
  /// (the last one recorded) reached it: training ends there.
  bool reached_stop_return(std::int64_t iteration) const;
  /// The evaluations so far, oldest first.
  const std::vector<Record>& records() const { return records_; }
  /// Checkpoint sections "eval/iteration", "eval/env_steps", "eval/episodes",
  /// "eval/returns", "eval/lengths", "eval/truncated", "eval/capped", "eval/stochastic",
  /// "eval/max_episode_steps" (every record, also those of an earlier setting of the eval.*
  /// keys).
  void save(io::CheckpointWriter& w) const;
  /// Restores the records of `save` (none when the checkpoint has no "eval/iteration": a
  /// run without evaluation or of an older version), dropping those after `iteration`; a
  /// checkpoint without "eval/stochastic" (an older version) gives its records the current
  /// eval.stochastic and eval.max_episode_steps.
  /// @throws herd::IoError for malformed sections.
  void load(const io::CheckpointReader& r, std::int64_t iteration);
  /// The group `eval` of `<prefix>.h5` when there are records: coordinate `evaluation`
  /// (1, 2, ...), `iteration`, `env_steps`, `return_mean`, `return_std`, `length_mean`
  /// `[evaluations]`, dimension `episode`, `returns` and `lengths` `[evaluations,
  /// episodes]` (float64, NaN where an evaluation had fewer episodes), `truncated`, `capped`
  /// `[evaluations]`; attributes `episodes`, `stochastic`, `max_episode_steps` (those of
  /// the last evaluation, also when a resumed run changed the eval.* keys or turned
  /// evaluation off), `best_return_mean`, `best_env_steps`. @throws herd::IoError
  void write(io::H5Group& root) const;

 private:
  std::int64_t every_ = 0;
  int episodes_ = 5;
  bool stochastic_ = false, save_best_ = true;
  std::int64_t max_episode_steps_ = 0;
  std::uint64_t seed_ = 0;
  std::string best_path_;
  std::optional<double> stop_return_;
  std::vector<Record> records_;
};

/// What `run_iterations` asks of a run.
struct RunHooks {
  std::function<void()> iterate;                 ///< one iteration, its curve row logged
  std::function<std::int64_t()> env_steps;       ///< env steps done (all ranks)
  std::function<double()> mean_return;           ///< mean return of the recent episodes
  std::function<std::string()> progress_detail;  ///< text after the mean return ("" or "  eps ...")
};

/// `TrainingRun::run`'s loop, collective over `comm` (every rank calls it): iterates until
/// done, `stop_after` iterations (< 0: no limit) or an interrupt; a line of progress on
/// rank 0 every `progress_period` iterations; checkpoints every `checkpoint_period`
/// iterations or `checkpoint_period_seconds` (rank 0's clock); an interrupt requested on
/// any rank stops all (the largest value wins, stored in `interrupted_by`). At the end a
/// checkpoint, and when done `<prefix>.h5` written by rank 0. @throws as the hooks and the
/// run's save/write.
RunEnd run_iterations(TrainingRun& run, Communicator& comm, std::ostream* progress, std::int64_t stop_after,
                      const volatile std::sig_atomic_t* interrupt, const RunHooks& hooks, int& interrupted_by);

}  // namespace herd::rl::detail
