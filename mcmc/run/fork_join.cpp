// ParaDRAM's fork-join model of one chain (parallel.hpp, `run_fork_join`), resumable through
// the chain record of `run_resumable` (checkpoint_format.hpp), and its speedup model.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <exception>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "checkpoint_format.hpp"
#include "herd/core/error.hpp"
#include "herd/core/timer.hpp"

namespace herd::mcmc {

namespace {

using detail::kInf;

/// The round's stage-1 trial points and their values; the kernel's log density looks them
/// up (bitwise) and evaluates anything else itself (start point, DR stages).
struct Round {
  int n = 0;
  std::vector<double> ys, vals;  // [n, d], [size, 2] (value, failed)
  std::int64_t fallback = 0;
  std::string local_error;
};

/// One fork-join run on this rank: the sampler over the round's looked-up values, the
/// round, and (rank 0 of a resumable run) the chain file and checkpoint schedule. The steps
/// are called in order: `open_files` (with files), `start`, `run_rounds`, `finish`.
class ForkJoinDriver {
 public:
  ForkJoinDriver(const DramOptions& options, const PointLogDensity& log_density, Communicator& comm, ChainSink& sink,
                 const ResumableOptions* files, const Timer& timer, ForkJoinRun& out)
      : options_(options),
        log_density_(log_density),
        comm_(comm),
        sink_(sink),
        files_(files),
        timer_(timer),
        out_(out),
        rank_(comm.rank()),
        size_(comm.size()),
        d_(static_cast<int>(options.start_point.size())),
        hash_(dram_options_hash(options)) {}

  /// Resumable: every rank reads the checkpoint (the same state), rank 0 opens the chain
  /// file. Returns true when the checkpoint says the run had finished (`out` holds its
  /// result). Collective.
  bool open_files() {
    HERD_REQUIRE(!files_->chain_path.empty() && !files_->checkpoint_path.empty(),
                 "run_fork_join: chain_path and checkpoint_path must be given");
    HERD_REQUIRE(files_->period_steps >= 0 && files_->period_seconds >= 0,
                 "run_fork_join: the checkpoint period must be >= 0");
    rec_ = detail::open_record(*files_, hash_);
    // Every rank must have read the checkpoint before rank 0 may replace it.
    comm_.barrier();
    out_.resumed = rec_.resumed;
    out_.seconds_before = rec_.seconds_before;
    out_.proposals_before = rec_.proposals_before;
    if (rec_.complete) {
      out_.already_complete = true;
      out_.result = std::move(rec_.result);
      out_.result.seconds = 0.0;
      return true;
    }
    if (rank_ == 0) {
      if (rec_.state) rec_.checksums.verify(files_->chain_path, "the chain file");
      file_ = rec_.state ? io::AppendFile::resume(files_->chain_path, rec_.chain_bytes)
                         : io::AppendFile::create(files_->chain_path);
      bytes_ = std::make_unique<detail::ByteSink>();
      fan_ = std::make_unique<FanSink>(*bytes_, sink_);
    }
    return false;
  }

  /// Makes the sampler (from the checkpointed state when resumed) and the checkpoint
  /// schedule, and begins the output.
  void start() {
    round_.ys.resize(static_cast<std::size_t>(size_) * d_);
    round_.vals.resize(static_cast<std::size_t>(size_) * 2);
    PointLogDensity lookup = [this](const double* x, int dim) { return round_value(x, dim); };
    sampler_.emplace(options_, lookup);
    const bool resumed = rec_.state != nullptr;
    if (resumed) sampler_->set_state(std::move(*rec_.state));
    if (files_ && rank_ == 0) {
      if (files_->period_steps > 0)
        next_ckpt_ = sampler_->state().proposal_number + static_cast<std::uint64_t>(files_->period_steps);
      if (files_->period_seconds > 0) next_time_ = files_->period_seconds;
    }
    period_ =
        options_.adaptive_update_period == 0 ? 4 * static_cast<std::int64_t>(d_) : options_.adaptive_update_period;
    lo_ = options_.domain_lower;
    hi_ = options_.domain_upper;
    lo_.resize(d_, -kInf);
    hi_.resize(d_, kInf);
    if (resumed) out_sink().resume_at(sampler_->state().proposal_number, sampler_->state().records_written);
    out_sink().begin(sampler_->state().chain_id, d_);
  }

