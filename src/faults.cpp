#include "herd/core/faults.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <exception>
#include <span>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "herd/core/error.hpp"
#include "herd/core/mpi_communicator.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace herd {

namespace {

int env_int(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return 0;
  char* end = nullptr;
  const long x = std::strtol(v, &end, 10);
  return (end && *end == '\0' && x > 0 && x < (1L << 30)) ? static_cast<int>(x) : 0;
}

}  // namespace

int launcher_process_count() {
  return std::max({env_int("PMI_SIZE"), env_int("OMPI_COMM_WORLD_SIZE"), env_int("MV2_COMM_WORLD_SIZE")});
}

void check_launch(int mpi_size) {
  const int n = launcher_process_count();
  if (mpi_size == 1 && n > 1)
    throw InputError(
        fmt::format("the launcher started {} processes, but MPI reports this process alone (size 1): every process "
                    "would do the same work and write the same files. The program was probably launched with the "
                    "mpiexec of another MPI "
                    "library (herd is built with MPICH: use its mpiexec, e.g. mpiexec.mpich), or built without MPI",
                    n));
}

void check_same_input(Communicator& comm, std::uint64_t hash, std::string_view what) {
  if (comm.size() == 1) return;
  const auto v = static_cast<std::int64_t>(hash);
  const std::vector<std::int64_t> all = comm.allgather(std::span<const std::int64_t>(&v, 1));
  std::string bad;
  for (std::size_t r = 1; r < all.size(); ++r)
    if (all[r] != all[0]) bad += (bad.empty() ? "" : ", ") + std::to_string(r);
  if (!bad.empty())
    throw InputError(
        fmt::format("the {} differs between ranks: rank(s) {} differ from rank 0; every rank "
                    "must read the same input",
                    what, bad));
}

void abort_all_on_error(Communicator& comm, const std::function<void()>& body, int code) {
  if (comm.size() == 1) {
    body();
    return;
  }
  std::string msg;
  try {
    body();
    return;
  } catch (const std::exception& e) {
    msg = e.what();
  } catch (...) {
    msg = "unknown exception";
  }
  std::fprintf(stderr, "herd: rank %d of %d failed: %s (ending all ranks)\n", comm.rank(), comm.size(), msg.c_str());
  std::fflush(stderr);
  comm.abort(code);
}

// --- ExitGuard ------------------------------------------------------------------------------

namespace {
std::atomic<ExitGuard*> g_exit_guard{nullptr};
std::once_flag g_exit_handler_once;
}  // namespace

struct ExitGuardHandler {
  static void on_exit() {
    ExitGuard* g = g_exit_guard.load();
    if (g == nullptr || MpiEnvironment::call_in_progress()) return;
    g_exit_guard = nullptr;
    const std::string who = g->comm_->size() > 1 ? fmt::format("rank {}: ", g->comm_->rank()) : std::string();
    std::fflush(stdout);
    std::fprintf(stderr,
                 "%s: error: %s%s called exit(...) during the run; it must return a value (or -inf), not end the "
                 "process; ending the job (the last checkpoint is kept)\n",
                 g->program_.c_str(), who.c_str(), g->what_.c_str());
    std::fflush(stderr);
    if (g->comm_->size() > 1) g->comm_->abort(1);
    std::_Exit(1);
  }
};

ExitGuard::ExitGuard(Communicator& comm, std::string program, std::string what)
    : comm_(&comm), program_(std::move(program)), what_(std::move(what)) {
  // Registered after MPI's own exit handler (MpiEnvironment::ensure), so it runs before it.
  std::call_once(g_exit_handler_once, [] { std::atexit(&ExitGuardHandler::on_exit); });
  previous_ = g_exit_guard.exchange(this);
}

ExitGuard::~ExitGuard() { g_exit_guard = previous_; }

// --- StallWatchdog ---------------------------------------------------------------------------

namespace {

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// Seconds since the last modification of `path`, or -1 when it does not exist.
double file_age(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return -1.0;
  struct timespec now {};
  ::clock_gettime(CLOCK_REALTIME, &now);
  return static_cast<double>(now.tv_sec - st.st_mtim.tv_sec) +
         1e-9 * static_cast<double>(now.tv_nsec - st.st_mtim.tv_nsec);
}

}  // namespace

