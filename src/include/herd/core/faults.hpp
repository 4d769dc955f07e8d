#pragma once
/// @file faults.hpp
/// Start-up checks and failure handling for programs run on several processes (MPI ranks),
/// shared by herd-sample, herd-rl and the C API (DESIGN.md §4).

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "herd/core/communicator.hpp"

namespace herd {

/// The launcher's claimed number of processes from its environment (`PMI_SIZE` of
/// MPICH's Hydra and Intel MPI, `OMPI_COMM_WORLD_SIZE` of Open MPI, `MV2_COMM_WORLD_SIZE`
/// of MVAPICH; the largest), or 0 when none is set. Thread-safe (reads the environment).
int launcher_process_count();

/// Detects a launch where every process believes it is alone: the launcher says more
/// than one process but MPI reports `mpi_size` == 1 (for example Open MPI's `mpiexec` with
/// an MPICH build), which would otherwise make N processes do the same work and write the
/// same files. @throws herd::InputError with the launcher's count and a hint.
void check_launch(int mpi_size);

/// Compares `hash` (of the resolved input) across ranks at start-up. Collective.
/// @throws herd::InputError on every rank, naming the ranks whose `what` differs from
///   rank 0's.
void check_same_input(Communicator& comm, std::uint64_t hash, std::string_view what = "input");

/// Runs `body`; when it throws on a run with more than one rank, prints one line
/// "herd: rank R of N failed: <message> (ending all ranks)" to stderr and ends every rank with
/// `comm.abort(code)` (MPI_Abort), so no rank waits for it in a collective. With one rank
/// the exception propagates. Files written atomically (checkpoints) are never left half
/// written by the abort. Returns normally only when `body` does.
void abort_all_on_error(Communicator& comm, const std::function<void()>& body, int code = 1);

/// While an `ExitGuard` lives, a call of `exit()` by code that herd runs (a plugin's log
/// density calling `exit(0)`, say) does not end the process quietly with that status: an
/// exit handler prints one line "<program>: error: [rank R: ]<what> called exit(...) during
/// the run; ending the job" to stderr and ends the job with exit code 1 (every rank: on more
/// than one rank through `comm.abort(1)`, so no other rank waits for this one forever).
/// Files written atomically (checkpoints) stay intact; a rerun resumes. An exit() made by
/// MPI itself (MPICH ends a rank when another aborted the job) is left alone.
/// One guard at a time per process (the last constructed is the one armed); construct and
/// destroy on the main thread.
class ExitGuard {
 public:
  /// Arms the guard. `program` (e.g. "herd-sample") and `what` (e.g. "the log density")
  /// name the culprit in the message. `comm` must outlive the guard.
  ExitGuard(Communicator& comm, std::string program, std::string what);
  /// Disarms the guard (a normal return from the run).
  ~ExitGuard();
  ExitGuard(const ExitGuard&) = delete;
  ExitGuard& operator=(const ExitGuard&) = delete;

 private:
  friend struct ExitGuardHandler;
  ExitGuard* previous_ = nullptr;
  Communicator* comm_;
  std::string program_, what_;
};

/// A watchdog for runs whose ranks call user code (a log density) between collectives:
/// when no call of that code has returned for `timeout_seconds` while one is in progress
/// (with several threads calling it, all must be stuck), or this rank has made no progress
/// at all (no call returned: it waits for a rank that stopped, e.g. SIGSTOP) for
/// `timeout_seconds`, it prints one line naming the stalled rank and ends the job
/// (`comm.abort(1)`, exit code 1; on one rank `_Exit(1)`). Checkpoints are written
/// atomically, so the last one is intact and a rerun resumes from it.
///
/// Which rank stalled: a rank inside a call that never returns reports itself; a rank that
/// waits (no call returned for the timeout) reports the ranks whose heartbeat file
/// (`<heartbeat_prefix><rank>`, touched by every rank's watchdog several times a second while
/// its process runs, removed when the watchdog ends) is older than the timeout: a stopped
/// process touches nothing. A rank that merely waits while no heartbeat is stale (rank 0
/// writing outputs after the others finished) is never reported. Without heartbeat files
/// (`heartbeat_prefix` empty) only the first case is detected.
///
/// Thread-safety: `enter`/`leave` may be called from any threads (atomics); one watchdog
/// thread per object. Not collective (each rank runs its own).
class StallWatchdog {
 public:
  /// Starts the watchdog thread. `timeout_seconds` > 0; `what` names the watched code in
  /// the message (e.g. "the log density"); heartbeat files are `<heartbeat_prefix><rank>`
  /// (none when empty).
  StallWatchdog(Communicator& comm, double timeout_seconds, std::string program, std::string what,
                std::string heartbeat_prefix = {});
  /// Stops the watchdog thread and removes this rank's heartbeat file.
  ~StallWatchdog();
  StallWatchdog(const StallWatchdog&) = delete;
  StallWatchdog& operator=(const StallWatchdog&) = delete;

  /// A call of the watched code starts.
  void enter() noexcept { inside_.fetch_add(1, std::memory_order_relaxed); }
  /// A call of the watched code returned (progress).
  void leave() noexcept {
    inside_.fetch_sub(1, std::memory_order_relaxed);
    progress_.fetch_add(1, std::memory_order_relaxed);
  }

 private:
  void watch(int heartbeat_fd);
  Communicator& comm_;
  double timeout_;
  std::string program_, what_, heartbeat_;
  std::atomic<int> inside_{0};
  std::atomic<std::uint64_t> progress_{0};
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace herd