  /// Runs rounds until the chain is finished; on an error flushes what was sampled, then
  /// rethrows.
  void run_rounds() {
    try {
      while (!sampler_->finished()) run_round();
    } catch (...) {
      if (!files_) {
        try {
          sampler_->finish(sink_, timer_.seconds());
        } catch (...) {
        }
      } else {
        try {
          sink_.flush();
        } catch (...) {
        }
      }
      throw;
    }
  }

  /// Ends the run: the result, the final checkpoint (rank 0, resumable), and the speedup
  /// prediction from the mean evaluation and communication times over ranks. Collective.
  void finish() {
    out_.fallback_evaluations = round_.fallback;
    out_.result = sampler_->finish(out_sink(), timer_.seconds());
    if (bytes_) commit(&out_.result);
    out_.seconds = timer_.seconds();
    // The allgather time of a rank includes waiting for slower ranks' evaluations; the
    // smallest over ranks is the closest to the communication itself.
    double t[2] = {out_.eval_seconds, static_cast<double>(my_evals_)};
    comm_.allreduce(t, 2, DataType::kFloat64, ReduceOp::kSum);
    const double cmin = comm_.allreduce_value(out_.comm_seconds, ReduceOp::kMin);
    const double tf = t[1] > 0 ? t[0] / t[1] : 0.0;
    const double tcomm = out_.rounds > 0 ? cmin / static_cast<double>(out_.rounds) : 0.0;
    out_.mean_eval_seconds = tf;
    out_.comm_seconds_per_round = tcomm;
    out_.predicted_speedup = fork_join_predicted_speedup(out_.result.acceptance_rate, size_, tf, tcomm);
  }

 private:
  /// Where the records go: the chain file's buffer and `sink` (rank 0, resumable), else `sink`.
  ChainSink& out_sink() { return fan_ ? static_cast<ChainSink&>(*fan_) : sink_; }

  /// The kernel's log density: the round's value of a trial point (bitwise match), else an
  /// evaluation here. @throws herd::Error when the rank that evaluated the point failed.
  double round_value(const double* x, int dim) {
    for (int j = 0; j < round_.n; ++j) {
      if (std::memcmp(x, round_.ys.data() + static_cast<std::size_t>(j) * dim, sizeof(double) * dim) == 0) {
        if (round_.vals[2 * j + 1] != 0)
          throw Error(j == rank_ ? round_.local_error
                                 : fmt::format("the log density threw on rank {} (see that rank's message)", j));
        return round_.vals[2 * j];
      }
    }
    ++round_.fallback;
    return log_density_(x, dim);
  }

  /// Proposals of the next round: one per rank, never across an adaptation boundary or
  /// past `max_proposals`, at least one.
  std::int64_t round_size() const {
    const DramState& s = sampler_->state();
    const auto max_prop = static_cast<std::uint64_t>(options_.max_proposals);
    std::int64_t n = size_;
    if (s.updates_done < options_.adaptive_update_count) n = std::min(n, period_ - s.proposals_since_update);
    if (max_prop != 0) n = std::min<std::int64_t>(n, static_cast<std::int64_t>(max_prop - s.proposal_number));
    return std::max<std::int64_t>(n, 1);
  }

  /// One round: propose, evaluate this rank's trial, share the values, replay the kernel,
  /// and checkpoint (rank 0, resumable).
  void run_round() {
    const DramState& s = sampler_->state();
    const std::uint64_t k = s.proposal_number;
    const std::int64_t n = round_size();
    round_.n = 0;
    for (int j = 0; j < n; ++j)
      sampler_->propose(k + static_cast<std::uint64_t>(j), 1, s.point.data(), s.chol.data(),
                        round_.ys.data() + static_cast<std::size_t>(j) * d_);
    double mine[2] = {0.0, 0.0};
    if (rank_ < n) evaluate_own_trial(k, mine);
    {
      Timer tc;
      comm_.allgather(mine, round_.vals.data(), 2, DataType::kFloat64);
      out_.comm_seconds += tc.seconds();
    }
    round_.n = static_cast<int>(n);
    ++out_.rounds;
    for (int j = 0; j < n && !sampler_->finished(); ++j) {
      const std::int64_t before = sampler_->state().accepted;
      sampler_->step(out_sink());
      ++out_.rank_proposals[j];
      if (sampler_->state().accepted != before) {
        ++out_.rank_accepted[j];
        break;
      }
    }
    round_.n = 0;
    if (bytes_) checkpoint_after_round();
  }