StallWatchdog::StallWatchdog(Communicator& comm, double timeout_seconds, std::string program, std::string what,
                             std::string heartbeat_prefix)
    : comm_(comm),
      timeout_(timeout_seconds),
      program_(std::move(program)),
      what_(std::move(what)),
      heartbeat_(std::move(heartbeat_prefix)) {
  HERD_REQUIRE(timeout_seconds > 0, "StallWatchdog: the timeout is {} s, but must be > 0", timeout_seconds);
  // This rank's heartbeat exists (and is fresh) before the run starts, so a file left by an
  // earlier run of the folder is never taken for a stalled rank of this one.
  int fd = -1;
  if (!heartbeat_.empty()) {
    fd = ::open((heartbeat_ + std::to_string(comm_.rank())).c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd >= 0) ::futimens(fd, nullptr);
  }
  thread_ = std::thread([this, fd] { watch(fd); });
}

StallWatchdog::~StallWatchdog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  if (!heartbeat_.empty()) ::unlink((heartbeat_ + std::to_string(comm_.rank())).c_str());
}

void StallWatchdog::watch(int fd) {
  const int rank = comm_.rank(), ranks = comm_.size();
  const double tick = std::min(0.25, timeout_ / 4);
  std::uint64_t last = progress_.load();
  double since = steady_seconds();
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stop_) {
    wake_.wait_for(lock, std::chrono::duration<double>(tick));
    if (stop_) break;
    if (fd >= 0) ::futimens(fd, nullptr);
    const double now = steady_seconds();
    const std::uint64_t p = progress_.load();
    if (p != last) {
      last = p;
      since = now;
      continue;
    }
    const double idle = now - since;
    if (idle < timeout_) continue;
    const std::string who = ranks > 1 ? fmt::format("rank {} of {}", rank, ranks) : std::string("the run");
    std::string msg;
    if (inside_.load() > 0) {
      msg = fmt::format("{}: error: {} stalled: {} has not returned for {:.3g} s (stall_timeout_seconds = {:g})",
                        program_, who, what_, idle, timeout_);
    } else if (ranks > 1 && !heartbeat_.empty()) {
      std::string stale;
      for (int r = 0; r < ranks; ++r) {
        if (r == rank) continue;
        const double age = file_age(heartbeat_ + std::to_string(r));
        if (age > timeout_) stale += (stale.empty() ? "" : ", ") + std::to_string(r);
      }
      if (stale.empty()) continue;  // the others run (or finished): waiting is normal
      msg = fmt::format(
          "{}: error: rank(s) {} of {} stalled: no sign of life for more than {:g} s "
          "(stall_timeout_seconds; the process is stopped or hangs outside {}); rank {} waited {:.3g} s",
          program_, stale, ranks, timeout_, what_, rank, idle);
    } else {
      continue;
    }
    std::fprintf(stderr, "%s; ending the job (the last checkpoint is kept: rerun to resume)\n", msg.c_str());
    std::fflush(stderr);
    if (ranks > 1) {
      // Give the launcher a moment to relay the line: MPICH's Hydra drops what a rank wrote
      // but it has not yet forwarded when an abort ends the job (the line was lost now and
      // then on a loaded machine). A quarter of a second against a stall of seconds.
      std::this_thread::sleep_for(std::chrono::milliseconds(250));
      // The main thread aborts the job as soon as it waits in MPI; MPI_Abort from this
      // thread while it is inside MPI would run the transport's progress twice at once (UCX
      // asserts). When it does not (it is in the log density), this thread aborts.
      MpiEnvironment::request_abort(1);
      lock.unlock();
      for (int outside = 0; outside < 10;) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        outside = MpiEnvironment::call_in_progress() ? 0 : outside + 1;
      }
      comm_.abort(1);
    }
    std::_Exit(1);
  }
  if (fd >= 0) ::close(fd);
}

}  // namespace herd