  /// Evaluates this rank's trial of the round starting at proposal `k` into `mine` (value,
  /// failed) when it is inside the domain; an exception is kept as this rank's message.
  void evaluate_own_trial(std::uint64_t k, double mine[2]) {
    const double* y = round_.ys.data() + static_cast<std::size_t>(rank_) * d_;
    bool inside = true;
    for (int i = 0; i < d_; ++i) inside = inside && y[i] >= lo_[i] && y[i] <= hi_[i];
    if (!inside) return;
    Timer te;
    try {
      mine[0] = log_density_(y, d_);
    } catch (const std::exception& e) {
      mine[1] = 1.0;
      round_.local_error = fmt::format("rank {}: the log density threw at proposal {}: {}", rank_,
                                       k + static_cast<std::uint64_t>(rank_), e.what());
    } catch (...) {
      mine[1] = 1.0;
      round_.local_error = fmt::format("rank {}: the log density threw an unknown exception at proposal {}", rank_,
                                       k + static_cast<std::uint64_t>(rank_));
    }
    out_.eval_seconds += te.seconds();
    ++my_evals_;
  }

  /// Rank 0 of a resumable run, at a round boundary: appends a full chunk of records, and
  /// commits a checkpoint when one is due.
  void checkpoint_after_round() {
    if (bytes_->buf.size() >= detail::kAppendChunk) {
      detail::append_chain(file_, rec_.checksums, bytes_->buf);
      file_.start_writeback();
    }
    const std::uint64_t k1 = sampler_->state().proposal_number;
    if (k1 >= next_ckpt_) {
      commit(nullptr);
      next_ckpt_ = k1 + static_cast<std::uint64_t>(files_->period_steps);
    } else if (next_time_ < kInf && timer_.seconds() >= next_time_) {
      commit(nullptr);
      next_time_ = timer_.seconds() + files_->period_seconds;
    }
  }

  /// Commits a checkpoint of the current state (`final_result` when the run has finished).
  void commit(const DramResult* final_result) {
    Timer t;
    detail::commit_record(*files_, hash_, file_, rec_.checksums, *bytes_, sampler_->state(), final_result,
                          rec_.seconds_before + timer_.seconds());
    ++out_.checkpoints;
    out_.checkpoint_seconds += t.seconds();
  }

  const DramOptions& options_;
  const PointLogDensity& log_density_;
  Communicator& comm_;
  ChainSink& sink_;
  const ResumableOptions* files_;
  const Timer& timer_;
  ForkJoinRun& out_;
  int rank_, size_, d_;
  std::uint64_t hash_;
  detail::ChainFileState rec_;
  io::AppendFile file_;
  std::unique_ptr<detail::ByteSink> bytes_;  // rank 0 of a resumable run
  std::unique_ptr<FanSink> fan_;
  Round round_;
  std::optional<DramSampler> sampler_;
  std::uint64_t next_ckpt_ = std::numeric_limits<std::uint64_t>::max();
  double next_time_ = kInf;
  std::int64_t period_ = 0;  // proposals between adaptive updates
  std::vector<double> lo_, hi_;
  std::int64_t my_evals_ = 0;
};

}  // namespace

// --- fork-join ------------------------------------------------------------------------------

double fork_join_predicted_speedup(double p, int ranks, double eval_seconds, double comm_seconds) {
  if (ranks <= 1) return 1.0;
  // (1 - (1 - p)^N) / p, accurate for small p.
  const double mean = p >= 1.0 ? 1.0
                      : p > 0  ? -std::expm1(static_cast<double>(ranks) * std::log1p(-p)) / p
                               : static_cast<double>(ranks);
  const double denom = eval_seconds + comm_seconds;
  return denom > 0 ? mean * eval_seconds / denom : mean;
}

ForkJoinRun run_fork_join(const DramOptions& options, const PointLogDensity& log_density, Communicator& comm,
                          ChainSink& sink, const ResumableOptions* files) {
  Timer timer;
  ForkJoinRun out;
  out.rank_accepted.assign(comm.size(), 0);
  out.rank_proposals.assign(comm.size(), 0);
  ForkJoinDriver run(options, log_density, comm, sink, files, timer, out);
  if (files && run.open_files()) return out;
  run.start();
  run.run_rounds();
  run.finish();
  return out;
}

}  // namespace herd::mcmc
